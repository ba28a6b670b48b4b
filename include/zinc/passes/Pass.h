//===- Pass.h - The interface every zinc pass implements ------------------===//
#ifndef ZINC_PASSES_PASS_H
#define ZINC_PASSES_PASS_H

#include "zinc/ir/Graph.h"
#include "zinc/passes/MemoryOptions.h"
#include "zinc/passes/TierLayout.h"
#include "zinc/passes/TrainingOptions.h"
#include "zinc/support/Hardware.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include <functional>
#include <memory>

namespace zinc::passes {

class PassInstrumentation;

/// What a pass may need besides the graph: the options of the whole
/// compilation (hardware description, budgets, ZeRO stage...). It grows
/// with the passes that read it.
/// --ranks and --zero-stage: data parallelism (the partition pass).
struct ZeroOptions {
  unsigned ranks = 1;
  /// 0: every rank holds everything, gradients are all-reduced; 1: the
  /// optimizer states and fp32 master weights are sharded; 2: the
  /// gradients too; 3: the parameters too.
  unsigned stage = 0;
};

struct PassContext {
  /// partition: ranks and ZeRO stage.
  ZeroOptions zero;
  /// build-training: loss, trainable set, optimizer; mixed-precision:
  /// precision and loss scaling.
  TrainingOptions training;
  /// plan-memory, insert-transfers, spill, allocate: homes and capacities.
  MemoryOptions memory;
  /// The machine (--hw): plan-memory predicts the step of the plans it tries
  /// with it, insert-transfers times prefetches by it. Null (zinc-opt):
  /// prefetches go by node count.
  const Hardware *hardware = nullptr;
  /// The tiers' layout allocate proved, for the graph as allocate left it:
  /// the plan emitter uses it instead of packing again. Null before
  /// allocate runs.
  std::shared_ptr<const TierLayout> layout;
  /// The step plan-memory's search predicted for the graph it kept, laid
  /// out as `predictedLayout`: while that is still `layout`, the plan
  /// emitted from them must be predicted the same (zinc-compile checks).
  std::shared_ptr<const TierLayout> predictedLayout;
  double predictedStepSeconds = 0;
  /// Receives one-line notes for the user (the placement chosen); may be
  /// empty.
  std::function<void(const llvm::Twine &)> note;
  /// The verifier, dumps and timers of the pass manager running the
  /// pipeline, for the passes a pass runs itself (runPassesNamed:
  /// plan-memory's trials); null outside one.
  PassInstrumentation *instrumentation = nullptr;
};

/// A transformation of the graph. Passes are created through Passes.def,
/// never registered by static constructors.
class Pass {
public:
  virtual ~Pass();
  /// Human-readable name, for dumps and timers: "Dead Code Elimination".
  virtual llvm::StringRef getName() const = 0;
  /// The name in pipelines and on the command line: "dce".
  virtual llvm::StringRef getArgument() const = 0;
  /// Transforms `g`; returns whether anything changed. Errors are for what
  /// a user can cause (an unsupported op, a budget that cannot fit).
  virtual llvm::Expected<bool> run(ir::Graph &g, PassContext &ctx) = 0;
  /// Whether the default pipeline runs this pass for these options
  /// (build-training only in train mode, mixed-precision only below fp32).
  /// A pipeline written out by hand runs every pass it names.
  virtual bool isEnabled(const PassContext &) const { return true; }
  /// The passes this one runs itself, as a pipeline ("insert-transfers,
  /// spill,allocate" for plan-memory): --print-pipeline shows them in
  /// braces after its name. Empty for a pass that runs none.
  virtual llvm::StringRef getNestedPipeline() const { return ""; }
};

/// The factory of each pass listed in Passes.def.
#define ZINC_NESTED_PASS(ARGUMENT, CREATE) std::unique_ptr<Pass> CREATE();
#define ZINC_PASS(ARGUMENT, CREATE) std::unique_ptr<Pass> CREATE();
#include "zinc/passes/Passes.def"

} // namespace zinc::passes

#endif
