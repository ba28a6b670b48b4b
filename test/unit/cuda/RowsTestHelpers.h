//===- RowsTestHelpers.h - Device tensors and cpu comparisons, Rows/Layout ===//
//
// A fixture that owns a device arena and a stream, uploads cpu test tensors,
// runs a cuda kernel through its CudaKernelCall and downloads the results,
// so each test reads as "run the cpu kernel, run the cuda kernel, compare".
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_TEST_UNIT_CUDA_ROWSTESTHELPERS_H
#define ZINC_TEST_UNIT_CUDA_ROWSTESTHELPERS_H

#include "test/unit/cuda/DeviceTestSupport.h"
#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace zinc::cuda::rowstest {

using namespace zinc::cuda::test;

/// expectValuesClose: any shapes of as many elements.
inline void expectClose(const OwnedTensor &got, const OwnedTensor &want,
                        Tolerance tol) {
  expectValuesClose(got, want, tol);
}

/// Runs the cpu kernel `fn` (from cpu::lookupKernel / lookupZincKernel).
inline llvm::Error runCpu(cpu::KernelFn fn, llvm::StringRef op,
                          const AttributeList &attrs,
                          std::initializer_list<const OwnedTensor *> ins,
                          std::initializer_list<OwnedTensor *> outs,
                          int64_t opset = 17) {
  if (!fn)
    return cudaKernelError("no cpu kernel for " + op);
  return cpu::test::runKernel(fn, op, attrs, ins, outs, opset);
}

/// A call of a cuda kernel on `ins` and `outs` (null for absent operands)
/// with no device memory behind it: for the checks made before launching.
inline llvm::Error runUnlaunched(CudaKernelFn fn, llvm::StringRef op,
                                 const AttributeList &attrs,
                                 std::vector<const DeviceTensor *> ins,
                                 std::vector<DeviceTensor *> outs,
                                 int64_t opset = 17) {
  CudaKernelCall call{op, "test", opset, attrs, ins, outs};
  return fn(call);
}

/// With a device: the shared fixture plus a scratch area for the calls.
class CudaRows : public test::DeviceTest {
protected:
  static constexpr uint64_t kScratchBytes = uint64_t(16) << 20;

  void SetUp() override {
    DeviceTest::SetUp();
    if (IsSkipped() || HasFatalFailure())
      return;
    ASSIGN_OR_FAIL(offset, arena.place(kScratchBytes));
    ASSIGN_OR_FAIL(ptr, arena.pointer(offset, kScratchBytes));
    scratch = ptr;
  }

  /// Runs cuda kernel `fn` with the fixture's stream and scratch.
  llvm::Error runDevice(CudaKernelFn fn, llvm::StringRef op,
                        const AttributeList &attrs,
                        std::vector<const DeviceTensor *> ins,
                        std::vector<DeviceTensor *> outs, int64_t opset = 17) {
    if (!fn)
      return cudaKernelError("no cuda kernel for " + op);
    CudaKernelCall call{op, "test", opset, attrs, ins, outs};
    call.stream = stream.get();
    call.workspace = scratch;
    call.workspaceBytes = kScratchBytes;
    return fn(call);
  }

  void *scratch = nullptr;
  std::mt19937 rng{20240611};
};

} // namespace zinc::cuda::rowstest

#endif
