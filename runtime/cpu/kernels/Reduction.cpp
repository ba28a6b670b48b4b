//===- Reduction.cpp - ReduceSum, ReduceMean, ReduceMax, ReduceL2 kernels -===//
//
// The ops share everything but a small policy (accumulator type,
// combine, finish). The input is coalesced into groups of kept and reduced
// dimensions; the common layouts (one reduced group, e.g. a mean over the
// last axes or a sum over the batch) run as vectorisable loops over threads,
// anything else through one strided walk into accumulators of output size
// in the call's workspace.
//
//===----------------------------------------------------------------------===//
#include "KernelUtil.h"
#include "Kernels.h"
#include "llvm/ADT/Twine.h"
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace zinc::cpu {
namespace {

/// Below this many input elements thread start-up costs more than it saves.
constexpr int64_t kParallelMin = int64_t(1) << 15;
/// Columns accumulated together when reducing over a non-innermost group.
constexpr int64_t kColumnBlock = 256;
/// Independent accumulators per row, one vector's worth.
constexpr int64_t kLanes = 8;

enum class ReduceKind { Sum, Mean, Max, L2 };

/// Sum and Mean accumulate floats in double (a float sum over many elements
/// loses digits; round once at the end) and integers in 64 bits, wrapping
/// like numpy; Max compares in the compute type.
template <typename T, ReduceKind K> struct Reducer {
  static constexpr bool isMax = K == ReduceKind::Max;
  using Acc = std::conditional_t<
      isMax, ComputeT<T>,
      std::conditional_t<isFloatStorage<T>(), double, uint64_t>>;

  static Acc init() {
    if constexpr (!isMax)
      return Acc(0);
    else if constexpr (std::numeric_limits<Acc>::has_infinity)
      return -std::numeric_limits<Acc>::infinity();
    else
      return std::numeric_limits<Acc>::lowest();
  }
  static Acc combine(Acc a, T v) {
    if constexpr (isMax) {
      ComputeT<T> c = load(v);
      // NaN wins, as in numpy's maximum.reduce.
      return (c > a || c != c) ? c : a;
    } else if constexpr (std::is_integral_v<T>) {
      Acc c = static_cast<Acc>(static_cast<int64_t>(v));
      return a + (K == ReduceKind::L2 ? c * c : c);
    } else {
      Acc c = static_cast<Acc>(load(v));
      return a + (K == ReduceKind::L2 ? c * c : c);
    }
  }
  /// Combines two partial results (of lanes or of threads).
  static Acc merge(Acc a, Acc b) {
    if constexpr (isMax)
      return (b > a || b != b) ? b : a;
    else
      return a + b;
  }
  static T finish(Acc a, int64_t n) {
    if constexpr (K == ReduceKind::L2) {
      if constexpr (std::is_integral_v<T>)
        return static_cast<T>(std::sqrt(static_cast<double>(a)));
      else
        return store<T>(std::sqrt(a));
    } else if constexpr (K == ReduceKind::Mean) {
      if constexpr (std::is_integral_v<T>) {
        // Truncated like numpy's mean(...).astype(int); n > 0 is checked.
        if constexpr (std::is_signed_v<T>)
          return static_cast<T>(static_cast<int64_t>(a) / n);
        else
          return static_cast<T>(a / static_cast<uint64_t>(n));
      } else {
        return store<T>(a / static_cast<double>(n));
      }
    } else if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(a);
    } else {
      return store<T>(a);
    }
  }
};

} // namespace

