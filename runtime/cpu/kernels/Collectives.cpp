//===- Collectives.cpp - AllReduce, ReduceScatter, AllGather, ShardOf -----===//
//
// The data-parallel ops of the partition pass (ZincOps.def), over the call's
// communicator (zinc/runtime/comm/Communicator.h); without one (a single
// rank) they are what one rank's collective is: a copy.
//
//===----------------------------------------------------------------------===//
#include "Kernels.h"
#include "zinc/runtime/comm/Communicator.h"
#include "zinc/support/Error.h"
#include "zinc/support/KernelWorkspace.h"
#include <cstring>

namespace zinc::cpu {
namespace {

unsigned rankOf(const KernelCall &call) { return call.comm ? call.comm->rank() : 0; }
unsigned ranksOf(const KernelCall &call) { return call.comm ? call.comm->size() : 1; }

/// What diagnostics call the collective: "AllGather 'w/allgather'".
std::string describe(const KernelCall &call) {
  return (call.opType + " '" + call.nodeName + "'").str();
}

/// Checks that `shard` is one rank's padded shard of `whole` elements.
llvm::Error checkShard(const KernelCall &call, const TensorRef *whole,
                       const TensorRef *shard) {
  if (!whole || !shard || whole->dtype != shard->dtype)
    return makeError(call.opType + " expects a tensor and a shard of one dtype");
  int64_t want = (whole->numElements() + ranksOf(call) - 1) / ranksOf(call);
  if (shard->numElements() != want)
    return makeError(call.opType + ": a shard of " + llvm::Twine(whole->numElements()) +
                     " elements over " + llvm::Twine(ranksOf(call)) + " ranks has " +
                     llvm::Twine(want) + " elements, not " +
                     llvm::Twine(shard->numElements()));
  return llvm::Error::success();
}

llvm::Expected<comm::ReduceOp> reduceOpOf(const KernelCall &call) {
  return comm::parseReduceOp(call.attrs.getString("op", "sum"));
}

/// The f32 scratch of a 16-bit sum or mean (KernelWorkspace.cpp sizes it).
llvm::Expected<llvm::MutableArrayRef<float>> reductionScratch(const KernelCall &call,
                                                             const TensorRef &x,
                                                             comm::ReduceOp op) {
  bool widened = (x.dtype == DType::F16 || x.dtype == DType::BF16) &&
                 op != comm::ReduceOp::Max;
  if (!widened || !x.numElements())
    return llvm::MutableArrayRef<float>();
  int64_t n = std::min<int64_t>(x.numElements(), kCollectiveChunkElements);
  auto scratch = call.scratch<float>(n);
  if (!scratch)
    return scratch.takeError();
  return llvm::MutableArrayRef<float>(*scratch, n);
}

} // namespace

llvm::Error runAllReduce(const KernelCall &call) {
  TensorRef *x = call.updated(0);
  if (!x)
    return makeError("AllReduce expects a tensor it is declared to write");
  auto op = reduceOpOf(call);
  if (!op)
    return op.takeError();
  if (!call.comm)
    return llvm::Error::success();
  auto scratch = reductionScratch(call, *x, *op);
  if (!scratch)
    return scratch.takeError();
  return call.comm->allReduce(x->data, x->numElements(), x->dtype, *op, describe(call),
                              *scratch);
}

llvm::Error runReduceScatter(const KernelCall &call) {
  const TensorRef *whole = call.input(0);
  TensorRef *shard = call.output(0);
  if (auto err = checkShard(call, whole, shard))
    return err;
  auto op = reduceOpOf(call);
  if (!op)
    return op.takeError();
  if (!call.comm) {
    std::memcpy(shard->data, whole->data, whole->byteSize());
    return llvm::Error::success();
  }
  auto scratch = reductionScratch(call, *whole, *op);
  if (!scratch)
    return scratch.takeError();
  return call.comm->reduceScatter(whole->data, shard->data, whole->numElements(),
                                  shard->numElements(), whole->dtype, *op,
                                  describe(call), *scratch);
}

llvm::Error runAllGather(const KernelCall &call) {
  const TensorRef *shard = call.input(0);
  TensorRef *whole = call.output(0);
  if (auto err = checkShard(call, whole, shard))
    return err;
  if (!call.comm) {
    std::memcpy(whole->data, shard->data, whole->byteSize());
    return llvm::Error::success();
  }
  return call.comm->allGather(shard->data, whole->data, whole->numElements(),
                              shard->numElements(), whole->dtype, describe(call));
}

llvm::Error runShardOf(const KernelCall &call) {
  const TensorRef *whole = call.input(0);
  TensorRef *shard = call.output(0);
  if (auto err = checkShard(call, whole, shard))
    return err;
  size_t e = dtypeSize(whole->dtype);
  int64_t per = shard->numElements();
  int64_t owned = ownedElements(whole->numElements(), per, rankOf(call));
  auto *dst = static_cast<uint8_t *>(shard->data);
  if (owned > 0)
    std::memcpy(dst, static_cast<const uint8_t *>(whole->data) + per * rankOf(call) * e,
                owned * e);
  std::memset(dst + owned * e, 0, (per - owned) * e);
  return llvm::Error::success();
}

} // namespace zinc::cpu
