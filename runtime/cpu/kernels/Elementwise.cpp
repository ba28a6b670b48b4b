//===- Elementwise.cpp - Unary, binary and ternary elementwise cpu kernels
//-===//
//
// Every op here is a functor on one element handed to a shared driver. The
// driver coalesces the numpy broadcast of the operands into rows whose
// operands are either contiguous or a repeated scalar, so the per-element
// loops vectorise, and spreads long rows or many rows over OpenMP threads.
//
//===----------------------------------------------------------------------===//
#include "Convert.h"
#include "KernelUtil.h"
#include "Kernels.h"
#include "zinc/runtime/cpu/RowMath.h"
#include "llvm/ADT/Twine.h"
#include <algorithm>
#include <cmath>
#include <limits>
#include <omp.h>

namespace zinc::cpu {
namespace {

/// Below this many elements thread start-up costs more than it saves.
constexpr int64_t kParallelMin = int64_t(1) << 15;
/// Long rows are cut into pieces of about this many elements for threads.
constexpr int64_t kGrain = int64_t(1) << 13;

/// The broadcast of N operands onto a contiguous output, coalesced: the
/// output is `outer` rows of `inner` contiguous elements; operand k starts
/// each row at a flat offset given by `strides[k]` over the outer index and
/// steps by `innerStride[k]` (0 or 1) along the row.
template <size_t N> struct RowPlan {
  llvm::SmallVector<int64_t, 6> outer;
  std::array<llvm::SmallVector<int64_t, 6>, N> strides;
  std::array<int64_t, N> innerStride{};
  int64_t inner = 1;
};

} // namespace

/// Merges adjacent output dimensions along which every operand is laid out
/// contiguously (or broadcast), so that `[B,S,H] + [H]` becomes one outer
/// dimension of B*S rows of H. Size-1 dimensions are dropped.
template <size_t N>
static RowPlan<N> planRows(llvm::ArrayRef<int64_t> out,
                           const std::array<llvm::ArrayRef<int64_t>, N> &ins) {
  std::array<llvm::SmallVector<int64_t, 6>, N> st;
  for (size_t k = 0; k < N; ++k)
    st[k] = broadcastStrides(ins[k], out);
  RowPlan<N> p;
  llvm::SmallVector<int64_t, 6> shape;
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == 1)
      continue;
    bool merge = !shape.empty();
    for (size_t k = 0; k < N && merge; ++k)
      merge = p.strides[k].back() == st[k][d] * out[d];
    if (merge) {
      shape.back() *= out[d];
      for (size_t k = 0; k < N; ++k)
        p.strides[k].back() = st[k][d];
      continue;
    }
    shape.push_back(out[d]);
    for (size_t k = 0; k < N; ++k)
      p.strides[k].push_back(st[k][d]);
  }
  if (shape.empty())
    return p;
  p.inner = shape.pop_back_val();
  for (size_t k = 0; k < N; ++k)
    p.innerStride[k] = p.strides[k].pop_back_val();
  p.outer = shape;
  return p;
}