/// out[o, i] = reduce_j in[o, j, i] for a row-major [outer, red, inner] view.
template <typename R, typename T>
static void reduceMiddle(const T *in, T *out, int64_t outer, int64_t red,
                         int64_t inner) {
  using Acc = typename R::Acc;
  bool parallel = outer * red * inner >= kParallelMin;
  if (inner == 1) {
    parallelFor(outer, parallel, [&](int64_t o) {
      // Independent lanes let the row vectorise (the order of a double sum
      // or of a max does not matter to the result's rounding).
      const T *row = in + o * red;
      Acc lanes[kLanes];
      for (int64_t l = 0; l < kLanes; ++l)
        lanes[l] = R::init();
      int64_t j = 0;
      for (; j + kLanes <= red; j += kLanes)
#pragma omp simd
        for (int64_t l = 0; l < kLanes; ++l)
          lanes[l] = R::combine(lanes[l], row[j + l]);
      for (; j < red; ++j)
        lanes[0] = R::combine(lanes[0], row[j]);
      Acc a = lanes[0];
      for (int64_t l = 1; l < kLanes; ++l)
        a = R::merge(a, lanes[l]);
      out[o] = R::finish(a, red);
    });
    return;
  }
  // Accumulate a block of columns at a time: each input row is read once,
  // contiguously, and the accumulators stay in cache.
  int64_t blocks = (inner + kColumnBlock - 1) / kColumnBlock;
  parallelFor(outer * blocks, parallel, [&](int64_t task) {
    int64_t o = task / blocks;
    int64_t i0 = (task % blocks) * kColumnBlock;
    int64_t len = std::min(kColumnBlock, inner - i0);
    Acc acc[kColumnBlock];
    for (int64_t i = 0; i < len; ++i)
      acc[i] = R::init();
    for (int64_t j = 0; j < red; ++j) {
      const T *row = in + (o * red + j) * inner + i0;
#pragma omp simd
      for (int64_t i = 0; i < len; ++i)
        acc[i] = R::combine(acc[i], row[i]);
    }
    for (int64_t i = 0; i < len; ++i)
      out[o * inner + i0 + i] = R::finish(acc[i], red);
  });
}

/// Any set of reduced axes: one strided walk over the input, accumulating
/// into `acc`, outCount accumulators.
template <typename R, typename T>
static void reduceStrided(const T *in, T *out, llvm::ArrayRef<int64_t> shape,
                          llvm::ArrayRef<bool> reduced, int64_t outCount,
                          int64_t red, typename R::Acc *acc) {
  llvm::SmallVector<int64_t, 6> inStrides = contiguousStrides(shape);
  // Output strides over the input's dimensions: 0 along reduced ones.
  llvm::SmallVector<int64_t, 6> outStrides(shape.size(), 0);
  int64_t s = 1;
  for (size_t d = shape.size(); d-- > 0;)
    if (!reduced[d]) {
      outStrides[d] = s;
      s *= shape[d];
    }
  std::fill(acc, acc + outCount, R::init());
  forEachStrided<2>(shape, {inStrides, outStrides},
                    [&](const std::array<int64_t, 2> &off) {
                      acc[off[1]] = R::combine(acc[off[1]], in[off[0]]);
                    });
  for (int64_t o = 0; o < outCount; ++o)
    out[o] = R::finish(acc[o], red);
}

