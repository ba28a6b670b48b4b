//===- Attribute.h - Node attributes, shared by the IR and the plan -------===//
#ifndef ZINC_SUPPORT_ATTRIBUTE_H
#define ZINC_SUPPORT_ATTRIBUTE_H

#include "zinc/support/DType.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include <string>
#include "llvm/ADT/Optional.h"
#include <vector>

namespace zinc {

/// A small tensor carried by an attribute (Constant's value,
/// ConstantOfShape's value). Its bytes are little-endian and dense.
struct TensorData {
  DType dtype = DType::F32;
  llvm::SmallVector<int64_t, 4> shape;
  std::vector<uint8_t> bytes;
  bool operator==(const TensorData &o) const {
    return dtype == o.dtype && shape == o.shape && bytes == o.bytes;
  }
};

/// The one element of a float or bool tensor, as a double; None for any
/// other shape or type.
llvm::Optional<double> scalarValue(const TensorData &t);

enum class AttrKind { Int, Float, String, Ints, Floats, Strings, Tensor };

struct Attribute {
  std::string name;
  AttrKind kind = AttrKind::Int;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::vector<std::string> strings;
  TensorData tensor;
  bool operator==(const Attribute &o) const;
};

/// One attribute of each kind, named.
Attribute makeIntAttr(llvm::StringRef name, int64_t v);
Attribute makeIntsAttr(llvm::StringRef name, llvm::ArrayRef<int64_t> v);
Attribute makeFloatAttr(llvm::StringRef name, double v);
Attribute makeStringAttr(llvm::StringRef name, llvm::StringRef v);
Attribute makeTensorAttr(llvm::StringRef name, TensorData t);

/// Attributes of one node, kept sorted by name so printing is deterministic.
class AttributeList {
public:
  void set(Attribute a);
  const Attribute *find(llvm::StringRef name) const;
  bool has(llvm::StringRef name) const { return find(name) != nullptr; }
  int64_t getInt(llvm::StringRef name, int64_t dflt) const;
  double getFloat(llvm::StringRef name, double dflt) const;
  llvm::StringRef getString(llvm::StringRef name, llvm::StringRef dflt) const;
  /// Empty when absent.
  llvm::ArrayRef<int64_t> getInts(llvm::StringRef name) const;
  llvm::ArrayRef<double> getFloats(llvm::StringRef name) const;
  /// Null when absent.
  const TensorData *getTensor(llvm::StringRef name) const;

  llvm::ArrayRef<Attribute> all() const { return attrs; }
  bool empty() const { return attrs.empty(); }
  bool operator==(const AttributeList &o) const { return attrs == o.attrs; }

private:
  std::vector<Attribute> attrs;
};

} // namespace zinc

#endif
