//===- PadGeometry.cpp - Where each element of a padded tensor comes from -===//
#include "PadGeometry.h"
#include "KernelUtil.h"
#include "llvm/ADT/Twine.h"

namespace zinc::cpu {

llvm::Expected<PadGeometry> padGeometry(const KernelCall &call,
                                        llvm::ArrayRef<int64_t> inShape,
                                        llvm::ArrayRef<int64_t> outShape,
                                        size_t padsInput, size_t axesInput) {
  const TensorRef *pads = call.input(padsInput), *axes = call.input(axesInput);
  PadGeometry g;
  llvm::StringRef mode = call.attrs.getString("mode", "constant");
  if (mode == "constant")
    g.mode = PadModeKind::Constant;
  else if (mode == "reflect")
    g.mode = PadModeKind::Reflect;
  else if (mode == "edge")
    g.mode = PadModeKind::Edge;
  else if (mode == "wrap")
    g.mode = PadModeKind::Wrap;
  else
    return kernelError(call.opType + ": unsupported mode '" + mode + "'");

  int64_t rank = inShape.size();
  llvm::SmallVector<int64_t, 6> axisList;
  if (axes) {
    for (int64_t a : loadIndexList(*axes)) {
      llvm::Expected<int64_t> axis = normalizeAxis(a, rank);
      if (!axis)
        return axis.takeError();
      axisList.push_back(*axis);
    }
  } else {
    for (int64_t d = 0; d < rank; ++d)
      axisList.push_back(d);
  }
  llvm::SmallVector<int64_t, 12> p;
  if (pads) {
    p = loadIndexList(*pads);
  } else {
    llvm::ArrayRef<int64_t> attr = call.attrs.getInts("pads");
    p.assign(attr.begin(), attr.end());
  }
  int64_t n = axisList.size();
  if (static_cast<int64_t>(p.size()) != 2 * n)
    return kernelError(call.opType + ": pads has " + llvm::Twine(p.size()) +
                       " entries, expected " + llvm::Twine(2 * n));
  g.before.assign(rank, 0);
  llvm::SmallVector<int64_t, 6> after(rank, 0);
  for (int64_t i = 0; i < n; ++i) {
    g.before[axisList[i]] = p[i];
    after[axisList[i]] = p[i + n];
  }
  g.inShape.assign(inShape.begin(), inShape.end());
  g.outShape.assign(outShape.begin(), outShape.end());
  if (static_cast<int64_t>(outShape.size()) != rank)
    return kernelError(call.opType + ": output rank differs from the input's");
  for (int64_t d = 0; d < rank; ++d) {
    if (inShape[d] + g.before[d] + after[d] != outShape[d])
      return kernelError(call.opType + ": dimension " + llvm::Twine(d) +
                         " of size " + llvm::Twine(inShape[d]) + " padded by " +
                         llvm::Twine(g.before[d]) + " and " +
                         llvm::Twine(after[d]) + " is not the output's " +
                         llvm::Twine(outShape[d]));
    bool grows = g.before[d] > 0 || after[d] > 0;
    if (!grows || g.mode == PadModeKind::Constant)
      continue;
    if (inShape[d] == 0)
      return kernelError(call.opType + ": cannot pad empty dimension " +
                         llvm::Twine(d) + " in mode '" + mode + "'");
    if (g.mode == PadModeKind::Reflect &&
        std::max(g.before[d], after[d]) >= inShape[d])
      return kernelError(call.opType + ": reflect pads of dimension " +
                         llvm::Twine(d) + " must be smaller than its size " +
                         llvm::Twine(inShape[d]));
  }
  return g;
}

int64_t padSource(const PadGeometry &g, size_t d, int64_t o) {
  int64_t n = g.inShape[d];
  int64_t i = o - g.before[d];
  if (i >= 0 && i < n)
    return i;
  switch (g.mode) {
  case PadModeKind::Constant:
    return -1;
  case PadModeKind::Edge:
    return i < 0 ? 0 : n - 1;
  case PadModeKind::Reflect:
    // Mirrored about the first and last element, which are not repeated.
    if (n == 1)
      return 0;
    while (i < 0 || i >= n)
      i = i < 0 ? -i : 2 * (n - 1) - i;
    return i;
  case PadModeKind::Wrap:
    return ((i % n) + n) % n;
  }
  return -1;
}

} // namespace zinc::cpu
