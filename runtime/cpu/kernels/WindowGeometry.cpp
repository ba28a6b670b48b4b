//===- WindowGeometry.cpp - Window and padding arithmetic of Conv and pooling //
#include "WindowGeometry.h"
#include "llvm/ADT/Twine.h"

namespace zinc::cpu {

bool WindowGeometry::hasEmptyWindow() const {
  for (size_t d = 0; d < rank(); ++d)
    for (int64_t o = 0; o < output[d]; ++o) {
      int64_t first, last;
      validTaps(d, o, first, last);
      if (first >= last)
        return true;
    }
  return false;
}

int64_t WindowGeometry::inputSize() const { return numElements(input); }
int64_t WindowGeometry::outputSize() const { return numElements(output); }
int64_t WindowGeometry::kernelSize() const { return numElements(kernel); }

llvm::Expected<AutoPadKind> readAutoPad(const AttributeList &attrs,
                                        llvm::StringRef op) {
  llvm::StringRef s = attrs.getString("auto_pad", "NOTSET");
  if (s == "NOTSET")
    return AutoPadKind::NotSet;
  if (s == "SAME_UPPER")
    return AutoPadKind::SameUpper;
  if (s == "SAME_LOWER")
    return AutoPadKind::SameLower;
  if (s == "VALID")
    return AutoPadKind::Valid;
  return kernelError(op + ": unknown auto_pad '" + s + "'");
}

llvm::Expected<llvm::SmallVector<int64_t, 3>>
readSpatialInts(const AttributeList &attrs, llvm::StringRef op,
                llvm::StringRef name, size_t rank, int64_t dflt, int64_t min) {
  llvm::ArrayRef<int64_t> v = attrs.getInts(name);
  if (v.empty())
    return llvm::SmallVector<int64_t, 3>(rank, dflt);
  if (v.size() != rank)
    return kernelError(op + ": " + name + " has " + llvm::Twine(v.size()) +
                       " entries, expected one per spatial axis (" +
                       llvm::Twine(rank) + ")");
  for (int64_t x : v)
    if (x < min)
      return kernelError(op + ": " + name + " " + formatShape(v) +
                         " has an entry below " + llvm::Twine(min));
  return llvm::SmallVector<int64_t, 3>(v.begin(), v.end());
}

llvm::Error readPads(const AttributeList &attrs, llvm::StringRef op,
                     size_t rank, llvm::SmallVectorImpl<int64_t> &begin,
                     llvm::SmallVectorImpl<int64_t> &end) {
  llvm::ArrayRef<int64_t> p = attrs.getInts("pads");
  begin.assign(rank, 0);
  end.assign(rank, 0);
  if (p.empty())
    return llvm::Error::success();
  if (p.size() != 2 * rank)
    return kernelError(op + ": pads has " + llvm::Twine(p.size()) +
                       " entries, expected " + llvm::Twine(2 * rank));
  for (size_t d = 0; d < rank; ++d) {
    begin[d] = p[d];
    end[d] = p[rank + d];
    if (begin[d] < 0 || end[d] < 0)
      return kernelError(op + ": pads " + formatShape(p) +
                         " has a negative entry");
  }
  return llvm::Error::success();
}

llvm::Expected<WindowGeometry> resolveWindowGeometry(
    const AttributeList &attrs, llvm::StringRef op,
    llvm::ArrayRef<int64_t> input, llvm::ArrayRef<int64_t> output,
    llvm::ArrayRef<int64_t> kernel, bool ceilMode, bool allowDilations) {
  size_t rank = input.size();
  if (rank == 0)
    return kernelError(op + ": input has no spatial axes");
  if (output.size() != rank || kernel.size() != rank)
    return kernelError(op + ": input, output and kernel have different " +
                       "numbers of spatial axes");
  WindowGeometry g;
  g.input.assign(input.begin(), input.end());
  g.output.assign(output.begin(), output.end());
  g.kernel.assign(kernel.begin(), kernel.end());
  for (int64_t k : kernel)
    if (k < 1)
      return kernelError(op + ": kernel shape " + formatShape(kernel) +
                         " has an entry below 1");
  auto strides = readSpatialInts(attrs, op, "strides", rank, 1, 1);
  if (!strides)
    return strides.takeError();
  g.strides = std::move(*strides);
  if (allowDilations) {
    auto dilations = readSpatialInts(attrs, op, "dilations", rank, 1, 1);
    if (!dilations)
      return dilations.takeError();
    g.dilations = std::move(*dilations);
  } else {
    g.dilations.assign(rank, 1);
  }
  auto autoPad = readAutoPad(attrs, op);
  if (!autoPad)
    return autoPad.takeError();
  if (*autoPad == AutoPadKind::NotSet) {
    if (llvm::Error err = readPads(attrs, op, rank, g.padBegin, g.padEnd))
      return err;
  } else {
    g.padBegin.assign(rank, 0);
    g.padEnd.assign(rank, 0);
  }

  llvm::SmallVector<int64_t, 3> expected(rank), expectedCeil(rank);
  for (size_t d = 0; d < rank; ++d) {
    int64_t ek = g.effectiveKernel(d), s = g.strides[d];
    if (*autoPad == AutoPadKind::SameUpper ||
        *autoPad == AutoPadKind::SameLower) {
      // Pads make the output ceil(input / stride) long; the odd pixel goes
      // to the end for SAME_UPPER, to the start for SAME_LOWER. A kernel
      // shorter than the stride needs no pad (never a negative one).
      int64_t out = ceilDiv(input[d], s);
      int64_t total = std::max<int64_t>(0, (out - 1) * s + ek - input[d]);
      int64_t small = total / 2, big = total - small;
      g.padBegin[d] = *autoPad == AutoPadKind::SameUpper ? small : big;
      g.padEnd[d] = *autoPad == AutoPadKind::SameUpper ? big : small;
      expected[d] = expectedCeil[d] = out;
      continue;
    }
    int64_t span = input[d] + g.padBegin[d] + g.padEnd[d] - ek;
    if (span < 0)
      return kernelError(op + ": kernel " + formatShape(kernel) +
                         " (dilated) is larger than the padded input " +
                         formatShape(input));
    expected[d] = span / s + 1;
    expectedCeil[d] = ceilMode ? ceilDiv(span, s) + 1 : expected[d];
  }
  for (size_t d = 0; d < rank; ++d)
    if (output[d] != expected[d] && output[d] != expectedCeil[d])
      return kernelError(op + ": output spatial shape " + formatShape(output) +
                         " does not follow from input " + formatShape(input) +
                         ", kernel and attributes (expected " +
                         formatShape(ceilMode ? expectedCeil : expected) + ")");
  return g;
}

} // namespace zinc::cpu
