//===- ReducePlanning.cpp - Host planning of ReduceSum/Mean/Max calls -----===//
#include "ReducePlanning.h"
#include "ScalarOperand.h"
#include "zinc/runtime/cuda/CudaCheck.h"
#include "zinc/support/DType.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/Twine.h"
#include <algorithm>

namespace zinc::cuda {

using llvm::ArrayRef;
using llvm::Error;
using llvm::SmallVector;
using llvm::Twine;

Error planReduceChoices(
    const CudaKernelCall &call, bool readHostAxes, ReduceChoices &choices,
    bool &done, llvm::function_ref<Error(const ReducePlan &)> checkPlan) {
  const DeviceTensor *x = call.input(0);
  DeviceTensor *y = call.output(0);
  done = false;
  int64_t rank = static_cast<int64_t>(x->shape.size());
  bool keepdims = call.attrs.getInt("keepdims", 1) != 0;

  // Axes: input 1 when present, else the attribute. An input the host may
  // read is read here (with readHostAxes); one in device memory is matched
  // on the device.
  const DeviceTensor *axesIn = call.input(1);
  SmallVector<int64_t, 8> axes;
  int64_t axesCount;
  bool onDevice = false;
  if (axesIn) {
    if (axesIn->dtype != DType::I64 && axesIn->dtype != DType::I32)
      return cudaKernelError("unsupported: " + call.opType + " with axes of " +
                             dtypeName(axesIn->dtype) +
                             " on the cuda backend (i32, i64)");
    axesCount = axesIn->numElements();
    if (axesCount > 0) {
      onDevice = true;
      if (readHostAxes) {
        if (!axesIn->data)
          return cudaKernelError(call.opType + ": axes have a null pointer");
        auto readable = isHostReadable(axesIn->data);
        if (!readable)
          return readable.takeError();
        onDevice = !*readable;
      }
      for (int64_t i = 0; !onDevice && i < axesCount; ++i)
        axes.push_back(axesIn->dtype == DType::I64
                           ? static_cast<const int64_t *>(axesIn->data)[i]
                           : static_cast<const int32_t *>(axesIn->data)[i]);
    }
  } else {
    ArrayRef<int64_t> attr = call.attrs.getInts("axes");
    axes.assign(attr.begin(), attr.end());
    axesCount = static_cast<int64_t>(axes.size());
  }
  if (axesCount == 0 && call.attrs.getInt("noop_with_empty_axes", 0)) {
    if (x->shape != y->shape)
      return cudaKernelError(
          call.opType + ": noop reduction changes the shape " +
          formatShape(x->shape) + " to " + formatShape(y->shape));
    if (x->data != y->data && x->byteSize() > 0)
      ZINC_CUDA_TRY(cudaMemcpyAsync(y->data, x->data, x->byteSize(),
                                    cudaMemcpyDeviceToDevice, call.stream));
    done = true;
    return Error::success();
  }

  // The reduced dimensions: each reading of the axes the shapes allow.
  SmallVector<SmallVector<bool, 8>, kMaxChoices> readings;
  SmallVector<int64_t, kMaxChoices> masks;
  if (onDevice) {
    SmallVector<int64_t, 4> found =
        reductionsMatching(x->shape, y->shape, keepdims, axesCount);
    if (found.empty())
      return cudaKernelError(
          call.opType + ": output shape " + formatShape(y->shape) +
          " does not follow from input shape " + formatShape(x->shape) +
          " with " + Twine(axesCount) +
          " axes and keepdims=" + Twine(keepdims ? 1 : 0));
    if (found.size() > static_cast<size_t>(kMaxChoices))
      return cudaKernelError("unsupported: " + call.opType + " from " +
                             formatShape(x->shape) + " to " +
                             formatShape(y->shape) +
                             " with axes as a tensor: " + Twine(found.size()) +
                             " sets of axes fit the shapes");
    for (int64_t mask : found) {
      SmallVector<bool, 8> reduced(rank, false);
      for (int64_t d = 0; d < rank; ++d)
        reduced[d] = (mask >> d) & 1;
      readings.push_back(std::move(reduced));
      masks.push_back(mask);
    }
  } else {
    SmallVector<bool, 8> reduced(rank, axes.empty());
    for (int64_t a : axes) {
      int64_t n = a < 0 ? a + rank : a;
      if (n < 0 || n >= std::max<int64_t>(rank, 1))
        return cudaKernelError("axis " + Twine(a) +
                               " is out of range for rank " + Twine(rank));
      if (rank > 0)
        reduced[n] = true;
    }
    SmallVector<int64_t, 8> expect;
    for (int64_t d = 0; d < rank; ++d) {
      if (!reduced[d])
        expect.push_back(x->shape[d]);
      else if (keepdims)
        expect.push_back(1);
    }
    if (ArrayRef<int64_t>(expect) != ArrayRef<int64_t>(y->shape))
      return cudaKernelError(call.opType + ": output shape " +
                             formatShape(y->shape) + ", expected " +
                             formatShape(expect));
    readings.push_back(std::move(reduced));
    masks.push_back(0);
  }

  choices = ReduceChoices();
  choices.count = static_cast<int>(readings.size());
  for (int k = 0; k < choices.count; ++k) {
    if (!planReduce(x->shape, readings[k], choices.plans[k]))
      return cudaKernelError(
          "unsupported: " + call.opType + " of " + formatShape(x->shape) +
          " on the cuda backend: more than " + Twine(kMaxViewRank) +
          " alternating kept and reduced dimensions");
    choices.masks[k] = masks[k];
    if (checkPlan)
      if (Error e = checkPlan(choices.plans[k]))
        return e;
  }
  if (choices.count > 1) {
    choices.axes = axesIn->data;
    choices.axes64 = axesIn->dtype == DType::I64;
    choices.axesCount = axesCount;
    choices.rank = static_cast<int>(rank);
    std::copy(x->shape.begin(), x->shape.end(), choices.dims);
  }
  return Error::success();
}

} // namespace zinc::cuda
