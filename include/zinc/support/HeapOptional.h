//===- HeapOptional.h - An optional value kept on the heap ---------------===//
//
// llvm::Optional<T> holds T's bytes inline, present or not. For a field that
// most objects leave empty and whose T is large (an IR value's initializer
// source: 184 bytes, set on one value in ten), that is the object's largest
// part; this holds a pointer instead. Copies copy the value, as Optional's
// do.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_SUPPORT_HEAPOPTIONAL_H
#define ZINC_SUPPORT_HEAPOPTIONAL_H

#include <cassert>
#include <memory>

namespace zinc {

template <typename T> class HeapOptional {
public:
  HeapOptional() = default;
  HeapOptional(const T &v) : held(std::make_unique<T>(v)) {}
  HeapOptional(T &&v) : held(std::make_unique<T>(std::move(v))) {}
  HeapOptional(const HeapOptional &o)
      : held(o.held ? std::make_unique<T>(*o.held) : nullptr) {}
  HeapOptional(HeapOptional &&) noexcept = default;
  HeapOptional &operator=(const HeapOptional &o) {
    if (this != &o)
      held = o.held ? std::make_unique<T>(*o.held) : nullptr;
    return *this;
  }
  HeapOptional &operator=(HeapOptional &&) noexcept = default;

  explicit operator bool() const { return held != nullptr; }
  bool hasValue() const { return held != nullptr; }
  void reset() { held.reset(); }

  T &operator*() {
    assert(held && "no value");
    return *held;
  }
  const T &operator*() const {
    assert(held && "no value");
    return *held;
  }
  T *operator->() { return &**this; }
  const T *operator->() const { return &**this; }

private:
  std::unique_ptr<T> held;
};

} // namespace zinc

#endif
