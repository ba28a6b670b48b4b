//===- RowsTestHelpers.h - Device tensors and cpu comparisons, Rows/Layout ===//
//
// A fixture that owns a device arena and a stream, uploads cpu test tensors,
// runs a cuda kernel through its CudaKernelCall and downloads the results,
// so each test reads as "run the cpu kernel, run the cuda kernel, compare".
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_TEST_UNIT_CUDA_ROWSTESTHELPERS_H
#define ZINC_TEST_UNIT_CUDA_ROWSTESTHELPERS_H

#include "test/unit/cuda/ErrorAssertions.h"
#include "test/unit/kernels/KernelCallHelpers.h"
#include "zinc/runtime/cuda/CudaCheck.h"
#include "zinc/runtime/cuda/CudaKernel.h"
#include "zinc/runtime/cuda/Device.h"
#include "gtest/gtest.h"
#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace zinc::cuda::rowstest {

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

/// Uniform in [lo, hi], or integers in [lo, hi] for an integer dtype.
inline OwnedTensor randomTensor(DType dtype, llvm::ArrayRef<int64_t> shape,
                                std::mt19937 &rng, double lo, double hi) {
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(numElements(shape));
  for (double &x : v)
    x = isFloatDType(dtype) ? dist(rng) : std::floor(dist(rng));
  return tensorOf(dtype, shape, v);
}

struct Tolerance {
  double atol, rtol;
};

/// One unit in the last place, relative, of a 16-bit type; 0 for f32.
inline double halfUlp(DType t) {
  return t == DType::BF16 ? 1.0 / 128 : t == DType::F16 ? 1.0 / 1024 : 0.0;
}

/// |got - want| <= atol + rtol * |want| element-wise; NaN meets NaN.
inline void expectClose(const OwnedTensor &got, const OwnedTensor &want,
                        Tolerance tol) {
  std::vector<double> g = valuesOf(got), w = valuesOf(want);
  ASSERT_EQ(g.size(), w.size());
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

/// A shape-only device tensor (no data): for the no-device tests.
inline DeviceTensor shapeOnly(DType dtype, llvm::ArrayRef<int64_t> shape) {
  DeviceTensor t;
  t.dtype = dtype;
  t.shape.assign(shape.begin(), shape.end());
  return t;
}

/// With a device: an arena, a stream, a scratch area and the round trips.
class CudaRows : public ::testing::Test {
protected:
  static constexpr uint64_t kArenaBytes = uint64_t(256) << 20;
  static constexpr uint64_t kScratchBytes = uint64_t(16) << 20;

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
    ASSIGN_OR_FAIL(offset, arena.place(kScratchBytes));
    ASSIGN_OR_FAIL(ptr, arena.pointer(offset, kScratchBytes));
    scratch = ptr;
  }

  /// Space for a tensor, filled with 0xFF bytes (NaN in every float type),
  /// so anything left unwritten shows.
  llvm::Expected<DeviceTensor> allocate(DType dtype,
                                        llvm::ArrayRef<int64_t> shape) {
    DeviceTensor d = shapeOnly(dtype, shape);
    auto offset = arena.place(d.byteSize() + 1);
    if (!offset)
      return offset.takeError();
    auto ptr = arena.pointer(*offset, d.byteSize() + 1);
    if (!ptr)
      return ptr.takeError();
    d.data = *ptr;
    if (llvm::Error err = checkCuda(
            cudaMemsetAsync(d.data, 0xFF, d.byteSize(), stream.get()),
            "cudaMemsetAsync"))
      return err;
    return d;
  }

  llvm::Expected<DeviceTensor> upload(const OwnedTensor &t) {
    auto d = allocate(t.ref.dtype, t.ref.shape);
    if (!d)
      return d.takeError();
    if (llvm::Error err =
            checkCuda(cudaMemcpyAsync(d->data, t.ref.data, t.ref.byteSize(),
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
    if (llvm::Error err =
            checkCuda(cudaMemcpyAsync(t.ref.data, d.data, d.byteSize(),
                                      cudaMemcpyDeviceToHost, stream.get()),
                      "cudaMemcpyAsync(device to host)"))
      return err;
    if (llvm::Error err = stream.synchronize())
      return err;
    return t;
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

  DeviceArena arena;
  Stream stream;
  void *scratch = nullptr;
  std::mt19937 rng{20240611};
};

} // namespace zinc::cuda::rowstest

#endif
