//===- KernelCallHelpers.h - Tensors and calls for cpu kernel unit tests --===//
#ifndef ZINC_TEST_UNIT_KERNELS_KERNELCALLHELPERS_H
#define ZINC_TEST_UNIT_KERNELS_KERNELCALLHELPERS_H

#include "KernelUtil.h"
#include "Kernels.h"
#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <string>
#include <random>
#include <vector>

namespace zinc::cpu::test {

/// A tensor that owns its (8-byte aligned) buffer.
struct OwnedTensor {
  TensorRef ref;
  std::vector<uint64_t> storage;

  OwnedTensor(DType dtype, llvm::ArrayRef<int64_t> shape) {
    ref.dtype = dtype;
    ref.shape.assign(shape.begin(), shape.end());
    // One spare word so zero-size tensors still have a valid pointer.
    storage.assign(ref.byteSize() / 8 + 1, 0);
    ref.data = storage.data();
  }
  // A copy owns its own bytes: `ref.data` must point at the copy's storage,
  // not the original's (which a copied vector of tensors would outlive).
  OwnedTensor(const OwnedTensor &o) : ref(o.ref), storage(o.storage) {
    ref.data = storage.data();
  }
  OwnedTensor &operator=(const OwnedTensor &o) {
    ref = o.ref;
    storage = o.storage;
    ref.data = storage.data();
    return *this;
  }
  OwnedTensor(OwnedTensor &&o) noexcept
      : ref(std::move(o.ref)), storage(std::move(o.storage)) {
    ref.data = storage.data();
  }
  OwnedTensor &operator=(OwnedTensor &&o) noexcept {
    ref = std::move(o.ref);
    storage = std::move(o.storage);
    ref.data = storage.data();
    return *this;
  }

  /// A tensor of storage type T holding `values` (converted from double
  /// through store(), so f16/bf16 round as the kernels do).
  template <typename T>
  static OwnedTensor of(DType dtype, llvm::ArrayRef<int64_t> shape,
                        const std::vector<double> &values) {
    OwnedTensor t(dtype, shape);
    for (size_t i = 0; i < values.size(); ++i)
      t.ref.as<T>()[i] = store<T>(values[i]);
    return t;
  }

  static OwnedTensor f32(llvm::ArrayRef<int64_t> shape,
                         const std::vector<double> &values) {
    return of<float>(DType::F32, shape, values);
  }
  static OwnedTensor i64(llvm::ArrayRef<int64_t> shape,
                         const std::vector<double> &values) {
    return of<int64_t>(DType::I64, shape, values);
  }
  /// An int64 tensor with exact values (doubles cannot hold INT64_MAX).
  static OwnedTensor ints(llvm::ArrayRef<int64_t> shape,
                          const std::vector<int64_t> &values) {
    OwnedTensor t(DType::I64, shape);
    std::copy(values.begin(), values.end(), t.ref.as<int64_t>());
    return t;
  }
  /// Consecutive values 0, 1, 2, ... of storage type T.
  template <typename T>
  static OwnedTensor iota(DType dtype, llvm::ArrayRef<int64_t> shape) {
    OwnedTensor t(dtype, shape);
    for (int64_t i = 0; i < t.ref.numElements(); ++i)
      t.ref.as<T>()[i] = store<T>(i);
    return t;
  }

