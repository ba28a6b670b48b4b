//===- MiscTestHelpers.h - Shared pieces of the small training ops' tests -===//
//
// For CudaClipTest, CudaReduceMaxTest, CudaTriluTest, CudaNllLossTest and
// CudaGatherColumnsTest: the Rows fixture (a device arena, a stream and
// call scratch) and a view of a host tensor as a kernel operand, for the
// scalar and axes operands the kernels read on the host when they can.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_TEST_UNIT_CUDA_MISCTESTHELPERS_H
#define ZINC_TEST_UNIT_CUDA_MISCTESTHELPERS_H

#include "runtime/cuda/kernels/CudaKernels.h"
#include "test/unit/cuda/RowsTestHelpers.h"

namespace zinc::cuda::misctest {

using namespace zinc::cuda::test;
using rowstest::runCpu;
using rowstest::runUnlaunched;

inline const DType kFloatTypes[] = {DType::F32, DType::F16, DType::BF16};

/// `t` in host memory as a kernel operand: what the executor hands a kernel
/// for a small constant it keeps pinned.
inline DeviceTensor hostView(const OwnedTensor &t) {
  DeviceTensor d = shapeOnly(t.ref.dtype, t.ref.shape);
  d.data = t.ref.data;
  return d;
}

/// Where a test puts a scalar or axes operand of the cuda call.
enum class PlaceKind { Device, Host };

inline const char *placeName(PlaceKind p) {
  return p == PlaceKind::Device ? "device" : "host";
}

/// The Rows fixture, for the misc ops' device tests.
class CudaMiscDevice : public rowstest::CudaRows {
protected:
  /// `t` where `where` says: uploaded, or a view of its host bytes.
  llvm::Expected<DeviceTensor> placeOperand(const OwnedTensor &t,
                                            PlaceKind where) {
    if (where == PlaceKind::Host)
      return hostView(t);
    return upload(t);
  }
};

} // namespace zinc::cuda::misctest

#endif
