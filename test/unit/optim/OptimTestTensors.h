//===- OptimTestTensors.h - Tensors and attributes for optimizer kernel tests -===//
#ifndef ZINC_TEST_UNIT_OPTIM_OPTIMTESTTENSORS_H
#define ZINC_TEST_UNIT_OPTIM_OPTIMTESTTENSORS_H

#include "Kernels.h"
#include <cstring>
#include <random>
#include <vector>

namespace zinc::test {

/// A kernel operand that owns its bytes.
struct Tensor {
  cpu::TensorRef ref;
  std::vector<uint64_t> storage;
  Tensor(DType dtype, std::vector<int64_t> shape) {
    ref.dtype = dtype;
    ref.shape.assign(shape.begin(), shape.end());
    storage.assign(ref.byteSize() / 8 + 1, 0);
    ref.data = storage.data();
  }
  static Tensor f32(const std::vector<float> &values) {
    Tensor t(DType::F32, {static_cast<int64_t>(values.size())});
    std::memcpy(t.ref.data, values.data(), values.size() * 4);
    return t;
  }
  static Tensor scalar(float value) {
    Tensor t(DType::F32, {});
    *t.ref.as<float>() = value;
    return t;
  }
  float *floats() { return ref.as<float>(); }
};

inline std::vector<float> randomFloats(int64_t n, float lo, float hi, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

inline Attribute floatAttr(const char *name, double value) {
  Attribute a;
  a.name = name;
  a.kind = AttrKind::Float;
  a.f = value;
  return a;
}

inline Attribute intAttr(const char *name, int64_t value) {
  Attribute a;
  a.name = name;
  a.kind = AttrKind::Int;
  a.i = value;
  return a;
}

} // namespace zinc::test

#endif
