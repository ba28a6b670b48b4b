//===- TrainingOptions.h - What build-training builds: loss, optimizer ----===//
#ifndef ZINC_PASSES_TRAININGOPTIONS_H
#define ZINC_PASSES_TRAININGOPTIONS_H

#include <string>

namespace zinc {

/// None: no update; each trained parameter's gradient becomes a graph output
/// named "<initializer>.grad" (gradient checks, debugging).
enum class OptimizerKind { AdamW, Adam, SGD, None };

/// PyTorch's semantics and defaults (torch.optim.AdamW / Adam / SGD).
struct TrainingOptions {
  /// Graph output holding the scalar loss; empty: the only scalar float one.
  std::string loss;
  /// Initializers whose names match this regex are not trained.
  std::string freeze;
  OptimizerKind optimizer = OptimizerKind::AdamW;
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  /// AdamW's default is 0.01, Adam's and SGD's 0 (set by the tool).
  double weightDecay = 0.01;
  double momentum = 0;
  double dampening = 0;
  bool nesterov = false;
};

} // namespace zinc

#endif
