//===- PoolWindows.cpp - Pooling windows over three spatial axes ----------===//
#include "PoolWindows.h"
#include "llvm/ADT/Twine.h"

namespace zinc::cpu {

llvm::Expected<Pool3> makePool3(const KernelCall &call, const WindowGeometry &g,
                                int64_t planes) {
  Pool3 p;
  p.planes = planes;
  size_t lead = 3 - g.rank();
  for (size_t a = 0; a < 3; ++a)
    p.out[a] = a < lead ? 1 : g.output[a - lead];
  auto table = call.scratch<int64_t>(4 * (p.out[0] + p.out[1] + p.out[2]));
  if (!table)
    return table.takeError();
  int64_t *next = *table;
  for (size_t a = 0; a < 3; ++a) {
    bool dummy = a < lead;
    size_t d = a - lead;
    p.in[a] = dummy ? 1 : g.input[d];
    p.dil[a] = dummy ? 1 : g.dilations[d];
    AxisTaps &t = p.taps[a];
    t.first = next;
    t.last = next + p.out[a];
    t.padded = next + 2 * p.out[a];
    p.start[a] = next + 3 * p.out[a];
    next += 4 * p.out[a];
    for (int64_t o = 0; o < p.out[a]; ++o) {
      if (dummy) {
        t.first[o] = 0;
        t.last[o] = 1;
        t.padded[o] = 1;
        p.start[a][o] = 0;
        continue;
      }
      int64_t first, last;
      g.validTaps(d, o, first, last);
      int64_t s = g.start(d, o);
      // Taps past the end pad exist only in ceil mode; they are not counted
      // even with count_include_pad (as the spec's reference and PyTorch).
      int64_t padded = std::min(
          g.kernel[d], ceilDiv(g.input[d] + g.padEnd[d] - s, g.dilations[d]));
      t.first[o] = first;
      t.last[o] = last;
      t.padded[o] = padded;
      p.start[a][o] = s;
    }
  }
  p.inPlane = p.in[0] * p.in[1] * p.in[2];
  p.outPlane = p.out[0] * p.out[1] * p.out[2];
  return p;
}

llvm::Expected<WindowGeometry> poolGeometry(const KernelCall &call,
                                            const TensorRef &x,
                                            const TensorRef &y, bool ceilMode,
                                            bool allowDilations) {
  llvm::StringRef op = call.opType;
  if (x.rank() < 3)
    return kernelError(op + ": input must have shape [N, C, spatial...], got " +
                       formatShape(x.shape));
  if (y.rank() != x.rank() || y.shape[0] != x.shape[0] ||
      y.shape[1] != x.shape[1])
    return kernelError(op + ": output shape " + formatShape(y.shape) +
                       " does not match input shape " + formatShape(x.shape));
  llvm::ArrayRef<int64_t> kernel = call.attrs.getInts("kernel_shape");
  if (kernel.empty())
    return kernelError(op + ": kernel_shape is required");
  if (x.rank() - 2 > 3)
    return kernelError("unsupported: " + op + " with more than 3 spatial axes");
  auto g = resolveWindowGeometry(call.attrs, op,
                                 llvm::ArrayRef<int64_t>(x.shape).drop_front(2),
                                 llvm::ArrayRef<int64_t>(y.shape).drop_front(2),
                                 kernel, ceilMode, allowDilations);
  if (!g)
    return g.takeError();
  return g;
}

} // namespace zinc::cpu