/// Shared body of the three reductions.
template <ReduceKind K> static llvm::Error runReduce(const KernelCall &call) {
  const TensorRef *x = call.input(0);
  TensorRef *y = call.output(0);
  if (!x || !y)
    return kernelError(call.opType + ": missing input or output");
  if (x->dtype != y->dtype)
    return kernelError(call.opType + ": output element type " +
                       dtypeName(y->dtype) + " differs from input " +
                       dtypeName(x->dtype));
  int64_t rank = x->rank();

  // Axes are an input for ReduceSum from opset 13 (for the others from 18),
  // an attribute before; an input, when present, is authoritative.
  llvm::SmallVector<int64_t, 6> axes;
  if (const TensorRef *a = call.input(1)) {
    for (int64_t i = 0, n = a->numElements(); i < n; ++i)
      axes.push_back(loadIndex(*a, i));
  } else {
    llvm::ArrayRef<int64_t> attr = call.attrs.getInts("axes");
    axes.assign(attr.begin(), attr.end());
  }
  if (axes.empty() && call.attrs.getInt("noop_with_empty_axes", 0)) {
    if (x->shape != y->shape)
      return kernelError(call.opType + ": noop reduction changes the shape " +
                         formatShape(x->shape) + " to " +
                         formatShape(y->shape));
    if (x->data != y->data)
      std::memcpy(y->data, x->data, x->byteSize());
    return llvm::Error::success();
  }

  llvm::SmallVector<bool, 6> reduced(rank, axes.empty());
  for (int64_t axis : axes) {
    auto a = normalizeAxis(axis, rank);
    if (!a)
      return a.takeError();
    if (rank > 0)
      reduced[*a] = true;
  }
  bool keepdims = call.attrs.getInt("keepdims", 1) != 0;
  llvm::SmallVector<int64_t, 6> expect;
  int64_t red = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (reduced[d])
      red *= x->shape[d];
    if (!reduced[d])
      expect.push_back(x->shape[d]);
    else if (keepdims)
      expect.push_back(1);
  }
  if (llvm::ArrayRef<int64_t>(expect) != llvm::ArrayRef<int64_t>(y->shape))
    return kernelError(call.opType + ": output shape " + formatShape(y->shape) +
                       ", expected " + formatShape(expect));

  // Coalesce: size-1 dimensions do not matter, neighbours with the same
  // status merge.
  llvm::SmallVector<int64_t, 6> groups;
  llvm::SmallVector<bool, 6> groupReduced;
  for (int64_t d = 0; d < rank; ++d) {
    if (x->shape[d] == 1)
      continue;
    if (!groups.empty() && groupReduced.back() == reduced[d]) {
      groups.back() *= x->shape[d];
      continue;
    }
    groups.push_back(x->shape[d]);
    groupReduced.push_back(reduced[d]);
  }
  int64_t reducedGroups = llvm::count(groupReduced, true);
  int64_t outCount = y->numElements();

  return visitDType(x->dtype, [&](auto tag) -> llvm::Error {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      return kernelError("unsupported: " + call.opType +
                         " with element type bool");
    } else {
      using R = Reducer<T, K>;
      if constexpr (K == ReduceKind::Mean && std::is_integral_v<T>)
        if (red == 0)
          return kernelError(call.opType + ": integer mean of no elements");
      const T *in = x->as<const T>();
      T *out = y->as<T>();
      if (outCount == 0)
        return llvm::Error::success();
      if (reducedGroups <= 1) {
        int64_t outer = 1, inner = 1;
        size_t g = 0;
        for (; g < groups.size() && !groupReduced[g]; ++g)
          outer *= groups[g];
        for (++g; g < groups.size(); ++g)
          inner *= groups[g];
        if (reducedGroups == 0)
          inner = 1, outer = outCount;
        reduceMiddle<R>(in, out, outer, red, inner);
        return llvm::Error::success();
      }
      // Accumulators of 8 bytes or fewer: kernelWorkspaceBytes counts 8.
      static_assert(sizeof(typename R::Acc) <= 8, "accumulator too wide");
      auto acc = call.scratch<typename R::Acc>(outCount);
      if (!acc)
        return acc.takeError();
      reduceStrided<R>(in, out, groups, groupReduced, outCount, red, *acc);
      return llvm::Error::success();
    }
  });
}

llvm::Error runReduceSum(const KernelCall &call) {
  return runReduce<ReduceKind::Sum>(call);
}
llvm::Error runReduceMean(const KernelCall &call) {
  return runReduce<ReduceKind::Mean>(call);
}
llvm::Error runReduceMax(const KernelCall &call) {
  return runReduce<ReduceKind::Max>(call);
}
llvm::Error runReduceL2(const KernelCall &call) {
  return runReduce<ReduceKind::L2>(call);
}

} // namespace zinc::cpu
