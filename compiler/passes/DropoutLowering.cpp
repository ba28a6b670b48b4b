//===- DropoutLowering.cpp - Dropout: identity or the seeded training form ===//
#include "zinc/passes/DropoutLowering.h"
#include "zinc/support/Error.h"
#include "llvm/ADT/DenseSet.h"

namespace zinc::passes {

/// The single element of a Constant node's tensor value, as a double; an
/// error naming `what` when `v` is not such a value.
static llvm::Expected<double> readConstantScalar(const ir::Node &n,
                                                 const ir::Value *v,
                                                 llvm::StringRef what) {
  auto fail = [&]() {
    return makeError(n.describe() + ": " + what + " input '" + v->name +
                     "' must be a scalar Constant node (the compiler reads no "
                     "initializer)");
  };
  const ir::Node *def = v->def;
  if (!def || def->opType != "Constant" || !def->domain.empty())
    return fail();
  const Attribute *a = def->attrs.find("value");
  if (!a || a->kind != AttrKind::Tensor)
    return fail();
  if (llvm::Optional<double> value = scalarValue(a->tensor))
    return *value;
  return fail();
}

llvm::Expected<DropoutMode> readDropoutMode(const ir::Node &n, int64_t opset) {
  DropoutMode mode;
  mode.ratio = n.attrs.getFloat("ratio", 0.5);
  if (isTrainingDropout(n)) {
    mode.training = true;
    return mode;
  }
  // Before opset 12 there is no training input: Dropout is inference.
  if (opset < 12)
    return mode;
  mode.ratio = 0.5;
  if (n.inputs.size() > 1 && n.inputs[1]) {
    auto ratio = readConstantScalar(n, n.inputs[1], "ratio");
    if (!ratio)
      return ratio.takeError();
    mode.ratio = *ratio;
  }
  if (n.inputs.size() > 2 && n.inputs[2]) {
    auto training = readConstantScalar(n, n.inputs[2], "training_mode");
    if (!training)
      return training.takeError();
    mode.training = *training != 0;
  }
  return mode;
}

static bool isFusedAttention(const ir::Node &n) {
  return n.domain == "zinc" && n.opType == "Attention";
}

bool isTrainingDropout(const ir::Node &n) {
  return n.opType == "Dropout" && n.domain.empty() && n.attrs.has("seed_id");
}

llvm::Expected<bool> lowerDropouts(ir::Graph &g, bool training) {
  llvm::DenseSet<const ir::Value *> read(g.outputs().begin(),
                                         g.outputs().end());
  int64_t nextSeedId = 0;
  for (const auto &n : g.nodes()) {
    for (const ir::Value *v : n->inputs)
      read.insert(v);
    if (isTrainingDropout(*n) || (isFusedAttention(*n) && n->attrs.has("seed_id")))
      nextSeedId = std::max(nextSeedId, n->attrs.getInt("seed_id", 0) + 1);
  }
  bool changed = false;
  for (const auto &np : g.nodes()) {
    ir::Node &n = *np;
    // fuse-attention moved a Dropout on the probabilities onto the node as
    // its ratio: it draws from a stream of its own in training, and drops
    // nothing otherwise.
    if (isFusedAttention(n) && n.attrs.getFloat("ratio", 0) > 0 && !n.attrs.has("seed_id")) {
      if (training)
        n.attrs.set(makeIntAttr("seed_id", nextSeedId++));
      else
        n.attrs.set(makeFloatAttr("ratio", 0));
      changed = true;
      continue;
    }
    if (n.opType != "Dropout" || !n.domain.empty() ||
        (training && isTrainingDropout(n)))
      continue;
    // A training_mode initializer (not a Constant node) has bytes the
    // compiler never reads: the kernel reads it at run time, runs false and
    // refuses true there, since the node has no seed_id.
    ir::Value *trainingMode = n.inputs.size() > 2 ? n.inputs[2] : nullptr;
    if (training && g.opsetVersion >= 12 && trainingMode &&
        (!trainingMode->def || trainingMode->def->opType != "Constant"))
      continue;
    DropoutMode mode;
    if (training) {
      auto parsed = readDropoutMode(n, g.opsetVersion);
      if (!parsed)
        return parsed.takeError();
      mode = *parsed;
    }
    bool drops = training && mode.training && mode.ratio != 0;
    if (drops && !(mode.ratio > 0 && mode.ratio < 1))
      return makeError(n.describe() + ": ratio " + std::to_string(mode.ratio) +
                       " is outside [0, 1)");
    ir::Value *mask = n.outputs.size() > 1 ? n.outputs[1] : nullptr;
    bool maskRead = mask && read.count(mask);
    // The mask output goes where nothing reads it: regenerating the mask in
    // the backward costs no memory.
    if (mask && !maskRead) {
      mask->def = nullptr;
      n.outputs[1] = nullptr;
    }
    n.setInputs({n.inputs[0]});
    changed = true;
    if (drops) {
      n.attrs = AttributeList();
      n.attrs.set(makeFloatAttr("ratio", mode.ratio));
      n.attrs.set(makeIntAttr("seed_id", nextSeedId++));
      continue;
    }
    // Inference: the data unchanged, and an all-true mask where it is read.
    n.attrs = AttributeList();
    if (!maskRead) {
      n.opType = "Identity";
      n.outputs.resize(1);
    }
  }
  if (changed)
    g.eraseDeadValues();
  return changed;
}

} // namespace zinc::passes
