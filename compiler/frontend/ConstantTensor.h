//===- ConstantTensor.h - Small tensors the frontend computes with --------===//
//
// The values of shape computations (Shape -> Gather -> Range, Reshape
// targets, masks built from sizes) as the frontend folds them: integers and
// booleans exactly as int64, floating point as double rounded to the
// tensor's own precision after every operation, so a folded value is the
// one the exporting framework would have computed at run time.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_COMPILER_FRONTEND_CONSTANTTENSOR_H
#define ZINC_COMPILER_FRONTEND_CONSTANTTENSOR_H

#include "onnx/onnx_pb.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/Optional.h"
#include "llvm/ADT/SmallVector.h"
#include <cstdint>
#include <vector>

namespace zinc::frontend {

struct ConstantTensor {
  /// The ONNX element type code (onnx::TensorProto::DataType).
  int elemType = onnx::TensorProto::INT64;
  llvm::SmallVector<int64_t, 4> dims;
  /// Integer and bool elements; empty for floating-point tensors.
  std::vector<int64_t> ints;
  /// Floating-point elements; empty for integer and bool tensors.
  std::vector<double> reals;

  /// Element types the folder computes with: bool, the integers, f32, f64.
  static bool isFoldableType(int elemType);
  static bool isFloatType(int elemType);

  bool isFloat() const { return isFloatType(elemType); }
  int64_t numElements() const;
  /// Element k read as an integer (floats truncate toward zero, as a C cast)
  /// or as a real.
  int64_t integerAt(int64_t k) const;
  double realAt(int64_t k) const;

  /// An empty tensor of `elemType` and `dims`, its storage sized.
  static ConstantTensor make(int elemType, llvm::ArrayRef<int64_t> dims);
  /// Stores `v` at k, converted to the element type (rounded to f32,
  /// wrapped to the integer width, or tested against zero for bool).
  void setInteger(int64_t k, int64_t v);
  void setReal(int64_t k, double v);

  /// Reads a tensor held in the model. None when its element type is not
  /// foldable or its data is external or malformed.
  static llvm::Optional<ConstantTensor> fromProto(const onnx::TensorProto &t);
  /// The tensor as a TensorProto named `name`, with typed data fields.
  onnx::TensorProto toProto(const std::string &name) const;
};

} // namespace zinc::frontend

#endif