/// Calls fn(outOffset, operandOffsets, length) for every piece of every row
/// of `p`, in parallel when the output is large. Each thread decomposes its
/// first row index once and then steps an odometer, so short rows cost no
/// divisions.
template <size_t N, typename RowFn>
static void forEachRow(const RowPlan<N> &p, RowFn &&fn) {
  int64_t rows = zinc::numElements(p.outer);
  int64_t total = rows * p.inner;
  if (total == 0)
    return;
  int64_t pieces = std::max<int64_t>(1, p.inner / kGrain);
  int64_t pieceLen = (p.inner + pieces - 1) / pieces;
  int64_t tasks = rows * pieces;
  size_t rank = p.outer.size();
  auto runTasks = [&](int64_t t0, int64_t t1) {
    if (t0 >= t1)
      return;
    llvm::SmallVector<int64_t, 6> idx(rank, 0);
    std::array<int64_t, N> rowOff{};
    int64_t row = t0 / pieces;
    for (size_t d = rank, r = row; d-- > 0;) {
      idx[d] = static_cast<int64_t>(r) % p.outer[d];
      r /= p.outer[d];
      for (size_t k = 0; k < N; ++k)
        rowOff[k] += idx[d] * p.strides[k][d];
    }
    for (int64_t t = t0; t < t1; ++t) {
      int64_t piece = t % pieces;
      if (t != t0 && piece == 0) {
        ++row;
        for (size_t d = rank; d-- > 0;) {
          for (size_t k = 0; k < N; ++k)
            rowOff[k] += p.strides[k][d];
          if (++idx[d] < p.outer[d])
            break;
          for (size_t k = 0; k < N; ++k)
            rowOff[k] -= p.strides[k][d] * p.outer[d];
          idx[d] = 0;
        }
      }
      int64_t begin = piece * pieceLen;
      int64_t len = std::min(pieceLen, p.inner - begin);
      std::array<int64_t, N> off;
      for (size_t k = 0; k < N; ++k)
        off[k] = rowOff[k] + begin * p.innerStride[k];
      fn(row * p.inner + begin, off, len);
    }
  };
  if (!useThreads(total >= kParallelMin && tasks > 1)) {
    runTasks(0, tasks);
    return;
  }
#pragma omp parallel
  {
    int64_t nt = omp_get_num_threads(), tid = omp_get_thread_num();
    runTasks(tasks * tid / nt, tasks * (tid + 1) / nt);
  }
}

/// out[i] = fn(a[i*sa], b[i*sb]) with strides 0 or 1, split into the three
/// shapes the compiler can vectorise.
template <typename TA, typename TB, typename TO, typename Fn>
static void binaryRow(const TA *a, int64_t sa, const TB *b, int64_t sb, TO *o,
                      int64_t n, const Fn &fn) {
  // `omp simd`: -O2's cost model would otherwise leave these scalar.
  if (sa && sb) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i)
      o[i] = fn(a[i], b[i]);
  } else if (sa) {
    TB bv = *b;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i)
      o[i] = fn(a[i], bv);
  } else if (sb) {
    TA av = *a;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i)
      o[i] = fn(av, b[i]);
  } else {
    std::fill(o, o + n, fn(*a, *b));
  }
}

static llvm::Error typeError(const KernelCall &call, DType t) {
  return kernelError("unsupported: " + call.opType + " with element type " +
                     dtypeName(t));
}

/// Checks that inputs [0, nIn) and output 0 exist and that the output has
/// the broadcast shape of the inputs.
static llvm::Error checkOperands(const KernelCall &call, size_t nIn) {
  if (!call.output(0))
    return kernelError(call.opType + ": missing output 0");
  llvm::SmallVector<int64_t, 6> shape;
  for (size_t i = 0; i < nIn; ++i) {
    const TensorRef *in = call.input(i);
    if (!in)
      return kernelError(call.opType + ": missing input " + llvm::Twine(i));
    if (i == 0) {
      shape.assign(in->shape.begin(), in->shape.end());
      continue;
    }
    auto b = broadcastShapes(shape, in->shape);
    if (!b)
      return b.takeError();
    shape = *b;
  }
  if (llvm::ArrayRef<int64_t>(shape) !=
      llvm::ArrayRef<int64_t>(call.output(0)->shape))
    return kernelError(call.opType + ": output shape " +
                       formatShape(call.output(0)->shape) +
                       " is not the broadcast shape " + formatShape(shape));
  return llvm::Error::success();
}

static llvm::Error checkSameType(const KernelCall &call, const TensorRef &a,
                                 const TensorRef &b) {
  if (a.dtype == b.dtype)
    return llvm::Error::success();
  return kernelError(call.opType + ": element types " + dtypeName(a.dtype) +
                     " and " + dtypeName(b.dtype) + " differ");
}

