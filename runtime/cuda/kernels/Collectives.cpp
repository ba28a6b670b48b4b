//===- Collectives.cpp - AllReduce, ReduceScatter, AllGather, ShardOf -----===//
//
// The partition pass's data-parallel ops (Ops.def) on device tensors,
// over the call's device communicator (CudaKernelCall::comm); a bucket (an
// instruction of several tensors) is one group of it. The cpu kernels'
// checks and semantics (cpu/kernels/Collectives.cpp); without a
// communicator (one rank) a collective is a device copy.
//
//===----------------------------------------------------------------------===//
#include "CudaKernels.h"
#include "zinc/runtime/comm/Communicator.h"
#include "zinc/runtime/cuda/CudaCheck.h"
#include "zinc/support/Error.h"

namespace zinc::cuda {
namespace {

unsigned rankOf(const CudaKernelCall &call) {
  return call.comm ? call.comm->rank() : 0;
}
unsigned ranksOf(const CudaKernelCall &call) {
  return call.comm ? call.comm->size() : 1;
}

std::string describe(const CudaKernelCall &call) {
  return (call.opType + " '" + call.nodeName + "'").str();
}

/// `shard` is one rank's padded shard of `whole`, both in device memory.
llvm::Error checkShard(const CudaKernelCall &call, const DeviceTensor *whole,
                       const DeviceTensor *shard) {
  if (!whole || !shard || whole->dtype != shard->dtype)
    return makeError(call.opType +
                     " expects a tensor and a shard of one dtype");
  if ((whole->numElements() && !whole->data) ||
      (shard->numElements() && !shard->data))
    return makeError(call.opType +
                     ": the cuda backend runs collectives on GPU-tier "
                     "tensors only");
  int64_t want = (whole->numElements() + ranksOf(call) - 1) / ranksOf(call);
  if (shard->numElements() != want)
    return makeError(call.opType + ": a shard of " +
                     llvm::Twine(whole->numElements()) + " elements over " +
                     llvm::Twine(ranksOf(call)) + " ranks has " +
                     llvm::Twine(want) + " elements, not " +
                     llvm::Twine(shard->numElements()));
  return llvm::Error::success();
}

llvm::Expected<comm::ReduceOp> reduceOpOf(const CudaKernelCall &call) {
  return comm::parseReduceOp(call.attrs.getString("op", "sum"));
}

llvm::Error deviceCopy(const CudaKernelCall &call, void *dst, const void *src,
                       uint64_t n) {
  return checkCuda(
      cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, call.stream),
      describe(call) + ": one rank's copy");
}

template <typename Run>
llvm::Error forEachOperand(const CudaKernelCall &call, size_t n, Run run) {
  if (n == 0)
    return makeError(call.opType + " expects at least one tensor");
  bool group = n > 1 && call.comm;
  if (group)
    call.comm->beginGroup();
  for (size_t i = 0; i < n; ++i)
    if (llvm::Error err = run(i)) {
      if (group)
        llvm::consumeError(
            call.comm->endGroup()); // The first error is the one to tell.
      return err;
    }
  return group ? call.comm->endGroup() : llvm::Error::success();
}

} // namespace

llvm::Error runAllReduce(const CudaKernelCall &call) {
  auto op = reduceOpOf(call);
  if (!op)
    return op.takeError();
  if (!call.comm)
    return llvm::Error::success();
  return forEachOperand(call, call.inputs.size(), [&](size_t i) -> llvm::Error {
    DeviceTensor *x = call.updated(i);
    if (!x)
      return makeError("AllReduce expects tensors it is declared to write");
    if (x->numElements() && !x->data)
      return makeError("AllReduce: the cuda backend runs collectives on "
                       "GPU-tier tensors only");
    return call.comm->allReduce(x->data, x->numElements(), x->dtype, *op,
                                describe(call));
  });
}

llvm::Error runReduceScatter(const CudaKernelCall &call) {
  if (call.inputs.size() != call.outputs.size())
    return makeError("ReduceScatter expects one shard for each tensor");
  auto op = reduceOpOf(call);
  if (!op)
    return op.takeError();
  return forEachOperand(call, call.inputs.size(), [&](size_t i) -> llvm::Error {
    const DeviceTensor *whole = call.input(i);
    DeviceTensor *shard = call.output(i);
    if (auto err = checkShard(call, whole, shard))
      return err;
    if (!call.comm)
      return deviceCopy(call, shard->data, whole->data, whole->byteSize());
    return call.comm->reduceScatter(whole->data, shard->data,
                                    whole->numElements(), shard->numElements(),
                                    whole->dtype, *op, describe(call));
  });
}

llvm::Error runAllGather(const CudaKernelCall &call) {
  if (call.inputs.size() != call.outputs.size())
    return makeError("AllGather expects one tensor for each shard");
  return forEachOperand(call, call.inputs.size(), [&](size_t i) -> llvm::Error {
    const DeviceTensor *shard = call.input(i);
    DeviceTensor *whole = call.output(i);
    if (auto err = checkShard(call, whole, shard))
      return err;
    if (!call.comm)
      return deviceCopy(call, whole->data, shard->data, whole->byteSize());
    return call.comm->allGather(shard->data, whole->data, whole->numElements(),
                                shard->numElements(), whole->dtype,
                                describe(call));
  });
}

llvm::Error runShardOf(const CudaKernelCall &call) {
  const DeviceTensor *whole = call.input(0);
  DeviceTensor *shard = call.output(0);
  if (auto err = checkShard(call, whole, shard))
    return err;
  size_t e = dtypeSize(whole->dtype);
  int64_t per = shard->numElements();
  int64_t owned = ownedElements(whole->numElements(), per, rankOf(call));
  auto *dst = static_cast<uint8_t *>(shard->data);
  if (owned > 0)
    if (auto err = deviceCopy(call, dst,
                              static_cast<const uint8_t *>(whole->data) +
                                  per * rankOf(call) * e,
                              owned * e))
      return err;
  if (per > owned)
    return checkCuda(cudaMemsetAsync(dst + std::max<int64_t>(owned, 0) * e, 0,
                                     (per - std::max<int64_t>(owned, 0)) * e,
                                     call.stream),
                     describe(call) + ": zeroing the shard's padding");
  return llvm::Error::success();
}

} // namespace zinc::cuda
