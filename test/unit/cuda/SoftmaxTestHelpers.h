//===- SoftmaxTestHelpers.h - Run an op on the cpu and the GPU, compare ---===//
//
// A fixture that owns an arena and a stream, runs one op's cpu kernel and
// its cuda kernel (a CudaKernelCall over device tensors, as the executor
// makes it) on the same host inputs, and compares every output; device
// outputs start as 0xFF bytes (NaN in every float type), so an element the
// kernel forgot shows.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_TEST_UNIT_CUDA_SOFTMAXTESTHELPERS_H
#define ZINC_TEST_UNIT_CUDA_SOFTMAXTESTHELPERS_H

#include "test/unit/cuda/ErrorAssertions.h"
#include "test/unit/kernels/KernelCallHelpers.h"
#include "zinc/runtime/cuda/CudaCheck.h"
#include "zinc/runtime/cuda/CudaKernel.h"
#include "zinc/runtime/cuda/Device.h"
#include "zinc/support/Error.h"
#include "gtest/gtest.h"
#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace zinc::cuda::softmaxtest {

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
                                std::mt19937 &rng, double lo, double hi) {
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(numElements(shape));
  for (double &x : v)
    x = dist(rng);
  return tensorOf(dtype, shape, v);
}

/// A bool tensor, each element true with probability `p`.
inline OwnedTensor randomMask(llvm::ArrayRef<int64_t> shape, std::mt19937 &rng,
                              double p) {
  OwnedTensor t(DType::Bool, shape);
  std::bernoulli_distribution dist(p);
  for (int64_t i = 0; i < t.ref.numElements(); ++i)
    t.ref.as<bool>()[i] = dist(rng);
  return t;
}

/// Class indices in [0, classes) of an int32 or int64 tensor.
inline OwnedTensor randomTargets(DType dtype, llvm::ArrayRef<int64_t> shape,
                                 int64_t classes, std::mt19937 &rng) {
  std::vector<double> v(numElements(shape));
  for (double &x : v)
    x = static_cast<double>(rng() % static_cast<uint64_t>(classes));
  return dtype == DType::I32
             ? OwnedTensor::of<int32_t>(DType::I32, shape, v)
             : OwnedTensor::of<int64_t>(DType::I64, shape, v);
}

struct Tolerance {
  double atol, rtol;
};

/// Results computed in float on both sides and rounded once: a few f32
/// ulps apart (exp, and sums added in another order), or one unit in the
/// last place of a 16-bit type.
inline Tolerance softmaxTolerance(DType dtype) {
  if (dtype == DType::BF16)
    return {1e-5, 1.0 / 128};
  if (dtype == DType::F16)
    return {1e-5, 1.0 / 1024};
  return {1e-6, 2e-5};
}

/// Element-wise |got - want| <= atol + rtol * |want|; NaN only where NaN
/// is wanted, infinities exactly.
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

/// The cuda kernel of an op: `zinc` picks zinc's own domain.
inline CudaKernelFn cudaKernelOf(llvm::StringRef op, bool zinc) {
  return lookupCudaKernel(zinc ? kZincDomain : "", op);
}

/// Runs the cpu kernel of `op` as the runtime does (planned workspace).
inline llvm::Error runOnCpu(llvm::StringRef op, bool zinc,
                            const AttributeList &attrs, int64_t opset,
                            const std::vector<const OwnedTensor *> &ins,
                            const std::vector<OwnedTensor *> &outs) {
  cpu::KernelFn fn = zinc ? cpu::lookupZincKernel(op) : cpu::lookupKernel(op);
  if (!fn)
    return makeError("no cpu kernel for " + op);
  std::vector<const cpu::TensorRef *> inRefs;
  for (const OwnedTensor *t : ins)
    inRefs.push_back(t ? &t->ref : nullptr);
  std::vector<cpu::TensorRef *> outRefs;
  for (OwnedTensor *t : outs)
    outRefs.push_back(t ? &t->ref : nullptr);
  cpu::KernelCall call{op, "test", opset, attrs, inRefs, outRefs};
  return cpu::test::runWithWorkspace(fn, call);
}

/// A device tensor of the given type and shape without memory: enough for
/// the checks a kernel makes before it touches the device.
inline DeviceTensor shapeOnly(DType dtype, llvm::ArrayRef<int64_t> shape) {
  DeviceTensor d;
  d.dtype = dtype;
  d.shape.assign(shape.begin(), shape.end());
  return d;
}

/// A call of the cuda kernel of `op` on shape-only tensors (null: absent).
inline llvm::Error runShapesOnly(llvm::StringRef op, bool zinc,
                                 const AttributeList &attrs, int64_t opset,
                                 const std::vector<const DeviceTensor *> &ins,
                                 const std::vector<DeviceTensor *> &outs) {
  CudaKernelCall call{op, "test", opset, attrs, ins, outs};
  return cudaKernelOf(op, zinc)(call);
}

class CudaSoftmax : public ::testing::Test {
protected:
  static constexpr uint64_t kArenaBytes = uint64_t(256) << 20;
  /// Scratch given to calls that ask for it.
  static constexpr uint64_t kScratchBytes = uint64_t(1) << 20;

