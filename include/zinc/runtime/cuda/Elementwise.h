//===- Elementwise.h - Elementwise cuda kernels: arithmetic, activations --===//
#ifndef ZINC_RUNTIME_CUDA_ELEMENTWISE_H
#define ZINC_RUNTIME_CUDA_ELEMENTWISE_H

#include "zinc/runtime/cuda/DeviceTensor.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <cuda_runtime_api.h>

namespace zinc::cuda {

enum class BinaryOpKind { Add, Sub, Mul, Div };
/// Gelu is the exact (erf) form, ONNX's approximate="none".
enum class UnaryOpKind { Relu, Gelu, Exp, Tanh };

/// The ONNX op type, for diagnostics: "Add", "Gelu", ...
llvm::StringRef opName(BinaryOpKind op);
llvm::StringRef opName(UnaryOpKind op);

/// The largest rank a broadcast may have once dimensions that need no
/// separate index (size 1, or laid out contiguously in every operand) are
/// merged; the strides travel to the kernel by value in arrays this long.
constexpr int kMaxBroadcastRank = 6;

/// Queues y = a op b on `stream`, with numpy broadcasting of a and b to y's
/// shape. f32, f16 and bf16, all three tensors of one type; the 16-bit
/// types are computed in float and rounded once, as the cpu kernels do.
/// y may be a or b where that operand has y's shape (in place). Shapes and
/// types are checked before anything is queued.
llvm::Error launchBinary(BinaryOpKind op, const DeviceTensor &a,
                         const DeviceTensor &b, const DeviceTensor &y,
                         cudaStream_t stream);

/// Queues y = op(x) on `stream`; x and y have one shape and one type (f32,
/// f16 or bf16) and may be the same buffer.
llvm::Error launchUnary(UnaryOpKind op, const DeviceTensor &x,
                        const DeviceTensor &y, cudaStream_t stream);

} // namespace zinc::cuda

#endif
