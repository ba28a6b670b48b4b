//===- EmitPlan.cpp - Lowering a scheduled graph to the plan protobuf -----===//
#include "zinc/passes/EmitPlan.h"
#include "zinc/passes/NodeFlops.h"
#include "zinc/passes/OptimizerOps.h"
#include "zinc/passes/TierLayout.h"
#include "zinc/passes/UpdatePhase.h"
#include "llvm/Support/MathExtras.h"
#include "zinc/support/Error.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include <array>
#include <future>
#include <memory>
#include <tuple>

namespace zinc {

static plan::Role toPlanRole(ir::ValueRole r) {
  switch (r) {
  case ir::ValueRole::Input: return plan::ROLE_INPUT;
  case ir::ValueRole::Parameter: return plan::ROLE_PARAMETER;
  case ir::ValueRole::Constant: return plan::ROLE_CONSTANT;
  case ir::ValueRole::Activation: return plan::ROLE_ACTIVATION;
  case ir::ValueRole::State: return plan::ROLE_STATE;
  case ir::ValueRole::ModelState: return plan::ROLE_MODEL_STATE;
  }
  return plan::ROLE_ACTIVATION;
}

static void emitAttribute(const Attribute &a, plan::Attribute &out) {
  out.set_name(a.name);
  switch (a.kind) {
  case AttrKind::Int: out.set_kind(plan::ATTR_INT); out.set_i(a.i); break;
  case AttrKind::Float: out.set_kind(plan::ATTR_FLOAT); out.set_f(a.f); break;
  case AttrKind::String: out.set_kind(plan::ATTR_STRING); out.set_s(a.s); break;
  case AttrKind::Ints:
    out.set_kind(plan::ATTR_INTS);
    for (int64_t v : a.ints)
      out.add_ints(v);
    break;
  case AttrKind::Floats:
    out.set_kind(plan::ATTR_FLOATS);
    for (double v : a.floats)
      out.add_floats(v);
    break;
  case AttrKind::Strings:
    out.set_kind(plan::ATTR_STRINGS);
    for (const std::string &v : a.strings)
      out.add_strings(v);
    break;
  case AttrKind::Tensor: {
    out.set_kind(plan::ATTR_TENSOR);
    plan::TensorValue *t = out.mutable_tensor();
    t->set_dtype(static_cast<int>(a.tensor.dtype));
    for (int64_t d : a.tensor.shape)
      t->add_shape(d);
    t->set_data(a.tensor.bytes.data(), a.tensor.bytes.size());
    break;
  }
  }
}

static plan::Tier toPlanTier(ir::Tier t) {
  switch (t) {
  case ir::Tier::Gpu: return plan::TIER_GPU;
  case ir::Tier::Cpu: return plan::TIER_CPU;
  case ir::Tier::Nvme: return plan::TIER_NVME;
  }
  return plan::TIER_GPU;
}

static plan::Stream toPlanStream(ir::Stream s) {
  switch (s) {
  case ir::Stream::Compute: return plan::STREAM_COMPUTE;
  case ir::Stream::H2D: return plan::STREAM_H2D;
  case ir::Stream::D2H: return plan::STREAM_D2H;
  case ir::Stream::Nvme: return plan::STREAM_NVME;
  case ir::Stream::Collective: return plan::STREAM_COLLECTIVE;
  case ir::Stream::Host: return plan::STREAM_HOST;
  }
  return plan::STREAM_COMPUTE;
}

namespace {
/// An instruction's access to a value's bytes, as the range [lo, hi) of its
/// tier's shadow segments.
struct SegmentAccess {
  ir::Tier tier;
  bool write;
  uint32_t lo, hi;
};

/// Over n slots: raise a range to at least v, and the maximum of a range,
/// both O(log n). A raise tags the nodes that cover its range exactly and
/// lifts the maxima of their ancestors; a query reads the maxima of the
/// nodes covering its range and the tags of their ancestors.
class RangeMax {
public:
  explicit RangeMax(size_t n)
      : leaves(llvm::PowerOf2Ceil(std::max<size_t>(n, 1))), tag(2 * leaves, -1),
        below(2 * leaves, -1) {}

