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

#include "test/unit/cuda/ErrorAssertions.h"
#include "test/unit/kernels/KernelCallHelpers.h"
#include "zinc/runtime/cpu/Kernel.h"
#include "zinc/runtime/cuda/CudaCheck.h"
#include "zinc/runtime/cuda/CudaKernel.h"
#include "zinc/runtime/cuda/Device.h"
#include "gtest/gtest.h"
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace zinc::cuda::test {

using cpu::test::OwnedTensor;

/// The error's message, or "" for success.
inline std::string errorMessage(llvm::Error err) {
  return err ? llvm::toString(std::move(err)) : std::string();
}

/// A DeviceTensor description without memory, for argument checks that
/// must fail before anything touches a device.
inline DeviceTensor shapeOnly(DType dtype, llvm::ArrayRef<int64_t> shape) {
  DeviceTensor d;
  d.dtype = dtype;
  d.shape.assign(shape.begin(), shape.end());
  return d;
}

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
  uint64_t seed = 0;
  std::vector<std::optional<OwnedTensor>> inputs;
  /// The outputs' types and shapes (contents ignored); nullopt: absent.
  std::vector<std::optional<OwnedTensor>> outputs;
  /// Inputs the cuda kernel gets in host memory (index lists it reads on
  /// the host), not uploaded.
  std::set<size_t> hostInputs;
};

class CudaTrainingDevice : public ::testing::Test {
protected:
  static constexpr uint64_t kArenaBytes = uint64_t(64) << 20;

  void SetUp() override {
    llvm::Expected<int> count = cudaDeviceCount();
    if (!count)
      GTEST_SKIP() << "CUDA device query failed: "
                   << llvm::toString(count.takeError());
    if (*count == 0)
      GTEST_SKIP() << "no CUDA device";
    ASSIGN_OR_FAIL(a, DeviceArena::create(kArenaBytes));
    arena = std::move(a);
    ASSIGN_OR_FAIL(s, Stream::create());
    stream = std::move(s);
  }

  /// `t`'s bytes in the arena, `shift` elements past an aligned offset
  /// (whole elements: kernels may assume natural alignment, not 16 bytes).
  llvm::Expected<DeviceTensor> upload(const OwnedTensor &t,
                                      uint64_t shift = 0) {
    DeviceTensor d = shapeOnly(t.ref.dtype, t.ref.shape);
    shift *= dtypeSize(t.ref.dtype);
    auto offset = arena.place(d.byteSize() + shift + 1);
    if (!offset)
      return offset.takeError();
    auto ptr = arena.pointer(*offset + shift, d.byteSize());
    if (!ptr)
      return ptr.takeError();
    d.data = *ptr;
    if (llvm::Error err = checkCuda(
            cudaMemcpyAsync(d.data, t.ref.data, t.ref.byteSize(),
                            cudaMemcpyHostToDevice, stream.get()),
            "cudaMemcpyAsync(host to device)"))
      return err;
    if (llvm::Error err = stream.synchronize())
      return err;
    return d;
  }

  /// Waits for the stream and copies `d` back.
  llvm::Expected<OwnedTensor> download(const DeviceTensor &d) {
    OwnedTensor t(d.dtype, d.shape);
    if (llvm::Error err = checkCuda(
            cudaMemcpyAsync(t.ref.data, d.data, d.byteSize(),
                            cudaMemcpyDeviceToHost, stream.get()),
            "cudaMemcpyAsync(device to host)"))
      return err;
    if (llvm::Error err = stream.synchronize())
      return err;
    return t;
  }

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

  DeviceArena arena;
  Stream stream;
};

} // namespace zinc::cuda::test

#endif