/// out = fn(a, b) elementwise over the broadcast of a and b; fn maps storage
/// values to a storage value.
template <typename TA, typename TB, typename TO, typename Fn>
static void broadcast2(const TensorRef &a, const TensorRef &b, TensorRef &out,
                       const Fn &fn) {
  RowPlan<2> p = planRows<2>(out.shape, {a.shape, b.shape});
  const TA *pa = static_cast<const TA *>(a.data);
  const TB *pb = static_cast<const TB *>(b.data);
  TO *po = out.as<TO>();
  forEachRow(p, [&](int64_t o, const std::array<int64_t, 2> &off, int64_t n) {
    binaryRow(pa + off[0], p.innerStride[0], pb + off[1], p.innerStride[1],
              po + o, n, fn);
  });
}

/// y = fn(x) over a contiguous tensor; fn maps storage to storage.
template <typename TX, typename TY, typename Fn>
static void map1(const TensorRef &x, TensorRef &y, const Fn &fn) {
  RowPlan<1> p = planRows<1>(y.shape, {x.shape});
  const TX *px = static_cast<const TX *>(x.data);
  TY *py = y.as<TY>();
  forEachRow(p, [&](int64_t o, const std::array<int64_t, 1> &off, int64_t n) {
    const TX *in = px + off[0];
    TY *out = py + o;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i)
      out[i] = fn(in[i]);
  });
}

//===----------------------------------------------------------------------===//
// Unary ops
//===----------------------------------------------------------------------===//

/// Runs a unary op whose functor maps a compute value (float for the 16-bit
/// floats) to a compute value. Integer types are accepted only when
/// `allowInt`; bool never.
/// f32 tensors go to `rows` (RowMath's loop for the op, when it has one)
/// a range of elements per thread.
using F32Rows = void (*)(const float *x, float *y, int64_t n);

template <bool allowInt, typename Fn>
static llvm::Error runUnary(const KernelCall &call, const Fn &fn,
                            F32Rows rows = nullptr) {
  if (auto err = checkOperands(call, 1))
    return err;
  const TensorRef &x = *call.input(0);
  TensorRef &y = *call.output(0);
  if (auto err = checkSameType(call, x, y))
    return err;
  if (rows && x.dtype == DType::F32 && x.shape == y.shape) {
    const float *px = x.as<const float>();
    float *py = y.as<float>();
    parallelRanges(x.numElements(), x.byteSize() * 2,
                   [&](int64_t b, int64_t e) { rows(px + b, py + b, e - b); });
    return llvm::Error::success();
  }
  return visitDType(x.dtype, [&](auto tag) -> llvm::Error {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool> ||
                  (!allowInt && !isFloatStorage<T>())) {
      return typeError(call, x.dtype);
    } else {
      map1<T, T>(x, y, [&](T v) { return store<T>(fn(load(v))); });
      return llvm::Error::success();
    }
  });
}

/// Integer arithmetic wraps like numpy: computed in an unsigned type at
/// least as wide as unsigned int, so that neither signed overflow nor the
/// promotion of narrow types to int can be undefined behaviour.
template <typename C>
using WrapT = std::conditional_t<(sizeof(C) < sizeof(unsigned)), unsigned,
                                 std::make_unsigned_t<C>>;

llvm::Error runSqrt(const KernelCall &call) {
  return runUnary<false>(call, [](auto v) { return std::sqrt(v); });
}
llvm::Error runReciprocal(const KernelCall &call) {
  return runUnary<false>(call, [](auto v) { return decltype(v)(1) / v; });
}
llvm::Error runExp(const KernelCall &call) {
  return runUnary<false>(call, [](auto v) { return std::exp(v); },
                         rowMath().exp);
}
llvm::Error runLog(const KernelCall &call) {
  return runUnary<false>(call, [](auto v) { return std::log(v); });
}
llvm::Error runErf(const KernelCall &call) {
  return runUnary<false>(call, [](auto v) { return std::erf(v); },
                         rowMath().erf);
}
llvm::Error runTanh(const KernelCall &call) {
  return runUnary<false>(call, [](auto v) { return std::tanh(v); },
                         rowMath().tanh);
}