  void raise(size_t lo, size_t hi, int32_t v) {
    for (size_t a = lo + leaves, b = hi + leaves; a < b; a >>= 1, b >>= 1) {
      if (a & 1)
        lift(a++, v);
      if (b & 1)
        lift(--b, v);
    }
    // Every ancestor of those nodes holds leaf lo or leaf hi - 1.
    for (size_t a = (lo + leaves) >> 1; a; a >>= 1)
      below[a] = std::max(below[a], v);
    for (size_t a = (hi - 1 + leaves) >> 1; a; a >>= 1)
      below[a] = std::max(below[a], v);
  }

  /// -1 when nothing in [lo, hi) was raised.
  int32_t max(size_t lo, size_t hi) const {
    int32_t result = -1;
    for (size_t a = lo + leaves, b = hi + leaves; a < b; a >>= 1, b >>= 1) {
      if (a & 1)
        result = std::max(result, below[a++]);
      if (b & 1)
        result = std::max(result, below[--b]);
    }
    for (size_t a = (lo + leaves) >> 1; a; a >>= 1)
      result = std::max(result, tag[a]);
    for (size_t a = (hi - 1 + leaves) >> 1; a; a >>= 1)
      result = std::max(result, tag[a]);
    return result;
  }

private:
  void lift(size_t node, int32_t v) {
    tag[node] = std::max(tag[node], v);
    below[node] = std::max(below[node], v);
  }

  size_t leaves;
  /// tag: raised over the node's whole range; below: the most raised
  /// anywhere in it.
  std::vector<int32_t> tag, below;
};

constexpr int kStreams = 6;
constexpr int kTiers = 3;

/// Shadow memory of one tier: for each stream, the latest instruction that
/// wrote and that touched (read or wrote) each byte, over the segments
/// between the tier's tensor boundaries.
class TierShadow {
public:
  /// Each access's [begin, end) must start and end at one of `bounds`.
  explicit TierShadow(std::vector<uint64_t> bounds)
      : bounds(std::move(bounds)) {
    llvm::sort(this->bounds);
    this->bounds.erase(std::unique(this->bounds.begin(), this->bounds.end()),
                       this->bounds.end());
  }

  /// The segments of bytes [begin, end): looked up once per value, not
  /// once per access or stream queried.
  std::pair<uint32_t, uint32_t> segments(uint64_t begin, uint64_t end) const {
    return {static_cast<uint32_t>(llvm::lower_bound(bounds, begin) - bounds.begin()),
            static_cast<uint32_t>(llvm::lower_bound(bounds, end) - bounds.begin())};
  }

  /// The latest instruction on stream `t` whose access conflicts with `a`
  /// (overlaps it, one of them writing), or -1.
  int64_t latestConflict(const SegmentAccess &a, int t) const {
    const std::unique_ptr<RangeMax> &by = a.write ? touched[t] : written[t];
    if (!by)
      return -1;
    return by->max(a.lo, a.hi);
  }

  void record(const SegmentAccess &a, int stream, int32_t inst) {
    auto get = [&](std::unique_ptr<RangeMax> &by) -> RangeMax & {
      if (!by)
        by = std::make_unique<RangeMax>(bounds.size());
      return *by;
    };
    get(touched[stream]).raise(a.lo, a.hi, inst);
    if (a.write)
      get(written[stream]).raise(a.lo, a.hi, inst);
  }

private:

