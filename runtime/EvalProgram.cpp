//===- EvalProgram.cpp - Loading the eval program, giving it the weights --===//
#include "zinc/runtime/EvalProgram.h"
#include "zinc/runtime/Checkpoint.h"
#include "zinc/runtime/Safetensors.h"
#include "zinc/support/Error.h"
#include "zinc/support/Float16.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/FileSystem.h"
#include <cstring>
#include <vector>

namespace zinc::rt {

llvm::Expected<std::unique_ptr<Program>>
loadEvalProgram(const Program &training, const LoadOptions &opts) {
  const plan::Plan &plan = training.getPlan();
  if (!plan.has_eval())
    return makeError(
        "--eval-data: the plan has no evaluation program (it was "
        "compiled for inference, or by a zinc-compile older than "
        "evaluation, or its inference form could not be planned: "
        "compile it again with --mode=train and read its warnings)");
  return Program::fromPlanChecked(plan.eval(), opts,
                                  "the plan's evaluation program");
}

/// Writes `values` (fp32) into `dst` as `dtype`.
static llvm::Error narrow(llvm::ArrayRef<float> values, DType dtype,
                          uint8_t *dst, llvm::StringRef name) {
  size_t n = values.size();
  switch (dtype) {
  case DType::F32:
    std::memcpy(dst, values.data(), n * sizeof(float));
    return llvm::Error::success();
  case DType::F64:
    for (size_t k = 0; k < n; ++k)
      reinterpret_cast<double *>(dst)[k] = values[k];
    return llvm::Error::success();
  case DType::F16:
    for (size_t k = 0; k < n; ++k)
      reinterpret_cast<uint16_t *>(dst)[k] = floatToHalf(values[k]);
    return llvm::Error::success();
  case DType::BF16:
    for (size_t k = 0; k < n; ++k)
      reinterpret_cast<uint16_t *>(dst)[k] = floatToBf16(values[k]);
    return llvm::Error::success();
  default:
    return makeError("evaluation program: initializer '" + name +
                     "' is trained but its tensor is not a float type");
  }
}

llvm::Error copyTrainedWeights(Program &training, Program &eval) {
  llvm::SmallString<128> path;
  if (std::error_code ec = llvm::sys::fs::createTemporaryFile(
          "zinc-eval-weights", "safetensors", path))
    return makeError("cannot create a temporary file for the evaluation "
                     "program's weights: " +
                     ec.message());
  auto removeFile = llvm::make_scope_exit([&] { llvm::sys::fs::remove(path); });
  if (auto err = writeTrainedWeights(training, path))
    return err;
  auto file = SafetensorsFile::open(path);
  if (!file)
    return file.takeError();
  std::vector<float> slice;
  std::vector<uint8_t> staged;
  const plan::Plan &plan = eval.getPlan();
  for (const plan::Tensor &t : plan.tensors()) {
    if (t.init().name().empty())
      continue;
    const SafetensorView *saved = file->find(t.init().name());
    // Constants the training plan does not update keep what load() read.
    if (!saved)
      continue;
    const float *whole = reinterpret_cast<const float *>(saved->data.data());
    cpu::TensorRef &ref = eval.tensor(t.id());
    int64_t count = ref.numElements();
    const plan::InitializerSource &src = t.init();
    if (src.whole_shape_size()) {
      // A tile: the runs of its slice along slice_axis.
      llvm::SmallVector<int64_t, 6> shape(src.whole_shape().begin(),
                                          src.whole_shape().end());
      int64_t axis = src.slice_axis();
      if (axis < 0 || axis >= static_cast<int64_t>(shape.size()) ||
          zinc::numElements(shape) != zinc::numElements(saved->shape) ||
          ref.rank() != static_cast<int64_t>(shape.size()))
        return makeError("evaluation program: tile '" + t.name() +
                         "' does not match the trained initializer '" +
                         src.name() + "'");
      int64_t inner = 1, outer = 1;
      for (size_t d = axis + 1; d < shape.size(); ++d)
        inner *= shape[d];
      for (int64_t d = 0; d < axis; ++d)
        outer *= shape[d];
      int64_t run = ref.shape[axis] * inner;
      slice.resize(count);
      for (int64_t r = 0; r < outer; ++r)
        std::memcpy(slice.data() + r * run,
                    whole + r * shape[axis] * inner + src.slice_begin() * inner,
                    run * sizeof(float));
    } else {
      if (zinc::numElements(saved->shape) != count)
        return makeError("evaluation program: tensor '" + t.name() + "' has " +
                         llvm::Twine(count) +
                         " elements, the trained initializer '" + src.name() +
                         "' " + llvm::Twine(zinc::numElements(saved->shape)));
      slice.assign(whole, whole + count);
    }
    bool onNvme = eval.place(t.id()).tier == plan::TIER_NVME;
    uint8_t *dst = static_cast<uint8_t *>(ref.data);
    if (onNvme) {
      staged.resize(ref.byteSize());
      dst = staged.data();
    }
    if (auto err = narrow(slice, ref.dtype, dst, src.name()))
      return err;
    if (onNvme)
      if (auto err = eval.writeNvmeTensor(t.id(), staged.data()))
        return err;
  }
  return llvm::Error::success();
}

} // namespace zinc::rt
