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

#include "test/unit/cuda/ErrorAssertions.h"
#include "test/unit/kernels/KernelCallHelpers.h"
#include "zinc/runtime/cuda/CublasLtGemm.h"
#include "zinc/runtime/cuda/CudaCheck.h"
#include "zinc/runtime/cuda/CudaKernel.h"
#include "zinc/runtime/cuda/Device.h"
#include "gtest/gtest.h"
#include <cmath>
#include <initializer_list>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace zinc::cuda::matmultest {

using cpu::test::OwnedTensor;

inline std::string errorText(llvm::Error err) {
  return err ? llvm::toString(std::move(err)) : std::string();
}

/// Every element of `t` as double.
inline std::vector<double> valuesOf(const OwnedTensor &t) {
  return cpu::visitDType(t.ref.dtype,
                         [&](auto tag) { return t.values<decltype(tag)>(); });
}

/// A tensor of `dtype` holding `values`, rounded as the cpu kernels round.
inline OwnedTensor tensorOf(DType dtype, llvm::ArrayRef<int64_t> shape,
                            const std::vector<double> &values) {
  return cpu::visitDType(dtype, [&](auto tag) {
    return OwnedTensor::of<decltype(tag)>(dtype, shape, values);
  });
}

/// Uniform in [lo, hi].
inline OwnedTensor randomTensor(DType dtype, llvm::ArrayRef<int64_t> shape,
                                std::mt19937 &rng, double lo = -1,
                                double hi = 1) {
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(numElements(shape));
  for (double &x : v)
    x = dist(rng);
  return tensorOf(dtype, shape, v);
}

struct Tolerance {
  double atol, rtol;
};

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

/// Element-wise |got - want| <= atol + rtol * |want|; NaN only where NaN
/// is wanted (an element the kernel should have written and did not shows
/// as NaN, the fixture's fill).
inline void expectClose(const OwnedTensor &got, const OwnedTensor &want,
                        Tolerance tol) {
  ASSERT_EQ(got.ref.shape, want.ref.shape);
  std::vector<double> g = valuesOf(got), w = valuesOf(want);
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    bool ok = std::isnan(w[i])
                  ? std::isnan(g[i])
                  : (g[i] == w[i] || std::fabs(g[i] - w[i]) <=
                                         tol.atol + tol.rtol * std::fabs(w[i]));
    if (!ok && bad++ == 0)
      first = i;
  }
  EXPECT_EQ(bad, 0u) << bad << " of " << g.size()
                     << " elements differ; first at " << first << ": got "
                     << g[first] << ", want " << w[first];
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

/// A device tensor of `dtype` and `shape` with no storage: for calls that
/// must be refused before anything reads it.
inline DeviceTensor shapeOnly(DType dtype, llvm::ArrayRef<int64_t> shape) {
  DeviceTensor d;
  d.dtype = dtype;
  d.shape.assign(shape.begin(), shape.end());
  return d;
}

/// Skips without a device; otherwise an arena, a stream and a cuBLASLt
/// context for it.
class CudaMatMulDevice : public ::testing::Test {
protected:
  static constexpr uint64_t kArenaBytes = uint64_t(64) << 20;

  void SetUp() override {
    llvm::Expected<int> count = cudaDeviceCount();
    ASSERT_TRUE(static_cast<bool>(count)) << llvm::toString(count.takeError());
    if (*count == 0)
      GTEST_SKIP() << "no CUDA device";
    ASSIGN_OR_FAIL(a, DeviceArena::create(kArenaBytes));
    arena = std::move(a);
    ASSIGN_OR_FAIL(s, Stream::create());
    stream = std::move(s);
    ASSIGN_OR_FAIL(g, GemmContext::create());
    gemmContext = std::move(g);
  }

  /// Space for `t` in the arena, `shift` bytes past an aligned offset,
  /// filled with 0xFF bytes: NaN in every float type, so anything left
  /// unwritten shows.
  llvm::Expected<DeviceTensor>
  allocate(DType dtype, llvm::ArrayRef<int64_t> shape, uint64_t shift = 0) {
    DeviceTensor d = shapeOnly(dtype, shape);
    auto offset = arena.place(d.byteSize() + shift + 1);
    if (!offset)
      return offset.takeError();
    auto ptr = arena.pointer(*offset + shift, d.byteSize());
    if (!ptr)
      return ptr.takeError();
    d.data = *ptr;
    if (llvm::Error err =
            checkCuda(cudaMemsetAsync(d.data, 0xFF, d.byteSize(), stream.get()),
                      "cudaMemsetAsync"))
      return err;
    return d;
  }

  llvm::Expected<DeviceTensor> upload(const OwnedTensor &t,
                                      uint64_t shift = 0) {
    auto d = allocate(t.ref.dtype, t.ref.shape, shift);
    if (!d)
      return d.takeError();
    if (llvm::Error err =
            checkCuda(cudaMemcpyAsync(d->data, t.ref.data, t.ref.byteSize(),
                                      cudaMemcpyHostToDevice, stream.get()),
                      "cudaMemcpyAsync(host to device)"))
      return err;
    // The host buffer may go away before the copy has run.
    if (llvm::Error err = stream.synchronize())
      return err;
    return d;
  }

  /// Waits for the stream and copies `d` back.
  llvm::Expected<OwnedTensor> download(const DeviceTensor &d) {
    OwnedTensor t(d.dtype, d.shape);
    if (llvm::Error err =
            checkCuda(cudaMemcpyAsync(t.ref.data, d.data, d.byteSize(),
                                      cudaMemcpyDeviceToHost, stream.get()),
                      "cudaMemcpyAsync(device to host)"))
      return err;
    if (llvm::Error err = stream.synchronize())
      return err;
    return t;
  }

  /// runCuda on this fixture's stream and context.
  llvm::Error run(bool zinc, llvm::StringRef op, const AttributeList &attrs,
                  std::initializer_list<const DeviceTensor *> ins,
                  std::initializer_list<DeviceTensor *> outs,
                  bool allowTf32 = false) {
    return runCuda(zinc, op, attrs, ins, outs, stream.get(), gemmContext.get(),
                   allowTf32);
  }

  DeviceArena arena;
  Stream stream;
  std::unique_ptr<GemmContext> gemmContext;
  std::mt19937 rng{20240612};
};

} // namespace zinc::cuda::matmultest

#endif
