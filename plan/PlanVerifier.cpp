//===- PlanVerifier.cpp - Memory and synchronisation invariants of a plan -===//
//
// An independent checker: it reads the plan as data and shares nothing with
// the passes that produced it. The contract it checks is the comment above
// `message Instruction` in Plan.proto.
//
//===----------------------------------------------------------------------===//
#include "zinc/plan/PlanVerifier.h"
#include "zinc/ops/OpEffects.h"
#include "zinc/plan/PlanNames.h"
#include "zinc/support/DType.h"
#include "zinc/support/Error.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include <algorithm>
#include <array>
#include <future>
#include <map>
#include <queue>
#include <set>
#include <unordered_map>
#include <vector>

namespace zinc::plan {
namespace {

constexpr int kNumTiers = 3;
constexpr int kNumStreams = 6;
constexpr uint64_t kDefaultAlignment = 64;

llvm::Error fail(const llvm::Twine &msg) {
  return makeError("plan verifier: " + msg);
}


std::string range(uint64_t lo, uint64_t hi) {
  return "[" + std::to_string(lo) + ", " + std::to_string(hi) + ")";
}

bool isOp(const Instruction &inst, llvm::StringRef op) {
  return inst.domain() == "zinc" && inst.op() == op;
}

/// Whether an instruction updates its input `index` in place, as its op
/// declares in Ops.def (zinc/ops/OpEffects.h).
bool inputIsWritten(const Instruction &inst, int index) {
  return opEffects(inst.domain(), inst.op()).writesInput(index);
}

/// Whether the instruction needs input `index`'s bytes to hold its value:
/// inputs it reads do, and so do those it updates in place (an optimizer
/// step reads the weight it updates), except a CopyInto's destination,
/// which it overwrites whole.
bool inputValueIsUsed(const Instruction &inst, int index) {
  return !(inputIsWritten(inst, index) && isOp(inst, "CopyInto") && index == 1);
}

/// Facts several checks need. Built before any check runs, so it must not
/// trust the plan: it only indexes what it has bounds-checked.
struct PlanFacts {
  explicit PlanFacts(const Plan &p);

  const Plan &plan;
  /// The first TierInfo of each known tier, or null.
  std::array<const TierInfo *, kNumTiers> tiers{};
  /// Tensors read after the step (graph outputs, the loss): live until its end.
  std::vector<bool> readAfterStep;
  /// Tensors whose bytes must survive the whole step: inputs (fed before
  /// it), initializers and training state (kept across steps); kernel
  /// workspaces are held for the whole step too.
  std::vector<bool> persistent;

