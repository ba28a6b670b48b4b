//===- Elementwise.cu - Broadcasting arithmetic and activation kernels ----===//
//
// Three grid-stride kernels: broadcasting binary (arithmetic, comparisons,
// Pow, And, and the activation gradients as a flat case), broadcasting
// Where, and flat unary (activations, Not, Cast). The host merges the
// broadcast into as few dimensions as possible (as the cpu driver does), so
// the common cases (same shapes, a scalar operand, a bias over the last
// dimension) need at most one division per 16 bytes of output. For f32 and
// the 16-bit floats each thread moves 16-byte packs (float4, or eight
// 16-bit floats) whenever every pointer and the innermost dimension allow
// it; rarer types take the scalar path only, which keeps the number of
// kernel instantiations (and the build time) down. 16-bit floats are
// loaded, computed in float and rounded once on store, so results match the
// cpu kernels; the per-element math is ElementwiseMath.h's.
//
//===----------------------------------------------------------------------===//
#include "DeviceTypes.cuh"
#include "ElementwiseMath.h"
#include "zinc/runtime/cuda/CudaCheck.h"
#include "zinc/runtime/cuda/Elementwise.h"
#include "zinc/support/Error.h"
#include "llvm/ADT/Twine.h"
#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace zinc::cuda {
namespace {

namespace ew = elementwise;

constexpr int kThreads = 256;
constexpr int kPackBytes = 16;

//===----------------------------------------------------------------------===//
// Element access: storage to compute value and back.
//===----------------------------------------------------------------------===//

template <typename T>
constexpr bool kIsHalf =
    std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;
/// Types with packed (16-byte) kernels and 32-bit index variants.
template <typename T>
constexpr bool kIsFast = std::is_same_v<T, float> || kIsHalf<T>;
template <typename T>
constexpr bool kIsFloat = kIsFast<T> || std::is_same_v<T, double>;

template <typename T> using ComputeT = std::conditional_t<kIsHalf<T>, float, T>;

template <typename T> __device__ __forceinline__ ComputeT<T> loadValue(T v) {
  if constexpr (kIsHalf<T>)
    return loadF(v);
  else
    return v;
}
template <typename T, typename C> __device__ __forceinline__ T storeValue(C v) {
  if constexpr (kIsHalf<T>)
    return storeF<T>(static_cast<float>(v));
  else
    return static_cast<T>(v);
}

/// 16 bytes of elements, moved by one 128-bit load or store.
template <typename T> struct alignas(kPackBytes) Pack {
  static constexpr int kWidth = kPackBytes / sizeof(T);
  T v[kWidth];
};

//===----------------------------------------------------------------------===//
// Functors: storage values in, a storage value out. Math on compute values
// is ElementwiseMath.h's, wrapped once per shape of op.
//===----------------------------------------------------------------------===//

/// One type in and out, the math on compute values.
template <typename Math> struct SameType2 {
  Math math;
  template <typename T> __device__ T operator()(T a, T b) const {
    return storeValue<T>(math(loadValue(a), loadValue(b)));
  }
};
template <typename Math> struct SameType1 {
  Math math;
  template <typename T> __device__ T operator()(T v) const {
    return storeValue<T>(math(loadValue(v)));
  }
};

#define ZINC_EW_MATH2(Name, Fn)                                                \
  struct Name {                                                                \
    template <typename C> __device__ C operator()(C a, C b) const {            \
      return ew::Fn(a, b);                                                     \
    }                                                                          \
  };
#define ZINC_EW_MATH1(Name, Fn)                                                \
  struct Name {                                                                \
    template <typename C> __device__ C operator()(C v) const {                 \
      return ew::Fn(v);                                                        \
    }                                                                          \
  };
ZINC_EW_MATH2(AddMath, addValues)
ZINC_EW_MATH2(SubMath, subValues)
ZINC_EW_MATH2(MulMath, mulValues)
ZINC_EW_MATH2(DivMath, divValues)
ZINC_EW_MATH2(MaxMath, maxValues)
ZINC_EW_MATH2(MinMath, minValues)
ZINC_EW_MATH2(ModMath, modValues)
ZINC_EW_MATH2(FmodMath, fmodValues)
ZINC_EW_MATH2(ReluGradMath, reluGrad)
ZINC_EW_MATH2(GeluGradMath, geluErfGrad)
ZINC_EW_MATH2(GeluTanhGradMath, geluTanhGrad)
ZINC_EW_MATH2(SigmoidGradMath, sigmoidGrad)
ZINC_EW_MATH2(TanhGradMath, tanhGrad)
ZINC_EW_MATH2(ErfGradMath, erfGrad)
ZINC_EW_MATH2(SiluGradMath, siluGrad)
ZINC_EW_MATH2(HardSwishGradMath, hardSwishGrad)
ZINC_EW_MATH1(ReluMath, relu)
ZINC_EW_MATH1(GeluMath, geluErf)
ZINC_EW_MATH1(GeluTanhMath, geluTanh)
ZINC_EW_MATH1(ExpMath, expOf)
ZINC_EW_MATH1(TanhMath, tanhOf)
ZINC_EW_MATH1(SigmoidMath, sigmoid)
ZINC_EW_MATH1(SqrtMath, sqrtOf)
ZINC_EW_MATH1(ReciprocalMath, reciprocal)
ZINC_EW_MATH1(NegMath, negValue)
ZINC_EW_MATH1(LogMath, logOf)
ZINC_EW_MATH1(ErfMath, erfOf)
ZINC_EW_MATH1(SiluMath, silu)
ZINC_EW_MATH1(HardSwishMath, hardSwish)
#undef ZINC_EW_MATH2
#undef ZINC_EW_MATH1

/// The slope in the compute type, converted once on the host as the cpu
/// converts it (static_cast<C>(alpha)).
struct Slope {
  float f;
  double d;
  template <typename C> __device__ C as() const {
    if constexpr (std::is_same_v<C, double>)
      return d;
    else
      return f;
  }
};
struct LeakyReluMath {
  Slope alpha;
  template <typename C> __device__ C operator()(C v) const {
    return ew::leakyRelu(v, alpha.as<C>());
  }
};
struct LeakyReluGradMath {
  Slope alpha;
  template <typename C> __device__ C operator()(C x, C g) const {
    return ew::leakyReluGrad(x, g, alpha.as<C>());
  }
};

struct NotFn {
  __device__ bool operator()(bool v) const { return !v; }
};
struct AndFn {
  __device__ bool operator()(bool a, bool b) const { return a && b; }
};
struct OrFn {
  __device__ bool operator()(bool a, bool b) const { return a || b; }
};
struct XorFn {
  __device__ bool operator()(bool a, bool b) const { return a != b; }
};

enum class CompareKind { Equal, Less, Greater, LessOrEqual, GreaterOrEqual };
/// Compares compute values, as the cpu does (16-bit floats as float).
template <CompareKind K> struct CompareFn {
  template <typename T> __device__ bool operator()(T a, T b) const {
    auto x = loadValue(a), z = loadValue(b);
    if constexpr (K == CompareKind::Equal)
      return x == z;
    else if constexpr (K == CompareKind::Less)
      return x < z;
    else if constexpr (K == CompareKind::LessOrEqual)
      return x <= z;
    else if constexpr (K == CompareKind::GreaterOrEqual)
      return x >= z;
    else
      return x > z;
  }
};

/// A float base is raised in its compute type; an integer base with a
/// float exponent in double, then truncated; integers by squaring.
struct PowFn {
  template <typename T, typename E>
  __device__ T operator()(T base, E exp) const {
    if constexpr (kIsFloat<T>) {
      using C = ComputeT<T>;
      return storeValue<T>(
          ew::powOf(loadValue(base), static_cast<C>(loadValue(exp))));
    } else if constexpr (kIsFloat<E>) {
      return ew::truncateToInt<T>(ew::powOf(
          static_cast<double>(base), static_cast<double>(loadValue(exp))));
    } else {
      return ew::intPow(base, exp);
    }
  }
};

/// Cast of one element, as the cpu's convertValue: 16-bit floats go
/// through float, wider sources reach them through round-to-odd.
template <typename To> struct CastFn {
  template <typename From> __device__ To operator()(From v) const {
    if constexpr (kIsHalf<To> && kIsHalf<From>)
      return storeF<To>(loadF(v));
    else if constexpr (kIsHalf<To>)
      return storeF<To>(ew::halfSource(v));
    else if constexpr (kIsHalf<From>)
      return ew::convertScalar<To>(loadF(v));
    else
      return ew::convertScalar<To>(v);
  }
};

//===----------------------------------------------------------------------===//
// Broadcasting kernels
//===----------------------------------------------------------------------===//

/// The merged broadcast, passed by value: output dims (outermost first) and
/// each of N operands' element stride along them (0 where it is broadcast).
/// Operands' innermost strides are always 0 or 1.
template <typename IndexT, int N> struct BroadcastParams {
  int rank;
  IndexT dims[kMaxBroadcastRank];
  IndexT strides[N][kMaxBroadcastRank];
};

/// Offsets into each operand of output element `e`. The outermost dimension
/// needs no modulo, so a flat (rank 1) operation costs no division at all.
template <typename IndexT, int N>
__device__ __forceinline__ void offsetsOf(const BroadcastParams<IndexT, N> &p,
                                          IndexT e, IndexT (&off)[N]) {
  IndexT acc[N] = {};
  // Unrolled with constant indices so the parameters are read in place; a
  // loop to p.rank would copy the struct to local memory to index it.
#pragma unroll
  for (int d = kMaxBroadcastRank - 1; d > 0; --d) {
    if (d < p.rank) {
      IndexT idx = e % p.dims[d];
      e /= p.dims[d];
#pragma unroll
      for (int k = 0; k < N; ++k)
        acc[k] += idx * p.strides[k][d];
    }
  }
#pragma unroll
  for (int k = 0; k < N; ++k)
    off[k] = acc[k] + e * p.strides[k][0];
}

/// y[e] = op(a[...], b[...]) for `total` outputs. With Width > 1 (one type
/// throughout), each step handles Width consecutive outputs that the host
/// has checked lie in one innermost row, with every non-broadcast operand
/// and y 16-byte aligned; an operand broadcast along the row is read once
/// and repeated. Outputs past the last whole group (a flat tail) are done
/// one at a time. y may be an operand of its own shape (in place), so
/// nothing is __restrict__: each element is read and then written by the
/// same thread.
template <typename Op, typename TA, typename TB, typename TY, typename IndexT,
          int Width>
__global__ void __launch_bounds__(kThreads)
    binaryKernel(const TA *a, const TB *b, TY *y, IndexT total,
                 BroadcastParams<IndexT, 2> p, Op op) {
  IndexT step = IndexT(gridDim.x) * blockDim.x;
  IndexT first = IndexT(blockIdx.x) * blockDim.x + threadIdx.x;
  // Scalar kernels (Width 1) do everything in the loop after the groups.
  IndexT groups = Width > 1 ? total / Width : 0;
  if constexpr (Width > 1) {
    static_assert(std::is_same_v<TA, TY> && std::is_same_v<TB, TY> &&
                      Width == Pack<TY>::kWidth,
                  "a group is one pack of one type");
    bool rowA = p.strides[0][p.rank - 1] != 0;
    bool rowB = p.strides[1][p.rank - 1] != 0;
    for (IndexT g = first; g < groups; g += step) {
      IndexT off[2];
      offsetsOf(p, IndexT(g * Width), off);
      Pack<TY> va, vb, vy;
      if (rowA) {
        va = *reinterpret_cast<const Pack<TY> *>(a + off[0]);
      } else {
#pragma unroll
        for (int i = 0; i < Width; ++i)
          va.v[i] = a[off[0]];
      }
      if (rowB) {
        vb = *reinterpret_cast<const Pack<TY> *>(b + off[1]);
      } else {
#pragma unroll
        for (int i = 0; i < Width; ++i)
          vb.v[i] = b[off[1]];
      }
#pragma unroll
      for (int i = 0; i < Width; ++i)
        vy.v[i] = op(va.v[i], vb.v[i]);
      *reinterpret_cast<Pack<TY> *>(y + IndexT(g * Width)) = vy;
    }
  }
  for (IndexT e = groups * Width + first; e < total; e += step) {
    IndexT off[2];
    offsetsOf(p, e, off);
    y[e] = op(a[off[0]], b[off[1]]);
  }
}

/// y[e] = c[...] ? x[...] : z[...]. Only bytes move, so T is an unsigned
/// integer of the element's size.
template <typename T, typename IndexT>
__global__ void __launch_bounds__(kThreads)
    whereKernel(const bool *c, const T *x, const T *z, T *y, IndexT total,
                BroadcastParams<IndexT, 3> p) {
  IndexT step = IndexT(gridDim.x) * blockDim.x;
  for (IndexT e = IndexT(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += step) {
    IndexT off[3];
    offsetsOf(p, e, off);
    y[e] = c[off[0]] ? x[off[1]] : z[off[2]];
  }
}

//===----------------------------------------------------------------------===//
// Unary kernel
//===----------------------------------------------------------------------===//

/// y[i] = op(x[i]); with one type in and out, in 16-byte packs when both
/// pointers are aligned (x and y may alias, so no __restrict__), then a
/// scalar tail.
template <typename Op, typename TX, typename TY>
__global__ void __launch_bounds__(kThreads)
    unaryKernel(const TX *x, TY *y, int64_t n, bool packed, Op op) {
  int64_t step = int64_t(gridDim.x) * blockDim.x;
  int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t head = 0;
  if constexpr (std::is_same_v<TX, TY>) {
    constexpr int W = Pack<TX>::kWidth;
    if (packed) {
      int64_t packs = n / W;
      for (int64_t i = first; i < packs; i += step) {
        Pack<TX> v = reinterpret_cast<const Pack<TX> *>(x)[i];
#pragma unroll
        for (int j = 0; j < W; ++j)
          v.v[j] = op(v.v[j]);
        reinterpret_cast<Pack<TY> *>(y)[i] = v;
      }
      head = packs * W;
    }
  }
  for (int64_t i = head + first; i < n; i += step)
    y[i] = op(x[i]);
}

/// Cast from an integer or bool source of `bytes` bytes, widened on load to
/// Wide (int64_t for signed sources, uint64_t for unsigned ones and bool).
/// Every conversion from an integer depends only on its value, so one
/// kernel per destination and signedness serves all eight integer types
/// and bool, instead of one per pair.
template <typename To, typename Wide>
__global__ void __launch_bounds__(kThreads)
    castIntKernel(const void *x, To *y, int64_t n, int bytes) {
  using S8 = std::conditional_t<std::is_signed_v<Wide>, int8_t, uint8_t>;
  using S16 = std::conditional_t<std::is_signed_v<Wide>, int16_t, uint16_t>;
  using S32 = std::conditional_t<std::is_signed_v<Wide>, int32_t, uint32_t>;
  CastFn<To> cast;
  int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += step) {
    Wide v;
    switch (bytes) {
    case 1:
      v = static_cast<const S8 *>(x)[i];
      break;
    case 2:
      v = static_cast<const S16 *>(x)[i];
      break;
    case 4:
      v = static_cast<const S32 *>(x)[i];
      break;
    default:
      v = static_cast<const Wide *>(x)[i];
      break;
    }
    y[i] = cast(v);
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// Host side: names, types
//===----------------------------------------------------------------------===//

llvm::StringRef opName(BinaryOpKind op) {
  switch (op) {
  case BinaryOpKind::Add:
    return "Add";
  case BinaryOpKind::Sub:
    return "Sub";
  case BinaryOpKind::Mul:
    return "Mul";
  case BinaryOpKind::Div:
    return "Div";
  case BinaryOpKind::Pow:
    return "Pow";
  case BinaryOpKind::Equal:
    return "Equal";
  case BinaryOpKind::Less:
    return "Less";
  case BinaryOpKind::Greater:
    return "Greater";
  case BinaryOpKind::And:
    return "And";
  case BinaryOpKind::LessOrEqual:
    return "LessOrEqual";
  case BinaryOpKind::GreaterOrEqual:
    return "GreaterOrEqual";
  case BinaryOpKind::Or:
    return "Or";
  case BinaryOpKind::Xor:
    return "Xor";
  case BinaryOpKind::Max:
    return "Max";
  case BinaryOpKind::Min:
    return "Min";
  case BinaryOpKind::Mod:
  case BinaryOpKind::Fmod:
    return "Mod";
  }
  return "?";
}

llvm::StringRef opName(UnaryOpKind op) {
  switch (op) {
  case UnaryOpKind::Relu:
    return "Relu";
  case UnaryOpKind::Gelu:
  case UnaryOpKind::GeluTanh:
    return "Gelu";
  case UnaryOpKind::Exp:
    return "Exp";
  case UnaryOpKind::Tanh:
    return "Tanh";
  case UnaryOpKind::LeakyRelu:
    return "LeakyRelu";
  case UnaryOpKind::Sigmoid:
    return "Sigmoid";
  case UnaryOpKind::Sqrt:
    return "Sqrt";
  case UnaryOpKind::Reciprocal:
    return "Reciprocal";
  case UnaryOpKind::Neg:
    return "Neg";
  case UnaryOpKind::Log:
    return "Log";
  case UnaryOpKind::Erf:
    return "Erf";
  case UnaryOpKind::Not:
    return "Not";
  case UnaryOpKind::Silu:
    return "Silu";
  case UnaryOpKind::HardSwish:
    return "HardSwish";
  }
  return "?";
}

llvm::StringRef opName(GradOpKind op) {
  switch (op) {
  case GradOpKind::Relu:
    return "ReluGrad";
  case GradOpKind::LeakyRelu:
    return "LeakyReluGrad";
  case GradOpKind::Gelu:
  case GradOpKind::GeluTanh:
    return "GeluGrad";
  case GradOpKind::Sigmoid:
    return "SigmoidGrad";
  case GradOpKind::Tanh:
    return "TanhGrad";
  case GradOpKind::Erf:
    return "ErfGrad";
  case GradOpKind::Silu:
    return "SiluGrad";
  case GradOpKind::HardSwish:
    return "HardSwishGrad";
  }
  return "?";
}

static llvm::Error unsupportedType(llvm::StringRef op, DType t) {
  return makeError("unsupported: " + op +
                   " on the cuda backend with element type " + dtypeName(t));
}

/// Calls fn(T{}) with T the device storage type of `t`; every DType.
template <typename Fn> static llvm::Error visitDeviceType(DType t, Fn &&fn) {
  switch (t) {
  case DType::F32:
    return fn(float{});
  case DType::F64:
    return fn(double{});
  case DType::F16:
    return fn(__half{});
  case DType::BF16:
    return fn(__nv_bfloat16{});
  case DType::I8:
    return fn(int8_t{});
  case DType::I16:
    return fn(int16_t{});
  case DType::I32:
    return fn(int32_t{});
  case DType::I64:
    return fn(int64_t{});
  case DType::U8:
    return fn(uint8_t{});
  case DType::U16:
    return fn(uint16_t{});
  case DType::U32:
    return fn(uint32_t{});
  case DType::U64:
    return fn(uint64_t{});
  case DType::Bool:
    return fn(bool{});
  }
  return makeError("unknown element type");
}

/// The types arithmetic runs on: the floats, i32 and i64 (the integer types
/// exported models compute shapes and indices in).
static bool isArithmeticType(DType t) {
  switch (t) {
  case DType::F32:
  case DType::F16:
  case DType::BF16:
  case DType::F64:
  case DType::I32:
  case DType::I64:
    return true;
  default:
    return false;
  }
}
static bool isFloatType(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 ||
         t == DType::F64;
}

/// Calls fn(T{}) for an arithmetic type (isArithmeticType), else an error.
template <typename Fn>
static llvm::Error visitArithmetic(llvm::StringRef op, DType t, Fn &&fn) {
  if (!isArithmeticType(t))
    return unsupportedType(op, t);
  return visitDeviceType(t, [&](auto tag) -> llvm::Error {
    using T = decltype(tag);
    if constexpr (kIsFloat<T> || std::is_same_v<T, int32_t> ||
                  std::is_same_v<T, int64_t>)
      return fn(tag);
    else
      return unsupportedType(op, t);
  });
}

/// Calls fn(T{}) for a float type, else an error.
template <typename Fn>
static llvm::Error visitFloat(llvm::StringRef op, DType t, Fn &&fn) {
  if (!isFloatType(t))
    return unsupportedType(op, t);
  return visitDeviceType(t, [&](auto tag) -> llvm::Error {
    if constexpr (kIsFloat<decltype(tag)>)
      return fn(tag);
    else
      return unsupportedType(op, t);
  });
}

static bool isAligned(const void *p) {
  return reinterpret_cast<uintptr_t>(p) % kPackBytes == 0;
}

/// Enough blocks to fill the device once (grid-stride loops do the rest),
/// fewer for small work. The SM count is cached by the runtime, so asking
/// per launch costs no driver round trip.
static llvm::Error fillGrid(int64_t work, unsigned &grid) {
  int device = 0, sms = 0;
  if (llvm::Error err = checkCuda(cudaGetDevice(&device), "cudaGetDevice"))
    return err;
  if (llvm::Error err = checkCuda(
          cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
          "cudaDeviceGetAttribute(multiprocessor count)"))
    return err;
  int64_t full = int64_t(sms) * (2048 / kThreads);
  int64_t need = (work + kThreads - 1) / kThreads;
  grid = static_cast<unsigned>(std::max<int64_t>(1, std::min(need, full)));
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Host side: broadcasting
//===----------------------------------------------------------------------===//

/// The merged broadcast of N operands onto the output's shape, as int64
/// before it is narrowed to the kernel's index type.
template <size_t N> struct MergedBroadcast {
  llvm::SmallVector<int64_t, 6> dims;
  std::array<llvm::SmallVector<int64_t, 6>, N> strides;
};

/// Strides reading `in` (right-aligned against `out`) at out's indices.
static llvm::SmallVector<int64_t, 6>
broadcastStrides(llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> out) {
  llvm::SmallVector<int64_t, 6> strides(out.size(), 0);
  int64_t s = 1;
  for (size_t i = 0; i < in.size(); ++i) {
    size_t d = out.size() - 1 - i, k = in.size() - 1 - i;
    strides[d] = in[k] == 1 ? 0 : s;
    s *= in[k];
  }
  return strides;
}

/// Drops size-1 dimensions and merges neighbours along which every operand
/// is contiguous or broadcast, so `[B,S,H] + [H]` is rows of H and equal
/// shapes are one flat dimension.
template <size_t N>
static MergedBroadcast<N>
mergeBroadcast(const std::array<llvm::ArrayRef<int64_t>, N> &ins,
               llvm::ArrayRef<int64_t> out) {
  std::array<llvm::SmallVector<int64_t, 6>, N> st;
  for (size_t k = 0; k < N; ++k)
    st[k] = broadcastStrides(ins[k], out);
  MergedBroadcast<N> m;
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == 1)
      continue;
    bool merge = !m.dims.empty();
    for (size_t k = 0; k < N && merge; ++k)
      merge = m.strides[k].back() == st[k][d] * out[d];
    if (merge) {
      m.dims.back() *= out[d];
      for (size_t k = 0; k < N; ++k)
        m.strides[k].back() = st[k][d];
      continue;
    }
    m.dims.push_back(out[d]);
    for (size_t k = 0; k < N; ++k)
      m.strides[k].push_back(st[k][d]);
  }
  if (m.dims.empty()) {
    m.dims.push_back(1);
    for (size_t k = 0; k < N; ++k)
      m.strides[k].push_back(0);
  }
  return m;
}

/// The numpy broadcast of two shapes, or None.
static llvm::Optional<llvm::SmallVector<int64_t, 6>>
broadcastShape(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  llvm::SmallVector<int64_t, 6> out(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1)
      return llvm::None;
    out[rank - 1 - i] = da == 1 ? db : da;
  }
  return out;
}

/// "[2,3] and [4]", "[2,3], [4] and [1]".
template <size_t N>
static std::string formatShapes(const std::array<const DeviceTensor *, N> &ts) {
  std::string s;
  for (size_t k = 0; k < N; ++k) {
    if (k)
      s += k + 1 == N ? " and " : ", ";
    s += formatShape(ts[k]->shape);
  }
  return s;
}

/// Checks that the operands broadcast to y's shape in at most
/// kMaxBroadcastRank merged dimensions, and merges them.
template <size_t N>
static llvm::Expected<MergedBroadcast<N>>
checkBroadcast(llvm::StringRef name,
               const std::array<const DeviceTensor *, N> &ins,
               const DeviceTensor &y) {
  llvm::SmallVector<int64_t, 6> shape(ins[0]->shape);
  for (size_t k = 1; k < N; ++k) {
    auto b = broadcastShape(shape, ins[k]->shape);
    if (!b)
      return makeError(name + ": shapes " + formatShapes(ins) +
                       " do not broadcast");
    shape = *b;
  }
  if (shape != y.shape)
    return makeError(name + ": output shape " + formatShape(y.shape) +
                     ", expected " + formatShape(shape));
  std::array<llvm::ArrayRef<int64_t>, N> shapes;
  for (size_t k = 0; k < N; ++k)
    shapes[k] = ins[k]->shape;
  MergedBroadcast<N> m = mergeBroadcast<N>(shapes, y.shape);
  if (m.dims.size() > size_t(kMaxBroadcastRank))
    return makeError("unsupported: " + name + " of " + formatShapes(ins) +
                     " needs " + llvm::Twine(m.dims.size()) +
                     " broadcast dimensions, more than " +
                     llvm::Twine(kMaxBroadcastRank));
  return m;
}

template <typename IndexT, size_t N>
static BroadcastParams<IndexT, N> paramsOf(const MergedBroadcast<N> &m) {
  BroadcastParams<IndexT, N> p{};
  p.rank = static_cast<int>(m.dims.size());
  for (int d = 0; d < p.rank; ++d) {
    p.dims[d] = static_cast<IndexT>(m.dims[d]);
    for (size_t k = 0; k < N; ++k)
      p.strides[k][d] = static_cast<IndexT>(m.strides[k][d]);
  }
  return p;
}

/// 32-bit indices make the per-element divisions several times cheaper.
/// Every offset is below its operand's element count; the bound is
/// INT32_MAX, not UINT32_MAX, so that `index + grid size` in the grid-stride
/// loop cannot wrap.
static bool fitsNarrow(std::initializer_list<const DeviceTensor *> ts) {
  constexpr int64_t kMax32 = std::numeric_limits<int32_t>::max();
  for (const DeviceTensor *t : ts)
    if (t->numElements() > kMax32)
      return false;
  return true;
}

template <typename Op, typename TA, typename TB, typename TY, typename IndexT,
          int Width>
static llvm::Error launchBinaryAs(Op op, const DeviceTensor &a,
                                  const DeviceTensor &b, const DeviceTensor &y,
                                  const MergedBroadcast<2> &m,
                                  cudaStream_t stream, llvm::StringRef name) {
  int64_t total = y.numElements();
  unsigned grid = 0;
  if (llvm::Error err = fillGrid((total + Width - 1) / Width, grid))
    return err;
  binaryKernel<Op, TA, TB, TY, IndexT, Width><<<grid, kThreads, 0, stream>>>(
      static_cast<const TA *>(a.data), static_cast<const TB *>(b.data),
      static_cast<TY *>(y.data), static_cast<IndexT>(total),
      paramsOf<IndexT, 2>(m), op);
  return checkLaunch(name + " kernel (" + dtypeName(y.dtype) + ")");
}

/// Queues the broadcast y = op(a, b) whose shapes and types are checked,
/// in 16-byte packs where every pointer allows it (f32 and the 16-bit
/// floats, one type throughout). `kNarrow` adds the 32-bit index variants,
/// which pay only where a broadcast needs divisions: each variant is
/// another kernel to build, so rare ops and flat ones go without.
template <bool kNarrow, typename TA, typename TB, typename TY, typename Op>
static llvm::Error queueBinary(Op op, const DeviceTensor &a,
                               const DeviceTensor &b, const DeviceTensor &y,
                               const MergedBroadcast<2> &m, cudaStream_t stream,
                               llvm::StringRef name) {
  if (y.numElements() == 0)
    return llvm::Error::success();
  if (!a.data || !b.data || !y.data)
    return makeError(name + ": null device pointer");
  bool narrow = kNarrow && fitsNarrow({&a, &b, &y});
  auto launch = [&](auto width) -> llvm::Error {
    constexpr int W = decltype(width)::value;
    if constexpr (kNarrow)
      if (narrow)
        return launchBinaryAs<Op, TA, TB, TY, uint32_t, W>(op, a, b, y, m,
                                                           stream, name);
    return launchBinaryAs<Op, TA, TB, TY, uint64_t, W>(op, a, b, y, m, stream,
                                                       name);
  };
  if constexpr (kIsFast<TY> && std::is_same_v<TA, TY> &&
                std::is_same_v<TB, TY>) {
    constexpr int W = Pack<TY>::kWidth;
    // Packs need every operand read along the row and y aligned, and
    // whole packs per row (a flat operation may leave a tail).
    bool rowA = m.strides[0].back() != 0, rowB = m.strides[1].back() != 0;
    bool packed = isAligned(y.data) && (!rowA || isAligned(a.data)) &&
                  (!rowB || isAligned(b.data)) &&
                  (m.dims.size() == 1 || m.dims.back() % W == 0);
    if (packed)
      return launch(std::integral_constant<int, W>());
  }
  return launch(std::integral_constant<int, 1>());
}

static llvm::Error typesDiffer(llvm::StringRef name, const DeviceTensor &a,
                               const DeviceTensor &b, const DeviceTensor &y) {
  return makeError(name + ": element types " + dtypeName(a.dtype) + ", " +
                   dtypeName(b.dtype) + " -> " + dtypeName(y.dtype) +
                   " differ");
}

/// Pow's exponent types: a float base takes any float, i32 or i64; an i32
/// or i64 base takes i32, i64, f32 or f64.
template <typename T, typename E> constexpr bool isPowExponent() {
  if constexpr (std::is_same_v<E, int32_t> || std::is_same_v<E, int64_t>)
    return true;
  else if constexpr (kIsFloat<T>)
    return kIsFloat<E>;
  else
    return std::is_same_v<E, float> || std::is_same_v<E, double>;
}

static llvm::Error queuePow(const DeviceTensor &a, const DeviceTensor &b,
                            const DeviceTensor &y, const MergedBroadcast<2> &m,
                            cudaStream_t stream) {
  auto unsupported = [&] {
    return makeError("unsupported: Pow on the cuda backend with element "
                     "types " +
                     dtypeName(a.dtype) + " and " + dtypeName(b.dtype));
  };
  if (!isArithmeticType(a.dtype))
    return unsupported();
  return visitArithmetic("Pow", a.dtype, [&](auto baseTag) -> llvm::Error {
    using T = decltype(baseTag);
    return visitDeviceType(b.dtype, [&](auto expTag) -> llvm::Error {
      using E = decltype(expTag);
      if constexpr (isPowExponent<T, E>())
        return queueBinary<false, T, E, T>(PowFn{}, a, b, y, m, stream, "Pow");
      else
        return unsupported();
    });
  });
}

llvm::Error launchBinary(BinaryOpKind op, const DeviceTensor &a,
                         const DeviceTensor &b, const DeviceTensor &y,
                         cudaStream_t stream) {
  llvm::StringRef name = opName(op);
  bool compare = op == BinaryOpKind::Equal || op == BinaryOpKind::Less ||
                 op == BinaryOpKind::Greater || op == BinaryOpKind::LessOrEqual ||
                 op == BinaryOpKind::GreaterOrEqual;
  if (op == BinaryOpKind::Pow) {
    if (a.dtype != y.dtype)
      return makeError("Pow: base has element type " + dtypeName(a.dtype) +
                       " but the output " + dtypeName(y.dtype));
  } else if (compare) {
    if (a.dtype != b.dtype)
      return typesDiffer(name, a, b, y);
    if (y.dtype != DType::Bool)
      return makeError(name + ": output has element type " +
                       dtypeName(y.dtype) + ", expected bool");
  } else if (a.dtype != b.dtype || a.dtype != y.dtype) {
    return typesDiffer(name, a, b, y);
  }
  auto merged = checkBroadcast<2>(name, {&a, &b}, y);
  if (!merged)
    return merged.takeError();
  const MergedBroadcast<2> &m = *merged;

  switch (op) {
  case BinaryOpKind::And:
  case BinaryOpKind::Or:
  case BinaryOpKind::Xor:
    if (a.dtype != DType::Bool)
      return unsupportedType(name, a.dtype);
    if (op == BinaryOpKind::Or)
      return queueBinary<false, bool, bool, bool>(OrFn{}, a, b, y, m, stream,
                                                  name);
    if (op == BinaryOpKind::Xor)
      return queueBinary<false, bool, bool, bool>(XorFn{}, a, b, y, m, stream,
                                                  name);
    return queueBinary<false, bool, bool, bool>(AndFn{}, a, b, y, m, stream,
                                                name);
  case BinaryOpKind::Equal:
  case BinaryOpKind::Less:
  case BinaryOpKind::Greater:
  case BinaryOpKind::LessOrEqual:
  case BinaryOpKind::GreaterOrEqual: {
    auto run = [&](auto tag) -> llvm::Error {
      using T = decltype(tag);
      switch (op) {
      case BinaryOpKind::Equal:
        return queueBinary<false, T, T, bool>(CompareFn<CompareKind::Equal>{},
                                              a, b, y, m, stream, name);
      case BinaryOpKind::Less:
        return queueBinary<false, T, T, bool>(CompareFn<CompareKind::Less>{}, a,
                                              b, y, m, stream, name);
      case BinaryOpKind::LessOrEqual:
        return queueBinary<false, T, T, bool>(
            CompareFn<CompareKind::LessOrEqual>{}, a, b, y, m, stream, name);
      case BinaryOpKind::GreaterOrEqual:
        return queueBinary<false, T, T, bool>(
            CompareFn<CompareKind::GreaterOrEqual>{}, a, b, y, m, stream, name);
      default:
        return queueBinary<false, T, T, bool>(CompareFn<CompareKind::Greater>{},
                                              a, b, y, m, stream, name);
      }
    };
    if (a.dtype == DType::Bool)
      return run(bool{});
    return visitArithmetic(name, a.dtype, run);
  }
  case BinaryOpKind::Pow:
    return queuePow(a, b, y, m, stream);
  default:
    break;
  }
  return visitArithmetic(name, y.dtype, [&](auto tag) -> llvm::Error {
    using T = decltype(tag);
    constexpr bool narrow = kIsFast<T>;
    switch (op) {
    case BinaryOpKind::Add:
      return queueBinary<narrow, T, T, T>(SameType2<AddMath>{}, a, b, y, m,
                                          stream, name);
    case BinaryOpKind::Sub:
      return queueBinary<narrow, T, T, T>(SameType2<SubMath>{}, a, b, y, m,
                                          stream, name);
    case BinaryOpKind::Mul:
      return queueBinary<narrow, T, T, T>(SameType2<MulMath>{}, a, b, y, m,
                                          stream, name);
    case BinaryOpKind::Max:
      return queueBinary<narrow, T, T, T>(SameType2<MaxMath>{}, a, b, y, m,
                                          stream, name);
    case BinaryOpKind::Min:
      return queueBinary<narrow, T, T, T>(SameType2<MinMath>{}, a, b, y, m,
                                          stream, name);
    case BinaryOpKind::Mod:
      return queueBinary<narrow, T, T, T>(SameType2<ModMath>{}, a, b, y, m,
                                          stream, name);
    case BinaryOpKind::Fmod:
      return queueBinary<narrow, T, T, T>(SameType2<FmodMath>{}, a, b, y, m,
                                          stream, name);
    default:
      return queueBinary<narrow, T, T, T>(SameType2<DivMath>{}, a, b, y, m,
                                          stream, name);
    }
  });
}

//===----------------------------------------------------------------------===//
// Host side: gradients, Where
//===----------------------------------------------------------------------===//

llvm::Error launchGrad(GradOpKind op, const DeviceTensor &v,
                       const DeviceTensor &dy, const DeviceTensor &dx,
                       cudaStream_t stream, double alpha) {
  llvm::StringRef name = opName(op);
  if (v.dtype != dy.dtype || v.dtype != dx.dtype)
    return typesDiffer(name, v, dy, dx);
  for (const DeviceTensor *t : {&dy, &dx})
    if (t->shape != v.shape)
      return makeError(name + ": shapes " + formatShape(v.shape) + " and " +
                       formatShape(t->shape) + " differ");
  // Equal shapes merge to one flat dimension: no division per element.
  MergedBroadcast<2> m = mergeBroadcast<2>({v.shape, dy.shape}, dx.shape);
  Slope slope{static_cast<float>(alpha), alpha};
  return visitFloat(name, v.dtype, [&](auto tag) -> llvm::Error {
    using T = decltype(tag);
    auto queue = [&](auto math) {
      // Equal shapes: flat, no divisions for 32-bit indices to save.
      return queueBinary<false, T, T, T>(SameType2<decltype(math)>{math}, v, dy,
                                         dx, m, stream, name);
    };
    switch (op) {
    case GradOpKind::Relu:
      return queue(ReluGradMath{});
    case GradOpKind::LeakyRelu:
      return queue(LeakyReluGradMath{slope});
    case GradOpKind::Gelu:
      return queue(GeluGradMath{});
    case GradOpKind::GeluTanh:
      return queue(GeluTanhGradMath{});
    case GradOpKind::Sigmoid:
      return queue(SigmoidGradMath{});
    case GradOpKind::Tanh:
      return queue(TanhGradMath{});
    case GradOpKind::Erf:
      return queue(ErfGradMath{});
    case GradOpKind::Silu:
      return queue(SiluGradMath{});
    case GradOpKind::HardSwish:
      return queue(HardSwishGradMath{});
    }
    return makeError("unknown gradient op");
  });
}

template <typename T, typename IndexT>
static llvm::Error launchWhereAs(const DeviceTensor &c, const DeviceTensor &x,
                                 const DeviceTensor &z, const DeviceTensor &y,
                                 const MergedBroadcast<3> &m,
                                 cudaStream_t stream) {
  int64_t total = y.numElements();
  unsigned grid = 0;
  if (llvm::Error err = fillGrid(total, grid))
    return err;
  whereKernel<T, IndexT><<<grid, kThreads, 0, stream>>>(
      static_cast<const bool *>(c.data), static_cast<const T *>(x.data),
      static_cast<const T *>(z.data), static_cast<T *>(y.data),
      static_cast<IndexT>(total), paramsOf<IndexT, 3>(m));
  return checkLaunch("Where kernel (" + dtypeName(y.dtype) + ")");
}

llvm::Error launchWhere(const DeviceTensor &cond, const DeviceTensor &x,
                        const DeviceTensor &z, const DeviceTensor &y,
                        cudaStream_t stream) {
  if (cond.dtype != DType::Bool)
    return makeError("Where: condition has element type " +
                     dtypeName(cond.dtype) + ", expected bool");
  if (x.dtype != z.dtype || x.dtype != y.dtype)
    return typesDiffer("Where", x, z, y);
  auto merged = checkBroadcast<3>("Where", {&cond, &x, &z}, y);
  if (!merged)
    return merged.takeError();
  if (y.numElements() == 0)
    return llvm::Error::success();
  if (!cond.data || !x.data || !z.data || !y.data)
    return makeError("Where: null device pointer");
  bool narrow = fitsNarrow({&cond, &x, &z, &y});
  // Only the bytes move, so dispatch on the element size, not the type.
  auto run = [&](auto tag) {
    using T = decltype(tag);
    return narrow ? launchWhereAs<T, uint32_t>(cond, x, z, y, *merged, stream)
                  : launchWhereAs<T, uint64_t>(cond, x, z, y, *merged, stream);
  };
  switch (dtypeSize(x.dtype)) {
  case 1:
    return run(uint8_t{});
  case 2:
    return run(uint16_t{});
  case 4:
    return run(uint32_t{});
  case 8:
    return run(uint64_t{});
  default:
    return unsupportedType("Where", x.dtype);
  }
}

//===----------------------------------------------------------------------===//
// Host side: unary ops, Cast
//===----------------------------------------------------------------------===//

template <typename TX, typename TY, typename Op>
static llvm::Error queueUnary(Op op, const DeviceTensor &x,
                              const DeviceTensor &y, cudaStream_t stream,
                              llvm::StringRef name) {
  int64_t n = y.numElements();
  if (n == 0)
    return llvm::Error::success();
  if (!x.data || !y.data)
    return makeError(name + ": null device pointer");
  bool packed =
      std::is_same_v<TX, TY> && isAligned(x.data) && isAligned(y.data);
  unsigned grid = 0;
  if (llvm::Error err = fillGrid(
          packed ? (n + Pack<TX>::kWidth - 1) / Pack<TX>::kWidth : n, grid))
    return err;
  unaryKernel<Op, TX, TY>
      <<<grid, kThreads, 0, stream>>>(static_cast<const TX *>(x.data),
                                      static_cast<TY *>(y.data), n, packed, op);
  return checkLaunch(name + " kernel (" + dtypeName(x.dtype) + " -> " +
                     dtypeName(y.dtype) + ")");
}

llvm::Error launchUnary(UnaryOpKind op, const DeviceTensor &x,
                        const DeviceTensor &y, cudaStream_t stream,
                        double alpha) {
  llvm::StringRef name = opName(op);
  if (x.dtype != y.dtype)
    return makeError(name + ": element types " + dtypeName(x.dtype) + " -> " +
                     dtypeName(y.dtype) + " differ");
  if (x.shape != y.shape)
    return makeError(name + ": output shape " + formatShape(y.shape) +
                     ", expected " + formatShape(x.shape));
  if (op == UnaryOpKind::Not) {
    if (x.dtype != DType::Bool)
      return unsupportedType(name, x.dtype);
    return queueUnary<bool, bool>(NotFn{}, x, y, stream, name);
  }
  auto queue = [&](auto tag, auto math) {
    using T = decltype(tag);
    return queueUnary<T, T>(SameType1<decltype(math)>{math}, x, y, stream,
                            name);
  };
  if (op == UnaryOpKind::Relu || op == UnaryOpKind::Neg)
    return visitArithmetic(name, x.dtype, [&](auto tag) {
      return op == UnaryOpKind::Relu ? queue(tag, ReluMath{})
                                     : queue(tag, NegMath{});
    });
  Slope slope{static_cast<float>(alpha), alpha};
  return visitFloat(name, x.dtype, [&](auto tag) -> llvm::Error {
    switch (op) {
    case UnaryOpKind::Gelu:
      return queue(tag, GeluMath{});
    case UnaryOpKind::GeluTanh:
      return queue(tag, GeluTanhMath{});
    case UnaryOpKind::Exp:
      return queue(tag, ExpMath{});
    case UnaryOpKind::Tanh:
      return queue(tag, TanhMath{});
    case UnaryOpKind::LeakyRelu:
      return queue(tag, LeakyReluMath{slope});
    case UnaryOpKind::Sigmoid:
      return queue(tag, SigmoidMath{});
    case UnaryOpKind::Sqrt:
      return queue(tag, SqrtMath{});
    case UnaryOpKind::Reciprocal:
      return queue(tag, ReciprocalMath{});
    case UnaryOpKind::Log:
      return queue(tag, LogMath{});
    case UnaryOpKind::Erf:
      return queue(tag, ErfMath{});
    case UnaryOpKind::Silu:
      return queue(tag, SiluMath{});
    case UnaryOpKind::HardSwish:
      return queue(tag, HardSwishMath{});
    default:
      return makeError("unknown unary op");
    }
  });
}

llvm::Error launchCast(const DeviceTensor &x, const DeviceTensor &y,
                       cudaStream_t stream) {
  if (x.shape != y.shape)
    return makeError("Cast: output shape " + formatShape(y.shape) +
                     ", expected " + formatShape(x.shape));
  if (y.numElements() == 0)
    return llvm::Error::success();
  if (!x.data || !y.data)
    return makeError("Cast: null device pointer");
  // In place, each thread reads element i before writing it: only where
  // the two elements are the same bytes.
  if (x.data == y.data && dtypeSize(x.dtype) != dtypeSize(y.dtype))
    return makeError("Cast: in place from " + dtypeName(x.dtype) + " to " +
                     dtypeName(y.dtype) + ", element types of different sizes");
  if (x.dtype == y.dtype) {
    if (x.data == y.data)
      return llvm::Error::success();
    return checkCuda(cudaMemcpyAsync(y.data, x.data, y.byteSize(),
                                     cudaMemcpyDeviceToDevice, stream),
                     "cudaMemcpyAsync(Cast of " + llvm::Twine(y.byteSize()) +
                         " bytes, device to device)");
  }
  if (isFloatType(x.dtype))
    return visitFloat("Cast", x.dtype, [&](auto fromTag) -> llvm::Error {
      using From = decltype(fromTag);
      return visitDeviceType(y.dtype, [&](auto toTag) -> llvm::Error {
        using To = decltype(toTag);
        if constexpr (std::is_same_v<From, To>)
          return makeError("Cast: unreachable");
        else
          return queueUnary<From, To>(CastFn<To>{}, x, y, stream, "Cast");
      });
    });
  return visitDeviceType(y.dtype, [&](auto toTag) -> llvm::Error {
    using To = decltype(toTag);
    int64_t n = y.numElements();
    unsigned grid = 0;
    if (llvm::Error err = fillGrid(n, grid))
      return err;
    int bytes = static_cast<int>(dtypeSize(x.dtype));
    if (isSignedDType(x.dtype))
      castIntKernel<To, int64_t><<<grid, kThreads, 0, stream>>>(
          x.data, static_cast<To *>(y.data), n, bytes);
    else
      castIntKernel<To, uint64_t><<<grid, kThreads, 0, stream>>>(
          x.data, static_cast<To *>(y.data), n, bytes);
    return checkLaunch("Cast kernel (" + dtypeName(x.dtype) + " -> " +
                       dtypeName(y.dtype) + ")");
  });
}

} // namespace zinc::cuda
