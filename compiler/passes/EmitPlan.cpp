//===- EmitPlan.cpp - Lowering a scheduled graph to the plan protobuf -----===//
#include "zinc/passes/EmitPlan.h"
#include "zinc/passes/NodeFlops.h"
#include "zinc/passes/OptimizerOps.h"
#include "zinc/passes/PlanEnums.h"
#include "zinc/passes/StreamEvents.h"
#include "zinc/passes/TierLayout.h"
#include "zinc/passes/UpdatePhase.h"
#include "llvm/Support/MathExtras.h"
#include "zinc/support/Error.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include <array>
#include <future>
#include <memory>

namespace zinc {

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
  std::future<StreamEvents> events = synchronizeStreamsAsync(g, layout);

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
    t->set_name(v->name);
    t->set_dtype(static_cast<int>(v->dtype));
    for (int64_t d : v->shape)
      t->add_shape(d);
    t->set_role(toPlanRole(v->role));
    if (v->init) {
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
  return p;
}

} // namespace zinc
