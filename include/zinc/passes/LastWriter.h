//===- LastWriter.h - Where a value is complete for one of its readers ----===//
#ifndef ZINC_PASSES_LASTWRITER_H
#define ZINC_PASSES_LASTWRITER_H

#include "zinc/ir/Graph.h"
#include "llvm/ADT/DenseMap.h"

namespace zinc::passes {

/// The node after which `v` is complete for `user`: its definition, or the
/// last node before `user` (by `ordinal`, the nodes' positions) that writes
/// it in place, such as ZeRO stage 0's all-reduce of a gradient; null for a
/// value no node defines (a graph input). Linear in v's uses.
inline ir::Node *lastWriterBefore(ir::Value *v, const ir::Node *user,
                                  const llvm::DenseMap<const ir::Node *, size_t> &ordinal) {
  ir::Node *last = v->def;
  size_t limit = ordinal.lookup(user);
  for (const ir::Use &u : v->uses())
    if (u.user != user && u.user->writesInput(u.operand) && ordinal.lookup(u.user) < limit &&
        (!last || ordinal.lookup(u.user) > ordinal.lookup(last)))
      last = u.user;
  return last;
}

} // namespace zinc::passes

#endif
