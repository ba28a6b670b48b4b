//===- PlanDump.cpp - Text and JSON views of a plan -----------------------===//
#include "zinc/plan/PlanNames.h"
#include "zinc/plan/PlanDump.h"
#include "zinc/support/DType.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include <map>

namespace zinc::plan {

static std::string roleName(int role) {
  return llvm::StringRef(Role_Name(static_cast<Role>(role))).drop_front(5).lower();
}
static std::string typeText(const Tensor &t) {
  auto dtype = dtypeFromOnnx(t.dtype());
  std::vector<int64_t> shape(t.shape().begin(), t.shape().end());
  return (dtype ? dtypeName(*dtype).str() : "?") + formatShape(shape);
}

/// The shape of the initializer a tile is a share of.
static std::string wholeShapeText(const InitializerSource &src) {
  std::vector<int64_t> shape(src.whole_shape().begin(), src.whole_shape().end());
  return formatShape(shape);
}

static void printAttribute(const Attribute &a, llvm::raw_ostream &os) {
  os << a.name() << "=";
  switch (a.kind()) {
  case ATTR_INT: os << a.i(); break;
  case ATTR_FLOAT: os << llvm::format("%g", a.f()); break;
  case ATTR_STRING: os << '"' << a.s() << '"'; break;
  case ATTR_INTS:
    os << "[" << llvm::join(llvm::map_range(a.ints(), [](int64_t v) { return std::to_string(v); }), ",") << "]";
    break;
  case ATTR_FLOATS: {
    os << "[";
    for (int i = 0; i < a.floats_size(); ++i)
      os << (i ? "," : "") << llvm::format("%g", a.floats(i));
    os << "]";
    break;
  }
  case ATTR_STRINGS: os << "[" << a.strings_size() << " strings]"; break;
  case ATTR_TENSOR: os << "<tensor " << a.tensor().data().size() << " bytes>"; break;
  default: break;
  }
}

template <typename Field> static llvm::json::Array toJsonArray(const Field &f) {
  llvm::json::Array a;
  for (auto v : f)
    a.push_back(static_cast<int64_t>(v));
  return a;
}

void dumpPlanText(const Plan &plan, llvm::raw_ostream &os) {
  os << "plan mode=" << plan.mode() << " opset=" << plan.opset_version()
     << " hw=" << plan.hw();
  if (plan.ranks() > 1)
    os << " ranks=" << plan.ranks() << " zero-stage=" << plan.zero_stage();
  if (plan.grad_accum() > 1)
    os << " grad-accum=" << plan.grad_accum();
  os << "\n";
  os << "model " << plan.model_path() << "\n";
  for (const TierInfo &t : plan.tiers())
    os << "tier " << tierName(t.tier()) << " capacity=" << t.capacity()
       << " peak=" << t.peak() << "\n";
  for (const Workspace &w : plan.workspaces())
    os << "workspace " << streamName(w.stream()) << " %" << w.tensor() << "\n";
  os << "\ntensors:\n";
  for (const Tensor &t : plan.tensors()) {
    os << llvm::format("  %%%-4u ", t.id()) << typeText(t) << " " << roleName(t.role())
       << " " << tierName(t.tier()) << "[" << t.offset() << ", +" << t.size_bytes()
       << "] \"" << t.name() << "\"";
    if (t.has_init())
      os << " init \"" << t.init().name() << "\""
         << (t.init().file().empty() ? "" : " external \"" + t.init().file() + "\"");
    if (t.has_init() && t.init().whole_shape_size())
      os << " tile of " << wholeShapeText(t.init()) << " at "
         << t.init().slice_begin() << " on axis " << t.init().slice_axis();
    if (t.shard_of_size())
      os << " shard of " << formatShape(std::vector<int64_t>(t.shard_of().begin(),
                                                              t.shard_of().end()));
    os << "\n";
  }
  // Group by stream, keeping plan order within each.
  std::map<int, std::vector<int>> byStream;
  for (int i = 0; i < plan.instructions_size(); ++i)
    byStream[plan.instructions(i).stream()].push_back(i);
  auto operand = [&](int id) {
    return id < 0 ? std::string("none") : "%" + std::to_string(id);
  };
  for (const auto &[stream, indices] : byStream) {
    os << "\nstream " << streamName(stream) << ":\n";
    for (int i : indices) {
      const Instruction &inst = plan.instructions(i);
      os << llvm::format("  %4d: ", i)
         << (inst.domain().empty() ? "" : inst.domain() + ".") << inst.op() << " \""
         << inst.name() << "\" ("
         << llvm::join(llvm::map_range(inst.inputs(), operand), ", ") << ") -> ("
         << llvm::join(llvm::map_range(inst.outputs(), operand), ", ") << ")";
      if (inst.attrs_size()) {
        os << " {";
        for (int k = 0; k < inst.attrs_size(); ++k) {
          if (k)
            os << ", ";
          printAttribute(inst.attrs(k), os);
        }
        os << "}";
      }
      for (uint32_t e : inst.wait_events())
        os << " wait(" << e << ")";
      for (uint32_t e : inst.signal_events())
        os << " signal(" << e << ")";
      if (inst.update_only())
        os << " update-only";
      os << "\n";
    }
  }
}

llvm::json::Value planToJson(const Plan &plan) {
  llvm::json::Array tiers, tensors, instructions, workspaces;
  for (const TierInfo &t : plan.tiers())
    tiers.push_back(llvm::json::Object{{"tier", tierName(t.tier())},
                                       {"capacity", t.capacity()},
                                       {"peak", t.peak()}});
  for (const Workspace &w : plan.workspaces())
    workspaces.push_back(llvm::json::Object{{"stream", streamName(w.stream())},
                                            {"tensor", w.tensor()}});
  for (const Tensor &t : plan.tensors()) {
    llvm::json::Object o{{"id", t.id()},
                         {"name", t.name()},
                         {"type", typeText(t)},
                         {"role", roleName(t.role())},
                         {"tier", tierName(t.tier())},
                         {"offset", t.offset()},
                         {"size_bytes", t.size_bytes()}};
    if (t.has_init())
      o["init"] = llvm::json::Object{{"name", t.init().name()},
                                     {"file", t.init().file()},
                                     {"offset", t.init().offset()},
                                     {"length", t.init().length()}};
    if (t.has_init() && t.init().whole_shape_size())
      o["tile_of"] = llvm::json::Object{
          {"shape", wholeShapeText(t.init())},
          {"axis", t.init().slice_axis()},
          {"begin", t.init().slice_begin()}};
    if (t.shard_of_size())
      o["shard_of"] = toJsonArray(t.shard_of());
    tensors.push_back(std::move(o));
  }
  for (const Instruction &inst : plan.instructions()) {
    llvm::json::Array attrs;
    for (const Attribute &a : inst.attrs()) {
      std::string text;
      llvm::raw_string_ostream os(text);
      printAttribute(a, os);
      attrs.push_back(os.str());
    }
    instructions.push_back(llvm::json::Object{
        {"name", inst.name()},
        {"update_only", inst.update_only()},
        {"op", inst.domain().empty() ? inst.op() : inst.domain() + "." + inst.op()},
        {"stream", streamName(inst.stream())},
        {"inputs", toJsonArray(inst.inputs())},
        {"outputs", toJsonArray(inst.outputs())},
        {"attrs", std::move(attrs)},
        {"wait", toJsonArray(inst.wait_events())},
        {"signal", toJsonArray(inst.signal_events())}});
  }
  return llvm::json::Object{{"mode", plan.mode()},
                            {"opset", plan.opset_version()},
                            {"hw", plan.hw()},
                            {"ranks", std::max(1u, plan.ranks())},
                            {"zero_stage", plan.zero_stage()},
                            {"grad_accum", std::max(1u, plan.grad_accum())},
                            {"model", plan.model_path()},
                            {"loss", plan.loss()},
                            {"inputs", toJsonArray(plan.inputs())},
                            {"outputs", toJsonArray(plan.outputs())},
                            {"tiers", std::move(tiers)},
                            {"workspaces", std::move(workspaces)},
                            {"tensors", std::move(tensors)},
                            {"instructions", std::move(instructions)}};
}

} // namespace zinc::plan
