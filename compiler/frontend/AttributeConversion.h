//===- AttributeConversion.h - ONNX attributes and tensors to zinc's ------===//
#ifndef ZINC_COMPILER_FRONTEND_ATTRIBUTECONVERSION_H
#define ZINC_COMPILER_FRONTEND_ATTRIBUTECONVERSION_H

#include "onnx/onnx_pb.h"
#include "zinc/support/Attribute.h"
#include "llvm/Support/Error.h"

namespace zinc::frontend {

/// Converts a small tensor held inside the model (an attribute's value, an
/// inline initializer read for a constant check) into dense little-endian
/// bytes, from raw_data or the typed fields. Refuses external data: the
/// compiler never reads weight files.
llvm::Expected<TensorData> convertTensor(const onnx::TensorProto &tensor);

/// How many values the typed field that ONNX uses for `dtype` holds (for
/// f16, i8, bool ... that is int32_data); lets callers check an inline
/// tensor's size without copying its data.
int64_t typedValueCount(const onnx::TensorProto &tensor, DType dtype);

/// Converts one node attribute. Graph, sparse-tensor, type and list-of-tensor
/// attributes are refused as unsupported.
llvm::Expected<Attribute> convertAttribute(const onnx::AttributeProto &attr);

} // namespace zinc::frontend

#endif
