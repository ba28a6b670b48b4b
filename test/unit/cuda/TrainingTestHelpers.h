//===- TrainingTestHelpers.h - Run one op on the cuda and cpu backends ----===//
//
// For CudaTrainingTest.cpp: a fixture that skips without a device, and a
// runner that gives the same host operands to the cpu kernel and (uploaded)
// to the cuda kernel and brings back every input (in-place updates) and
// output of both, so a test compares them element for element.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_TEST_UNIT_CUDA_TRAININGTESTHELPERS_H
#define ZINC_TEST_UNIT_CUDA_TRAININGTESTHELPERS_H

#include "test/unit/cuda/DeviceTestSupport.h"
#include "zinc/runtime/cpu/Kernel.h"
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace zinc::cuda::test {

/// Whether `a` and `b` hold the same bytes.
inline bool sameBytes(const OwnedTensor &a, const OwnedTensor &b) {
  return a.ref.dtype == b.ref.dtype && a.ref.byteSize() == b.ref.byteSize() &&
         std::memcmp(a.ref.data, b.ref.data, a.ref.byteSize()) == 0;
}

/// What one op left behind on one backend: every input (after in-place
/// updates) and every output, on the host.
struct OpResult {
  std::vector<std::optional<OwnedTensor>> inputs, outputs;
};

/// One op's operands and settings, run on both backends.
struct OpRun {
  std::string domain; ///< "" (ONNX) or "zinc"
  std::string op;
  AttributeList attrs;
  int64_t opset = 17;
  int64_t step = 1;
  /// Gradient accumulation: this micro-batch of the step's `microBatches`.
  int64_t microBatch = 0;
  int64_t microBatches = 1;
  uint64_t seed = 0;
  std::vector<std::optional<OwnedTensor>> inputs;
  /// The outputs' types and shapes (contents ignored); nullopt: absent.
  std::vector<std::optional<OwnedTensor>> outputs;
  /// Inputs the cuda kernel gets in host memory (index lists it reads on
  /// the host), not uploaded.
  std::set<size_t> hostInputs;
};

class CudaTrainingDevice : public DeviceTest {
protected:
  static constexpr uint64_t kArenaBytes = uint64_t(64) << 20;

  CudaTrainingDevice() : DeviceTest(kArenaBytes) {}

  /// Runs `run` with the cpu kernel on copies of its operands.
  llvm::Expected<OpResult> runCpu(const OpRun &run) {
    cpu::KernelFn fn = run.domain == "zinc" ? cpu::lookupZincKernel(run.op)
                                            : cpu::lookupKernel(run.op);
    if (!fn)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "no cpu kernel for " + run.op);
    OpResult r{run.inputs, run.outputs};
    std::vector<const cpu::TensorRef *> ins;
    std::vector<cpu::TensorRef *> outs;
    for (auto &t : r.inputs)
      ins.push_back(t ? &t->ref : nullptr);
    for (auto &t : r.outputs)
      outs.push_back(t ? &t->ref : nullptr);
    cpu::KernelCall call{run.op, "test", run.opset, run.attrs, ins, outs};
    call.step = run.step;
    call.microBatch = run.microBatch;
    call.microBatches = run.microBatches;
    call.seed = run.seed;
    if (llvm::Error err = cpu::test::runWithWorkspace(fn, call))
      return err;
    return r;
  }

  /// Runs `run` with the cuda kernel on uploaded operands (host inputs
  /// stay where they are) and downloads everything.
  llvm::Expected<OpResult> runCuda(const OpRun &run) {
    CudaKernelFn fn = lookupCudaKernel(run.domain, run.op);
    if (!fn)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "no cuda kernel for " + run.op);
    OpResult r{run.inputs, run.outputs};
    std::vector<DeviceTensor> devIns(r.inputs.size()),
        devOuts(r.outputs.size());
    std::vector<const DeviceTensor *> ins;
    std::vector<DeviceTensor *> outs;
    for (size_t i = 0; i < r.inputs.size(); ++i) {
      if (!r.inputs[i]) {
        ins.push_back(nullptr);
        continue;
      }
      if (run.hostInputs.count(i)) {
        devIns[i] = shapeOnly(r.inputs[i]->ref.dtype, r.inputs[i]->ref.shape);
        devIns[i].data = r.inputs[i]->ref.data;
      } else {
        auto d = upload(*r.inputs[i], i % 3);
        if (!d)
          return d.takeError();
        devIns[i] = *d;
      }
      ins.push_back(&devIns[i]);
    }
    for (size_t i = 0; i < r.outputs.size(); ++i) {
      if (!r.outputs[i]) {
        outs.push_back(nullptr);
        continue;
      }
      auto d = upload(*r.outputs[i]);
      if (!d)
        return d.takeError();
      devOuts[i] = *d;
      outs.push_back(&devOuts[i]);
    }
    CudaKernelCall call{run.op, "test", run.opset, run.attrs, ins, outs};
    call.step = run.step;
    call.microBatch = run.microBatch;
    call.microBatches = run.microBatches;
    call.seed = run.seed;
    call.stream = stream.get();
    if (llvm::Error err = fn(call))
      return err;
    for (size_t i = 0; i < r.inputs.size(); ++i) {
      if (!r.inputs[i] || run.hostInputs.count(i))
        continue;
      auto t = download(devIns[i]);
      if (!t)
        return t.takeError();
      r.inputs[i] = std::move(*t);
    }
    for (size_t i = 0; i < r.outputs.size(); ++i) {
      if (!r.outputs[i])
        continue;
      auto t = download(devOuts[i]);
      if (!t)
        return t.takeError();
      r.outputs[i] = std::move(*t);
    }
    return r;
  }
};

} // namespace zinc::cuda::test

#endif
