//===- ElementwiseTestHelpers.h - Running an op on the cpu and the GPU ----===//
//
// The elementwise cuda tests run each op's cuda kernel and its cpu kernel on
// the same inputs and compare: this holds the comparison, on top of the
// shared device fixture (DeviceTestSupport.h).
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_TEST_UNIT_CUDA_ELEMENTWISETESTHELPERS_H
#define ZINC_TEST_UNIT_CUDA_ELEMENTWISETESTHELPERS_H

#include "test/unit/cuda/DeviceTestSupport.h"
#include <cmath>
#include <random>
#include <string>
#include <vector>

// Its own namespace: the test binary links every cuda test, and other
// files' helpers have names like these.
namespace zinc::cuda::ewtest {

using namespace zinc::cuda::test;

/// expectValuesClose for tensors of one element type; infinities must
/// match exactly.
inline void expectClose(const OwnedTensor &got, const OwnedTensor &want,
                        Tolerance tol) {
  ASSERT_EQ(got.ref.dtype, want.ref.dtype);
  expectValuesClose(got, want, tol, /*exactInfinities=*/true);
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

/// How one comparison runs: which input (if any) the output overwrites,
/// and by how many elements input 0 is misaligned.
struct Placement {
  int inPlace = -1;
  uint64_t shift = 0;
};

/// The device fixture, and the comparison with the cpu kernel.
class ElementwiseDevice : public test::DeviceTest {
protected:
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

  std::mt19937 rng{20240612};
};

} // namespace zinc::cuda::ewtest

#endif
