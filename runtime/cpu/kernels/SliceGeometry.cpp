//===- SliceGeometry.cpp - Where an ONNX Slice lands in its input ---------===//
#include "SliceGeometry.h"
#include "KernelUtil.h"
#include <algorithm>

namespace zinc::cpu {

llvm::Expected<SliceView> computeSliceView(llvm::StringRef op,
                                           llvm::ArrayRef<int64_t> shape,
                                           llvm::ArrayRef<int64_t> starts,
                                           llvm::ArrayRef<int64_t> ends,
                                           llvm::ArrayRef<int64_t> axesIn,
                                           llvm::ArrayRef<int64_t> stepsIn) {
  size_t n = starts.size();
  llvm::SmallVector<int64_t, 6> axes(axesIn.begin(), axesIn.end());
  llvm::SmallVector<int64_t, 6> steps(stepsIn.begin(), stepsIn.end());
  if (axes.empty())
    for (size_t i = 0; i < n; ++i)
      axes.push_back(static_cast<int64_t>(i));
  if (steps.empty())
    steps.assign(n, 1);
  if (ends.size() != n || axes.size() != n || steps.size() != n)
    return kernelError(op + ": starts, ends, axes and steps differ in length");

  int64_t rank = static_cast<int64_t>(shape.size());
  llvm::SmallVector<int64_t, 6> full = contiguousStrides(shape);
  SliceView v{llvm::SmallVector<int64_t, 6>(shape.begin(), shape.end()), full, 0};
  llvm::SmallVector<bool, 6> seen(rank, false);
  for (size_t i = 0; i < n; ++i) {
    auto axisOr = normalizeAxis(axes[i], rank);
    if (!axisOr)
      return axisOr.takeError();
    int64_t axis = *axisOr;
    if (seen[axis])
      return kernelError(op + ": axis " + llvm::Twine(axes[i]) + " appears twice");
    seen[axis] = true;
    int64_t dim = shape[axis], step = steps[i];
    if (step == 0)
      return kernelError(op + ": step is zero for axis " + llvm::Twine(axes[i]));
    // Any step beyond the dimension takes at most one element; clamping
    // keeps -step from overflowing for INT64_MIN.
    step = std::clamp<int64_t>(step, -std::max<int64_t>(dim, 1),
                               std::max<int64_t>(dim, 1));
    int64_t start = starts[i], end = ends[i];
    if (start < 0)
      start += dim;
    if (end < 0)
      end += dim;
    int64_t count;
    if (dim == 0) {
      count = 0;
    } else if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      count = end > start ? (end - start + step - 1) / step : 0;
    } else {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
      count = start > end ? (start - end - step - 1) / -step : 0;
    }
    v.shape[axis] = count;
    v.strides[axis] = step * full[axis];
    if (count > 0)
      v.base += start * full[axis];
  }
  return v;
}

} // namespace zinc::cpu
