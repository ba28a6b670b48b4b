//===- ReshapeFallback.h - Reshape shapes onnx 1.12 leaves unknown --------===//
#ifndef ZINC_COMPILER_FRONTEND_RESHAPEFALLBACK_H
#define ZINC_COMPILER_FRONTEND_RESHAPEFALLBACK_H

#include "onnx/onnx_pb.h"
#include <string>
#include <unordered_map>

namespace zinc::frontend {

/// Values onnx's data propagation computed, by name (what InferShapes
/// returns in generated_shape_data_by_name).
using PropagatedData = std::unordered_map<std::string, onnx::TensorShapeProto>;

/// Reshape-5/13 in onnx 1.12 ignore propagated data for their target shape
/// (Reshape-14 uses it), so `Reshape(x, Shape(y))` in an opset-13 model,
/// common in PyTorch exports, gets no output shape. For each such Reshape
/// whose input shape is static and whose target onnx propagated to known
/// values, this computes the output shape by Reshape's rules and records it
/// in the graph's value_info. Returns true when it recorded any, so that the
/// caller runs shape inference again for the nodes after it.
/// First it carries the propagated values through the integer arithmetic
/// (Mul, Add, Unsqueeze, Concat, ...) onnx 1.12 stops at in opset 13, adding
/// them to `data`.
bool inferReshapesFromPropagatedData(onnx::GraphProto &graph,
                                     PropagatedData &data);

} // namespace zinc::frontend

#endif
