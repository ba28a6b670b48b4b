//===- Sequences.h - Tensor sequences whose lengths fold, as tensors ------===//
#ifndef ZINC_COMPILER_FRONTEND_SEQUENCES_H
#define ZINC_COMPILER_FRONTEND_SEQUENCES_H

#include "compiler/frontend/ConstantTensor.h"
#include "onnx/onnx_pb.h"
#include "llvm/ADT/StringMap.h"

namespace zinc::frontend {

/// Follows ONNX tensor sequences whose every element is known at compile
/// time (SequenceEmpty, SequenceConstruct, SplitToSequence with static
/// sizes, SequenceInsert, Identity) and replaces what reads a tensor out of
/// one by tensor ops: SequenceAt with a known position by an Identity of
/// that element, ConcatFromSequence by a Concat (of Unsqueezes with
/// new_axis), SequenceLength by a Constant; SplitToSequence gets a Split
/// beside it for its elements. Sequence nodes nothing reads any more are
/// removed, so that none reaches the IR. `types` are the value types after
/// shape inference. Returns true when it changed anything.
bool foldSequences(onnx::GraphProto &graph,
                   const llvm::StringMap<ConstantTensor> &known,
                   const llvm::StringMap<const onnx::TypeProto *> &types,
                   int64_t opset);

} // namespace zinc::frontend

#endif
