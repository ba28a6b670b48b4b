//===- KernelUtil.cpp - Dtype dispatch and broadcasting for cpu kernels ---===//
#include "KernelUtil.h"
#include "zinc/support/MatMulGeometry.h"
#include "llvm/ADT/Twine.h"
#include <algorithm>
#include <cstring>
#include <omp.h>

namespace zinc::cpu {

int64_t loadIndex(const TensorRef &t, int64_t i) {
  switch (t.dtype) {
  case DType::I64: return t.as<int64_t>()[i];
  case DType::I32: return t.as<int32_t>()[i];
  case DType::I16: return t.as<int16_t>()[i];
  case DType::I8: return t.as<int8_t>()[i];
  case DType::U8: return t.as<uint8_t>()[i];
  case DType::U16: return t.as<uint16_t>()[i];
  case DType::U32: return t.as<uint32_t>()[i];
  case DType::U64: return static_cast<int64_t>(t.as<uint64_t>()[i]);
  default:
    return visitDType(t.dtype, [&](auto tag) -> int64_t {
      using T = decltype(tag);
      return static_cast<int64_t>(load(static_cast<const T *>(t.data)[i]));
    });
  }
}

llvm::SmallVector<int64_t, 6> contiguousStrides(llvm::ArrayRef<int64_t> shape) {
  llvm::SmallVector<int64_t, 6> s(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    s[d - 1] = s[d] * shape[d];
  return s;
}

llvm::SmallVector<int64_t, 6> broadcastStrides(llvm::ArrayRef<int64_t> in,
                                               llvm::ArrayRef<int64_t> out) {
  llvm::SmallVector<int64_t, 6> inStrides = contiguousStrides(in);
  llvm::SmallVector<int64_t, 6> s(out.size(), 0);
  size_t lead = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d)
    s[lead + d] = in[d] == 1 ? 0 : inStrides[d];
  return s;
}

llvm::Expected<llvm::SmallVector<int64_t, 6>>
broadcastShapes(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b) {
  auto out = broadcastBatch(a, b);
  if (!out)
    return kernelError(llvm::toString(out.takeError()));
  return std::move(*out);
}

llvm::Expected<SoftmaxGeometry> softmaxGeometry(llvm::ArrayRef<int64_t> shape,
                                                int64_t axisAttr, bool flatten) {
  auto axisOr = normalizeAxis(axisAttr, static_cast<int64_t>(shape.size()));
  if (!axisOr)
    return axisOr.takeError();
  int64_t axis = std::min<int64_t>(*axisOr, shape.size());
  SoftmaxGeometry g;
  g.outer = zinc::numElements(shape.take_front(axis));
  g.d = flatten ? zinc::numElements(shape.drop_front(axis))
                : (shape.empty() ? 1 : shape[axis]);
  g.inner = flatten || shape.empty() ? 1 : zinc::numElements(shape.drop_front(axis + 1));
  return g;
}

llvm::Expected<int64_t> normalizeAxis(int64_t axis, int64_t rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= std::max<int64_t>(rank, 1))
    return kernelError("axis " + llvm::Twine(axis) + " is out of range for rank " +
                       llvm::Twine(rank));
  return a;
}

llvm::SmallVector<int64_t, 6> loadIndexList(const TensorRef &t) {
  llvm::SmallVector<int64_t, 6> v;
  int64_t n = t.numElements();
  v.reserve(n);
  for (int64_t i = 0; i < n; ++i)
    v.push_back(loadIndex(t, i));
  return v;
}

void copyBytes(void *dst, const void *src, size_t bytes) {
  if (dst == src || bytes == 0)
    return;
  constexpr size_t chunk = size_t(1) << 20;
  auto *d = static_cast<char *>(dst);
  auto *s = static_cast<const char *>(src);
  int64_t chunks = static_cast<int64_t>((bytes + chunk - 1) / chunk);
  parallelRanges(chunks, bytes, [&](int64_t begin, int64_t end) {
    size_t from = static_cast<size_t>(begin) * chunk;
    size_t to = std::min(static_cast<size_t>(end) * chunk, bytes);
    std::memcpy(d + from, s + from, to - from);
  });
}

void parallelRanges(int64_t n, size_t workBytes,
                    llvm::function_ref<void(int64_t, int64_t)> fn) {
  // Below about a MiB of traffic, waking the thread team costs more than
  // the loop itself.
  if (n < 2 || workBytes < (size_t(1) << 20) || omp_get_max_threads() < 2 ||
      omp_in_parallel()) {
    if (n > 0)
      fn(0, n);
    return;
  }
#pragma omp parallel
  {
    int64_t t = omp_get_thread_num(), threads = omp_get_num_threads();
    int64_t begin = n * t / threads, end = n * (t + 1) / threads;
    if (begin < end)
      fn(begin, end);
  }
}

} // namespace zinc::cpu
