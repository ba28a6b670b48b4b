//===- OpEffects.cpp - The effects table, generated from ZincOps.def ------===//
#include "zinc/support/OpEffects.h"
#include "llvm/ADT/StringMap.h"
#include <deque>
#include <vector>

namespace zinc {
namespace {

/// One op's declaration: its written positions live in the table's storage.
struct Entry {
  OpEffects effects;
  bool transfer = false;
};

class EffectsTable {
public:
  EffectsTable() {
#define ZINC_PURE {}, false
#define ZINC_WRITES(...) {__VA_ARGS__}, false
#define ZINC_WRITES_ALL {}, true
#define ZINC_ZOP(Name, Fn, Effects) add(#Name, Effects, false);
#define ZINC_TRANSFER_OP(Name, Effects) add(#Name, Effects, true);
#include "zinc/support/ZincOps.def"
#undef ZINC_PURE
#undef ZINC_WRITES
#undef ZINC_WRITES_ALL
  }

  const Entry *find(llvm::StringRef opType) const {
    auto it = entries.find(opType);
    return it == entries.end() ? nullptr : &it->second;
  }

private:
  void add(llvm::StringRef name, std::initializer_list<unsigned> writes, bool writesAll,
           bool transfer) {
    auto &stored = positions.emplace_back(writes.begin(), writes.end());
    entries[name] = Entry{OpEffects{stored, writesAll}, transfer};
  }

  // A deque keeps each entry's positions where the ArrayRef points.
  std::deque<std::vector<unsigned>> positions;
  llvm::StringMap<Entry> entries;
};

const EffectsTable &table() {
  static const EffectsTable t;
  return t;
}

const OpEffects kPure{};

} // namespace

const OpEffects *lookupOpEffects(llvm::StringRef domain, llvm::StringRef opType) {
  if (domain != kZincDomain)
    return &kPure;
  const Entry *e = table().find(opType);
  return e ? &e->effects : nullptr;
}

const OpEffects &opEffects(llvm::StringRef domain, llvm::StringRef opType) {
  static const OpEffects unknown{{}, /*writesEveryInput=*/true};
  const OpEffects *e = lookupOpEffects(domain, opType);
  return e ? *e : unknown;
}

bool isTransferOp(llvm::StringRef domain, llvm::StringRef opType) {
  if (domain != kZincDomain)
    return false;
  const Entry *e = table().find(opType);
  return e && e->transfer;
}

} // namespace zinc