  /// Every element, converted to double through load().
  template <typename T> std::vector<double> values() const {
    std::vector<double> v;
    for (int64_t i = 0; i < ref.numElements(); ++i)
      v.push_back(static_cast<double>(load(ref.as<T>()[i])));
    return v;
  }
  std::vector<double> f32s() const { return values<float>(); }
  std::vector<double> i64s() const { return values<int64_t>(); }
};

/// The bytes of workspace the planner gives `call` of kernel `fn`
/// (kernelWorkspaceBytes, with zinc's own ops in the "zinc" domain).
inline uint64_t plannedWorkspace(KernelFn fn, const KernelCall &call) {
  llvm::StringRef domain =
      fn && lookupZincKernel(call.opType) == fn ? "zinc" : "";
  std::vector<KernelOperand> ins, outs;
  for (const TensorRef *t : call.inputs)
    ins.push_back(t ? KernelOperand{t->dtype, t->shape, true}
                    : KernelOperand{});
  for (const TensorRef *t : call.outputs)
    outs.push_back(t ? KernelOperand{t->dtype, t->shape, true}
                     : KernelOperand{});
  return kernelWorkspaceBytes(domain, call.opType, call.opsetVersion, ins, outs,
                              call.attrs);
}

/// Runs `call` as the runtime does: with a workspace of exactly the bytes
/// the planner counts for it, filled with garbage, so a kernel that takes
/// more than kernelWorkspaceBytes says, or reads scratch it did not write,
/// fails its test. `used`, when given, receives the bytes it took.
inline llvm::Error runWithWorkspace(KernelFn fn, KernelCall call,
                                    uint64_t *used = nullptr) {
  uint64_t bytes = plannedWorkspace(fn, call);
  std::vector<uint8_t> storage(bytes + kWorkspaceAlignment, 0xA5);
  auto address = reinterpret_cast<uintptr_t>(storage.data());
  auto *base =
      reinterpret_cast<uint8_t *>((address + kWorkspaceAlignment - 1) /
                                  kWorkspaceAlignment * kWorkspaceAlignment);
  Workspace ws(base, bytes);
  call.workspace = &ws;
  llvm::Error err = fn(call);
  if (used)
    *used = ws.used();
  return err;
}

/// Runs `fn` with the given operands (null for an absent one).
inline llvm::Error runKernel(KernelFn fn, llvm::StringRef op,
                             const AttributeList &attrs,
                             std::initializer_list<const OwnedTensor *> ins,
                             std::initializer_list<OwnedTensor *> outs,
                             int64_t opset = 17) {
  std::vector<const TensorRef *> inRefs;
  for (const OwnedTensor *t : ins)
    inRefs.push_back(t ? &t->ref : nullptr);
  std::vector<TensorRef *> outRefs;
  for (OwnedTensor *t : outs)
    outRefs.push_back(t ? &t->ref : nullptr);
  KernelCall call{op, "test", opset, attrs, inRefs, outRefs};
  return runWithWorkspace(fn, call);
}

/// The message of an expected error, or "" if there was none.
inline std::string errorText(llvm::Error e) {
  return e ? llvm::toString(std::move(e)) : std::string();
}

// Short names for the support library's attribute makers.
inline Attribute intAttr(const std::string &name, int64_t v) { return makeIntAttr(name, v); }
inline Attribute intsAttr(const std::string &name, std::vector<int64_t> v) {
  return makeIntsAttr(name, v);
}
inline Attribute floatAttr(const std::string &name, double v) {
  return makeFloatAttr(name, v);
}
inline Attribute stringAttr(const std::string &name, const std::string &v) {
  return makeStringAttr(name, v);
}
inline Attribute tensorAttr(const std::string &name, const OwnedTensor &t) {
  TensorData data;
  data.dtype = t.ref.dtype;
  data.shape.assign(t.ref.shape.begin(), t.ref.shape.end());
  const auto *p = static_cast<const uint8_t *>(t.ref.data);
  data.bytes.assign(p, p + t.ref.byteSize());
  return makeTensorAttr(name, std::move(data));
}

/// `n` values uniform in [low, high), from a fixed seed.
inline std::vector<double> randomValues(int64_t n, double low, double high,
                                        unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(low, high);
  std::vector<double> v(n);
  for (double &x : v)
    x = dist(rng);
  return v;
}

inline AttributeList attrs(std::initializer_list<Attribute> list) {
  AttributeList l;
  for (const Attribute &a : list)
    l.set(a);
  return l;
}

} // namespace zinc::cpu::test

#endif
