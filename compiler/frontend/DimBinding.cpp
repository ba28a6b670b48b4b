//===- DimBinding.cpp - Binds symbolic dimensions to --dim values ---------===//
#include "compiler/frontend/DimBinding.h"
#include "zinc/support/Error.h"
#include <map>

namespace zinc::frontend {

/// Binds the dimensions of one declared value. Returns the name of the first
/// dimension that stays symbolic (empty if none).
static std::string bindValue(onnx::ValueInfoProto &vi,
                             const llvm::StringMap<int64_t> &dims,
                             llvm::StringSet<> &seen) {
  if (!vi.has_type() || !vi.type().has_tensor_type() ||
      !vi.type().tensor_type().has_shape())
    return "";
  std::string firstUnbound;
  for (onnx::TensorShapeProto::Dimension &d : *vi.mutable_type()
                                                   ->mutable_tensor_type()
                                                   ->mutable_shape()
                                                   ->mutable_dim()) {
    if (!d.has_dim_param())
      continue;
    seen.insert(d.dim_param());
    auto it = dims.find(d.dim_param());
    if (it != dims.end()) {
      d.set_dim_value(it->second); // clears dim_param: they share a oneof
      continue;
    }
    if (firstUnbound.empty())
      firstUnbound = d.dim_param();
  }
  return firstUnbound;
}

/// Forgets symbolic names nobody bound, so that what shape inference infers
/// replaces them instead of being merged with a name that means nothing.
static void clearUnbound(onnx::ValueInfoProto &vi, DimSymbols &cleared) {
  if (!vi.has_type() || !vi.type().has_tensor_type() ||
      !vi.type().tensor_type().has_shape())
    return;
  llvm::SmallVector<std::string, 4> names;
  bool any = false;
  for (onnx::TensorShapeProto::Dimension &d : *vi.mutable_type()
                                                   ->mutable_tensor_type()
                                                   ->mutable_shape()
                                                   ->mutable_dim()) {
    names.push_back(d.has_dim_param() ? d.dim_param() : "");
    if (d.has_dim_param()) {
      any = true;
      d.clear_dim_param();
    }
  }
  if (any)
    cleared[vi.name()] = std::move(names);
}

llvm::Error bindDimensions(onnx::GraphProto &graph,
                           const llvm::StringMap<int64_t> &dims,
                           const llvm::StringSet<> &initializerNames,
                           const WarningHandler &warn, DimSymbols &cleared) {
  // std::map: errors and warnings must come out in a deterministic order.
  std::map<std::string, int64_t> sorted;
  for (const auto &entry : dims) {
    if (entry.second < 1)
      return makeError("--dim " + entry.first() + "=" +
                       std::to_string(entry.second) +
                       ": a dimension must be at least 1");
    sorted.emplace(entry.first().str(), entry.second);
  }

  llvm::StringSet<> seen;
  for (onnx::ValueInfoProto &vi : *graph.mutable_input()) {
    std::string unbound = bindValue(vi, dims, seen);
    if (initializerNames.count(vi.name()))
      continue; // the initializer's own dims are what count
    if (!unbound.empty())
      return makeError("unbound dimension '" + unbound + "' (input '" +
                       vi.name() + "'); bind it with --dim " + unbound + "=N");
    const onnx::TypeProto &type = vi.type();
    if (!type.has_tensor_type())
      continue; // not a tensor: refused with the other type checks
    if (!type.tensor_type().has_shape())
      return makeError("input '" + vi.name() +
                       "' has no shape; declare one in the model");
    int index = 0;
    for (const auto &d : type.tensor_type().shape().dim()) {
      if (!d.has_dim_value() || d.dim_value() < 0)
        return makeError("input '" + vi.name() +
                         "' has no size for dimension " +
                         std::to_string(index) +
                         "; give it a size or a name to bind with --dim");
      ++index;
    }
  }
  for (onnx::ValueInfoProto &vi : *graph.mutable_output()) {
    bindValue(vi, dims, seen);
    clearUnbound(vi, cleared);
  }
  for (onnx::ValueInfoProto &vi : *graph.mutable_value_info()) {
    bindValue(vi, dims, seen);
    clearUnbound(vi, cleared);
  }

  for (const auto &entry : sorted)
    if (!seen.count(entry.first) && warn)
      warn("--dim " + entry.first + "=" + std::to_string(entry.second) +
           ": the model has no dimension named '" + entry.first + "'");
  return llvm::Error::success();
}

} // namespace zinc::frontend
