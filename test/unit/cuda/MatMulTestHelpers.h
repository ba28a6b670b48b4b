//===- MatMulTestHelpers.h - Device buffers and calls for cuda GEMM tests -===//
//
// A fixture that owns an arena, a stream and a cuBLASLt context, moves
// OwnedTensors to and from the device, and runs a cuda kernel the way the
// executor does (CudaKernelCall over device tensors), so each test reads as
// "the same op on the cpu and on the GPU, then compare".
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_TEST_UNIT_CUDA_MATMULTESTHELPERS_H
#define ZINC_TEST_UNIT_CUDA_MATMULTESTHELPERS_H

#include "test/unit/cuda/DeviceTestSupport.h"
#include "zinc/runtime/cuda/CublasLtGemm.h"
#include <cmath>
#include <initializer_list>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace zinc::cuda::matmultest {

using namespace zinc::cuda::test;

/// A GEMM's results differ from OpenBLAS's only by summation order: a few
/// f32 ulps per product in f32; in f16/bf16 both round one f32 sum, so at
/// most one unit in the last place apart.
inline Tolerance gemmTolerance(DType dtype, int64_t k) {
  double atol = 2e-6 * static_cast<double>(std::max<int64_t>(k, 1));
  double rtol = dtype == DType::BF16  ? 1.0 / 128
                : dtype == DType::F16 ? 1.0 / 1024
                                      : 1e-5;
  return {atol, rtol};
}

/// expectValuesClose for tensors of one shape.
inline void expectClose(const OwnedTensor &got, const OwnedTensor &want,
                        Tolerance tol) {
  ASSERT_EQ(got.ref.shape, want.ref.shape);
  expectValuesClose(got, want, tol);
}

/// Runs the cpu kernel of `op` (ONNX, or zinc's own when `zinc`).
inline llvm::Error runCpu(bool zinc, llvm::StringRef op,
                          const AttributeList &attrs,
                          std::initializer_list<const OwnedTensor *> ins,
                          std::initializer_list<OwnedTensor *> outs) {
  cpu::KernelFn fn = zinc ? cpu::lookupZincKernel(op) : cpu::lookupKernel(op);
  if (!fn)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "no cpu kernel for " + op.str());
  return cpu::test::runKernel(fn, op, attrs, ins, outs);
}

/// Runs the cuda kernel of `op` (ONNX, or zinc's own when `zinc`) over
/// device tensors, with `gemm` as the stream's cuBLASLt context (null: the
/// kernel must fail before touching the device).
inline llvm::Error runCuda(bool zinc, llvm::StringRef op,
                           const AttributeList &attrs,
                           std::initializer_list<const DeviceTensor *> ins,
                           std::initializer_list<DeviceTensor *> outs,
                           cudaStream_t stream = nullptr,
                           GemmContext *gemm = nullptr,
                           bool allowTf32 = false) {
  CudaKernelFn fn = lookupCudaKernel(zinc ? kZincDomain : "", op);
  if (!fn)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "no cuda kernel for " + op.str());
  std::vector<const DeviceTensor *> inRefs(ins);
  std::vector<DeviceTensor *> outRefs(outs);
  CudaKernelCall call{op, "test", 17, attrs, inRefs, outRefs};
  call.stream = stream;
  call.gemm = gemm;
  call.allowTf32 = allowTf32;
  return fn(call);
}

/// Skips without a device; otherwise an arena, a stream and a cuBLASLt
/// context for it.
class CudaMatMulDevice : public test::DeviceTest {
protected:
  static constexpr uint64_t kArenaBytes = uint64_t(64) << 20;

  CudaMatMulDevice() : DeviceTest(kArenaBytes) {}

  void SetUp() override {
    DeviceTest::SetUp();
    if (IsSkipped() || HasFatalFailure())
      return;
    ASSIGN_OR_FAIL(g, GemmContext::create());
    gemmContext = std::move(g);
  }

  /// runCuda on this fixture's stream and context.
  llvm::Error run(bool zinc, llvm::StringRef op, const AttributeList &attrs,
                  std::initializer_list<const DeviceTensor *> ins,
                  std::initializer_list<DeviceTensor *> outs,
                  bool allowTf32 = false) {
    return runCuda(zinc, op, attrs, ins, outs, stream.get(), gemmContext.get(),
                   allowTf32);
  }

  std::unique_ptr<GemmContext> gemmContext;
  std::mt19937 rng{20240612};
};

} // namespace zinc::cuda::matmultest

#endif
