//===- PytorchNames.cpp - The PyTorch parameter behind each initializer ---===//
#include "compiler/frontend/PytorchNames.h"
#include "compiler/frontend/OnnxUtil.h"
#include "zinc/support/DType.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include <functional>

namespace zinc::frontend {

namespace {
/// Where an initializer is read: the nodes and operand slots.
struct Reads {
  llvm::SmallVector<std::pair<const onnx::NodeProto *, int>, 2> uses;
};
} // namespace

/// The module path of a node the exporter named `/a.0/b/c/Op` (`a.0.b.c`),
/// or empty for a name of another form.
static std::string moduleScope(llvm::StringRef nodeName) {
  if (!nodeName.consume_front("/"))
    return "";
  llvm::SmallVector<llvm::StringRef, 8> parts;
  nodeName.split(parts, '/');
  if (parts.size() < 2)
    return "";
  std::string scope;
  for (llvm::StringRef p : llvm::makeArrayRef(parts).drop_back()) {
    if (p.empty())
      return "";
    if (!scope.empty())
      scope += '.';
    scope += p.str();
  }
  return scope;
}

void namePytorchParameters(const onnx::GraphProto &graph,
                           llvm::MutableArrayRef<InitializerInfo> initializers,
                           const WarningHandler &warn) {
  llvm::StringMap<Reads> reads;
  llvm::StringSet<> names;
  for (const InitializerInfo &init : initializers) {
    names.insert(init.ref.name);
    if (llvm::StringRef(init.ref.name).startswith("onnx::"))
      reads[init.ref.name];
  }
  if (reads.empty())
    return;
  // Subgraphs (If branches) count too: a read there is a read of another
  // kind than a MatMul's weight, and keeps the initializer's name.
  std::function<void(const onnx::GraphProto &)> scan =
      [&](const onnx::GraphProto &g) {
        for (const onnx::NodeProto &node : g.node()) {
          for (int i = 0; i < node.input_size(); ++i) {
            auto it = reads.find(node.input(i));
            if (it != reads.end())
              it->second.uses.push_back({&node, &g == &graph ? i : -1});
          }
          for (const onnx::AttributeProto &a : node.attribute()) {
            if (a.has_g())
              scan(a.g());
            for (const onnx::GraphProto &sub : a.graphs())
              scan(sub);
          }
        }
      };
  scan(graph);
  llvm::StringSet<> taken;
  unsigned unnamed = 0;
  std::string firstUnnamed;
  for (InitializerInfo &init : initializers) {
    auto it = reads.find(init.ref.name);
    if (it == reads.end())
      continue;
    llvm::Optional<DType> dtype = dtypeFromOnnx(init.elemType);
    if (!dtype || !isFloatDType(*dtype))
      continue;
    // Read only through Identity nodes whose outputs carry a parameter's
    // name (how an exporter aliases an initializer under the name of the
    // parameter it holds): that name, the smallest when tied aliases give
    // several.
    std::string alias;
    bool aliased = !it->second.uses.empty();
    for (const auto &[node, operand] : it->second.uses) {
      if (node->op_type() != "Identity" || operand != 0 ||
          node->output_size() != 1) {
        aliased = false;
        break;
      }
      llvm::StringRef out = node->output(0);
      if (!out.empty() && !out.contains("::") && !out.startswith("/") &&
          (alias.empty() || out < alias))
        alias = out.str();
    }
    if (aliased && !alias.empty() && !names.count(alias) &&
        taken.insert(alias).second) {
      init.ref.pytorchName = alias;
      continue;
    }
    std::string scope;
    bool linear = init.shape.size() == 2 && !it->second.uses.empty();
    for (const auto &[node, operand] : it->second.uses) {
      std::string s = moduleScope(node->name());
      if (node->op_type() != "MatMul" || operand != 1 || s.empty() ||
          (!scope.empty() && s != scope)) {
        linear = false;
        break;
      }
      scope = s;
    }
    std::string key = scope + ".weight";
    if (linear && !names.count(key) && taken.insert(key).second) {
      init.ref.pytorchName = key;
      init.ref.pytorchTransposed = true;
      continue;
    }
    if (!unnamed++)
      firstUnnamed = init.ref.name;
  }
  if (unnamed)
    warn(llvm::Twine(unnamed) + " float initializer" +
         (unnamed == 1 ? "" : "s") +
         " made by PyTorch's exporter (constants it folded, such as '" +
         firstUnnamed +
         "') hold no PyTorch tensor zinc can name: saved weights keep their "
         "ONNX "
         "names, which load_state_dict would report as unexpected keys, and "
         "zinc-run --weight-names=pytorch leaves them out (export with "
         "do_constant_folding=False to keep every parameter's name)");
}

} // namespace zinc::frontend
