//===- ControlFlow.h - If nodes whose condition folds, and why others don't -===//
#ifndef ZINC_COMPILER_FRONTEND_CONTROLFLOW_H
#define ZINC_COMPILER_FRONTEND_CONTROLFLOW_H

#include "compiler/frontend/ConstantTensor.h"
#include "onnx/onnx_pb.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include <string>

namespace zinc::frontend {

/// Control-flow ops: zinc plans are static programs, so it runs none of them;
/// an If whose condition is a compile-time constant is inlined instead.
bool isControlFlowOp(const onnx::NodeProto &node);

/// Replaces each If node whose condition `takenBranch` knows (node index ->
/// true for then_branch, false for else_branch) by the nodes of that branch,
/// at its place in the node list: the branch's initializers join the graph's,
/// its nodes keep their outer-scope references (ONNX names are unique across
/// a model and its subgraphs, so none is shadowed), and each If output
/// becomes an Identity of the branch's output. Returns the number inlined.
int inlineTakenBranches(onnx::GraphProto &graph,
                        const llvm::DenseMap<int, bool> &takenBranch);

/// The most iterations a Loop is unrolled to, and the most nodes its copies
/// may add up to.
constexpr int64_t kMaxUnrolledIterations = 4096;
constexpr int64_t kMaxUnrolledNodes = int64_t(1) << 18;

/// Unrolls each Loop whose trip count `known` holds (at most
/// kMaxUnrolledIterations and kMaxUnrolledNodes), whose condition stays true (absent, or a known
/// true value the body passes on through Cast or Identity) and whose body
/// holds no subgraph or initializer: the body's nodes are copied once per
/// iteration with their values renamed, the iteration number a Constant, the
/// loop-carried values threaded through, and scan outputs stacked along a new
/// first axis. PyTorch writes repeat_interleave this way (GPT-J's rotary
/// tables). Returns the number unrolled.
int unrollConstantLoops(onnx::GraphProto &graph,
                        const llvm::StringMap<ConstantTensor> &known,
                        int64_t opset);

/// For a control-flow node left after folding: what its condition (If) or
/// trip count and condition (Loop) are computed from at run time, e.g.
/// "its condition 'c' depends on graph input 'tokens'", so the diagnostic
/// names the data that keeps it from folding.
std::string describeRuntimeCondition(const onnx::GraphProto &graph,
                                     const onnx::NodeProto &node);

} // namespace zinc::frontend

#endif
