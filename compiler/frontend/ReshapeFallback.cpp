//===- ReshapeFallback.cpp - Reshape shapes onnx 1.12 leaves unknown ------===//
#include "compiler/frontend/ReshapeFallback.h"
#include "compiler/frontend/AttributeConversion.h"
#include "compiler/frontend/OnnxUtil.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/Optional.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include <algorithm>
#include <cstring>

namespace zinc::frontend {

/// Reshape's rules: 0 copies the input dimension (unless allowzero), -1
/// takes what is left. None when the target is inconsistent with the input;
/// onnx's checks or the static-shape error then report the node.
static llvm::Optional<llvm::SmallVector<int64_t, 4>>
reshapeTarget(llvm::ArrayRef<int64_t> input, llvm::ArrayRef<int64_t> target,
              bool allowZero) {
  llvm::SmallVector<int64_t, 4> out;
  int inferred = -1;
  int64_t known = 1;
  for (size_t i = 0; i < target.size(); ++i) {
    int64_t d = target[i];
    if (d == 0 && !allowZero) {
      if (i >= input.size())
        return llvm::None;
      d = input[i];
    } else if (d == -1) {
      if (inferred >= 0)
        return llvm::None;
      inferred = i;
      out.push_back(-1);
      continue;
    } else if (d < 0) {
      return llvm::None;
    }
    known *= d;
    out.push_back(d);
  }
  int64_t total = 1;
  for (int64_t d : input)
    total *= d;
  if (inferred >= 0) {
    if (known == 0 || total % known)
      return llvm::None;
    out[inferred] = total / known;
  } else if (known != total) {
    return llvm::None;
  }
  return out;
}

using IntValues = llvm::SmallVector<int64_t, 4>;

/// The values of an int32/int64 tensor held in the model, flattened.
static llvm::Optional<IntValues> intValues(const onnx::TensorProto &t) {
  llvm::Expected<TensorData> data = convertTensor(t);
  if (!data) {
    llvm::consumeError(data.takeError());
    return llvm::None;
  }
  IntValues out;
  if (data->dtype == DType::I64) {
    out.resize(data->bytes.size() / 8);
    std::memcpy(out.data(), data->bytes.data(), out.size() * 8);
  } else if (data->dtype == DType::I32) {
    for (size_t i = 0; i + 4 <= data->bytes.size(); i += 4) {
      int32_t v;
      std::memcpy(&v, data->bytes.data() + i, 4);
      out.push_back(v);
    }
  } else {
    return llvm::None;
  }
  return out;
}

static llvm::Optional<int64_t> applyArith(llvm::StringRef op, int64_t a,
                                          int64_t b) {
  if (op == "Add")
    return a + b;
  if (op == "Sub")
    return a - b;
  if (op == "Mul")
    return a * b;
  if (op == "Div" && b != 0)
    return a / b;
  return llvm::None;
}

/// Carries known shape values through the integer ops that compute Reshape
/// targets in opset-13 exports, where onnx 1.12 propagates through Shape and
/// Gather but not through Mul-13 and the ops after it. Adds what it learns
/// to `data`; values are flattened (a scalar is one value).
static void propagateShapeArithmetic(const onnx::GraphProto &graph,
                                     PropagatedData &data) {
  llvm::StringMap<IntValues> known;
  for (const auto &entry : data) {
    IntValues v;
    for (const auto &d : entry.second.dim()) {
      if (!d.has_dim_value())
        break;
      v.push_back(d.dim_value());
    }
    if (v.size() == static_cast<size_t>(entry.second.dim_size()))
      known[entry.first] = v;
  }
  for (const onnx::TensorProto &t : graph.initializer())
    if (t.data_location() != onnx::TensorProto::EXTERNAL &&
        numElements(llvm::SmallVector<int64_t, 4>(t.dims().begin(),
                                                  t.dims().end())) <= 64)
      if (llvm::Optional<IntValues> v = intValues(t))
        known[t.name()] = *v;

  auto get = [&](const std::string &name) -> const IntValues * {
    auto it = known.find(name);
    return it == known.end() ? nullptr : &it->second;
  };
  for (const onnx::NodeProto &node : graph.node()) {
    if (!isDefaultDomain(node.domain()) || node.output_size() < 1 ||
        known.count(node.output(0)))
      continue;
    llvm::StringRef op = node.op_type();
    llvm::Optional<IntValues> result;
    if (op == "Constant") {
      for (const onnx::AttributeProto &a : node.attribute())
        if (a.name() == "value" && a.has_t())
          result = intValues(a.t());
    } else if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") {
      const IntValues *a = get(node.input(0));
      const IntValues *b = node.input_size() > 1 ? get(node.input(1)) : nullptr;
      if (a && b &&
          (a->size() == b->size() || a->size() == 1 || b->size() == 1)) {
        size_t n = std::max(a->size(), b->size());
        IntValues out;
        for (size_t i = 0; i < n; ++i) {
          llvm::Optional<int64_t> v = applyArith(
              op, (*a)[a->size() == 1 ? 0 : i], (*b)[b->size() == 1 ? 0 : i]);
          if (!v)
            break;
          out.push_back(*v);
        }
        if (out.size() == n)
          result = out;
      }
    } else if (op == "Unsqueeze" || op == "Squeeze" || op == "Identity" ||
               op == "Cast") {
      if (const IntValues *a = get(node.input(0)))
        result = *a;
    } else if (op == "Concat") {
      IntValues out;
      bool all = true;
      for (const std::string &in : node.input()) {
        const IntValues *a = get(in);
        if (!a) {
          all = false;
          break;
        }
        out.append(a->begin(), a->end());
      }
      if (all)
        result = out;
    } else if (op == "Gather" && node.input_size() == 2) {
      const IntValues *a = get(node.input(0));
      const IntValues *idx = get(node.input(1));
      bool axisZero = true;
      for (const onnx::AttributeProto &attr : node.attribute())
        if (attr.name() == "axis" && attr.i() != 0)
          axisZero = false;
      if (a && idx && axisZero) {
        IntValues out;
        for (int64_t i : *idx) {
          int64_t j = i < 0 ? i + static_cast<int64_t>(a->size()) : i;
          if (j < 0 || j >= static_cast<int64_t>(a->size()))
            break;
          out.push_back((*a)[j]);
        }
        if (out.size() == idx->size())
          result = out;
      }
    }
    if (!result)
      continue;
    known[node.output(0)] = *result;
    onnx::TensorShapeProto &shape = data[node.output(0)];
    shape.clear_dim();
    for (int64_t v : *result)
      shape.add_dim()->set_dim_value(v);
  }
}

