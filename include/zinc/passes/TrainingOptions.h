//===- TrainingOptions.h - What build-training builds: loss, optimizer ----===//
#ifndef ZINC_PASSES_TRAININGOPTIONS_H
#define ZINC_PASSES_TRAININGOPTIONS_H

#include "zinc/support/LrSchedule.h"
#include "llvm/Support/Error.h"
#include <cstdint>
#include <string>

namespace zinc {

/// None: no update; each trained parameter's gradient becomes a graph output
/// named "<initializer>.grad" (gradient checks, debugging).
enum class OptimizerKind { AdamW, Adam, SGD, None };

/// Compute precision (--precision): Mixed kinds keep fp32 master weights and
/// fp32 optimizer states; the mixed-precision pass applies them.
enum class PrecisionKind { FP32, BF16, FP16 };

/// fp16 loss scaling (--loss-scale): PyTorch GradScaler's dynamic scheme,
/// a fixed scale, or none.
enum class LossScaleKind { None, Static, Dynamic };

/// --mode: build the training step, or run the forward pass only.
enum class CompileMode { Train, Infer };

/// PyTorch's semantics and defaults (torch.optim.AdamW / Adam / SGD).
struct TrainingOptions {
  CompileMode mode = CompileMode::Train;
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
  /// --lr-schedule, --warmup-steps, --total-steps: the factor of `lr` at
  /// each update (LrSchedule.h); the default is a constant rate.
  LrSchedule lrSchedule;
  /// --clip-grad-norm: torch.nn.utils.clip_grad_norm_(params, MAX) before
  /// each update (the clip-grad-norm pass); 0 for none.
  double clipGradNorm = 0;
  /// --grad-accum: micro-batches per optimizer step, each one's loss
  /// gradient 1/N, their gradients summed into f32 accumulators the updates
  /// read (the accumulate-gradients pass); 1 for none.
  int64_t gradAccum = 1;
  /// --grad-reduce: with --grad-accum under ZeRO stages 2-3, whether each
  /// micro-batch's gradients are reduce-scattered into sharded accumulators
  /// (MicroBatch) or summed whole on each rank and reduce-scattered once,
  /// in the step's last micro-batch (Step).
  enum class GradReduce { MicroBatch, Step } gradReduce = GradReduce::MicroBatch;

  /// fuse-attention: attention chains become zinc.Attention (O(T) memory).
  bool fuseAttention = true;

  PrecisionKind precision = PrecisionKind::FP32;
  LossScaleKind lossScale = LossScaleKind::None;
  /// The scale of the first step (Static: of every step); GradScaler's
  /// defaults for the rest.
  double initialLossScale = 65536.0;
  double lossScaleGrowthFactor = 2.0;
  double lossScaleBackoffFactor = 0.5;
  int64_t lossScaleGrowthInterval = 2000;
};

/// Refuses, naming the flag, a hyper-parameter torch.optim's constructors
/// refuse: a negative or non-finite learning rate, epsilon, weight decay or
/// momentum, a beta outside [0, 1).
llvm::Error checkHyperParameters(const TrainingOptions &options);

} // namespace zinc

#endif
