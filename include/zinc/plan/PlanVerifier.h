//===- PlanVerifier.h - The independent checker of a plan -----------------===//
//
// The compiler's passes decide tiers, offsets, streams and events; this
// checks their result as plain data, sharing no code with them, against the
// execution contract in Plan.proto. Each invariant is a separate check in
// PlanVerifier.cpp, run in order (later checks assume what earlier ones
// established), and the first violation is returned.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_PLAN_PLANVERIFIER_H
#define ZINC_PLAN_PLANVERIFIER_H

#include "Plan.pb.h"
#include "llvm/Support/Error.h"

namespace zinc::plan {

/// Checks, in order:
///  1. well-formedness: dense tensor ids, operand ids in range, known dtypes,
///     size_bytes = elements * dtype size, a TierInfo for every tier used,
///     every event id < num_events and signalled by exactly one instruction,
///     at most one workspace per kernel stream, in that stream's tier and
///     named by no instruction;
///  2. residency: compute and collective operands in the GPU tier, host
///     operands in the CPU tier, h2d/d2h/nvme instructions are zinc.Copy or
///     zinc.CopyInto between the tiers of their stream, of equal sizes;
///  3. placement: every tensor's [offset, offset + extent) inside
///     [0, peak] of its tier, offsets aligned, peak <= capacity;
///  4. no overlap in time and space: tensors of one tier whose live
///     intervals (plan order; persistent tensors and workspaces the whole
///     step) intersect
///     occupy disjoint extents;
///  5. event order: every event waited on is signalled by an earlier
///     instruction on another stream;
///  6. happens-before: conflicting accesses (same tier, overlapping bytes,
///     one a write) by different streams are ordered by events; and every
///     read (an in-place update reads too, a CopyInto's destination does
///     not) finds the bytes last written for the tensor it reads, so a
///     producer, a transfer or the weight loader wrote them before it:
///     persistent tensors hold their value from the start of the step,
///     other tensors only once written. Graph outputs and the loss that are
///     not persistent are written during the step;
///  7. write-backs: following values through zinc.Copy and zinc.CopyInto,
///     an in-place update of a copy of a persistent tensor (the host
///     optimizer's staged weight) reaches the persistent tensor's bytes
///     before anything reads them and before the step ends (the next step
///     reads them), and no update works on a copy taken before another.
/// Errors read "plan verifier: <what>", naming instructions and tensors.
llvm::Error verifyPlan(const Plan &plan);

} // namespace zinc::plan

#endif
