//===- Checkpoint.h - Training checkpoints that survive crashes -----------===//
//
// zinc-run --checkpoint-dir=DIR writes DIR/step-<S>/ after S steps:
//   model.safetensors  the trained fp32 weights keyed by ONNX initializer
//                      name (what --save-weights writes; any safetensors
//                      reader loads it);
//   state.safetensors  every tensor the step carries from one step to the
//                      next (parameters, optimizer states and master weights,
//                      BatchNorm running statistics, the loss scale), in its
//                      own type, keyed by its name in the plan; a ZeRO shard
//                      is kept whole (gathered from every rank, unpadded);
//   manifest.json      the step, the seed, the rank count, the run's identity
//                      (the plan's checksum and the run id: which checkpoints
//                      a run may prune or replace, CheckpointFolder.h), the
//                      plan's state (each state tensor's name, type and whole
//                      shape) and each file's size and xxHash64.
// With several ranks, rank 0 writes the checkpoint while the others take
// part in the gathers; on resume every rank reads its own share of each
// whole tensor, so a checkpoint of N ranks resumes on M when the plans
// differ only in rank count (the shards are partitioned anew). One rank is
// a plan of its own at ZeRO stages 1 and 2: it has no partition, so an fp32
// model has no separate master weight, and such a resume is refused.
// The data position and every Dropout mask follow from the step and the seed
// (counter-based), so these resume a run exactly.
//
// A checkpoint is written into DIR/step-<S>.partial-<pid>, each file fsynced,
// then renamed to DIR/step-<S> and DIR fsynced: a crash at any moment leaves
// the previous checkpoints whole. Tensors that live on NVMe are streamed one
// at a time. --resume picks the newest complete checkpoint and checks it
// against the plan and its own checksums before touching a tensor.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_RUNTIME_CHECKPOINT_H
#define ZINC_RUNTIME_CHECKPOINT_H

#include "zinc/runtime/CheckpointFolder.h"
#include "zinc/runtime/Program.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <cstdint>
#include <functional>
#include <string>

namespace zinc::rt {

/// The keys of saved weights (zinc-run --weight-names).
enum class WeightKeysKind {
  /// ONNX initializer names.
  Onnx,
  /// PyTorch state_dict keys, in PyTorch's layout, for the initializers
  /// whose plan tensor records one (InitializerSource.pytorch_name: the
  /// exporter renamed them); ONNX names for the others, which are their
  /// state_dict keys in an export without constant folding, except that
  /// initializers the exporter named (`onnx::...`) without a PyTorch name
  /// recorded are left out: they are constants it folded.
  Pytorch,
};

/// The trained weights and model state (BatchNorm running statistics) as
/// fp32 safetensors (--save-weights, and a checkpoint's model.safetensors);
/// NVMe-resident ones one at a time. Where the plan records a PyTorch name
/// for an initializer, `__metadata__` maps its key to the other name:
/// `zinc.pytorch_name.<ONNX name>` and `zinc.pytorch_layout.<ONNX name>`
/// ("transposed") under ONNX keys, `zinc.onnx_name.<key>` and
/// `zinc.onnx_layout.<key>` under PyTorch keys.
llvm::Error writeTrainedWeights(Program &program, llvm::StringRef path,
                                WeightKeysKind keys = WeightKeysKind::Onnx);

/// Each trained weight and model state tensor that writeTrainedWeights
/// saves under ONNX keys, whole in fp32 in the initializer's layout, given
/// to `visit` with its initializer's name and shape; NVMe-resident ones one
/// at a time. With several ranks every rank calls it (they take part in the
/// gathers of shards) and only rank 0 visits.
llvm::Error forEachTrainedWeight(
    Program &program,
    llvm::function_ref<llvm::Error(llvm::StringRef name,
                                   llvm::ArrayRef<int64_t> shape,
                                   llvm::ArrayRef<float> values)>
        visit);

/// The plan's identity in manifests: hex xxHash64 of its serialised form.
std::string planChecksum(const Program &program);

/// Writes DIR/step-<stepsDone> as run `id` (replacing one of that name only
/// if it is `id`'s), then removes all but the newest `keep` checkpoints of
/// run `id` (0: keep all) and partial ones left by processes that died
/// (CheckpointFolder.h). The caller holds DIR's CheckpointLock. `note` hears
/// what was removed. When `stopRequested` turns true on a single rank, the
/// checkpoint is abandoned between tensors (an error, nothing left behind).
llvm::Error saveCheckpoint(Program &program, llvm::StringRef dir,
                           uint64_t stepsDone, uint64_t seed, unsigned keep,
                           const RunIdentity &id,
                           const std::function<void(llvm::StringRef)> &note,
                           const std::function<bool()> &stopRequested = {},
                           WeightKeysKind keys = WeightKeysKind::Onnx);

/// Where a run resumes.
struct ResumePoint {
  /// The checkpoint directory used.
  std::string path;
  /// Steps already done: the next step is this one (0-based).
  uint64_t stepsDone = 0;
  uint64_t seed = 0;
  /// The run it continues, with this plan's checksum.
  RunIdentity identity;
};

/// `path` is a checkpoint (it has a manifest.json) or a directory of them
/// (the newest complete one of this plan is used; with none, the newest of
/// another plan, which `note` hears). Checks the manifest against the plan
/// (naming the first difference) and the files against their checksums
/// (naming the file), then loads every state tensor into its home tier.
llvm::Expected<ResumePoint>
resumeFromCheckpoint(Program &program, llvm::StringRef path,
                     const std::function<void(llvm::StringRef)> &note = {});

} // namespace zinc::rt

#endif