llvm::Error runNeg(const KernelCall &call) {
  return runUnary<true>(call, [](auto v) -> decltype(v) {
    using C = decltype(v);
    if constexpr (std::is_integral_v<C>)
      return static_cast<C>(WrapT<C>(0) - static_cast<WrapT<C>>(v));
    else
      return -v;
  });
}

llvm::Error runRelu(const KernelCall &call) {
  // `v < 0 ? 0 : v` rather than max(): NaN passes through as in numpy.
  return runUnary<true>(call, [](auto v) {
    using C = decltype(v);
    if constexpr (std::is_unsigned_v<C>)
      return v;
    else
      return v < 0 ? C(0) : v;
  });
}

llvm::Error runLeakyRelu(const KernelCall &call) {
  double alpha = call.attrs.getFloat("alpha", 0.01);
  return runUnary<false>(call, [alpha](auto v) {
    using C = decltype(v);
    return v < 0 ? static_cast<C>(alpha) * v : v;
  });
}

/// Clip's bounds in the compute type C of the data: inputs 1 and 2 from
/// opset 11 on (absent means unbounded), the float attributes min and max
/// before (defaulting to float's range, as ONNX does). Each bound input must
/// be a scalar of the data's type.
template <typename T, typename C>
static llvm::Error clipBounds(const KernelCall &call, C &lo, C &hi) {
  lo = std::numeric_limits<C>::lowest();
  hi = std::numeric_limits<C>::max();
  if (std::numeric_limits<C>::has_infinity) {
    lo = -std::numeric_limits<C>::infinity();
    hi = std::numeric_limits<C>::infinity();
  }
  if (call.opsetVersion < 11) {
    if constexpr (std::is_floating_point_v<C>) {
      lo = static_cast<C>(
          call.attrs.getFloat("min", std::numeric_limits<float>::lowest()));
      hi = static_cast<C>(
          call.attrs.getFloat("max", std::numeric_limits<float>::max()));
    }
    return llvm::Error::success();
  }
  const TensorRef &x = *call.input(0);
  for (size_t i : {1, 2}) {
    const TensorRef *b = call.input(i);
    if (!b)
      continue;
    if (b->dtype != x.dtype)
      return kernelError(call.opType + ": " + (i == 1 ? "min" : "max") +
                         " has element type " + dtypeName(b->dtype) +
                         ", expected " + dtypeName(x.dtype));
    if (b->numElements() != 1)
      return kernelError(call.opType + ": " + (i == 1 ? "min" : "max") +
                         " must be a scalar, has shape " +
                         formatShape(b->shape));
    (i == 1 ? lo : hi) = load(b->as<T>()[0]);
  }
  return llvm::Error::success();
}

llvm::Error runClip(const KernelCall &call) {
  if (!call.input(0) || !call.output(0))
    return kernelError("Clip: expects input 0 and output 0");
  const TensorRef &x = *call.input(0);
  TensorRef &y = *call.output(0);
  if (auto err = checkSameType(call, x, y))
    return err;
  if (x.shape != y.shape)
    return kernelError("Clip: output shape " + formatShape(y.shape) +
                       " differs from input shape " + formatShape(x.shape));
  return visitDType(x.dtype, [&](auto tag) -> llvm::Error {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      return typeError(call, x.dtype);
    } else {
      using C = ComputeT<T>;
      C lo, hi;
      if (auto err = clipBounds<T>(call, lo, hi))
        return err;
      // min(max(x, lo), hi) as numpy.clip: hi wins when lo > hi, and NaN
      // passes through both comparisons.
      map1<T, T>(x, y, [lo, hi](T s) {
        C v = load(s);
        v = v < lo ? lo : v;
        return store<T>(v > hi ? hi : v);
      });
      return llvm::Error::success();
    }
  });
}

