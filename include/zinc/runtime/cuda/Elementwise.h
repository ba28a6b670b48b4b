//===- Elementwise.h - Elementwise cuda kernels: arithmetic, activations --===//
//
// The launchers behind the cuda kernels of the elementwise ONNX and zinc
// ops (ElementwiseOps.cu). Each checks shapes and element types on the host
// before anything is queued, then queues one kernel on `stream`; none
// allocates or synchronises. Results match the cpu kernels: 16-bit floats
// are computed in float and rounded once, f64 in double, integers wrap.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_CUDA_ELEMENTWISE_H
#define ZINC_RUNTIME_CUDA_ELEMENTWISE_H

#include "zinc/runtime/cuda/DeviceTensor.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <cuda_runtime_api.h>

namespace zinc::cuda {

/// Add..Div: one type for a, b and y: f32, f16, bf16, f64, i32 or i64
/// (integer x / 0 gives 0: see elementwise::divValues). Pow: y has a's
/// type; a float base takes an exponent of any float type, i32 or i64, an
/// i32 or i64 base an exponent of i32, i64, f32 or f64. Equal, Less,
/// Greater, LessOrEqual, GreaterOrEqual: a and b of one type (Add's, or
/// bool), y bool. And, Or, Xor: all bool. Max, Min: Add's types, NaN wins.
/// Mod (integers) and Fmod: Add's types, x % 0 is 0.
enum class BinaryOpKind {
  Add,
  Sub,
  Mul,
  Div,
  Pow,
  Equal,
  Less,
  Greater,
  And,
  LessOrEqual,
  GreaterOrEqual,
  Or,
  Xor,
  Max,
  Min,
  Mod,  // integers: the divisor's sign (fmod=0)
  Fmod, // the dividend's sign (fmod=1; floats only take this form)
};

/// Gelu is the exact (erf) form, ONNX's approximate="none"; GeluTanh is
/// approximate="tanh". Relu and Neg also take i32 and i64, Not only bool;
/// the rest f32, f16, bf16 and f64. x and y have one type.
enum class UnaryOpKind {
  Relu,
  Gelu,
  Exp,
  Tanh,
  GeluTanh,
  LeakyRelu,
  Sigmoid,
  Sqrt,
  Reciprocal,
  Neg,
  Log,
  Erf,
  Not,
  Silu,      ///< zinc.Silu: x sigmoid(x)
  HardSwish, ///< x min(max(x + 3, 0), 6) / 6
};

/// The zinc gradient ops dx = f(v, dy): v is the forward input, or for
/// Sigmoid and Tanh the forward output. Float types only.
enum class GradOpKind {
  Relu,
  LeakyRelu,
  Gelu,
  GeluTanh,
  Sigmoid,
  Tanh,
  Erf,
  Silu,
  HardSwish,
};

/// The op type, for diagnostics: "Add", "Gelu", "ReluGrad", ...
llvm::StringRef opName(BinaryOpKind op);
llvm::StringRef opName(UnaryOpKind op);
llvm::StringRef opName(GradOpKind op);

/// The largest rank a broadcast may have once dimensions that need no
/// separate index (size 1, or laid out contiguously in every operand) are
/// merged; the strides travel to the kernel by value in arrays this long.
constexpr int kMaxBroadcastRank = 6;

/// Queues y = a op b on `stream`, with numpy broadcasting of a and b to y's
/// shape; element types as BinaryOpKind says. y may be a or b where that
/// operand has y's shape and type (in place).
llvm::Error launchBinary(BinaryOpKind op, const DeviceTensor &a,
                         const DeviceTensor &b, const DeviceTensor &y,
                         cudaStream_t stream);

/// Queues y = op(x) on `stream`; x and y have one shape and one type and
/// may be the same buffer. `alpha` is LeakyRelu's slope, unused otherwise.
llvm::Error launchUnary(UnaryOpKind op, const DeviceTensor &x,
                        const DeviceTensor &y, cudaStream_t stream,
                        double alpha = 0.01);

/// Queues dx = op'(v) * dy: v, dy and dx of one float type and one shape
/// (dx may be v's or dy's buffer). `alpha` is LeakyRelu's slope.
llvm::Error launchGrad(GradOpKind op, const DeviceTensor &v,
                       const DeviceTensor &dy, const DeviceTensor &dx,
                       cudaStream_t stream, double alpha = 0.01);

/// Queues y = cond ? x : z with numpy broadcasting of all three: cond bool,
/// x, z and y of one type (any). y may be x or z where it has y's shape.
llvm::Error launchWhere(const DeviceTensor &cond, const DeviceTensor &x,
                        const DeviceTensor &z, const DeviceTensor &y,
                        cudaStream_t stream);

/// Queues y = x converted to y's element type, between any two zinc types,
/// rounding as the cpu's Cast does; one type is an asynchronous copy (none
/// when y is x).
llvm::Error launchCast(const DeviceTensor &x, const DeviceTensor &y,
                       cudaStream_t stream);

} // namespace zinc::cuda

#endif
