//===- ReducePlanning.h - Host planning of ReduceSum/Mean/Max calls -------===//
//
// ReduceSum, ReduceMean (Rows.cu) and ReduceMax (ReduceMax.cu) read their
// axes and check their shapes the same way, as the cpu kernels do; this is
// that shared host code and the plan it hands to the kernels.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_CUDA_KERNELS_REDUCEPLANNING_H
#define ZINC_RUNTIME_CUDA_KERNELS_REDUCEPLANNING_H

#include "RowsMath.h"
#include "zinc/runtime/cuda/CudaKernel.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Error.h"
#include <cstdint>

namespace zinc::cuda {

/// Readings of an axes tensor the shapes may leave open.
constexpr int kMaxChoices = 4;

/// The reductions the host allows for one call: a single plan, or (an axes
/// tensor in device memory that the shapes leave ambiguous) up to
/// kMaxChoices plans, each with the effective axes mask it stands for; the
/// kernel reads the axes and takes the plan whose mask they give.
struct ReduceChoices {
  int count = 1;
  ReducePlan plans[kMaxChoices];
  int64_t masks[kMaxChoices] = {};
  const void *axes = nullptr;
  bool axes64 = true;
  int64_t axesCount = 0;
  int rank = 0;
  int64_t dims[16] = {};
};

/// Plans the reduction of call.input(0) into call.output(0) (both present,
/// their element types already checked) over the axes of input 1 when
/// present, else of the attribute `axes`, with `keepdims` and
/// `noop_with_empty_axes` as the cpu kernels read them. An empty no-op
/// copies the input to the output on call.stream and sets `done`.
///
/// With `readHostAxes`, an axes input the host may read is read here;
/// otherwise, or when it is in device memory, every reading the shapes
/// allow becomes one of `choices`. `checkPlan`, when given, may refuse each
/// plan as it is made.
llvm::Error planReduceChoices(
    const CudaKernelCall &call, bool readHostAxes, ReduceChoices &choices,
    bool &done,
    llvm::function_ref<llvm::Error(const ReducePlan &)> checkPlan = nullptr);

} // namespace zinc::cuda

#endif