llvm::Error runSigmoid(const KernelCall &call) {
  // exp(-v) overflows to inf for very negative v, giving exactly 0.
  return runUnary<false>(call, [](auto v) {
    using C = decltype(v);
    return C(1) / (C(1) + std::exp(-v));
  });
}

llvm::Error runGelu(const KernelCall &call) {
  llvm::StringRef approx = call.attrs.getString("approximate", "none");
  // RowMath's loops take the form as an argument; these adapt them.
  static const auto erfRows = [](const float *x, float *y, int64_t n) {
    rowMath().gelu(x, y, n, GeluForm::Erf);
  };
  static const auto tanhRows = [](const float *x, float *y, int64_t n) {
    rowMath().gelu(x, y, n, GeluForm::Tanh);
  };
  if (approx == "none")
    return runUnary<false>(
        call,
        [](auto v) {
          using C = decltype(v);
          return C(0.5) * v * (C(1) + std::erf(v * C(M_SQRT1_2)));
        },
        +erfRows);
  if (approx == "tanh")
    return runUnary<false>(
        call,
        [](auto v) {
          using C = decltype(v);
          const C k = C(0.7978845608028654); // sqrt(2 / pi)
          return C(0.5) * v *
                 (C(1) + std::tanh(k * (v + C(0.044715) * v * v * v)));
        },
        +tanhRows);
  return kernelError("unsupported: Gelu with approximate=\"" + approx + "\"");
}

llvm::Error runNot(const KernelCall &call) {
  if (auto err = checkOperands(call, 1))
    return err;
  const TensorRef &x = *call.input(0);
  TensorRef &y = *call.output(0);
  if (x.dtype != DType::Bool || y.dtype != DType::Bool)
    return typeError(call, x.dtype != DType::Bool ? x.dtype : y.dtype);
  map1<bool, bool>(x, y, [](bool v) { return !v; });
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Binary arithmetic
//===----------------------------------------------------------------------===//

namespace {
struct AddOp {
  template <typename C> C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>)
      return static_cast<C>(WrapT<C>(a) + WrapT<C>(b));
    else
      return a + b;
  }
};
struct SubOp {
  template <typename C> C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>)
      return static_cast<C>(WrapT<C>(a) - WrapT<C>(b));
    else
      return a - b;
  }
};
struct MulOp {
  template <typename C> C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C>)
      return static_cast<C>(WrapT<C>(a) * WrapT<C>(b));
    else
      return a * b;
  }
};
/// Integer division truncates toward zero as in C (and ONNX Runtime);
/// divisors are checked for zero before the loop, and min / -1 wraps.
struct DivOp {
  template <typename C> C operator()(C a, C b) const {
    if constexpr (std::is_integral_v<C> && std::is_signed_v<C>)
      return b == -1 ? SubOp()(C(0), a) : static_cast<C>(a / b);
    else
      return static_cast<C>(a / b);
  }
};
} // namespace

/// Add, Sub, Mul and Div: same-typed inputs broadcast to the output.
template <typename Op>
static llvm::Error runArithmetic(const KernelCall &call, Op op) {
  if (auto err = checkOperands(call, 2))
    return err;
  const TensorRef &a = *call.input(0), &b = *call.input(1);
  TensorRef &y = *call.output(0);
  if (auto err = checkSameType(call, a, b))
    return err;
  if (auto err = checkSameType(call, a, y))
    return err;
  return visitDType(a.dtype, [&](auto tag) -> llvm::Error {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      return typeError(call, a.dtype);
    } else {
      if constexpr (std::is_integral_v<T> && std::is_same_v<Op, DivOp>) {
        const T *pb = b.as<const T>();
        if (std::find(pb, pb + b.numElements(), T(0)) != pb + b.numElements())
          return kernelError("Div: integer division by zero");
      }
      broadcast2<T, T, T>(
          a, b, y, [op](T x, T z) { return store<T>(op(load(x), load(z))); });
      return llvm::Error::success();
    }
  });
}