  uint64_t alignment(int tier) const {
    const TierInfo *info = tiers[tier];
    return info && info->alignment() ? info->alignment() : kDefaultAlignment;
  }
  /// alignTo(max(size_bytes, 1), alignment), saturating.
  uint64_t extent(const Tensor &t) const {
    uint64_t a = alignment(t.tier());
    uint64_t size = std::max<uint64_t>(t.size_bytes(), 1);
    if (size > UINT64_MAX - (a - 1))
      return UINT64_MAX;
    return (size + a - 1) / a * a;
  }
  std::string tensor(int id) const {
    const Tensor &t = plan.tensors(id);
    return t.name().empty() ? "tensor %" + std::to_string(id)
                            : "tensor '" + t.name() + "'";
  }
  /// "node 'MatMul_3'", or "instruction #4" when it has no name.
  std::string node(int i) const {
    const Instruction &inst = plan.instructions(i);
    return inst.name().empty() ? "instruction #" + std::to_string(i)
                               : "node '" + inst.name() + "'";
  }
  /// "node 'MatMul_3' (MatMul)"
  std::string describe(int i) const {
    const Instruction &inst = plan.instructions(i);
    return node(i) + " (" + (inst.domain().empty() ? "" : inst.domain() + ".") +
           inst.op() + ")";
  }
};

PlanFacts::PlanFacts(const Plan &p) : plan(p) {
  for (const TierInfo &info : p.tiers())
    if (Tier_IsValid(info.tier()) && !tiers[info.tier()])
      tiers[info.tier()] = &info;
  int n = p.tensors_size();
  readAfterStep.assign(n, false);
  persistent.assign(n, false);
  for (int id = 0; id < n; ++id) {
    Role r = p.tensors(id).role();
    persistent[id] = r == ROLE_INPUT || r == ROLE_PARAMETER ||
                     r == ROLE_CONSTANT || r == ROLE_STATE ||
                     r == ROLE_MODEL_STATE;
  }
  for (uint32_t id : p.inputs())
    if (id < static_cast<uint32_t>(n))
      persistent[id] = true;
  // A stream's kernels use its workspace at any time during the step.
  for (const Workspace &w : p.workspaces())
    if (w.tensor() < static_cast<uint32_t>(n))
      persistent[w.tensor()] = true;
  for (uint32_t id : p.outputs())
    if (id < static_cast<uint32_t>(n))
      readAfterStep[id] = true;
  if (p.loss() >= 0 && p.loss() < n)
    readAfterStep[p.loss()] = true;
}

//===----------------------------------------------------------------------===//
// 1. Well-formedness
//===----------------------------------------------------------------------===//

llvm::Error checkTierInfos(const Plan &p, const PlanFacts &) {
  std::array<bool, kNumTiers> seen{};
  for (const TierInfo &info : p.tiers()) {
    if (!Tier_IsValid(info.tier()))
      return fail("a TierInfo names unknown tier " + llvm::Twine(info.tier()));
    if (seen[info.tier()])
      return fail("the " + tierName(info.tier()) +
                  " tier has two TierInfo entries");
    seen[info.tier()] = true;
  }
  return llvm::Error::success();
}

llvm::Error checkTensors(const Plan &p, const PlanFacts &f) {
  for (int i = 0; i < p.tensors_size(); ++i) {
    const Tensor &t = p.tensors(i);
    if (t.id() != static_cast<uint32_t>(i))
      return fail("tensor '" + t.name() + "' is listed at index " +
                  llvm::Twine(i) + " but has id " + llvm::Twine(t.id()) +
                  "; tensor ids must be 0, 1, 2, ... in order");
    // Messages are built only on failure: plans have 10^5 tensors.
    auto what = [&] { return f.tensor(i); };
    if (!Role_IsValid(t.role()))
      return fail(what() + " has unknown role " + llvm::Twine(t.role()));
    if (!Tier_IsValid(t.tier()))
      return fail(what() + " is in unknown tier " + llvm::Twine(t.tier()));
    if (!f.tiers[t.tier()])
      return fail(what() + " is in the " + tierName(t.tier()) +
                  " tier, which has no TierInfo");
    auto dtype = dtypeFromOnnx(t.dtype());
    if (!dtype)
      return fail(what() + " has dtype " + llvm::Twine(t.dtype()) +
                  ", which zinc cannot hold");
    std::vector<int64_t> shape(t.shape().begin(), t.shape().end());
    auto type = [&] { return dtypeName(*dtype).str() + formatShape(shape); };
    if (llvm::any_of(shape, [](int64_t d) { return d < 0; }))
      return fail(what() + " has a negative dimension: " + type());
    bool empty = llvm::any_of(shape, [](int64_t d) { return d == 0; });
    unsigned __int128 bytes = empty ? 0 : dtypeSize(*dtype);
    bool tooBig = false;
    for (int64_t d : shape) {
      if (empty)
        break;
      bytes *= static_cast<uint64_t>(d);
      if (bytes > UINT64_MAX) {
        tooBig = true;
        break;
      }
    }
    if (tooBig)
      return fail(what() + " is " + type() + ", more than 2^64 bytes");
    if (static_cast<uint64_t>(bytes) != t.size_bytes())
      return fail(what() + " has size_bytes " + llvm::Twine(t.size_bytes()) +
                  " but " + type() + " is " +
                  llvm::Twine(static_cast<uint64_t>(bytes)) + " bytes");
  }
  return llvm::Error::success();
}

llvm::Error checkOperandIds(const Plan &p, const PlanFacts &f) {
  int n = p.tensors_size();
  std::string count = " (the plan has " + std::to_string(n) + " tensors)";
  for (int i = 0; i < p.instructions_size(); ++i) {
    const Instruction &inst = p.instructions(i);
    if (!Stream_IsValid(inst.stream()))
      return fail(f.describe(i) + " is on unknown stream " +
                  llvm::Twine(inst.stream()));
    for (int k = 0; k < inst.inputs_size(); ++k)
      if (inst.inputs(k) < -1 || inst.inputs(k) >= n)
        return fail(f.describe(i) + " input " + llvm::Twine(k) + " is tensor " +
                    llvm::Twine(inst.inputs(k)) + ", out of range" + count);
    for (int k = 0; k < inst.outputs_size(); ++k)
      if (inst.outputs(k) < -1 || inst.outputs(k) >= n)
        return fail(f.describe(i) + " output " + llvm::Twine(k) +
                    " is tensor " + llvm::Twine(inst.outputs(k)) +
                    ", out of range" + count);
    auto where = [&] {
      return f.describe(i) + " on the " + streamName(inst.stream()) +
             " stream";
    };
    if (isOp(inst, "Copy") &&
        (inst.inputs_size() != 1 || inst.outputs_size() != 1 ||
         inst.inputs(0) < 0 || inst.outputs(0) < 0))
      return fail(where() + " must have one input (the source) and one output");
    if (isOp(inst, "CopyInto") &&
        (inst.inputs_size() != 2 || inst.outputs_size() != 0 ||
         inst.inputs(0) < 0 || inst.inputs(1) < 0))
      return fail(where() +
                  " must have two inputs (source, destination) and no outputs");
  }
  for (int k = 0; k < p.inputs_size(); ++k)
    if (p.inputs(k) >= static_cast<uint32_t>(n))
      return fail("graph input " + llvm::Twine(k) + " is tensor " +
                  llvm::Twine(p.inputs(k)) + ", out of range" + count);
  for (int k = 0; k < p.outputs_size(); ++k)
    if (p.outputs(k) >= static_cast<uint32_t>(n))
      return fail("graph output " + llvm::Twine(k) + " is tensor " +
                  llvm::Twine(p.outputs(k)) + ", out of range" + count);
  if (p.loss() < -1 || p.loss() >= n)
    return fail("the loss is tensor " + llvm::Twine(p.loss()) +
                ", out of range" + count);
  if (p.has_loss_scaling()) {
    if (p.loss_scaling().scale() >= static_cast<uint32_t>(n))
      return fail("the loss scale is tensor " +
                  llvm::Twine(p.loss_scaling().scale()) + ", out of range" +
                  count);
    if (p.loss_scaling().found_inf() >= static_cast<uint32_t>(n))
      return fail("the loss scaling's found_inf is tensor " +
                  llvm::Twine(p.loss_scaling().found_inf()) + ", out of range" +
                  count);
  }
  return llvm::Error::success();
}

llvm::Error checkWorkspaces(const Plan &p, const PlanFacts &f) {
  int n = p.tensors_size();
  std::array<bool, kNumStreams> seen{};
  std::vector<bool> isWorkspace(n, false);
  for (const Workspace &w : p.workspaces()) {
    if (!Stream_IsValid(w.stream()))
      return fail("a workspace is on unknown stream " +
                  llvm::Twine(w.stream()));
    std::string what = "the " + streamName(w.stream()) + " stream's workspace";
    if (w.tensor() >= static_cast<uint32_t>(n))
      return fail(what + " is tensor " + llvm::Twine(w.tensor()) +
                  ", out of range (the plan has " + llvm::Twine(n) +
                  " tensors)");
    if (seen[w.stream()])
      return fail("the " + streamName(w.stream()) +
                  " stream has two workspaces");
    seen[w.stream()] = true;
    Stream s = w.stream();
    if (s != STREAM_COMPUTE && s != STREAM_COLLECTIVE && s != STREAM_HOST)
      return fail(what + ": the " + streamName(s) + " stream runs no kernels");
    int want = s == STREAM_HOST ? TIER_CPU : TIER_GPU;
    int tier = p.tensors(w.tensor()).tier();
    if (tier != want)
      return fail(what + " " + f.tensor(w.tensor()) + " is in the " +
                  tierName(tier) + " tier; the " + streamName(s) +
                  " stream's kernels work in the " + tierName(want) + " tier");
    isWorkspace[w.tensor()] = true;
  }
  // Scratch shared by a stream's kernels holds nothing an instruction could
  // name.
  for (int i = 0; i < p.instructions_size(); ++i) {
    const Instruction &inst = p.instructions(i);
    for (auto ids :
         {llvm::ArrayRef<int>(inst.inputs().data(), inst.inputs_size()),
          llvm::ArrayRef<int>(inst.outputs().data(), inst.outputs_size())})
      for (int id : ids)
        if (id >= 0 && isWorkspace[id])
          return fail(f.describe(i) + " names " + f.tensor(id) +
                      ", a stream's workspace, as an operand");
  }
  return llvm::Error::success();
}

llvm::Error checkEventIds(const Plan &p, const PlanFacts &f) {
  uint32_t numEvents = p.num_events();
  std::string count =
      " (the plan has " + std::to_string(numEvents) + " events)";
  std::unordered_map<uint32_t, int> signaller;
  for (int i = 0; i < p.instructions_size(); ++i) {
    const Instruction &inst = p.instructions(i);
    for (uint32_t e : inst.wait_events())
      if (e >= numEvents)
        return fail(f.describe(i) + " waits on event " + llvm::Twine(e) +
                    ", out of range" + count);
    for (uint32_t e : inst.signal_events()) {
      if (e >= numEvents)
        return fail(f.describe(i) + " signals event " + llvm::Twine(e) +
                    ", out of range" + count);
      auto [it, inserted] = signaller.emplace(e, i);
      if (!inserted)
        return fail("event " + llvm::Twine(e) + " is signalled by both " +
                    (it->second == i
                         ? f.describe(i) + " (twice)"
                         : f.describe(it->second) + " and " + f.describe(i)));
    }
  }
  // Every event in [0, num_events) exactly once: the smallest unsignalled.
  std::vector<uint32_t> ids;
  ids.reserve(signaller.size());
  for (const auto &[e, i] : signaller)
    ids.push_back(e);
  std::sort(ids.begin(), ids.end());
  uint32_t missing = 0;
  while (missing < ids.size() && ids[missing] == missing)
    ++missing;
  if (missing < numEvents)
    return fail("event " + llvm::Twine(missing) + " is never signalled" +
                count);
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// 2. Residency per stream
//===----------------------------------------------------------------------===//

llvm::Error checkResidency(const Plan &p, const PlanFacts &f) {
  auto tierOf = [&](int id) { return static_cast<int>(p.tensors(id).tier()); };
  for (int i = 0; i < p.instructions_size(); ++i) {
    const Instruction &inst = p.instructions(i);
    Stream s = inst.stream();
    auto where = [&] {
      return f.describe(i) + " on the " + streamName(s) + " stream";
    };
    bool copy = isOp(inst, "Copy"), copyInto = isOp(inst, "CopyInto");
    if (s == STREAM_COMPUTE || s == STREAM_COLLECTIVE || s == STREAM_HOST) {
      int want = s == STREAM_HOST ? TIER_CPU : TIER_GPU;
      for (int k = 0; k < inst.inputs_size(); ++k) {
        int id = inst.inputs(k);
        if (id >= 0 && tierOf(id) != want)
          return fail(where() +
                      (inputIsWritten(inst, k) ? " updates " : " reads ") +
                      f.tensor(id) + " which is in the " +
                      tierName(tierOf(id)) + " tier");
      }
      for (int id : inst.outputs())
        if (id >= 0 && tierOf(id) != want)
          return fail(where() + " writes " + f.tensor(id) + " which is in the " +
                      tierName(tierOf(id)) + " tier");
    } else if (!copy && !copyInto) {
      return fail(where() + ": the " + streamName(s) +
                  " stream runs only zinc.Copy and zinc.CopyInto");
    }
    if (!copy && !copyInto)
      continue;
    // Operand counts were checked with the operand ids.
    int src = inst.inputs(0), dst = copy ? inst.outputs(0) : inst.inputs(1);
    int from = tierOf(src), to = tierOf(dst);
    const char *rule = nullptr;
    if (s == STREAM_H2D && !(from == TIER_CPU && to == TIER_GPU))
      rule = "h2d copies cpu -> gpu";
    else if (s == STREAM_D2H && !(from == TIER_GPU && to == TIER_CPU))
      rule = "d2h copies gpu -> cpu";
    else if (s == STREAM_NVME && !(from == TIER_NVME && to == TIER_CPU) &&
             !(from == TIER_CPU && to == TIER_NVME))
      rule = "nvme copies nvme -> cpu or cpu -> nvme";
    if (rule)
      return fail(where() + " copies " + f.tensor(src) + " in the " +
                  tierName(from) + " tier to " + f.tensor(dst) + " in the " +
                  tierName(to) + " tier; " + rule);
    uint64_t srcBytes = p.tensors(src).size_bytes(),
             dstBytes = p.tensors(dst).size_bytes();
    if (srcBytes != dstBytes)
      return fail(where() + " copies " + f.tensor(src) + " (" +
                  llvm::Twine(srcBytes) + " bytes) to " + f.tensor(dst) + " (" +
                  llvm::Twine(dstBytes) + " bytes); the sizes must be equal");
  }
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// 3. Placement
//===----------------------------------------------------------------------===//

llvm::Error checkPlacement(const Plan &p, const PlanFacts &f) {
  for (const TierInfo &info : p.tiers())
    if (info.capacity() && info.peak() > info.capacity())
      return fail("the " + tierName(info.tier()) + " tier's peak " +
                  llvm::Twine(info.peak()) + " exceeds its capacity " +
                  llvm::Twine(info.capacity()));
  for (int id = 0; id < p.tensors_size(); ++id) {
    const Tensor &t = p.tensors(id);
    uint64_t align = f.alignment(t.tier());
    std::string tier = tierName(t.tier());
    if (t.offset() % align)
      return fail(f.tensor(id) + " is at offset " + llvm::Twine(t.offset()) +
                  " of the " + tier +
                  " tier, not a multiple of its alignment " +
                  llvm::Twine(align));
    uint64_t extent = f.extent(t), peak = f.tiers[t.tier()]->peak();
    if (t.offset() > peak || extent > peak - t.offset()) {
      uint64_t end =
          t.offset() > UINT64_MAX - extent ? UINT64_MAX : t.offset() + extent;
      return fail(f.tensor(id) + " occupies " + range(t.offset(), end) +
                  " of the " + tier + " tier, past its peak " +
                  llvm::Twine(peak));
    }
  }
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// 4. No overlap in time and space
//===----------------------------------------------------------------------===//

llvm::Error checkNoOverlap(const Plan &p, const PlanFacts &f) {
  int n = p.tensors_size();
  int64_t numInsts = p.instructions_size();
  int64_t lastInst = std::max<int64_t>(numInsts - 1, 0);
  std::vector<int64_t> first(n, INT64_MAX), last(n, -1);
  for (int64_t i = 0; i < numInsts; ++i) {
    const Instruction &inst = p.instructions(i);
    for (auto ids :
         {llvm::ArrayRef<int>(inst.inputs().data(), inst.inputs_size()),
          llvm::ArrayRef<int>(inst.outputs().data(), inst.outputs_size())})
      for (int id : ids)
        if (id >= 0) {
          first[id] = std::min(first[id], i);
          last[id] = std::max(last[id], i);
        }
  }
  struct Live {
    int64_t begin, end;
    uint64_t lo, hi;
    int id;
  };
  std::array<std::vector<Live>, kNumTiers> byTier;
  for (int id = 0; id < n; ++id) {
    const Tensor &t = p.tensors(id);
    Live live{first[id], last[id], t.offset(), t.offset() + f.extent(t), id};
    if (f.persistent[id] || (f.readAfterStep[id] && last[id] < 0)) {
      live.begin = 0;
      live.end = lastInst;
    } else if (f.readAfterStep[id]) {
      // Nothing before its first write matters; after it, the bytes must
      // survive to the end of the step, where the runtime reads them.
      live.end = lastInst;
    } else if (last[id] < 0) {
      continue; // Never touched: holds nothing.
    }
    byTier[t.tier()].push_back(live);
  }

  for (int tier = 0; tier < kNumTiers; ++tier) {
    std::vector<Live> &lives = byTier[tier];
    std::sort(lives.begin(), lives.end(), [](const Live &a, const Live &b) {
      return a.begin != b.begin ? a.begin < b.begin : a.id < b.id;
    });
    // Live tensors by offset; disjoint by construction, so a newcomer can
    // only collide with its neighbours.
    std::set<std::pair<uint64_t, size_t>> active;
    using Ending = std::pair<int64_t, size_t>;
    std::priority_queue<Ending, std::vector<Ending>, std::greater<Ending>>
        endings;
    for (size_t k = 0; k < lives.size(); ++k) {
      const Live &cur = lives[k];
      while (!endings.empty() && endings.top().first < cur.begin) {
        active.erase({lives[endings.top().second].lo, endings.top().second});
        endings.pop();
      }
      auto next = active.lower_bound({cur.lo, 0});
      const Live *clash = nullptr;
      if (next != active.begin() && lives[std::prev(next)->second].hi > cur.lo)
        clash = &lives[std::prev(next)->second];
      else if (next != active.end() && lives[next->second].lo < cur.hi)
        clash = &lives[next->second];
      if (clash) {
        const Live &a = clash->id < cur.id ? *clash : cur;
        const Live &b = clash->id < cur.id ? cur : *clash;
        bool wholeStep = f.persistent[a.id] && f.persistent[b.id];
        std::string when =
            wholeStep || numInsts == 0
                ? std::string("for the whole step")
                : "at " + f.describe(static_cast<int>(cur.begin));
        return fail("tensors '" + p.tensors(a.id).name() + "' " +
                    range(a.lo, a.hi) + " and '" + p.tensors(b.id).name() +
                    "' " + range(b.lo, b.hi) + " of the " + tierName(tier) +
                    " tier overlap and are both live " + when);
      }
      active.insert({cur.lo, k});
      endings.push({cur.end, k});
    }
  }
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// 5. Event order
//===----------------------------------------------------------------------===//

/// The instruction that signals each event (exactly one, after check 1).
std::vector<int> signallers(const Plan &p) {
  std::vector<int> by(p.num_events(), -1);
  for (int i = 0; i < p.instructions_size(); ++i)
    for (uint32_t e : p.instructions(i).signal_events())
      by[e] = i;
  return by;
}

llvm::Error checkEventOrder(const Plan &p, const PlanFacts &f) {
  std::vector<int> signaller = signallers(p);
  for (int i = 0; i < p.instructions_size(); ++i) {
    const Instruction &inst = p.instructions(i);
    for (uint32_t e : inst.wait_events()) {
      int j = signaller[e];
      auto event = [&] {
        return f.describe(i) + " on the " + streamName(inst.stream()) +
               " stream waits on event " + std::to_string(e);
      };
      if (j == i)
        return fail(event() + ", which it signals itself");
      if (j > i)
        return fail(event() + ", which " + f.describe(j) + " signals later");
      if (p.instructions(j).stream() == inst.stream())
        return fail(
            event() + ", which " + f.describe(j) +
            " signals on the same stream; events order different streams "
            "(a wrong stream assignment?)");
    }
  }
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// 6. Happens-before of conflicting accesses; reads of written bytes
//===----------------------------------------------------------------------===//

using Clock = std::array<uint32_t, kNumStreams>;

/// One instruction's access to one tensor.
struct Access {
  int inst = -1; // -1: none
  int tensor = -1;
  int stream = 0;
  uint32_t seq = 0; // position on its stream, from 1
  bool valid() const { return inst >= 0; }
  bool operator==(const Access &o) const {
    return inst == o.inst && tensor == o.tensor;
  }
};

/// What the bytes of a segment last saw: the last write, and since then
/// the last read on each stream (a later read on one stream is ordered
/// after its earlier ones, so it stands for them all).
struct Segment {
  uint64_t end = 0;
  Access write;
  std::array<Access, kNumStreams> reads;
  bool sameState(const Segment &o) const {
    return write == o.write && reads == o.reads;
  }
};

/// Shadow memory of one tier: disjoint segments keyed by their start, in the
/// style of a race detector, so each access costs the segments it covers.
class TierShadow {
public:
  TierShadow(const PlanFacts &f, int tier) : f(f), tier(tier) {}

  /// Checks that every earlier conflicting access on [lo, hi) happens
  /// before `a`, whose stream's clock is `clock`, and, when `a` uses the
  /// bytes' value, that they were last written for its own tensor (or that
  /// it is persistent, loaded before the step); then records `a`.
  llvm::Error access(uint64_t lo, uint64_t hi, const Access &a,
                     const Clock &clock, bool write, bool usesValue) {
    if (lo >= hi)
      return llvm::Error::success();
    split(lo);
    split(hi);
    uint64_t cur = lo;
    auto it = segments.lower_bound(lo);
    auto firstSeg = segments.end();
    while (cur < hi) {
      if (it == segments.end() || it->first > cur) {
        Segment fresh;
        fresh.end = it == segments.end() ? hi : std::min(hi, it->first);
        it = segments.emplace_hint(it, cur, fresh);
      }
      if (firstSeg == segments.end())
        firstSeg = it;
      Segment &seg = it->second;
      if (seg.write.valid() && !ordered(seg.write, a, clock))
        return race(a, write, lo, hi, seg.write, /*earlierWrote=*/true);
      if (write)
        for (const Access &r : seg.reads)
          if (r.valid() && !ordered(r, a, clock))
            return race(a, write, lo, hi, r, /*earlierWrote=*/false);
      if (usesValue && !f.persistent[a.tensor] &&
          (!seg.write.valid() || seg.write.tensor != a.tensor))
        return unwritten(a, write, it, hi);
      if (write) {
        seg.write = a;
        seg.reads = {};
      } else {
        seg.reads[a.stream] = a;
      }
      cur = seg.end;
      ++it;
    }
    // Coalesce neighbours that now say the same (every segment of a write).
    auto prev = firstSeg;
    if (prev != segments.begin())
      prev = std::prev(prev);
    while (prev != segments.end()) {
      auto next = std::next(prev);
      if (next == segments.end() || next->first > hi)
        break;
      if (prev->second.end == next->first &&
          prev->second.sameState(next->second)) {
        prev->second.end = next->second.end;
        segments.erase(next);
      } else {
        prev = next;
      }
    }
    return llvm::Error::success();
  }

private:
  void split(uint64_t at) {
    auto it = segments.upper_bound(at);
    if (it == segments.begin())
      return;
    --it;
    if (it->first < at && at < it->second.end) {
      Segment tail = it->second;
      it->second.end = at;
      segments.emplace_hint(std::next(it), at, tail);
    }
  }

  static bool ordered(const Access &earlier, const Access &later,
                      const Clock &clock) {
    return earlier.inst == later.inst || earlier.stream == later.stream ||
           clock[earlier.stream] >= earlier.seq;
  }

  llvm::Error race(const Access &a, bool write, uint64_t lo, uint64_t hi,
                   const Access &earlier, bool earlierWrote) {
    const Tensor &t = f.plan.tensors(earlier.tensor);
    uint64_t from = std::max(lo, t.offset());
    uint64_t to = std::min(hi, t.offset() + t.size_bytes());
    return fail(
        f.node(a.inst) + " on " + streamName(a.stream) +
        (write ? " writes bytes " : " reads bytes ") + range(from, to) +
        " of the " + tierName(tier) + " tier that " + f.node(earlier.inst) +
        " on " + streamName(earlier.stream) +
        (earlierWrote ? " wrote" : " read") +
        ", with no event ordering them (" + f.tensor(a.tensor) +
        (a.tensor == earlier.tensor ? "" : " and " + f.tensor(earlier.tensor)) +
        ")");
  }

  /// `a` uses the value of bytes from `seg` on that hold no value of its
  /// tensor: never written, or last written for another tensor sharing them.
  llvm::Error unwritten(const Access &a, bool write,
                        std::map<uint64_t, Segment>::const_iterator seg,
                        uint64_t hi) {
    std::string what = f.describe(a.inst) + " on the " + streamName(a.stream) +
                       " stream" + (write ? " updates " : " reads ") +
                       f.tensor(a.tensor);
    const char *hint = " (a missing producer or prefetch?)";
    const Access &last = seg->second.write;
    if (!last.valid())
      return fail(what + " which nothing writes before it" + hint);
    // Name all the bytes that one write left, not one segment of them.
    uint64_t from = seg->first, to = seg->second.end;
    for (auto next = std::next(seg);
         next != segments.end() && next->first == to && to < hi &&
         next->second.write == last;
         ++next)
      to = next->second.end;
    return fail(what + " whose bytes " + range(from, std::min(to, hi)) +
                " of the " + tierName(tier) + " tier were last written for " +
                f.tensor(last.tensor) + " by " + f.node(last.inst) +
                "; nothing writes " + f.tensor(a.tensor) + " before it" + hint);
  }

  const PlanFacts &f;
  int tier;
  std::map<uint64_t, Segment> segments;
};

llvm::Error checkHappensBefore(const Plan &p, const PlanFacts &f) {
  std::vector<TierShadow> shadows;
  for (int tier = 0; tier < kNumTiers; ++tier)
    shadows.emplace_back(f, tier);
  std::array<Clock, kNumStreams> streamClock{};
  std::vector<Clock> eventClock(p.num_events());
  // Written by an instruction of the step (outputs, in-place updates).
  std::vector<bool> written(p.tensors_size(), false);
  auto touch = [&](int id, const Access &a, const Clock &clock, bool write,
                   bool usesValue) {
    const Tensor &t = p.tensors(id);
    Access at = a;
    at.tensor = id;
    if (write)
      written[id] = true;
    return shadows[t.tier()].access(t.offset(), t.offset() + t.size_bytes(), at,
                                    clock, write, usesValue);
  };
  for (int i = 0; i < p.instructions_size(); ++i) {
    const Instruction &inst = p.instructions(i);
    int s = inst.stream();
    Clock &clock = streamClock[s];
    for (uint32_t e : inst.wait_events())
      for (int k = 0; k < kNumStreams; ++k)
        clock[k] = std::max(clock[k], eventClock[e][k]);
    ++clock[s];
    Access a;
    a.inst = i;
    a.stream = s;
    a.seq = clock[s];
    for (int k = 0; k < inst.inputs_size(); ++k)
      if (inst.inputs(k) >= 0 && !inputIsWritten(inst, k))
        if (llvm::Error err = touch(inst.inputs(k), a, clock, /*write=*/false,
                                    /*usesValue=*/true))
          return err;
    for (int k = 0; k < inst.inputs_size(); ++k)
      if (inst.inputs(k) >= 0 && inputIsWritten(inst, k))
        if (llvm::Error err = touch(inst.inputs(k), a, clock, /*write=*/true,
                                    inputValueIsUsed(inst, k)))
          return err;
    for (int id : inst.outputs())
      if (id >= 0)
        if (llvm::Error err = touch(id, a, clock, /*write=*/true,
                                    /*usesValue=*/false))
          return err;
    for (uint32_t e : inst.signal_events())
      eventClock[e] = clock;
  }
  // The runtime reads the graph outputs and the loss after the step: the
  // step must compute them (the no-overlap check keeps them intact since).
  for (int id = 0; id < p.tensors_size(); ++id)
    if (f.readAfterStep[id] && !f.persistent[id] && !written[id] &&
        p.tensors(id).size_bytes() != 0)
      return fail(std::string(id == p.loss() ? "the loss " : "graph output ") +
                  f.tensor(id) +
                  " is read after the step, but nothing writes it");
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// 7. Updates of persistent tensors reach their homes
//===----------------------------------------------------------------------===//

/// The value a tensor holds: a version of a persistent tensor's value (the
/// one its home had at the start of the step is version 0), or one computed
/// in this step from other values (home -1).
struct Holds {
  int home = -1;
  uint32_t version = 0;
};

/// Follows values through copies in plan order (a valid sequential order,
/// and the happens-before check has shown conflicting accesses keep it):
/// zinc.Copy(src) -> dst and zinc.CopyInto(src, dst) make dst hold what src
/// holds, an in-place update of a tensor holding a version of H makes a new
/// version of H. A persistent tensor's own bytes must hold the latest
/// version of its value whenever it is read and when the step ends, when
/// the next step reads it.
class ValueFlow {
public:
  explicit ValueFlow(const PlanFacts &f) : f(f), p(f.plan) {
    int n = p.tensors_size();
    holds.resize(n);
    latest.assign(n, 0);
    updater.assign(n, -1);
    updated.assign(n, -1);
    storer.assign(n, -1);
    for (int id = 0; id < n; ++id)
      if (f.persistent[id])
        holds[id] = {id, 0};
  }

  llvm::Error run() {
    for (int i = 0; i < p.instructions_size(); ++i)
      if (llvm::Error err = visit(i))
        return err;
    return checkEnd();
  }

private:
  llvm::Error visit(int i) {
    const Instruction &inst = p.instructions(i);
    bool copy = isOp(inst, "Copy");
    if (copy || isOp(inst, "CopyInto")) {
      int src = inst.inputs(0);
      int dst = copy ? inst.outputs(0) : inst.inputs(1);
      if (llvm::Error err = checkCurrent(i, src))
        return err;
      store(i, dst, holds[src]);
      return llvm::Error::success();
    }
    for (int k = 0; k < inst.inputs_size(); ++k)
      if (inst.inputs(k) >= 0 && !inputIsWritten(inst, k))
        if (llvm::Error err = checkCurrent(i, inst.inputs(k)))
          return err;
    for (int k = 0; k < inst.inputs_size(); ++k)
      if (inst.inputs(k) >= 0 && inputIsWritten(inst, k))
        if (llvm::Error err = update(i, inst.inputs(k)))
          return err;
    for (int id : inst.outputs())
      if (id >= 0)
        store(i, id, Holds{});
    return llvm::Error::success();
  }

  /// Instruction `i` makes `dst` hold `value`.
  void store(int i, int dst, Holds value) {
    if (!f.persistent[dst]) {
      holds[dst] = value;
      return;
    }
    storer[dst] = i;
    if (value.home == dst) { // A write-back.
      holds[dst] = value;
      return;
    }
    // Bytes computed from other values (BatchNorm's running statistics, a
    // refreshed copy of another tensor): the new value of dst.
    holds[dst] = {dst, ++latest[dst]};
    updater[dst] = i;
    updated[dst] = dst;
  }

  /// Instruction `i` updates tensor `id` in place.
  llvm::Error update(int i, int id) {
    Holds &h = holds[id];
    if (h.home < 0)
      return llvm::Error::success(); // A value of this step.
    if (h.version != latest[h.home])
      return stale(i, id, "updates ");
    h.version = ++latest[h.home];
    updater[h.home] = i;
    updated[h.home] = id;
    if (id == h.home)
      storer[id] = i;
    return llvm::Error::success();
  }

  /// Instruction `i` reads tensor `id`: if persistent, its latest value.
  llvm::Error checkCurrent(int i, int id) {
    if (f.persistent[id] && holds[id].version != latest[id])
      return stale(i, id, "reads ");
    return llvm::Error::success();
  }

  /// How the latest version of `home` came about, and why its bytes do not
  /// hold it.
  std::string latestUpdate(int home) const {
    int by = updater[home], what = updated[home];
    if (what != home)
      return f.describe(by) + " updated its copy " + f.tensor(what) +
             " and no write-back reaches " + f.tensor(home) +
             " in between (a missing write-back?)";
    return f.describe(by) + " updated it, then " + f.describe(storer[home]) +
           " wrote an older copy back over it";
  }

  /// Instruction `i` uses `id`, which does not hold the latest version.
  llvm::Error stale(int i, int id, llvm::StringRef verb) {
    const Instruction &inst = p.instructions(i);
    std::string who =
        f.describe(i) + " on the " + streamName(inst.stream()) + " stream ";
    int home = holds[id].home;
    if (id == home)
      return fail(who + verb + f.tensor(id) +
                  ", which is stale: " + latestUpdate(home));
    int by = updater[home], what = updated[home];
    return fail(who + "updates " + f.tensor(id) + ", a copy of " +
                f.tensor(home) + " taken before " + f.describe(by) +
                " updated " +
                (what == home ? std::string("it") : f.tensor(what)) +
                "; one of the two updates is lost");
  }

  /// When the step ends, every persistent tensor holds its latest value;
  /// the earliest update that is lost is reported.
  llvm::Error checkEnd() {
    int lost = -1;
    for (int id = 0; id < p.tensors_size(); ++id)
      if (f.persistent[id] && holds[id].version != latest[id] &&
          (lost < 0 || updater[id] < updater[lost]))
        lost = id;
    if (lost < 0)
      return llvm::Error::success();
    int what = updated[lost];
    if (what == lost)
      return fail(f.tensor(lost) + " ends the step holding an older value: " +
                  latestUpdate(lost));
    return fail(f.describe(updater[lost]) + " updates " + f.tensor(what) +
                ", a copy of " + f.tensor(lost) + " in the " +
                tierName(p.tensors(lost).tier()) +
                " tier, but no write-back reaches " + f.tensor(lost) +
                " before the step ends");
  }

  const PlanFacts &f;
  const Plan &p;
  std::vector<Holds> holds;
  /// Per persistent tensor: its value's latest version, the instruction
  /// that made it and the tensor that instruction wrote, and the last
  /// instruction that stored into the tensor's own bytes.
  std::vector<uint32_t> latest;
  std::vector<int> updater, updated, storer;
};

llvm::Error checkWriteBacks(const Plan &, const PlanFacts &f) {
  return ValueFlow(f).run();
}

using Check = llvm::Error (*)(const Plan &, const PlanFacts &);

/// In order: the later checks assume what the earlier ones establish (ids
/// in range, copies with their operands, a TierInfo per tier used, one
/// signaller per event, events signalled before they are waited on).
const Check wellFormed[] = {checkTierInfos, checkTensors, checkOperandIds,
                            checkWorkspaces, checkEventIds};
/// Memory and ordering assume only well-formedness of each other, so on a
/// big plan they run side by side.
const Check memory[] = {checkResidency, checkPlacement, checkNoOverlap};
const Check ordering[] = {checkEventOrder, checkHappensBefore,
                          checkWriteBacks};
/// Plans of this many instructions check ordering on a second thread.
constexpr int kParallelInstructions = 1 << 14;

llvm::Error runChecks(llvm::ArrayRef<Check> checks, const Plan &plan,
                      const PlanFacts &facts) {
  for (Check check : checks)
    if (llvm::Error err = check(plan, facts))
      return err;
  return llvm::Error::success();
}

} // namespace

llvm::Error verifyPlan(const Plan &plan) {
  PlanFacts facts(plan);
  if (llvm::Error err = runChecks(wellFormed, plan, facts))
    return err;
  // Ordering on a second thread for big plans; for small ones it runs
  // after memory, and not at all when memory already failed.
  bool parallel = plan.instructions_size() >= kParallelInstructions;
  std::future<llvm::Error> ordered =
      std::async(parallel ? std::launch::async : std::launch::deferred,
                 [&] { return runChecks(ordering, plan, facts); });
  // The first failure in check order, as a sequential run reports it.
  if (llvm::Error memoryErr = runChecks(memory, plan, facts)) {
    if (parallel)
      llvm::consumeError(ordered.get());
    return memoryErr;
  }
  return ordered.get();
}

} // namespace zinc::plan
