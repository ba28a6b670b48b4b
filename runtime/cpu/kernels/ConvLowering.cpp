//===- ConvLowering.cpp - im2col/col2im + GEMM cores of Conv and gradients ===//
//
// The column matrix is built a few position rows (lines) at a time so that
// its size stays bounded whatever the feature map (convLinesPerTile), in the
// call's workspace; f32 runs sgemm, f64 dgemm (16-bit floats arrive widened
// to f32, see dispatchConvFloat).
//
//===----------------------------------------------------------------------===//
#include "ConvLowering.h"
#include "TeamGemm.h"
#include "llvm/ADT/Twine.h"
#include <algorithm>
#include <climits>

namespace zinc::cpu {

/// Below this many element operations, im2col/col2im run on one thread.
static constexpr int64_t kParallelWork = 1 << 15;

/// GEMM in f32 or f64 over the OpenMP team: C[m,n] = A[m,k] (or A^T) *
/// B[k,n] + beta * C.
template <typename T>
static void gemm(bool transA, int64_t m, int64_t n, int64_t k, const T *a,
                 int64_t lda, const T *b, int64_t ldb, T beta, T *c,
                 int64_t ldc) {
  teamGemm(GemmArgs<T>::make(transA, false, m, n, k, T(1), a, lda, b, ldb,
                             beta, c, ldc));
}

/// GEMM with B transposed: C[m,n] = A[m,k] * B[n,k]^T + C.
template <typename T>
static void gemmAccumulateTransB(int64_t m, int64_t n, int64_t k, const T *a,
                                 int64_t lda, const T *b, int64_t ldb, T *c,
                                 int64_t ldc) {
  teamGemm(GemmArgs<T>::make(false, true, m, n, k, T(1), a, lda, b, ldb, T(1),
                             c, ldc));
}

/// Splits flat kernel tap `k` into one index per axis.
static void decodeTap(const WindowGeometry &g, int64_t k,
                      llvm::SmallVectorImpl<int64_t> &taps) {
  taps.resize(g.rank());
  for (size_t d = g.rank(); d-- > 0;) {
    taps[d] = k % g.kernel[d];
    k /= g.kernel[d];
  }
}

/// Visits, for image channel plane `channel` and kernel tap `k`, every line
/// of positions in [l0, l1): fn(line, imageRow) with imageRow the image line
/// the tap reads (null when the whole line reads padding), plus the range
/// [lo, hi) of positions along the last axis that read real input and the
/// image offset of position 0 (so position p reads imageRow[p*s + base]).
template <typename Fn>
static void forEachTapLine(const WindowGeometry &g, int64_t k, int64_t l0,
                           int64_t l1, Fn &&fn) {
  size_t rank = g.rank(), last = rank - 1;
  llvm::SmallVector<int64_t, 3> taps;
  decodeTap(g, k, taps);
  int64_t len = g.output[last], s = g.strides[last];
  int64_t base = taps[last] * g.dilations[last] - g.padBegin[last];
  // Position p reads p*s + base; it is real input for 0 <= p*s+base < in.
  int64_t lo = std::clamp<int64_t>(ceilDiv(-base, s), 0, len);
  int64_t hi = std::clamp<int64_t>(ceilDiv(g.input[last] - base, s), lo, len);
  // Odometer over the leading position axes, started at line l0.
  llvm::SmallVector<int64_t, 3> pos(rank, 0);
  for (int64_t l = l0, d = last; d-- > 0;) {
    pos[d] = l % g.output[d];
    l /= g.output[d];
  }
  for (int64_t line = l0; line < l1; ++line) {
    int64_t off = 0;
    bool inside = true;
    for (size_t d = 0; d < last; ++d) {
      int64_t i = g.start(d, pos[d]) + taps[d] * g.dilations[d];
      inside &= i >= 0 && i < g.input[d];
      off = off * g.input[d] + i;
    }
    fn(line, inside ? off * g.input[last] : -1, lo, hi, base);
    for (size_t d = last; d-- > 0;) {
      if (++pos[d] < g.output[d])
        break;
      pos[d] = 0;
    }
  }
}

/// col[r][p] = image value read by row r = (channel, tap) at position p, for
/// the positions of lines [l0, l1); zero where it reads padding.
template <typename C>
static void im2col(const WindowGeometry &g, const C *image, int64_t channels,
                   int64_t l0, int64_t l1, C *col) {
  int64_t taps = g.kernelSize(), plane = g.inputSize();
  int64_t len = g.output.back(), s = g.strides.back();
  int64_t cols = (l1 - l0) * len, rows = channels * taps;
  parallelFor(rows, rows * cols > kParallelWork, [&](int64_t r) {
    const C *src = image + (r / taps) * plane;
    C *dst = col + r * cols;
    forEachTapLine(g, r % taps, l0, l1,
                   [&](int64_t line, int64_t rowOff, int64_t lo, int64_t hi,
                       int64_t base) {
                     C *out = dst + (line - l0) * len;
                     if (rowOff < 0) {
                       std::fill(out, out + len, C(0));
                       return;
                     }
                     // Position p reads src[rowOff + p*s + base].
                     const C *in = src + rowOff + lo * s + base;
                     std::fill(out, out + lo, C(0));
                     if (s == 1)
                       std::copy(in, in + (hi - lo), out + lo);
                     else
                       for (int64_t p = lo; p < hi; ++p)
                         out[p] = in[(p - lo) * s];
                     std::fill(out + hi, out + len, C(0));
                   });
  });
}

/// The adjoint of im2col: image value read by row r at position p gets
/// col[r][p] added. Threads own whole channels, so the sum order (and the
/// result) does not depend on the thread count.
template <typename C>
static void col2im(const WindowGeometry &g, const C *col, int64_t channels,
                   int64_t l0, int64_t l1, C *image) {
  int64_t taps = g.kernelSize(), plane = g.inputSize();
  int64_t len = g.output.back(), s = g.strides.back();
  int64_t cols = (l1 - l0) * len;
  parallelFor(channels, channels * taps * cols > kParallelWork, [&](int64_t c) {
    C *dst = image + c * plane;
    for (int64_t k = 0; k < taps; ++k) {
      const C *src = col + (c * taps + k) * cols;
      forEachTapLine(g, k, l0, l1,
                     [&](int64_t line, int64_t rowOff, int64_t lo, int64_t hi,
                         int64_t base) {
                       if (rowOff < 0)
                         return;
                       const C *in = src + (line - l0) * len;
                       C *out = dst + rowOff + lo * s + base;
                       for (int64_t p = lo; p < hi; ++p)
                         out[(p - lo) * s] += in[p];
                     });
    }
  });
}

/// Lines of positions per column tile for `rows` column rows.
static int64_t linesPerTile(const WindowGeometry &g, int64_t rows) {
  int64_t len = std::max<int64_t>(g.output.back(), 1);
  return convLinesPerTile(rows, len, g.outputSize() / len);
}

static bool isPointwise(const WindowGeometry &g) {
  for (size_t d = 0; d < g.rank(); ++d)
    if (g.kernel[d] != 1 || g.strides[d] != 1 || g.padBegin[d] != 0 ||
        g.input[d] != g.output[d])
      return false;
  return true;
}

int64_t convColumnElements(const ConvShape &cs, ConvLowering lowering) {
  const WindowGeometry &g = cs.geom;
  int64_t rows = cs.imagePerGroup * g.kernelSize();
  if (rows == 0 || g.outputSize() == 0 || cs.positionPerGroup == 0 ||
      isPointwise(g))
    return 0;
  if (lowering == ConvLowering::Forward && cs.imagePerGroup == 1 &&
      cs.group > 1)
    return 0; // depthwiseForward needs no columns
  return rows * linesPerTile(g, rows) * g.output.back();
}

/// Sets every plane of y [N, M, spatial] to its channel's bias (or zero);
/// batch item n starts at y + n * batchStride.
template <typename C>
static void fillBias(C *y, const C *bias, int64_t batch, int64_t channels,
                     int64_t plane, int64_t batchStride) {
  bool big = batch * channels * plane > kParallelWork;
  parallelFor(batch * channels, big, [&](int64_t i) {
    C *p = y + (i / channels) * batchStride + (i % channels) * plane;
    std::fill(p, p + plane, bias ? bias[i % channels] : C(0));
  });
}

/// Depthwise Conv (one input channel per group): each output plane is a
/// sum of shifted, scaled copies of its input plane. Done directly, since
/// im2col plus a one-row GEMM per group would mostly move memory; threads
/// own whole output planes.
template <typename C>
static void depthwiseForward(const ConvShape &cs, const C *x, const C *w,
                             C *y) {
  const WindowGeometry &g = cs.geom;
  int64_t taps = g.kernelSize(), inPlane = g.inputSize();
  int64_t outPlane = g.outputSize(), mg = cs.positionPerGroup;
  int64_t len = g.output.back(), lines = outPlane / len;
  int64_t s = g.strides.back();
  int64_t outChannels = cs.group * mg, planes = cs.batch * outChannels;
  bool big = planes * outPlane * taps > kParallelWork;
  parallelFor(planes, big, [&](int64_t plane) {
    int64_t n = plane / outChannels, oc = plane % outChannels;
    const C *xp = x + (n * cs.group + oc / mg) * inPlane;
    C *yp = y + plane * outPlane;
    for (int64_t k = 0; k < taps; ++k) {
      C wv = w[oc * taps + k];
      forEachTapLine(g, k, 0, lines,
                     [&](int64_t line, int64_t rowOff, int64_t lo, int64_t hi,
                         int64_t base) {
                       if (rowOff < 0)
                         return;
                       const C *__restrict in = xp + rowOff + lo * s + base;
                       C *__restrict out = yp + line * len + lo;
                       if (s == 1) // the common case, kept vectorisable
#pragma omp simd
                         for (int64_t p = 0; p < hi - lo; ++p)
                           out[p] += wv * in[p];
                       else
                         for (int64_t p = 0; p < hi - lo; ++p)
                           out[p] += wv * in[p * s];
                     });
    }
  });
}

template <typename C>
void convForward(const ConvShape &cs, const C *x, const C *w, const C *bias,
                 C *y, C *col) {
  const WindowGeometry &g = cs.geom;
  int64_t cg = cs.imagePerGroup, mg = cs.positionPerGroup;
  int64_t inPlane = g.inputSize(), outPlane = g.outputSize();
  int64_t rows = cg * g.kernelSize();
  int64_t inChannels = cg * cs.group, outChannels = mg * cs.group;
  int64_t yBatch = cs.outBatchStride ? cs.outBatchStride : outChannels * outPlane;
  // Bias first, GEMMs accumulate onto it (beta = 1).
  fillBias(y, bias, cs.batch, outChannels, outPlane, yBatch);
  if (rows == 0 || outPlane == 0 || mg == 0)
    return;
  bool pointwise = isPointwise(g);
  if (cg == 1 && cs.group > 1 && !pointwise) {
    depthwiseForward(cs, x, w, y);
    return;
  }
  int64_t len = g.output.back(), lines = outPlane / len;
  int64_t tile = linesPerTile(g, rows);
  for (int64_t n = 0; n < cs.batch; ++n)
    for (int64_t grp = 0; grp < cs.group; ++grp) {
      const C *xg = x + (n * inChannels + grp * cg) * inPlane;
      const C *wg = w + grp * mg * rows;
      C *yg = y + n * yBatch + grp * mg * outPlane;
      if (pointwise) {
        gemm(false, mg, outPlane, cg, wg, cg, xg, inPlane, C(1), yg, outPlane);
        continue;
      }
      for (int64_t l0 = 0; l0 < lines; l0 += tile) {
        int64_t l1 = std::min(lines, l0 + tile), cols = (l1 - l0) * len;
        im2col(g, xg, cg, l0, l1, col);
        gemm(false, mg, cols, rows, wg, rows, col, cols, C(1), yg + l0 * len,
             outPlane);
      }
    }
}

template <typename C>
void convTransposeForward(const ConvShape &cs, const C *x, const C *w,
                          const C *bias, C *y, C *col) {
  const WindowGeometry &g = cs.geom;
  int64_t cg = cs.positionPerGroup, mg = cs.imagePerGroup;
  int64_t xPlane = g.outputSize(), yPlane = g.inputSize();
  int64_t rows = mg * g.kernelSize();
  int64_t inChannels = cg * cs.group, outChannels = mg * cs.group;
  fillBias(y, bias, cs.batch, outChannels, yPlane, outChannels * yPlane);
  if (rows == 0 || xPlane == 0 || cg == 0)
    return;
  bool pointwise = isPointwise(g);
  int64_t len = g.output.back(), lines = xPlane / len;
  int64_t tile = linesPerTile(g, rows);
  for (int64_t n = 0; n < cs.batch; ++n)
    for (int64_t grp = 0; grp < cs.group; ++grp) {
      const C *xg = x + (n * inChannels + grp * cg) * xPlane;
      // W is [C, M/group, taps...]: this group's rows form [Cg, Mg*taps].
      const C *wg = w + grp * cg * rows;
      C *yg = y + (n * outChannels + grp * mg) * yPlane;
      if (pointwise) {
        gemm(true, mg, xPlane, cg, wg, mg, xg, xPlane, C(1), yg, yPlane);
        continue;
      }
      for (int64_t l0 = 0; l0 < lines; l0 += tile) {
        int64_t l1 = std::min(lines, l0 + tile), cols = (l1 - l0) * len;
        gemm(true, rows, cols, cg, wg, rows, xg + l0 * len, xPlane, C(0), col,
             cols);
        col2im(g, col, mg, l0, l1, yg);
      }
    }
}

template <typename C>
void convWeightGrad(const ConvShape &cs, const C *image, const C *positionGrad,
                    C *dw, C *col) {
  const WindowGeometry &g = cs.geom;
  int64_t cg = cs.imagePerGroup, mg = cs.positionPerGroup;
  int64_t inPlane = g.inputSize(), outPlane = g.outputSize();
  int64_t rows = cg * g.kernelSize();
  int64_t imageChannels = cg * cs.group, positionChannels = mg * cs.group;
  std::fill(dw, dw + positionChannels * rows, C(0));
  if (rows == 0 || outPlane == 0 || mg == 0)
    return;
  bool pointwise = isPointwise(g);
  int64_t len = g.output.back(), lines = outPlane / len;
  int64_t tile = linesPerTile(g, rows);
  // The batch is the GEMMs' outer loop: each adds its items into dW (beta
  // 1), in batch order, so the sum does not depend on the thread count.
  for (int64_t n = 0; n < cs.batch; ++n)
    for (int64_t grp = 0; grp < cs.group; ++grp) {
      const C *ig = image + (n * imageChannels + grp * cg) * inPlane;
      const C *pg = positionGrad + (n * positionChannels + grp * mg) * outPlane;
      C *dwg = dw + grp * mg * rows;
      if (pointwise) {
        gemmAccumulateTransB(mg, cg, outPlane, pg, outPlane, ig, inPlane, dwg,
                             rows);
        continue;
      }
      for (int64_t l0 = 0; l0 < lines; l0 += tile) {
        int64_t l1 = std::min(lines, l0 + tile), cols = (l1 - l0) * len;
        im2col(g, ig, cg, l0, l1, col);
        gemmAccumulateTransB(mg, rows, cols, pg + l0 * len, outPlane, col, cols,
                             dwg, rows);
      }
    }
}

template void convForward(const ConvShape &, const float *, const float *,
                          const float *, float *, float *);
template void convForward(const ConvShape &, const double *, const double *,
                          const double *, double *, double *);
template void convTransposeForward(const ConvShape &, const float *,
                                   const float *, const float *, float *,
                                   float *);
template void convTransposeForward(const ConvShape &, const double *,
                                   const double *, const double *, double *,
                                   double *);
template void convWeightGrad(const ConvShape &, const float *, const float *,
                             float *, float *);
template void convWeightGrad(const ConvShape &, const double *, const double *,
                             double *, double *);

llvm::Error checkConvOperands(llvm::StringRef op, const TensorRef *x,
                              const TensorRef *w, const TensorRef *bias,
                              const TensorRef *y) {
  if (!x || !w || !y)
    return kernelError(op + ": needs inputs X, W and output Y");
  if (!isFloatDType(x->dtype) || w->dtype != x->dtype || y->dtype != x->dtype ||
      (bias && bias->dtype != x->dtype))
    return kernelError(op + ": unsupported element types (X " +
                       dtypeName(x->dtype) + ", W " + dtypeName(w->dtype) +
                       ", Y " + dtypeName(y->dtype) + ")");
  if (x->rank() < 3 || w->rank() != x->rank() || y->rank() != x->rank())
    return kernelError(op + ": X " + formatShape(x->shape) + ", W " +
                       formatShape(w->shape) + " and Y " +
                       formatShape(y->shape) +
                       " must have the same rank, at least 3");
  // cblas takes 32-bit sizes.
  for (const TensorRef *t : {x, w, y})
    if (t->numElements() > INT_MAX)
      return kernelError("unsupported: " + op + " with a tensor of over 2^31 " +
                         "elements");
  return llvm::Error::success();
}

/// The kernel's spatial shape: W's, which kernel_shape (when given) must
/// repeat.
static llvm::Expected<llvm::SmallVector<int64_t, 3>>
kernelShape(llvm::StringRef op, const AttributeList &attrs,
            const TensorRef &w) {
  llvm::SmallVector<int64_t, 3> k(w.shape.begin() + 2, w.shape.end());
  llvm::ArrayRef<int64_t> attr = attrs.getInts("kernel_shape");
  if (!attr.empty() && attr != llvm::ArrayRef<int64_t>(k))
    return kernelError(op + ": kernel_shape " + formatShape(attr) +
                       " does not match W " + formatShape(w.shape));
  return k;
}

/// Resolves ConvTranspose's pads and checks Y's spatial shape. The result's
/// image is Y, its positions are X.
static llvm::Expected<WindowGeometry>
convTransposeGeometry(llvm::StringRef op, const AttributeList &attrs,
                      llvm::ArrayRef<int64_t> xs, llvm::ArrayRef<int64_t> ys,
                      llvm::ArrayRef<int64_t> kernel) {
  size_t rank = xs.size();
  WindowGeometry g;
  g.input.assign(ys.begin(), ys.end());
  g.output.assign(xs.begin(), xs.end());
  g.kernel.assign(kernel.begin(), kernel.end());
  auto strides = readSpatialInts(attrs, op, "strides", rank, 1, 1);
  if (!strides)
    return strides.takeError();
  g.strides = std::move(*strides);
  auto dilations = readSpatialInts(attrs, op, "dilations", rank, 1, 1);
  if (!dilations)
    return dilations.takeError();
  g.dilations = std::move(*dilations);
  auto outputPadding = readSpatialInts(attrs, op, "output_padding", rank, 0, 0);
  if (!outputPadding)
    return outputPadding.takeError();
  auto autoPad = readAutoPad(attrs, op);
  if (!autoPad)
    return autoPad.takeError();
  // output_shape may also list N and C; only the spatial entries count.
  llvm::ArrayRef<int64_t> outputShape = attrs.getInts("output_shape");
  if (outputShape.size() == rank + 2)
    outputShape = outputShape.drop_front(2);
  if (!outputShape.empty() && outputShape.size() != rank)
    return kernelError(op + ": output_shape " + formatShape(outputShape) +
                       " does not have one entry per spatial axis");
  if (outputShape.empty() && *autoPad == AutoPadKind::NotSet) {
    if (llvm::Error err = readPads(attrs, op, rank, g.padBegin, g.padEnd))
      return err;
  } else {
    g.padBegin.assign(rank, 0);
    g.padEnd.assign(rank, 0);
  }
  llvm::SmallVector<int64_t, 3> expected(rank);
  for (size_t d = 0; d < rank; ++d) {
    if (kernel[d] < 1)
      return kernelError(op + ": W has an empty kernel axis");
    int64_t full =
        g.strides[d] * (xs[d] - 1) + (*outputPadding)[d] + g.effectiveKernel(d);
    bool same = *autoPad == AutoPadKind::SameUpper ||
                *autoPad == AutoPadKind::SameLower;
    if (!outputShape.empty() || same) {
      // The spec's split: SAME_UPPER puts the odd pixel at the end, every
      // other mode (output_shape with NOTSET included) at the start.
      expected[d] = outputShape.empty() ? xs[d] * g.strides[d] : outputShape[d];
      int64_t total = full - expected[d];
      int64_t half = floorDiv(total, 2);
      g.padBegin[d] = *autoPad == AutoPadKind::SameUpper ? half : total - half;
      g.padEnd[d] = total - g.padBegin[d];
    } else {
      expected[d] = full - g.padBegin[d] - g.padEnd[d];
    }
  }
  if (llvm::ArrayRef<int64_t>(expected) != ys)
    return kernelError(op + ": output spatial shape " + formatShape(ys) +
                       " does not follow from input " + formatShape(xs) +
                       ", kernel and attributes (expected " +
                       formatShape(expected) + ")");
  // An output larger than the full result shifts it right under the spec's
  // split but not under ONNX Runtime's or PyTorch's; refuse rather than
  // pick one. (A negative end pad only appends bias-only positions, which
  // all agree on.)
  for (size_t d = 0; d < rank; ++d)
    if (g.padBegin[d] < 0)
      return kernelError("unsupported: " + op +
                         " whose output_shape or "
                         "auto_pad needs a negative pad at the start");
  return g;
}

llvm::Expected<ConvShape>
resolveConvShape(llvm::StringRef op, const AttributeList &attrs,
                 const TensorRef &x, const TensorRef &w, const TensorRef *bias,
                 const TensorRef &y) {
  ConvShape cs;
  cs.batch = x.shape[0];
  cs.group = attrs.getInt("group", 1);
  int64_t c = x.shape[1], m = w.shape[0];
  if (cs.group < 1 || c % cs.group != 0 || m % cs.group != 0 ||
      w.shape[1] * cs.group != c)
    return kernelError(op + ": X " + formatShape(x.shape) + " and W " +
                       formatShape(w.shape) + " do not fit group " +
                       llvm::Twine(cs.group));
  if (y.shape[0] != cs.batch || y.shape[1] != m)
    return kernelError(op + ": Y " + formatShape(y.shape) +
                       " must be [N, M, ...] with N = " +
                       llvm::Twine(cs.batch) + " and M = " + llvm::Twine(m));
  if (bias && bias->numElements() != m)
    return kernelError(op + ": B " + formatShape(bias->shape) + " must have " +
                       llvm::Twine(m) + " elements");
  cs.imagePerGroup = c / cs.group;
  cs.positionPerGroup = m / cs.group;
  auto kernel = kernelShape(op, attrs, w);
  if (!kernel)
    return kernel.takeError();
  auto g = resolveWindowGeometry(
      attrs, op, llvm::ArrayRef<int64_t>(x.shape).drop_front(2),
      llvm::ArrayRef<int64_t>(y.shape).drop_front(2), *kernel,
      /*ceilMode=*/false, /*allowDilations=*/true);
  if (!g)
    return g.takeError();
  cs.geom = std::move(*g);
  return cs;
}

llvm::Expected<ConvShape>
resolveConvTransposeShape(llvm::StringRef op, const AttributeList &attrs,
                          const TensorRef &x, const TensorRef &w,
                          const TensorRef *bias, const TensorRef &y) {
  ConvShape cs;
  cs.batch = x.shape[0];
  cs.group = attrs.getInt("group", 1);
  int64_t c = x.shape[1];
  if (cs.group < 1 || c % cs.group != 0 || w.shape[0] != c)
    return kernelError(op + ": X " + formatShape(x.shape) + " and W " +
                       formatShape(w.shape) + " do not fit group " +
                       llvm::Twine(cs.group));
  int64_t m = w.shape[1] * cs.group;
  if (y.shape[0] != cs.batch || y.shape[1] != m)
    return kernelError(op + ": Y " + formatShape(y.shape) +
                       " must be [N, M, ...] with N = " +
                       llvm::Twine(cs.batch) + " and M = " + llvm::Twine(m));
  if (bias && bias->numElements() != m)
    return kernelError(op + ": B " + formatShape(bias->shape) + " must have " +
                       llvm::Twine(m) + " elements");
  cs.positionPerGroup = c / cs.group;
  cs.imagePerGroup = w.shape[1];
  auto kernel = kernelShape(op, attrs, w);
  if (!kernel)
    return kernel.takeError();
  auto g = convTransposeGeometry(
      op, attrs, llvm::ArrayRef<int64_t>(x.shape).drop_front(2),
      llvm::ArrayRef<int64_t>(y.shape).drop_front(2), *kernel);
  if (!g)
    return g.takeError();
  cs.geom = std::move(*g);
  return cs;
}

} // namespace zinc::cpu
