//===- GradientBuilder.h - What a gradient rule sees and emits with -------===//
//
// A gradient rule is a short function over one forward node: it reads the
// node's inputs, outputs and the gradients flowing into its outputs, and
// emits backward nodes through this builder, which appends them to the graph
// with their static shapes. Rules never touch the Graph directly.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_PASSES_AUTODIFF_GRADIENTBUILDER_H
#define ZINC_PASSES_AUTODIFF_GRADIENTBUILDER_H

#include "zinc/ir/Graph.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"

namespace zinc::autodiff {

/// The element type and static shape of a value a rule creates.
struct TensorType {
  DType dtype = DType::F32;
  llvm::SmallVector<int64_t, 4> shape;
};

class GradientBuilder {
public:
  GradientBuilder(ir::Graph &g, const ir::Node &fwd,
                  llvm::ArrayRef<ir::Value *> outputGrads,
                  llvm::ArrayRef<bool> inputNeedsGrad);

  const ir::Node &node() const { return fwd; }
  const AttributeList &attrs() const { return fwd.attrs; }
  int64_t opset() const { return g.opsetVersion; }
  /// Input i of the forward node; null when absent.
  ir::Value *input(unsigned i) const;
  ir::Value *output(unsigned i) const;
  unsigned numInputs() const { return fwd.inputs.size(); }
  /// The gradient flowing into output i; null when none reaches it (zero).
  ir::Value *outputGrad(unsigned i) const;
  /// Whether input i needs a gradient (it lies on a path from a trainable
  /// parameter to the loss).
  bool needsGrad(unsigned i) const;
  /// Records the gradient of input i; its type must equal the input's.
  llvm::Error setGrad(unsigned i, ir::Value *grad);
  llvm::ArrayRef<ir::Value *> inputGrads() const { return grads; }

  /// Appends a node with one output of type `type`.
  ir::Value *op(llvm::StringRef opType, llvm::ArrayRef<ir::Value *> inputs,
                const TensorType &type, AttributeList attrs = {},
                llvm::StringRef domain = "");
  /// Appends a node with several outputs.
  llvm::SmallVector<ir::Value *, 4>
  ops(llvm::StringRef opType, llvm::ArrayRef<ir::Value *> inputs,
      llvm::ArrayRef<TensorType> types, AttributeList attrs = {},
      llvm::StringRef domain = "");
  /// Same as op() in the "zinc" domain.
  ir::Value *zincOp(llvm::StringRef opType, llvm::ArrayRef<ir::Value *> inputs,
                    const TensorType &type, AttributeList attrs = {});

  // Conveniences over op(); each takes care of the opset's form of the op.
  /// A Constant scalar (shape []) of `dtype`.
  ir::Value *scalar(double value, DType dtype);
  /// A Constant i64[n].
  ir::Value *int64s(llvm::ArrayRef<int64_t> values);
  /// Numpy-broadcasting binary ops; the result type follows broadcasting.
  ir::Value *add(ir::Value *a, ir::Value *b);
  ir::Value *sub(ir::Value *a, ir::Value *b);
  ir::Value *mul(ir::Value *a, ir::Value *b);
  ir::Value *div(ir::Value *a, ir::Value *b);
  ir::Value *neg(ir::Value *a);
  /// Unary op with the type of its input (Exp, Sqrt, Tanh, ...).
  ir::Value *unary(llvm::StringRef opType, ir::Value *a);
  ir::Value *reshape(ir::Value *a, llvm::ArrayRef<int64_t> shape);
  ir::Value *transpose(ir::Value *a, llvm::ArrayRef<int64_t> perm);
  /// ReduceSum over `axes` (non-negative, sorted).
  ir::Value *reduceSum(ir::Value *a, llvm::ArrayRef<int64_t> axes, bool keepDims);
  /// Undoes numpy broadcasting: sums `grad` over the axes along which a
  /// value of `shape` was broadcast, and reshapes to `shape`.
  ir::Value *sumToShape(ir::Value *grad, llvm::ArrayRef<int64_t> shape);
  ir::Value *cast(ir::Value *a, DType to);

  /// Numpy broadcast of two static shapes (asserts compatibility: the
  /// forward graph already passed shape inference).
  static llvm::SmallVector<int64_t, 4> broadcast(llvm::ArrayRef<int64_t> a,
                                                 llvm::ArrayRef<int64_t> b);

private:
  std::string freshNodeName(llvm::StringRef opType);

  ir::Graph &g;
  const ir::Node &fwd;
  llvm::SmallVector<ir::Value *, 4> outGrads;
  llvm::SmallVector<bool, 4> needs;
  llvm::SmallVector<ir::Value *, 4> grads;
  unsigned counter = 0;
};

} // namespace zinc::autodiff

#endif
