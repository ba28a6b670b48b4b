//===- ElementwiseTestHelpers.h - Running an op on the cpu and the GPU ----===//
//
// The elementwise cuda tests run each op's cuda kernel and its cpu kernel on
// the same inputs and compare: this holds the device fixture (arena, stream,
// uploads), random inputs and the comparison.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_TEST_UNIT_CUDA_ELEMENTWISETESTHELPERS_H
#define ZINC_TEST_UNIT_CUDA_ELEMENTWISETESTHELPERS_H

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

// Its own namespace: the test binary links every cuda test, and other
// files' helpers have names like these.
namespace zinc::cuda::ewtest {

using cpu::test::OwnedTensor;

inline std::string errorText(llvm::Error err) {
  return err ? llvm::toString(std::move(err)) : std::string();
}

/// Every element of `t` as double.
inline std::vector<double> valuesOf(const OwnedTensor &t) {
  return cpu::visitDType(t.ref.dtype,
                         [&](auto tag) { return t.values<decltype(tag)>(); });
}

/// A tensor of `dtype` holding `values`, converted as the cpu's store().
inline OwnedTensor tensorOf(DType dtype, llvm::ArrayRef<int64_t> shape,
                            const std::vector<double> &values) {
  return cpu::visitDType(dtype, [&](auto tag) {
    return OwnedTensor::of<decltype(tag)>(dtype, shape, values);
  });
}

/// Uniform in [lo, hi]; integer types get integers (the conversion
/// truncates), bool gets true and false. `integral` rounds down for float
/// types too (few distinct values, for comparisons).
inline OwnedTensor randomTensor(DType dtype, llvm::ArrayRef<int64_t> shape,
                                std::mt19937 &rng, double lo, double hi,
                                bool integral = false) {
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(numElements(shape));
  for (double &x : v) {
    x = dtype == DType::Bool ? double(rng() % 2) : dist(rng);
    if (integral)
      x = std::floor(x);
  }
  return tensorOf(dtype, shape, v);
}

struct Tolerance {
  double atol, rtol;
};

/// One unit in the last place, relative, of a 16-bit type; 0 otherwise.
inline double halfUlp(DType t) {
  return t == DType::BF16 ? 1.0 / 128 : t == DType::F16 ? 1.0 / 1024 : 0.0;
}

/// Element-wise |got - want| <= atol + rtol * |want|; NaN must meet NaN and
/// infinities must match exactly.
inline void expectClose(const OwnedTensor &got, const OwnedTensor &want,
                        Tolerance tol) {
  ASSERT_EQ(got.ref.dtype, want.ref.dtype);
  std::vector<double> g = valuesOf(got), w = valuesOf(want);
  ASSERT_EQ(g.size(), w.size());
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    bool ok = std::isnan(w[i]) ? std::isnan(g[i])
                               : (g[i] == w[i] ||
                                  (std::isfinite(w[i]) &&
                                   std::fabs(g[i] - w[i]) <=
                                       tol.atol + tol.rtol * std::fabs(w[i])));
    if (!ok && bad++ == 0)
      first = i;
  }
  EXPECT_EQ(bad, 0u) << bad << " of " << g.size()
                     << " elements differ; first at " << first << ": got "
                     << g[first] << ", want " << w[first];
}

/// A call of a cuda kernel on `stream`, as the executor makes it.
inline CudaKernelCall makeCall(llvm::StringRef op, const AttributeList &attrs,
                               llvm::ArrayRef<const DeviceTensor *> ins,
                               llvm::ArrayRef<DeviceTensor *> outs,
                               cudaStream_t stream) {
  CudaKernelCall call{op, "test", 17, attrs, ins, outs};
  call.stream = stream;
  return call;
}

/// A device tensor of `dtype` and `shape` with no memory behind it, for
/// checks that must fail before anything is queued.
inline DeviceTensor shapeOnly(DType dtype, llvm::ArrayRef<int64_t> shape) {
  DeviceTensor d;
  d.dtype = dtype;
  d.shape.assign(shape.begin(), shape.end());
  return d;
}

/// How one comparison runs: which input (if any) the output overwrites,
/// and by how many bytes input 0 is misaligned.
struct Placement {
  int inPlace = -1;
  uint64_t shift = 0;
};

/// Skips without a device; gives each test an arena and a stream.
class ElementwiseDevice : public ::testing::Test {
protected:
  /// The arena has no free: a test's cases share it, so they stay small.
  static constexpr uint64_t kArenaBytes = uint64_t(256) << 20;

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

  /// Space for a tensor, `shift` elements past an aligned offset (to test
  /// unaligned pointers), filled with 0xFF bytes: NaN in every float type,
  /// so anything left unwritten shows.
  llvm::Expected<DeviceTensor>
  allocate(DType dtype, llvm::ArrayRef<int64_t> shape, uint64_t shift = 0) {
    // Whole elements: a kernel may assume its tensors' natural alignment
    // (the arena gives every tensor at least 64 bytes), not 16 bytes.
    shift *= dtypeSize(dtype);
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

  /// Runs op `op` ("zinc" domain when `zincOp`) with `ins` on the cpu and
  /// on the GPU, into an output of `outType` and `outShape`, and compares.
  void compareWithCpu(llvm::StringRef op, bool zincOp,
                      const AttributeList &attrs,
                      std::vector<const OwnedTensor *> ins, DType outType,
                      llvm::ArrayRef<int64_t> outShape, Tolerance tol,
                      Placement where = {}) {
    cpu::KernelFn cpuFn =
        zincOp ? cpu::lookupZincKernel(op) : cpu::lookupKernel(op);
    CudaKernelFn cudaFn = lookupCudaKernel(zincOp ? "zinc" : "", op);
    ASSERT_NE(cpuFn, nullptr) << op.str();
    ASSERT_NE(cudaFn, nullptr) << op.str();
    OwnedTensor want(outType, outShape);
    {
      std::vector<const cpu::TensorRef *> refs;
      for (const OwnedTensor *t : ins)
        refs.push_back(&t->ref);
      std::vector<cpu::TensorRef *> outs{&want.ref};
      cpu::KernelCall call{op, "test", 17, attrs, refs, outs};
      ASSERT_NO_ERROR(cpu::test::runWithWorkspace(cpuFn, call));
    }
    std::vector<DeviceTensor> dev;
    for (size_t i = 0; i < ins.size(); ++i) {
      ASSIGN_OR_FAIL(d, upload(*ins[i], i == 0 ? where.shift : 0));
      dev.push_back(d);
    }
    DeviceTensor out;
    if (where.inPlace >= 0) {
      out = dev[where.inPlace];
      out.dtype = outType;
    } else {
      ASSIGN_OR_FAIL(fresh, allocate(outType, outShape));
      out = fresh;
    }
    std::vector<const DeviceTensor *> devIns;
    for (const DeviceTensor &d : dev)
      devIns.push_back(&d);
    std::vector<DeviceTensor *> devOuts{&out};
    ASSERT_NO_ERROR(cudaFn(makeCall(op, attrs, devIns, devOuts, stream.get())));
    ASSIGN_OR_FAIL(got, download(out));
    expectClose(got, want, tol);
  }

  DeviceArena arena;
  Stream stream;
  std::mt19937 rng{20240612};
};

} // namespace zinc::cuda::ewtest

#endif