/// Mod {fmod}: with fmod 0 (integers only) the remainder takes the
/// divisor's sign, as Python's %; with fmod 1 the dividend's, as C's fmod.
/// A zero integer divisor fails the step.
llvm::Error runMod(const KernelCall &call) {
  if (auto err = checkOperands(call, 2))
    return err;
  const TensorRef &a = *call.input(0), &b = *call.input(1);
  TensorRef &y = *call.output(0);
  if (auto err = checkSameType(call, a, b))
    return err;
  if (auto err = checkSameType(call, a, y))
    return err;
  bool fmod = call.attrs.getInt("fmod", 0) != 0;
  return visitDType(a.dtype, [&](auto tag) -> llvm::Error {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      return typeError(call, a.dtype);
    } else if constexpr (std::is_integral_v<T>) {
      const T *pb = b.as<const T>();
      if (std::find(pb, pb + b.numElements(), T(0)) != pb + b.numElements())
        return kernelError("Mod: integer division by zero");
      broadcast2<T, T, T>(a, b, y, [fmod](T x, T z) -> T {
        if constexpr (std::is_signed_v<T>)
          if (z == T(-1))
            return T(0); // min % -1 would trap
        T r = static_cast<T>(x % z);
        if constexpr (std::is_signed_v<T>)
          if (!fmod && r != 0 && ((r < 0) != (z < 0)))
            r = static_cast<T>(r + z);
        return r;
      });
      return llvm::Error::success();
    } else {
      if (!fmod)
        return kernelError("Mod: a float Mod needs fmod=1");
      broadcast2<T, T, T>(a, b, y, [](T x, T z) {
        return store<T>(std::fmod(load(x), load(z)));
      });
      return llvm::Error::success();
    }
  });
}

llvm::Error runAdd(const KernelCall &call) {
  return runArithmetic(call, AddOp());
}
llvm::Error runSub(const KernelCall &call) {
  return runArithmetic(call, SubOp());
}
llvm::Error runMul(const KernelCall &call) {
  return runArithmetic(call, MulOp());
}
llvm::Error runDiv(const KernelCall &call) {
  return runArithmetic(call, DivOp());
}

/// base^exp for integers by squaring, wrapping on overflow. A negative
/// exponent gives the real result truncated toward zero (only bases 1 and
/// -1 are nonzero), as an integer base with a float exponent does.
template <typename T, typename E> static T intPow(T base, E exp) {
  if constexpr (std::is_signed_v<E>) {
    if (exp < 0) {
      if (base == 1)
        return 1;
      if constexpr (std::is_signed_v<T>)
        if (base == -1)
          return (exp & 1) ? T(-1) : T(1);
      return 0;
    }
  }
  WrapT<T> result = 1, b = static_cast<WrapT<T>>(base);
  for (uint64_t n = static_cast<uint64_t>(exp); n; n >>= 1, b *= b)
    if (n & 1)
      result *= b;
  return static_cast<T>(result);
}

/// Pow's base and exponent may have different types (opset 12+); the
/// result has the base's type. A float base is raised in its compute type;
/// an integer base with a float exponent is raised in double and truncated,
/// as numpy's power(...).astype(base type) does.
llvm::Error runPow(const KernelCall &call) {
  if (auto err = checkOperands(call, 2))
    return err;
  const TensorRef &a = *call.input(0), &b = *call.input(1);
  TensorRef &y = *call.output(0);
  if (auto err = checkSameType(call, a, y))
    return err;
  return visitDType(a.dtype, [&](auto baseTag) -> llvm::Error {
    using T = decltype(baseTag);
    return visitDType(b.dtype, [&](auto expTag) -> llvm::Error {
      using E = decltype(expTag);
      if constexpr (std::is_same_v<T, bool> || std::is_same_v<E, bool>) {
        return typeError(call, DType::Bool);
      } else if constexpr (isFloatStorage<T>()) {
        using C = ComputeT<T>;
        broadcast2<T, E, T>(a, b, y, [](T x, E e) {
          return store<T>(std::pow(load(x), static_cast<C>(load(e))));
        });
        return llvm::Error::success();
      } else if constexpr (isFloatStorage<E>()) {
        broadcast2<T, E, T>(a, b, y, [](T x, E e) {
          return convertValue<T>(
              std::pow(static_cast<double>(x), static_cast<double>(load(e))));
        });
        return llvm::Error::success();
      } else {
        broadcast2<T, E, T>(a, b, y, [](T x, E e) { return intPow(x, e); });
        return llvm::Error::success();
      }
    });
  });
}