  void SetUp() override {
    llvm::Expected<int> count = cudaDeviceCount();
    if (!count)
      GTEST_SKIP() << "CUDA device query failed: "
                   << llvm::toString(count.takeError());
    if (*count == 0)
      GTEST_SKIP() << "no CUDA device";
    ASSIGN_OR_FAIL(s, Stream::create());
    stream = std::move(s);
    ASSERT_NO_ERROR(resetArena());
  }

  /// Space for a tensor, filled with 0xFF bytes.
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
    if (llvm::Error err =
            checkCuda(cudaMemsetAsync(d.data, 0xFF, d.byteSize(), stream.get()),
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

  /// Runs the cuda kernel of `op` on `ins` (null: absent), with outputs
  /// shaped like `likes` (null: absent), and returns the outputs (an empty
  /// tensor for an absent one). `withScratch` lends the call kScratchBytes.
  llvm::Expected<std::vector<OwnedTensor>>
  runOnDevice(llvm::StringRef op, bool zinc, const AttributeList &attrs,
              int64_t opset, const std::vector<const OwnedTensor *> &ins,
              const std::vector<const OwnedTensor *> &likes,
              bool withScratch = true) {
    // The arena only grows: start it again once half is used (every
    // earlier result has been copied back by then).
    if (arena.used() > kArenaBytes / 2)
      if (llvm::Error err = resetArena())
        return err;
    std::vector<DeviceTensor> inDev(ins.size()), outDev(likes.size());
    std::vector<const DeviceTensor *> inPtrs;
    std::vector<DeviceTensor *> outPtrs;
    for (size_t i = 0; i < ins.size(); ++i) {
      if (!ins[i]) {
        inPtrs.push_back(nullptr);
        continue;
      }
      auto d = upload(*ins[i]);
      if (!d)
        return d.takeError();
      inDev[i] = *d;
      inPtrs.push_back(&inDev[i]);
    }
    for (size_t i = 0; i < likes.size(); ++i) {
      if (!likes[i]) {
        outPtrs.push_back(nullptr);
        continue;
      }
      auto d = allocate(likes[i]->ref.dtype, likes[i]->ref.shape);
      if (!d)
        return d.takeError();
      outDev[i] = *d;
      outPtrs.push_back(&outDev[i]);
    }
    CudaKernelCall call{op, "test", opset, attrs, inPtrs, outPtrs};
    call.stream = stream.get();
    if (withScratch) {
      // Garbage, so a kernel that reads scratch it did not write fails.
      if (llvm::Error err = checkCuda(
              cudaMemsetAsync(scratch, 0xA5, kScratchBytes, stream.get()),
              "cudaMemsetAsync(scratch)"))
        return err;
      call.workspace = scratch;
      call.workspaceBytes = kScratchBytes;
    }
    CudaKernelFn fn = cudaKernelOf(op, zinc);
    if (!fn)
      return makeError("no cuda kernel for " + op);
    if (llvm::Error err = fn(call))
      return err;
    // Reserved up front: OwnedTensor's move may throw (SmallVector), so a
    // growing vector would copy it, and a copy's ref.data points into the
    // original's storage.
    std::vector<OwnedTensor> results;
    results.reserve(likes.size());
    for (size_t i = 0; i < likes.size(); ++i) {
      if (!likes[i]) {
        results.emplace_back(DType::F32, llvm::ArrayRef<int64_t>{0});
        continue;
      }
      auto t = download(outDev[i]);
      if (!t)
        return t.takeError();
      results.push_back(std::move(*t));
    }
    return results;
  }

  /// Runs `op` on the cpu into `wants` and on the GPU, and compares every
  /// present output.
  void expectMatchesCpu(llvm::StringRef op, bool zinc,
                        const AttributeList &attrs,
                        const std::vector<const OwnedTensor *> &ins,
                        const std::vector<OwnedTensor *> &wants, Tolerance tol,
                        int64_t opset = 17, bool withScratch = true) {
    ASSERT_NO_ERROR(runOnCpu(op, zinc, attrs, opset, ins, wants));
    std::vector<const OwnedTensor *> likes(wants.begin(), wants.end());
    ASSIGN_OR_FAIL(got, runOnDevice(op, zinc, attrs, opset, ins, likes,
                                    withScratch));
    for (size_t i = 0; i < wants.size(); ++i)
      if (wants[i]) {
        SCOPED_TRACE("output " + std::to_string(i));
        expectClose(got[i], *wants[i], tol);
      }
  }

  /// A fresh arena with the scratch at its start.
  llvm::Error resetArena() {
    if (llvm::Error err = stream.synchronize())
      return err;
    if (llvm::Error err = arena.release())
      return err;
    auto a = DeviceArena::create(kArenaBytes);
    if (!a)
      return a.takeError();
    arena = std::move(*a);
    auto offset = arena.place(kScratchBytes);
    if (!offset)
      return offset.takeError();
    auto p = arena.pointer(*offset, kScratchBytes);
    if (!p)
      return p.takeError();
    scratch = *p;
    return llvm::Error::success();
  }

  DeviceArena arena;
  Stream stream;
  void *scratch = nullptr;
  std::mt19937 rng{20240611};
};

} // namespace zinc::cuda::softmaxtest

#endif
