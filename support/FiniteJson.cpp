//===- FiniteJson.cpp - JSON that stays JSON when a number is NaN or inf --===//
#include "zinc/support/FiniteJson.h"
#include <cmath>

namespace zinc {

bool nullNonFiniteNumbers(llvm::json::Value &value) {
  if (llvm::json::Object *object = value.getAsObject()) {
    bool any = false;
    for (auto &field : *object)
      any |= nullNonFiniteNumbers(field.second);
    return any;
  }
  if (llvm::json::Array *array = value.getAsArray()) {
    bool any = false;
    for (llvm::json::Value &element : *array)
      any |= nullNonFiniteNumbers(element);
    return any;
  }
  // Integers are finite by construction; only doubles can be NaN or inf.
  if (value.kind() != llvm::json::Value::Number || value.getAsInteger())
    return false;
  if (std::isfinite(*value.getAsNumber()))
    return false;
  value = nullptr;
  return true;
}

llvm::json::Value finiteJsonObject(llvm::json::Object object) {
  llvm::json::Value value(std::move(object));
  if (nullNonFiniteNumbers(value))
    (*value.getAsObject())["nonfinite"] = true;
  return value;
}

} // namespace zinc