bool inferReshapesFromPropagatedData(onnx::GraphProto &graph,
                                     PropagatedData &data) {
  propagateShapeArithmetic(graph, data);
  llvm::StringMap<const onnx::TypeProto *> types = collectValueTypes(graph);
  bool changed = false;
  for (const onnx::NodeProto &node : graph.node()) {
    if (node.op_type() != "Reshape" || !isDefaultDomain(node.domain()) ||
        node.input_size() != 2 || node.output_size() != 1)
      continue;
    const std::string &out = node.output(0);
    auto outType = types.find(out);
    if (outType != types.end() && staticShape(*outType->second))
      continue;
    auto inType = types.find(node.input(0));
    if (inType == types.end())
      continue;
    llvm::Optional<llvm::SmallVector<int64_t, 4>> input =
        staticShape(*inType->second);
    auto target = data.find(node.input(1));
    if (!input || target == data.end())
      continue;
    llvm::SmallVector<int64_t, 4> dims;
    for (const auto &d : target->second.dim()) {
      if (!d.has_dim_value())
        break;
      dims.push_back(d.dim_value());
    }
    if (dims.size() != static_cast<size_t>(target->second.dim_size()))
      continue;
    bool allowZero = false;
    for (const onnx::AttributeProto &a : node.attribute())
      if (a.name() == "allowzero")
        allowZero = a.i() != 0;
    llvm::Optional<llvm::SmallVector<int64_t, 4>> shape =
        reshapeTarget(*input, dims, allowZero);
    if (!shape)
      continue;

    onnx::ValueInfoProto *vi = nullptr;
    for (onnx::ValueInfoProto &existing : *graph.mutable_value_info())
      if (existing.name() == out)
        vi = &existing;
    for (onnx::ValueInfoProto &existing : *graph.mutable_output())
      if (existing.name() == out)
        vi = &existing;
    if (!vi) {
      vi = graph.add_value_info();
      vi->set_name(out);
    }
    onnx::TypeProto_Tensor *tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elementType(*inType->second));
    tt->clear_shape();
    onnx::TensorShapeProto *s = tt->mutable_shape();
    for (int64_t d : *shape)
      s->add_dim()->set_dim_value(d);
    changed = true;
    // `types` may now point at a moved ValueInfoProto: collect again.
    types = collectValueTypes(graph);
  }
  return changed;
}

} // namespace zinc::frontend
