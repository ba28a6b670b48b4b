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

#include "test/unit/cuda/DeviceTestSupport.h"
#include "zinc/support/Error.h"
#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace zinc::cuda::softmaxtest {

using namespace zinc::cuda::test;

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

/// expectValuesClose for tensors of one shape.
inline void expectClose(const OwnedTensor &got, const OwnedTensor &want,
                        Tolerance tol) {
  ASSERT_EQ(got.ref.shape, want.ref.shape);
  expectValuesClose(got, want, tol);
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

/// A call of the cuda kernel of `op` on shape-only tensors (null: absent).
inline llvm::Error runShapesOnly(llvm::StringRef op, bool zinc,
                                 const AttributeList &attrs, int64_t opset,
                                 const std::vector<const DeviceTensor *> &ins,
                                 const std::vector<DeviceTensor *> &outs) {
  CudaKernelCall call{op, "test", opset, attrs, ins, outs};
  return cudaKernelOf(op, zinc)(call);
}

/// The shared fixture plus a scratch area at the start of the arena,
/// which it starts again when it fills.
class CudaSoftmax : public test::DeviceTest {
protected:
  /// Scratch given to calls that ask for it.
  static constexpr uint64_t kScratchBytes = uint64_t(1) << 20;

  void SetUp() override {
    DeviceTest::SetUp();
    if (IsSkipped() || HasFatalFailure())
      return;
    ASSERT_NO_ERROR(placeScratch());
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
    if (arena.used() > arenaBytes / 2)
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
    auto a = DeviceArena::create(arenaBytes);
    if (!a)
      return a.takeError();
    arena = std::move(*a);
    return placeScratch();
  }

  /// The scratch at the start of a fresh arena.
  llvm::Error placeScratch() {
    auto offset = arena.place(kScratchBytes);
    if (!offset)
      return offset.takeError();
    auto p = arena.pointer(*offset, kScratchBytes);
    if (!p)
      return p.takeError();
    scratch = *p;
    return llvm::Error::success();
  }

  void *scratch = nullptr;
  std::mt19937 rng{20240611};
};

} // namespace zinc::cuda::softmaxtest

#endif
