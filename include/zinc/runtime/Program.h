//===- Program.h - A loaded plan: arenas laid out, weights in place -------===//
#ifndef ZINC_RUNTIME_PROGRAM_H
#define ZINC_RUNTIME_PROGRAM_H

#include "zinc/plan/PlanFile.h"
#include "zinc/runtime/cpu/Kernel.h"
#include "llvm/Support/Error.h"
#include <memory>
#include <vector>

namespace zinc::rt {

/// One tier's memory: a single allocation made at start-up, 64-byte aligned.
class Arena {
public:
  llvm::Error allocate(uint64_t bytes);
  uint8_t *base() const { return data.get(); }
  uint64_t size() const { return bytes; }

private:
  struct Free {
    void operator()(uint8_t *p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> data;
  uint64_t bytes = 0;
};

/// An instruction resolved against the arenas, ready to run.
struct PreparedInstruction {
  const plan::Instruction *source = nullptr;
  cpu::KernelFn kernel = nullptr;
  AttributeList attrs;
  std::vector<const cpu::TensorRef *> inputs;
  std::vector<cpu::TensorRef *> outputs;
  /// End offset (offset + size) of the furthest operand in the GPU arena,
  /// for the measured high-water mark.
  uint64_t gpuHighWater = 0;
};

/// Everything zinc-run needs in memory to run steps. Allocates all memory in
/// load(); nothing after.
class Program {
public:
  /// Reads and checks the plan, lays out the tiers, prepares instructions
  /// and loads every initializer into its home tier.
  static llvm::Expected<std::unique_ptr<Program>> load(llvm::StringRef planPath);
  /// The same from a plan already in memory (tests, embedders).
  static llvm::Expected<std::unique_ptr<Program>> fromPlan(plan::Plan plan);

  const plan::Plan &getPlan() const { return plan; }
  cpu::TensorRef &tensor(int id) { return tensors[id]; }
  const cpu::TensorRef &tensor(int id) const { return tensors[id]; }
  std::vector<PreparedInstruction> &instructions() { return prepared; }
  const Arena &gpuArena() const { return gpu; }

private:
  llvm::Error layOut();
  llvm::Error prepare();

  plan::Plan plan;
  Arena gpu;
  std::vector<cpu::TensorRef> tensors;
  std::vector<PreparedInstruction> prepared;
};

} // namespace zinc::rt

#endif