  std::vector<uint64_t> bounds;
  /// Per stream, made when the stream first touches the tier.
  std::array<std::unique_ptr<RangeMax>, kStreams> written, touched;
};
} // namespace

/// The event edges for the plan's instructions, in program order: what
/// each instruction waits for and signals.
struct StreamEvents {
  /// (instruction, event), in the order the instructions list them.
  std::vector<std::pair<uint32_t, uint32_t>> waits, signals;
  unsigned numEvents = 0;
};

/// Event edges: each instruction waits for the latest earlier instruction on
/// every other stream whose bytes conflict with its own (overlapping, one of
/// them writing: data dependences and the reuse of a buffer alike), unless
/// its stream already waited on that one or a later one of that stream.
/// The latest conflict on each stream comes from per-tier shadow memory, so
/// an instruction costs O(log n) per operand and stream, however far back
/// the conflict is; a stream that issued nothing since the instruction's
/// stream last waited on it is not asked (most of them, most of the time).
static StreamEvents synchronizeStreams(const ir::Graph &g, const TierLayout &layout) {
  StreamEvents events;
  std::vector<const ir::Node *> order;
  order.reserve(g.numNodes());
  for (const auto &n : g.nodes())
    order.push_back(&*n);
  // Each value's bytes, once: a value is accessed by its writer and each
  // reader, and they all see the same range.
  struct ValueBytes {
    uint64_t begin = 0, end = 0;
    uint32_t lo = 0, hi = 0;
    bool seen = false;
  };
  std::vector<ValueBytes> bytesOf(g.valueIdBound());
  std::vector<const ir::Value *> touched;
  std::vector<uint64_t> bounds[kTiers];
  auto note = [&](const ir::Value *v) {
    ValueBytes &b = bytesOf[v->id];
    if (b.seen)
      return;
    b.seen = true;
    b.begin = layout.offsets.lookup(v);
    b.end = b.begin + llvm::alignTo(std::max<uint64_t>(v->byteSize(), 1),
                                    tierAlignment(v->tier));
    touched.push_back(v);
    unsigned tier = static_cast<unsigned>(v->tier);
    bounds[tier].push_back(b.begin);
    bounds[tier].push_back(b.end);
  };
  for (const ir::Node *n : order) {
    for (const ir::Value *in : n->inputs)
      if (in)
        note(in);
    for (const ir::Value *out : n->outputs)
      if (out)
        note(out);
  }
  std::vector<TierShadow> shadows;
  for (std::vector<uint64_t> &b : bounds)
    shadows.emplace_back(std::move(b));
  for (const ir::Value *v : touched) {
    ValueBytes &b = bytesOf[v->id];
    std::tie(b.lo, b.hi) =
        shadows[static_cast<unsigned>(v->tier)].segments(b.begin, b.end);
  }
  // Instruction i's accesses are spans[first[i], first[i + 1]).
  std::vector<SegmentAccess> spans;
  std::vector<uint32_t> first;
  first.reserve(order.size() + 1);
  for (const ir::Node *n : order) {
    first.push_back(static_cast<uint32_t>(spans.size()));
    auto add = [&](const ir::Value *v, bool write) {
      const ValueBytes &b = bytesOf[v->id];
      spans.push_back({v->tier, write, b.lo, b.hi});
    };
    const OpEffects &effects = n->effects(); // A table lookup: once a node.
    for (unsigned k = 0; k < n->inputs.size(); ++k)
      if (n->inputs[k])
        add(n->inputs[k], effects.writesInput(k));
    for (const ir::Value *out : n->outputs)
      if (out)
        add(out, true);
  }
  first.push_back(static_cast<uint32_t>(spans.size()));
  auto accessesOf = [&](size_t i) {
    return llvm::makeArrayRef(spans).slice(first[i], first[i + 1] - first[i]);
  };

  using Clock = std::array<int64_t, kStreams>;
  // waited[s][t]: the latest instruction of stream t that stream s is
  // already ordered after.
  std::array<Clock, kStreams> waited;
  for (Clock &w : waited)
    w.fill(-1);
  std::vector<int> eventOf(order.size(), -1);
  // clock[i]: what instruction i is ordered after, per stream (a vector
  // clock taken when it was issued).
  std::vector<Clock> clock(order.size());
  // lastOf[t]: stream t's latest instruction so far. A stream with none
  // since s last waited on it cannot hold a conflict s must wait for.
  Clock lastOf;
  lastOf.fill(-1);
  for (size_t i = 0; i < order.size(); ++i) {
    int s = static_cast<int>(order[i]->stream);
    int64_t latest[kStreams];
    for (int t = 0; t < kStreams; ++t) {
      latest[t] = -1;
      if (t != s && lastOf[t] > waited[s][t])
        for (const SegmentAccess &a : accessesOf(i))
          latest[t] = std::max(
              latest[t],
              shadows[static_cast<unsigned>(a.tier)].latestConflict(a, t));
    }
    for (int t = 0; t < kStreams; ++t) {
      int64_t j = latest[t];
      if (t == s || j <= waited[s][t])
        continue;
      if (eventOf[j] < 0) {
        eventOf[j] = events.numEvents++;
        events.signals.push_back({static_cast<uint32_t>(j), static_cast<uint32_t>(eventOf[j])});
      }
      events.waits.push_back({static_cast<uint32_t>(i), static_cast<uint32_t>(eventOf[j])});
      // Everything that instruction was ordered after is ordered too.
      for (int u = 0; u < kStreams; ++u)
        waited[s][u] = std::max(waited[s][u], clock[j][u]);
      waited[s][t] = j;
    }
    waited[s][s] = i;
    lastOf[s] = i;
    clock[i] = waited[s];
    for (const SegmentAccess &a : accessesOf(i))
      shadows[static_cast<unsigned>(a.tier)].record(a, s,
                                                    static_cast<int32_t>(i));
  }
  return events;
}

/// One byte tensor per stream whose kernels need scratch, where the layout
/// put it, named in the plan's workspaces.
static void addWorkspaces(const TierLayout &layout, plan::Plan &p) {
  for (unsigned s = 0; s < kNumStreams; ++s) {
    uint64_t bytes = layout.workspaceBytes[s];
    if (!bytes)
      continue;
    auto stream = static_cast<ir::Stream>(s);
    plan::Tensor *t = p.add_tensors();
    t->set_id(p.tensors_size() - 1);
    t->set_name("zinc.workspace." + ir::streamName(stream).str());
    t->set_dtype(static_cast<int>(DType::U8));
    t->add_shape(static_cast<int64_t>(bytes));
    t->set_role(plan::ROLE_ACTIVATION);
    t->set_tier(toPlanTier(workspaceTier(stream)));
    t->set_offset(layout.workspaceOffset[s]);
    t->set_size_bytes(bytes);
    plan::Workspace *w = p.add_workspaces();
    w->set_stream(toPlanStream(stream));
    w->set_tensor(t->id());
  }
}

llvm::Expected<plan::Plan> emitPlan(const ir::Graph &g, const EmitOptions &opts) {
  plan::Plan p;
  if (llvm::Error err = emitPlanInto(g, opts, p))
    return std::move(err);
  return p;
}

llvm::Error emitPlanInto(const ir::Graph &g, const EmitOptions &opts, plan::Plan &p) {
  p.set_producer("zinc-compile");
  p.set_model_path(g.modelPath);
  p.set_opset_version(g.opsetVersion);
  p.set_ranks(g.ranks);
  p.set_zero_stage(opts.zeroStage);
  llvm::DenseSet<const ir::Node *> updateOnly;
  if (opts.gradAccum > 1) {
    p.set_grad_accum(opts.gradAccum);
    updateOnly = passes::updateOnlyNodes(g);
  }
  p.set_mode(opts.mode);
  p.set_hw(opts.hw);
  p.set_hardware_json(opts.hardwareJson);
  p.set_loss(-1);

  TierLayout computed;
  if (!opts.layout)
    computed = computeTierLayout(g);
  const TierLayout &layout = opts.layout ? *opts.layout : computed;
  if (opts.gpuCapacity && layout.peak[0] > opts.gpuCapacity)
    return makeError("the plan needs " + llvm::Twine(layout.peak[0]) +
                     " bytes of gpu memory but the tier holds " +
                     llvm::Twine(opts.gpuCapacity) + "; use --gpu-mem=" +
                     llvm::Twine(layout.peak[0]) + " or more");

  // The events need only the order and the layout: on big graphs they are
  // found on a second thread while the instructions are written.
  constexpr size_t kNodesWorthAThread = 8192;
  std::future<StreamEvents> events = std::async(
      g.numNodes() >= kNodesWorthAThread ? std::launch::async : std::launch::deferred,
      [&] { return synchronizeStreams(g, layout); });

  // Plan tensor ids by value id.
  std::vector<int> ids(g.valueIdBound(), -1);
  auto idOf = [&](const ir::Value *v) { return v ? ids[v->id] : -1; };
  p.mutable_tensors()->Reserve(static_cast<int>(g.values().size()) + kNumStreams);
  p.mutable_instructions()->Reserve(static_cast<int>(g.numNodes()));
  for (const auto &v : g.values()) {
    int id = p.tensors_size();
    ids[v->id] = id;
    plan::Tensor *t = p.add_tensors();
    t->set_id(id);
    if (!opts.forSimulation)
      t->set_name(v->name);
    t->set_dtype(static_cast<int>(v->dtype));
    for (int64_t d : v->shape)
      t->add_shape(d);
    t->set_role(toPlanRole(v->role));
    if (v->init && !opts.forSimulation) {
      plan::InitializerSource *src = t->mutable_init();
      src->set_name(v->init->name);
      src->set_file(v->init->file);
      src->set_offset(v->init->offset);
      src->set_length(v->init->length);
      if (v->init->isSlice()) {
        for (int64_t d : v->init->wholeShape)
          src->add_whole_shape(d);
        src->set_slice_axis(static_cast<int32_t>(v->init->sliceAxis));
        src->set_slice_begin(v->init->sliceBegin);
      }
      if (!v->init->pytorchName.empty()) {
        src->set_pytorch_name(v->init->pytorchName);
        src->set_pytorch_transposed(v->init->pytorchTransposed);
      }
    }
    for (int64_t d : v->shardOf)
      t->add_shard_of(d);
    t->set_tier(toPlanTier(v->tier));
    t->set_offset(layout.offsets.lookup(v.get()));
    t->set_size_bytes(v->byteSize());
  }
  addWorkspaces(layout, p);
  for (const ir::Value *in : g.inputs())
    p.add_inputs(idOf(in));
  for (const ir::Value *out : g.outputs())
    p.add_outputs(idOf(out));
  if (opts.loss)
    p.set_loss(idOf(opts.loss));

  for (const auto &n : g.nodes()) {
    if (llvm::StringRef(n->opType) == "UpdateLossScale" && n->domain == "zinc" &&
        n->inputs.size() == 4 && n->inputs[0] && n->inputs[2]) {
      p.mutable_loss_scaling()->set_scale(idOf(n->inputs[0]));
      p.mutable_loss_scaling()->set_found_inf(idOf(n->inputs[2]));
    }
    plan::Instruction *inst = p.add_instructions();
    inst->set_name(n->name);
    inst->set_domain(n->domain);
    inst->set_op(n->opType);
    inst->set_stream(toPlanStream(n->stream));
    if (updateOnly.count(n))
      inst->set_update_only(true);
    if (n->stream == ir::Stream::Compute || n->stream == ir::Stream::Host)
      inst->set_flops(passes::estimateFlops(*n));
    for (const ir::Value *in : n->inputs)
      inst->add_inputs(idOf(in));
    for (const ir::Value *out : n->outputs)
      inst->add_outputs(idOf(out));
    if (!opts.forSimulation)
      for (const Attribute &a : n->attrs.all())
        emitAttribute(a, *inst->add_attrs());
  }

  StreamEvents found = events.get();
  for (auto [inst, event] : found.signals)
    p.mutable_instructions(inst)->add_signal_events(event);
  for (auto [inst, event] : found.waits)
    p.mutable_instructions(inst)->add_wait_events(event);
  p.set_num_events(found.numEvents);
  const uint64_t capacities[3] = {opts.gpuCapacity, opts.cpuCapacity, opts.nvmeCapacity};
  for (ir::Tier tier : {ir::Tier::Gpu, ir::Tier::Cpu, ir::Tier::Nvme}) {
    unsigned t = static_cast<unsigned>(tier);
    // The GPU tier is always described; the others when used.
    if (tier != ir::Tier::Gpu && !layout.peak[t])
      continue;
    plan::TierInfo *info = p.add_tiers();
    info->set_tier(toPlanTier(tier));
    info->set_capacity(capacities[t]);
    info->set_peak(layout.peak[t]);
    info->set_alignment(tierAlignment(tier));
  }
  return llvm::Error::success();
}

} // namespace zinc