/// Max and Min of one or more same-typed inputs, broadcast to the output,
/// folded pairwise into it. NaN wins either way, as in numpy's maximum
/// (and PyTorch's torch.max(a, b)).
template <bool isMax> static llvm::Error runExtremum(const KernelCall &call) {
  size_t n = call.inputs.size();
  if (n == 0)
    return kernelError(call.opType + ": expects at least one input");
  if (auto err = checkOperands(call, n))
    return err;
  TensorRef &y = *call.output(0);
  for (size_t i = 0; i < n; ++i)
    if (auto err = checkSameType(call, *call.input(i), y))
      return err;
  return visitDType(y.dtype, [&](auto tag) -> llvm::Error {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      return typeError(call, y.dtype);
    } else {
      auto pick = [](T a, T b) {
        auto x = load(a), z = load(b);
        if constexpr (!std::is_integral_v<decltype(x)>)
          if (x != x || z != z)
            return x != x ? a : b;
        return (isMax ? x >= z : x <= z) ? a : b;
      };
      if (n == 1) {
        map1<T, T>(*call.input(0), y, [](T v) { return v; });
        return llvm::Error::success();
      }
      broadcast2<T, T, T>(*call.input(0), *call.input(1), y, pick);
      // y already has the output shape, so folding into it in place reads
      // and writes each element at the same offset.
      for (size_t i = 2; i < n; ++i)
        broadcast2<T, T, T>(y, *call.input(i), y, pick);
      return llvm::Error::success();
    }
  });
}

llvm::Error runMax(const KernelCall &call) { return runExtremum<true>(call); }
llvm::Error runMin(const KernelCall &call) { return runExtremum<false>(call); }

/// zinc.Silu: x / (1 + exp(-x)), as PyTorch's cpu silu computes it.
llvm::Error runSilu(const KernelCall &call) {
  return runUnary<false>(call, [](auto v) {
    using C = decltype(v);
    return v / (C(1) + std::exp(-v));
  });
}

/// HardSigmoid: max(0, min(1, alpha x + beta)); PyTorch's hardsigmoid
/// exports with alpha 1/6.
llvm::Error runHardSigmoid(const KernelCall &call) {
  double alpha = call.attrs.getFloat("alpha", 0.2);
  double beta = call.attrs.getFloat("beta", 0.5);
  return runUnary<false>(call, [alpha, beta](auto v) {
    using C = decltype(v);
    C t = static_cast<C>(alpha) * v + static_cast<C>(beta);
    return t < C(0) ? C(0) : (t > C(1) ? C(1) : t);
  });
}

/// HardSwish: x * max(0, min(1, x / 6 + 1/2)), written as PyTorch's
/// x * min(max(x + 3, 0), 6) / 6 so that results round alike.
llvm::Error runHardSwish(const KernelCall &call) {
  return runUnary<false>(call, [](auto v) {
    using C = decltype(v);
    C t = v + C(3);
    t = t < C(0) ? C(0) : (t > C(6) ? C(6) : t);
    return v * t / C(6);
  });
}

//===----------------------------------------------------------------------===//
// Comparisons and logic
//===----------------------------------------------------------------------===//

