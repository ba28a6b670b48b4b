//===- PlanBuilder.h - Small multi-tier plans built directly as protobuf --===//
#ifndef ZINC_TEST_UNIT_RUNTIME_PLANBUILDER_H
#define ZINC_TEST_UNIT_RUNTIME_PLANBUILDER_H

#include "zinc/plan/PlanBuilder.h"
#include "zinc/runtime/Executor.h"
#include "zinc/runtime/Program.h"
#include "llvm/Support/MathExtras.h"
#include <cstring>
#include <gtest/gtest.h>
#include <initializer_list>
#include <string>
#include <vector>

namespace zinc::rt::test {

using plan::PlanBuilder;

/// Loads `plan`, failing the test on an error.
inline std::unique_ptr<Program> loadOrFail(plan::Plan plan,
                                           const LoadOptions &opts = {}) {
  auto program = Program::fromPlan(std::move(plan), opts);
  EXPECT_TRUE(static_cast<bool>(program))
      << llvm::toString(program.takeError());
  return program ? std::move(*program) : nullptr;
}

/// The error message of `result`, or "" if it succeeded.
template <typename T> std::string errorOf(llvm::Expected<T> result) {
  if (result)
    return "";
  return llvm::toString(result.takeError());
}

/// The message of `err`, or "" on success.
inline std::string messageOf(llvm::Error err) {
  return err ? llvm::toString(std::move(err)) : "";
}

inline std::vector<float> values(Program &program, int id) {
  const cpu::TensorRef &t = program.tensor(id);
  return std::vector<float>(t.as<float>(), t.as<float>() + t.numElements());
}

inline void setValues(Program &program, int id, float start, float stride) {
  cpu::TensorRef &t = program.tensor(id);
  for (int64_t i = 0; i < t.numElements(); ++i)
    t.as<float>()[i] = start + stride * static_cast<float>(i % 97);
}

/// Raw bytes of every tensor in host memory (GPU and CPU tiers).
inline std::vector<std::vector<uint8_t>> snapshot(Program &program) {
  std::vector<std::vector<uint8_t>> out;
  for (const plan::Tensor &t : program.getPlan().tensors()) {
    const cpu::TensorRef &ref = program.tensor(t.id());
    if (!ref.data) {
      out.emplace_back();
      continue;
    }
    auto *p = static_cast<const uint8_t *>(ref.data);
    out.emplace_back(p, p + ref.byteSize());
  }
  return out;
}

} // namespace zinc::rt::test

#endif
