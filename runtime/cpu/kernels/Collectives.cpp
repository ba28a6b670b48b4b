//===- Collectives.cpp - AllReduce, ReduceScatter, AllGather, ShardOf -----===//
//
// The data-parallel ops of the partition pass (Ops.def), over the call's
// communicator (zinc/runtime/comm/Communicator.h); without one (a single
// rank) they are what one rank's collective is: a copy.
//
//===----------------------------------------------------------------------===//
#include "Kernels.h"
#include "zinc/ops/KernelWorkspace.h"
#include "zinc/runtime/comm/Communicator.h"
#include "zinc/support/Error.h"
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

/// The f32 scratch of a 16-bit sum or mean (KernelWorkspace.cpp sizes it):
/// one chunk for all of a bucket's tensors, which use it one after another.
llvm::Expected<llvm::MutableArrayRef<float>> reductionScratch(const KernelCall &call,
                                                             comm::ReduceOp op) {
  if (op == comm::ReduceOp::Max)
    return llvm::MutableArrayRef<float>();
  int64_t n = 0;
  for (const TensorRef *x : call.inputs)
    if (x && (x->dtype == DType::F16 || x->dtype == DType::BF16))
      n = std::max<int64_t>(n, std::min<int64_t>(x->numElements(), kCollectiveChunkElements));
  if (!n)
    return llvm::MutableArrayRef<float>();
  auto scratch = call.scratch<float>(n);
  if (!scratch)
    return scratch.takeError();
  return llvm::MutableArrayRef<float>(*scratch, n);
}

/// `run(i)` for each of a collective's `n` operands; a bucket's (n > 1)
/// as one group of the communicator, so their latencies overlap.
template <typename Run>
llvm::Error forEachOperand(const KernelCall &call, size_t n, Run run) {
  if (n == 0)
    return makeError(call.opType + " expects at least one tensor");
  bool group = n > 1 && call.comm;
  if (group)
    call.comm->beginGroup();
  for (size_t i = 0; i < n; ++i)
    if (llvm::Error err = run(i)) {
      if (group)
        llvm::consumeError(call.comm->endGroup()); // The first error is the one to tell.
      return err;
    }
  return group ? call.comm->endGroup() : llvm::Error::success();
}

} // namespace

llvm::Error runAllReduce(const KernelCall &call) {
  auto op = reduceOpOf(call);
  if (!op)
    return op.takeError();
  if (!call.comm)
    return llvm::Error::success();
  auto scratch = reductionScratch(call, *op);
  if (!scratch)
    return scratch.takeError();
  return forEachOperand(call, call.inputs.size(), [&](size_t i) -> llvm::Error {
    TensorRef *x = call.updated(i);
    if (!x)
      return makeError("AllReduce expects tensors it is declared to write");
    return call.comm->allReduce(x->data, x->numElements(), x->dtype, *op, describe(call),
                                *scratch);
  });
}

llvm::Error runReduceScatter(const KernelCall &call) {
  if (call.inputs.size() != call.outputs.size())
    return makeError("ReduceScatter expects one shard for each tensor");
  auto op = reduceOpOf(call);
  if (!op)
    return op.takeError();
  llvm::MutableArrayRef<float> scratch;
  if (call.comm) {
    auto chunk = reductionScratch(call, *op);
    if (!chunk)
      return chunk.takeError();
    scratch = *chunk;
  }
  return forEachOperand(call, call.inputs.size(), [&](size_t i) -> llvm::Error {
    const TensorRef *whole = call.input(i);
    TensorRef *shard = call.output(i);
    if (auto err = checkShard(call, whole, shard))
      return err;
    if (!call.comm) {
      std::memcpy(shard->data, whole->data, whole->byteSize());
      return llvm::Error::success();
    }
    return call.comm->reduceScatter(whole->data, shard->data, whole->numElements(),
                                    shard->numElements(), whole->dtype, *op, describe(call),
                                    scratch);
  });
}

llvm::Error runAllGather(const KernelCall &call) {
  if (call.inputs.size() != call.outputs.size())
    return makeError("AllGather expects one tensor for each shard");
  return forEachOperand(call, call.inputs.size(), [&](size_t i) -> llvm::Error {
    const TensorRef *shard = call.input(i);
    TensorRef *whole = call.output(i);
    if (auto err = checkShard(call, whole, shard))
      return err;
    if (!call.comm) {
      std::memcpy(whole->data, shard->data, whole->byteSize());
      return llvm::Error::success();
    }
    return call.comm->allGather(shard->data, whole->data, whole->numElements(),
                                shard->numElements(), whole->dtype, describe(call));
  });
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
