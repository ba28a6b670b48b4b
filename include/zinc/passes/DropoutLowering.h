//===- DropoutLowering.h - What each Dropout becomes, train or infer -----===//
//
// ONNX spells training-mode Dropout as Dropout(data, ratio, training_mode)
// with the two modes' inputs given by Constant nodes. zinc decides at compile
// time: an inference Dropout is the identity, and a training one becomes
// zinc's training form, Dropout(data) {ratio, seed_id}, whose mask the
// kernels draw from the Philox stream of (run seed, step, seed_id, element).
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_PASSES_DROPOUTLOWERING_H
#define ZINC_PASSES_DROPOUTLOWERING_H

#include "zinc/ir/Graph.h"
#include "llvm/Support/Error.h"

namespace zinc::passes {

/// The mode and ratio a Dropout node runs with, read from its constant
/// inputs (opset 12 on) or its ratio attribute (before).
struct DropoutMode {
  bool training = false;
  double ratio = 0.5;
};
llvm::Expected<DropoutMode> readDropoutMode(const ir::Node &n, int64_t opset);

/// True for build-training's training form, Dropout(data) {ratio, seed_id}.
bool isTrainingDropout(const ir::Node &n);

/// Rewrites every ONNX Dropout of `g`. With `training` false, or where the
/// node is in inference mode or has ratio 0, it becomes Identity(data) (or
/// Dropout(data), whose mask is all true, where something reads its mask).
/// Otherwise it becomes the training form, its seed_id the number of
/// training Dropouts before it in graph order (stable across recompiles and
/// ranks), and its mask output is dropped unless something reads it. A
/// training_mode given by an initializer, whose bytes the compiler never
/// reads, is left to the kernel, which runs false and refuses true. Returns
/// whether anything changed.
llvm::Expected<bool> lowerDropouts(ir::Graph &g, bool training);

} // namespace zinc::passes

#endif
