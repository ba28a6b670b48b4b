//===- PytorchNames.h - The PyTorch parameter behind each initializer -----===//
#ifndef ZINC_COMPILER_FRONTEND_PYTORCHNAMES_H
#define ZINC_COMPILER_FRONTEND_PYTORCHNAMES_H

#include "compiler/frontend/Initializers.h"
#include "onnx/onnx_pb.h"
#include "llvm/ADT/ArrayRef.h"

namespace zinc::frontend {

/// Names the PyTorch parameter held by each float initializer that PyTorch's
/// exporter named itself (`onnx::<Op>_<n>`: a constant it folded, such as the
/// transpose of a Linear weight applied to a rank-3 input), so that saved
/// weights load into the exporting module under its state_dict keys.
///
/// An exporter-named rank-2 initializer read only as input B of MatMul
/// nodes of one module scope (node names `/blocks.0/attn/q/MatMul`, which
/// the exporter gives since PyTorch 1.13) is that module's Linear weight,
/// transposed: `blocks.0.attn.q.weight`. One read only by Identity nodes
/// whose outputs are named as parameters (`lm_head.weight =
/// Identity(onnx::Identity_5)`) is the parameter of that name (the smallest,
/// when tied aliases give several). The other exporter-named float
/// initializers (folded constants, such as an attention mask) get one
/// warning for all: PyTorch has no name for them. Initializers named
/// otherwise keep their name, which is the state_dict key in an export
/// without constant folding.
void namePytorchParameters(const onnx::GraphProto &graph,
                           llvm::MutableArrayRef<InitializerInfo> initializers,
                           const WarningHandler &warn);

} // namespace zinc::frontend

#endif
