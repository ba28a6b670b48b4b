//===- EvalProgram.cpp - Loading the eval program, giving it the weights --===//
#include "zinc/runtime/EvalProgram.h"
#include "zinc/runtime/Checkpoint.h"
#include "zinc/support/Error.h"
#include "zinc/support/Float16.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
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
  const plan::Plan &plan = eval.getPlan();
  // The evaluation program's tensors of each initializer (a tiled one has
  // several); constants the training plan does not update keep what load()
  // read.
  llvm::StringMap<llvm::SmallVector<int, 1>> byInitializer;
  for (const plan::Tensor &t : plan.tensors())
    if (!t.init().name().empty())
      byInitializer[t.init().name()].push_back(t.id());
  std::vector<float> slice;
  std::vector<uint8_t> staged;
  auto give = [&](llvm::StringRef name, llvm::ArrayRef<int64_t> shape,
                  llvm::ArrayRef<float> whole) -> llvm::Error {
    auto found = byInitializer.find(name);
    if (found == byInitializer.end())
      return llvm::Error::success();
    for (int id : found->second) {
      const plan::Tensor &t = plan.tensors(id);
      cpu::TensorRef &ref = eval.tensor(id);
      int64_t count = ref.numElements();
      const plan::InitializerSource &src = t.init();
      llvm::ArrayRef<float> values = whole;
      if (src.whole_shape_size()) {
        // A tile: the runs of its slice along slice_axis.
        int64_t axis = src.slice_axis();
        if (axis < 0 || axis >= static_cast<int64_t>(shape.size()) ||
            !llvm::equal(src.whole_shape(), shape) ||
            ref.rank() != static_cast<int64_t>(shape.size()))
          return makeError("evaluation program: tile '" + t.name() +
                           "' does not match the trained initializer '" + name +
                           "'");
        int64_t inner = 1, outer = 1;
        for (size_t d = axis + 1; d < shape.size(); ++d)
          inner *= shape[d];
        for (int64_t d = 0; d < axis; ++d)
          outer *= shape[d];
        int64_t run = ref.shape[axis] * inner;
        slice.resize(count);
        for (int64_t r = 0; r < outer; ++r)
          std::memcpy(slice.data() + r * run,
                      whole.data() + r * shape[axis] * inner +
                          src.slice_begin() * inner,
                      run * sizeof(float));
        values = slice;
      } else if (static_cast<int64_t>(whole.size()) != count) {
        return makeError("evaluation program: tensor '" + t.name() + "' has " +
                         llvm::Twine(count) +
                         " elements, the trained initializer '" + name + "' " +
                         llvm::Twine(whole.size()));
      }
      bool onNvme = eval.place(id).tier == plan::TIER_NVME;
      uint8_t *dst = static_cast<uint8_t *>(ref.data);
      if (onNvme) {
        staged.resize(ref.byteSize());
        dst = staged.data();
      }
      if (auto err = narrow(values, ref.dtype, dst, name))
        return err;
      if (onNvme)
        if (auto err = eval.writeNvmeTensor(id, staged.data()))
          return err;
    }
    return llvm::Error::success();
  };
  return forEachTrainedWeight(training, give);
}

} // namespace zinc::rt