/// Equal and the orderings: same-typed inputs, bool output.
template <typename Cmp>
static llvm::Error runCompare(const KernelCall &call, Cmp cmp) {
  if (auto err = checkOperands(call, 2))
    return err;
  const TensorRef &a = *call.input(0), &b = *call.input(1);
  TensorRef &y = *call.output(0);
  if (auto err = checkSameType(call, a, b))
    return err;
  if (y.dtype != DType::Bool)
    return typeError(call, y.dtype);
  return visitDType(a.dtype, [&](auto tag) -> llvm::Error {
    using T = decltype(tag);
    broadcast2<T, T, bool>(a, b, y,
                           [cmp](T x, T z) { return cmp(load(x), load(z)); });
    return llvm::Error::success();
  });
}

llvm::Error runEqual(const KernelCall &call) {
  return runCompare(call, [](auto x, auto z) { return x == z; });
}
llvm::Error runLess(const KernelCall &call) {
  return runCompare(call, [](auto x, auto z) { return x < z; });
}
llvm::Error runGreater(const KernelCall &call) {
  return runCompare(call, [](auto x, auto z) { return x > z; });
}

llvm::Error runLessOrEqual(const KernelCall &call) {
  return runCompare(call, [](auto x, auto z) { return x <= z; });
}
llvm::Error runGreaterOrEqual(const KernelCall &call) {
  return runCompare(call, [](auto x, auto z) { return x >= z; });
}

/// And, Or, Xor: bool inputs broadcast to a bool output.
template <typename Fn>
static llvm::Error runLogic(const KernelCall &call, const Fn &fn) {
  if (auto err = checkOperands(call, 2))
    return err;
  const TensorRef &a = *call.input(0), &b = *call.input(1);
  TensorRef &y = *call.output(0);
  for (const TensorRef *t : {&a, &b, static_cast<const TensorRef *>(&y)})
    if (t->dtype != DType::Bool)
      return typeError(call, t->dtype);
  broadcast2<bool, bool, bool>(a, b, y, fn);
  return llvm::Error::success();
}

llvm::Error runAnd(const KernelCall &call) {
  return runLogic(call, [](bool x, bool z) { return x && z; });
}
llvm::Error runOr(const KernelCall &call) {
  return runLogic(call, [](bool x, bool z) { return x || z; });
}
llvm::Error runXor(const KernelCall &call) {
  return runLogic(call, [](bool x, bool z) { return x != z; });
}

llvm::Error runWhere(const KernelCall &call) {
  if (auto err = checkOperands(call, 3))
    return err;
  const TensorRef &c = *call.input(0), &x = *call.input(1), &z = *call.input(2);
  TensorRef &y = *call.output(0);
  if (c.dtype != DType::Bool)
    return kernelError("Where: condition has element type " +
                       dtypeName(c.dtype) + ", expected bool");
  if (auto err = checkSameType(call, x, z))
    return err;
  if (auto err = checkSameType(call, x, y))
    return err;
  RowPlan<3> p = planRows<3>(y.shape, {c.shape, x.shape, z.shape});
  // Only the bytes move, so dispatch on the element size, not the type.
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const bool *pc = c.as<const bool>();
    const T *px = x.as<const T>(), *pz = z.as<const T>();
    T *py = y.as<T>();
    int64_t sc = p.innerStride[0], sx = p.innerStride[1], sz = p.innerStride[2];
    forEachRow(p, [&](int64_t o, const std::array<int64_t, 3> &off, int64_t n) {
      const bool *rc = pc + off[0];
      const T *rx = px + off[1], *rz = pz + off[2];
      for (int64_t i = 0; i < n; ++i)
        py[o + i] = rc[i * sc] ? rx[i * sx] : rz[i * sz];
    });
  };
  switch (dtypeSize(x.dtype)) {
  case 1:
    run(uint8_t{});
    break;
  case 2:
    run(uint16_t{});
    break;
  case 4:
    run(uint32_t{});
    break;
  case 8:
    run(uint64_t{});
    break;
  default:
    return typeError(call, x.dtype);
  }
  return llvm::Error::success();
}

} // namespace zinc::cpu
