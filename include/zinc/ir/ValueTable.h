//===- ValueTable.h - A per-value table stored by value id ----------------===//
//
// Value ids are dense in a graph (Graph::valueIdBound) and kept by clone, so
// a table of something per value is a vector indexed by id: a lookup is an
// index, where a hash map of pointers probes and misses the cache. The
// planner's layouts are read once per operand of every node of every trial.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_IR_VALUETABLE_H
#define ZINC_IR_VALUETABLE_H

#include "zinc/ir/Graph.h"
#include <cassert>
#include <vector>

namespace zinc::ir {

/// Something per value of one graph, `T{}` for a value never set.
template <typename T> class ValueTable {
public:
  ValueTable() = default;
  /// Room for every value of a graph whose ids are below `idBound`.
  explicit ValueTable(unsigned idBound) : slots(idBound) {}
  /// The table whose entry for the value of id i is byId[i].
  explicit ValueTable(std::vector<T> byId) : slots(std::move(byId)) {}

  /// `v`'s entry, or T{} when it has none.
  T lookup(const Value *v) const {
    return v->id < slots.size() ? slots[v->id] : T{};
  }
  /// `v`'s entry, made (as T{}) when it has none.
  T &operator[](const Value *v) {
    if (v->id >= slots.size())
      slots.resize(v->id + 1);
    return slots[v->id];
  }
  /// `v`'s entry; it must have room (asserted).
  const T &at(const Value *v) const {
    assert(v->id < slots.size() && "a value of another graph");
    return slots[v->id];
  }
  /// One past the largest id the table has room for.
  size_t idBound() const { return slots.size(); }

private:
  std::vector<T> slots;
};

} // namespace zinc::ir

#endif
