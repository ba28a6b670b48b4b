//===- Rotary.cpp - zinc.Rotary and its gradient on the cpu ---------------===//
//
// Rotary position embeddings over the last axis of x (d even, h = d/2),
// cos and sin broadcast to x as numpy broadcasts them (fuse-rotary makes
// this op of Llama's and GPT-NeoX's x * cos + rotate_half(x) * sin):
//   y[j] = x[j] cos[j] - x[j+h] sin[j]      j < h
//   y[j] = x[j] cos[j] + x[j-h] sin[j]      j >= h
// and its gradient, rotate_half's transpose applied to dy sin:
//   dx[j] = dy[j] cos[j] + dy[j+h] sin[j+h]  j < h
//   dx[j] = dy[j] cos[j] - dy[j-h] sin[j-h]  j >= h
// Each product is rounded, then the sum, as PyTorch's Mul and Add round.
//
//===----------------------------------------------------------------------===//
#include "KernelUtil.h"
#include "Kernels.h"
#include "llvm/ADT/Twine.h"

namespace zinc::cpu {
namespace {

/// Where each row of x (its last axis) finds its row of the tables.
struct TableRows {
  /// x's leading axes, and the tables' strides along them (0 where broadcast).
  llvm::SmallVector<int64_t, 6> dims, strides;
  /// The tables' stride along the last axis: 1, or 0 when it broadcasts.
  int64_t step = 1;

  int64_t offset(int64_t row) const {
    int64_t off = 0;
    for (size_t k = dims.size(); k-- > 0;) {
      off += (row % dims[k]) * strides[k];
      row /= dims[k];
    }
    return off;
  }
};

/// Checks a (x or dy), cos, sin and the output: one float type, d even,
/// the tables of one shape that broadcasts to a's without widening it.
llvm::Error checkRotary(const KernelCall &call) {
  const TensorRef *a = call.input(0), *cos = call.input(1),
                  *sin = call.input(2);
  const TensorRef *y = call.output(0);
  if (!a || !cos || !sin || !y)
    return kernelError(call.opType + ": missing an operand");
  if (!isFloatDType(a->dtype) || a->rank() == 0)
    return kernelError("unsupported: " + call.opType + " with element type " +
                       dtypeName(a->dtype) + " and shape " +
                       formatShape(a->shape));
  if (a->shape.back() % 2)
    return kernelError(call.opType + ": the last axis of " +
                       formatShape(a->shape) + " is odd");
  if (y->dtype != a->dtype || y->shape != a->shape)
    return kernelError(call.opType +
                       ": output differs from input 0 in type or shape");
  if (cos->dtype != a->dtype || sin->dtype != a->dtype ||
      cos->shape != sin->shape)
    return kernelError(call.opType + ": cos and sin differ from each other or "
                                     "from input 0 in type or shape");
  size_t rank = a->rank(), trank = cos->rank();
  bool fits = trank <= rank;
  for (size_t k = 0; fits && k < trank; ++k) {
    int64_t t = cos->shape[trank - 1 - k];
    fits = t == 1 || t == a->shape[rank - 1 - k];
  }
  if (!fits)
    return kernelError(call.opType + ": tables of shape " +
                       formatShape(cos->shape) + " do not broadcast to " +
                       formatShape(a->shape));
  return llvm::Error::success();
}

TableRows tableRows(const TensorRef &a, const TensorRef &table) {
  llvm::SmallVector<int64_t, 6> strides =
      broadcastStrides(table.shape, a.shape);
  TableRows t;
  t.dims.assign(a.shape.begin(), a.shape.end() - 1);
  t.strides.assign(strides.begin(), strides.end() - 1);
  t.step = strides.back();
  return t;
}

/// Runs row(a, cos, sin, out, d, step) over every row of a, in parallel.
template <typename RowFn>
llvm::Error runRows(const KernelCall &call, RowFn row) {
  if (auto err = checkRotary(call))
    return err;
  const TensorRef &a = *call.input(0), &cos = *call.input(1),
                  &sin = *call.input(2);
  TensorRef &y = *call.output(0);
  int64_t d = a.shape.back(), rows = d ? a.numElements() / d : 0;
  TableRows t = tableRows(a, cos);
  visitDType(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (isFloatStorage<T>()) {
      const T *pa = a.as<const T>(), *pc = cos.as<const T>(),
              *ps = sin.as<const T>();
      T *py = y.as<T>();
      parallelRanges(rows, a.byteSize() * 2 + cos.byteSize() * 2,
                     [&](int64_t begin, int64_t end) {
                       for (int64_t r = begin; r < end; ++r) {
                         int64_t off = t.offset(r);
                         row(pa + r * d, pc + off, ps + off, py + r * d, d,
                             t.step);
                       }
                     });
    }
  });
  return llvm::Error::success();
}

} // namespace

/// Rotary(x, cos, sin) -> y.
llvm::Error runRotary(const KernelCall &call) {
  return runRows(call, [](const auto *x, const auto *c, const auto *s, auto *y,
                          int64_t d, int64_t step) {
    using T = std::remove_pointer_t<decltype(y)>;
    using C = ComputeT<T>;
    int64_t h = d / 2;
    for (int64_t j = 0; j < h; ++j) {
      C a = load(x[j]) * load(c[j * step]);
      C b = load(x[j + h]) * load(s[j * step]);
      y[j] = store<T>(a - b);
    }
    for (int64_t j = h; j < d; ++j) {
      C a = load(x[j]) * load(c[j * step]);
      C b = load(x[j - h]) * load(s[j * step]);
      y[j] = store<T>(a + b);
    }
  });
}

/// RotaryGrad(dy, cos, sin) -> dx.
llvm::Error runRotaryGrad(const KernelCall &call) {
  return runRows(call, [](const auto *g, const auto *c, const auto *s, auto *dx,
                          int64_t d, int64_t step) {
    using T = std::remove_pointer_t<decltype(dx)>;
    using C = ComputeT<T>;
    int64_t h = d / 2;
    for (int64_t j = 0; j < h; ++j) {
      C a = load(g[j]) * load(c[j * step]);
      C b = load(g[j + h]) * load(s[(j + h) * step]);
      dx[j] = store<T>(a + b);
    }
    for (int64_t j = h; j < d; ++j) {
      C a = load(g[j]) * load(c[j * step]);
      C b = load(g[j - h]) * load(s[(j - h) * step]);
      dx[j] = store<T>(a - b);
    }
  });
}

} // namespace zinc::cpu
