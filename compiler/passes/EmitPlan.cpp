//===- EmitPlan.cpp - Lowering a scheduled graph to the plan protobuf -----===//
#include "zinc/passes/EmitPlan.h"
#include "zinc/passes/ArenaLayout.h"
#include "zinc/support/Error.h"
#include "llvm/ADT/DenseMap.h"

namespace zinc {

static plan::Role toPlanRole(ir::ValueRole r) {
  switch (r) {
  case ir::ValueRole::Input: return plan::ROLE_INPUT;
  case ir::ValueRole::Parameter: return plan::ROLE_PARAMETER;
  case ir::ValueRole::Constant: return plan::ROLE_CONSTANT;
  case ir::ValueRole::Activation: return plan::ROLE_ACTIVATION;
  case ir::ValueRole::State: return plan::ROLE_STATE;
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

/// Live interval of every value over the instruction indices. Values the
/// step needs from start to end (inputs, initializers, outputs) span it all.
static std::vector<BufferInterval> liveIntervals(const ir::Graph &g) {
  int64_t last = std::max<int64_t>(0, static_cast<int64_t>(g.nodes().size()) - 1);
  llvm::DenseMap<const ir::Value *, size_t> index;
  std::vector<BufferInterval> intervals;
  for (const auto &v : g.values()) {
    index[v.get()] = intervals.size();
    bool persistent = v->role != ir::ValueRole::Activation;
    intervals.push_back({v->byteSize(), persistent ? 0 : last + 1,
                         persistent ? last : -1});
  }
  for (const ir::Value *out : g.outputs())
    intervals[index[out]].end = last;
  int64_t pos = 0;
  for (const auto &n : g.nodes()) {
    for (const ir::Value *out : n->outputs)
      if (out) {
        BufferInterval &iv = intervals[index[out]];
        iv.begin = std::min(iv.begin, pos);
        iv.end = std::max(iv.end, pos);
      }
    for (const ir::Value *in : n->inputs)
      if (in) {
        BufferInterval &iv = intervals[index[in]];
        iv.end = std::max(iv.end, pos);
      }
    ++pos;
  }
  for (BufferInterval &iv : intervals)
    if (iv.begin > iv.end) // Defined by nobody and used by nobody.
      iv.begin = iv.end = 0;
  return intervals;
}

llvm::Expected<plan::Plan> emitPlan(const ir::Graph &g, const EmitOptions &opts) {
  plan::Plan p;
  p.set_producer("zinc-compile");
  p.set_model_path(g.modelPath);
  p.set_opset_version(g.opsetVersion);
  p.set_mode(opts.mode);
  p.set_hw(opts.hw);
  p.set_loss(-1);

  std::vector<BufferInterval> intervals = liveIntervals(g);
  ArenaLayout layout = layoutArena(intervals);
  if (opts.gpuCapacity && layout.peak > opts.gpuCapacity)
    return makeError("the step needs " + llvm::Twine(layout.peak) +
                     " bytes of GPU memory but the GPU tier holds " +
                     llvm::Twine(opts.gpuCapacity) + "; use --gpu-mem=" +
                     llvm::Twine(layout.peak) + " or more");

  llvm::DenseMap<const ir::Value *, int> ids;
  for (const auto &v : g.values()) {
    int id = p.tensors_size();
    ids[v.get()] = id;
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
    }
    t->set_tier(plan::TIER_GPU);
    t->set_offset(layout.offsets[id]);
    t->set_size_bytes(v->byteSize());
  }
  for (const ir::Value *in : g.inputs())
    p.add_inputs(ids[in]);
  for (const ir::Value *out : g.outputs())
    p.add_outputs(ids[out]);
  if (opts.loss)
    p.set_loss(ids[opts.loss]);

  for (const auto &n : g.nodes()) {
    if (n->domain == "zinc" && n->opType == "UpdateLossScale" && n->inputs.size() == 4 &&
        n->inputs[0] && n->inputs[2]) {
      p.mutable_loss_scaling()->set_scale(ids[n->inputs[0]]);
      p.mutable_loss_scaling()->set_found_inf(ids[n->inputs[2]]);
    }
    plan::Instruction *inst = p.add_instructions();
    inst->set_name(n->name);
    inst->set_domain(n->domain);
    inst->set_op(n->opType);
    inst->set_stream(plan::STREAM_COMPUTE);
    for (const ir::Value *in : n->inputs)
      inst->add_inputs(in ? ids[in] : -1);
    for (const ir::Value *out : n->outputs)
      inst->add_outputs(out ? ids[out] : -1);
    for (const Attribute &a : n->attrs.all())
      emitAttribute(a, *inst->add_attrs());
  }

  plan::TierInfo *gpu = p.add_tiers();
  gpu->set_tier(plan::TIER_GPU);
  gpu->set_capacity(opts.gpuCapacity);
  gpu->set_peak(layout.peak);
  return p;
}

} // namespace zinc
