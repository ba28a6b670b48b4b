//===- ConvCores.cu - im2col/col2im kernels and the GPU conv cores --------===//
//
// The three lowerings of ConvCores.h. Kernels are grid-stride loops over
// the elements they write: im2col over column entries (consecutive threads
// read consecutive image elements at stride 1), the col2im gather over
// image elements, the bias fill over output elements. GEMMs go through
// cuBLASLt (CublasLtGemm.h) in the tensors' own type with f32
// accumulation; f32 uses TF32 only when the run allows it.
//
//===----------------------------------------------------------------------===//
#include "ConvCores.h"
#include "ConvLowering.h"
#include "DeviceTypes.cuh"
#include "zinc/runtime/cuda/CudaCheck.h"
#include "zinc/runtime/cuda/CublasLtGemm.h"
#include "llvm/ADT/Twine.h"
#include <algorithm>

using llvm::Error;
using llvm::Twine;

namespace zinc::cuda {

namespace {

constexpr unsigned kThreads = 256;

/// Column entries of `channels` image channels (`perGroup` to a group) of
/// `items` batch items, positions [p0, p0 + count), laid out by `layout`;
/// zero where a tap reads padding.
template <typename T>
__global__ void im2colKernel(ConvWindow w, const T *image, int64_t itemStride,
                             int64_t channels, int64_t perGroup, int64_t items,
                             int64_t p0, int64_t count, ColumnLayout layout,
                             T *col) {
  int64_t total = items * channels * w.taps * count;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    int64_t p = e % count, rest = e / count;
    int64_t tap = rest % w.taps;
    rest /= w.taps;
    int64_t c = rest % channels, item = rest / channels;
    int64_t at = imageElementOf(w, tap, p0 + p);
    T v = at < 0 ? storeF<T>(0.0f)
                 : image[item * itemStride + c * w.inPlane + at];
    col[layout.at(c / perGroup, item, (c % perGroup) * w.taps + tap, p)] = v;
  }
}

/// image += the column entries that read each image element, for positions
/// [p0, p0 + count): the adjoint of im2col as a gather, taps in ascending
/// order, summed in f32 and rounded once.
template <typename T>
__global__ void col2imKernel(ConvWindow w, const T *col, ColumnLayout layout,
                             int64_t channels, int64_t perGroup, int64_t items,
                             int64_t p0, int64_t count, T *image,
                             int64_t itemStride) {
  int64_t total = items * channels * w.inPlane;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    int64_t pixel = e % w.inPlane, rest = e / w.inPlane;
    int64_t c = rest % channels, item = rest / channels;
    T *out = image + item * itemStride + c * w.inPlane + pixel;
    float acc = loadF(*out);
    int64_t g = c / perGroup, row = (c % perGroup) * w.taps;
    for (int64_t tap = 0; tap < w.taps; ++tap) {
      int64_t p = positionOf(w, tap, pixel) - p0;
      if (p >= 0 && p < count)
        acc += loadF(col[layout.at(g, item, row + tap, p)]);
    }
    *out = storeF<T>(acc);
  }
}

/// Every plane of y [batch, channels, plane] (item n at y + n * itemStride)
/// set to its channel's bias, or zero without one.
template <typename T>
__global__ void fillBiasKernel(T *y, const T *bias, int64_t batch,
                               int64_t channels, int64_t plane,
                               int64_t itemStride) {
  int64_t total = batch * channels * plane;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    int64_t p = e % plane, rest = e / plane;
    int64_t c = rest % channels, n = rest / channels;
    y[n * itemStride + c * plane + p] = bias ? bias[c] : storeF<T>(0.0f);
  }
}

/// rows[m][item * count + p] = planes[item][m][p0 + p]: a tile of the
/// position gradient with its items side by side, so that one GEMM sums
/// the weight gradient over them.
template <typename T>
__global__ void sideBySideKernel(const T *planes, int64_t channels,
                                 int64_t plane, int64_t items, int64_t p0,
                                 int64_t count, T *rows) {
  int64_t total = channels * items * count;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    int64_t p = e % count, rest = e / count;
    int64_t item = rest % items, m = rest / items;
    rows[e] = planes[(item * channels + m) * plane + p0 + p];
  }
}

/// Depthwise Conv (one image channel per group) directly: each output
/// element is its bias plus its window's taps times its channel's weights,
/// taps in ascending order as the cpu adds them.
template <typename T>
__global__ void depthwiseKernel(ConvWindow w, const T *x, const T *wt,
                                const T *bias, int64_t batch, int64_t groups,
                                int64_t perGroup, int64_t itemStride, T *y) {
  int64_t outChannels = groups * perGroup;
  int64_t total = batch * outChannels * w.outPlane;
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    int64_t p = e % w.outPlane, rest = e / w.outPlane;
    int64_t oc = rest % outChannels, n = rest / outChannels;
    const T *plane = x + (n * groups + oc / perGroup) * w.inPlane;
    const T *taps = wt + oc * w.taps;
    float acc = bias ? loadF(bias[oc]) : 0.0f;
    for (int64_t k = 0; k < w.taps; ++k) {
      int64_t at = imageElementOf(w, k, p);
      if (at >= 0)
        acc += loadF(plane[at]) * loadF(taps[k]);
    }
    y[n * itemStride + oc * w.outPlane + p] = storeF<T>(acc);
  }
}

/// `base` advanced by `elements` elements of `dtype`.
template <typename P> P *advance(P *base, int64_t elements, DType dtype) {
  using Byte = std::conditional_t<std::is_const_v<P>, const char, char>;
  return reinterpret_cast<P *>(reinterpret_cast<Byte *>(base) +
                               elements * int64_t(dtypeSize(dtype)));
}

bool isPointwise(const cpu::WindowGeometry &g) {
  for (size_t d = 0; d < g.rank(); ++d)
    if (g.kernel[d] != 1 || g.strides[d] != 1 || g.padBegin[d] != 0 ||
        g.input[d] != g.output[d])
      return false;
  return true;
}

/// The GEMM settings every conv product shares.
GemmDesc convGemm(const CudaKernelCall &call, DType dtype) {
  GemmDesc d;
  d.dtype = dtype;
  d.tf32 = call.allowTf32;
  return d;
}

Error noContext(const CudaKernelCall &call) {
  return cudaKernelError(call.opType + ": no cuBLASLt context for the call's stream");
}

/// Free scratch of `call` in elements of `dtype`, less the alignment the
/// pieces taken from it may lose.
int64_t scratchBudget(const CudaKernelCall &call, DType dtype, int pieces) {
  int64_t free = int64_t(call.workspaceBytes - call.scratchUsed) - 256 * pieces;
  return std::max<int64_t>(free, 0) / int64_t(dtypeSize(dtype));
}

Error fillBias(const CudaKernelCall &call, DType dtype, void *y,
               const void *bias, int64_t batch, int64_t channels,
               int64_t plane, int64_t itemStride) {
  return dispatchFloat(dtype, call.opType, [&](auto tag) -> Error {
    using T = decltype(tag);
    int64_t n = batch * channels * plane;
    if (n == 0)
      return Error::success();
    fillBiasKernel<T><<<gridFor(n, kThreads), kThreads, 0, call.stream>>>(
        static_cast<T *>(y), static_cast<const T *>(bias), batch, channels,
        plane, itemStride);
    return checkLaunch(call.opType + " bias fill");
  });
}

Error im2col(const CudaKernelCall &call, DType dtype, const ConvWindow &w,
             const void *image, int64_t itemStride, int64_t channels,
             int64_t perGroup, int64_t items, int64_t p0, int64_t count,
             ColumnLayout layout, void *col) {
  return dispatchFloat(dtype, call.opType, [&](auto tag) -> Error {
    using T = decltype(tag);
    int64_t n = items * channels * w.taps * count;
    im2colKernel<T><<<gridFor(n, kThreads), kThreads, 0, call.stream>>>(
        w, static_cast<const T *>(image), itemStride, channels, perGroup,
        items, p0, count, layout, static_cast<T *>(col));
    return checkLaunch(call.opType + " im2col");
  });
}

} // namespace

llvm::Expected<ConvWindow> convWindowOf(const cpu::WindowGeometry &g,
                                        llvm::StringRef op) {
  if (g.rank() < 1 || g.rank() > 3)
    return cudaKernelError("unsupported: " + op + " over " + Twine(g.rank()) +
                           " spatial axes on the cuda backend (1 to 3)");
  ConvWindow w;
  w.rank = static_cast<int>(g.rank());
  for (size_t d = 0; d < g.rank(); ++d) {
    w.in[d] = g.input[d];
    w.out[d] = g.output[d];
    w.kernel[d] = g.kernel[d];
    w.stride[d] = g.strides[d];
    w.dilation[d] = g.dilations[d];
    w.padBegin[d] = g.padBegin[d];
  }
  w.inPlane = g.inputSize();
  w.outPlane = g.outputSize();
  w.taps = g.kernelSize();
  return w;
}

llvm::Expected<ConvTiling> planConvTiles(llvm::StringRef op, int64_t batch,
                                         int64_t positions, int64_t lineLength,
                                         int64_t perPosition, int64_t budget) {
  ConvTiling t;
  if (batch == 0 || positions == 0 || perPosition == 0) {
    t.items = std::max<int64_t>(batch, 1);
    t.positions = std::max<int64_t>(positions, 1);
    return t;
  }
  int64_t perItem = perPosition * positions;
  if (perItem <= budget) {
    t.items = std::min(batch, budget / perItem);
    t.positions = positions;
    return t;
  }
  // Whole lines where one fits; otherwise any run of positions (a long
  // last axis): the kernels decode flat positions either way.
  t.items = 1;
  lineLength = std::max<int64_t>(lineLength, 1);
  int64_t lines = budget / (perPosition * lineLength);
  t.positions = lines > 0 ? lines * lineLength : budget / perPosition;
  if (t.positions == 0)
    return cudaKernelError(op + ": one position needs " + Twine(perPosition) +
                           " scratch elements for its columns, more than the " +
                           Twine(budget) + " the cuda kernel scratch has free");
  return t;
}

Error convForwardOnGpu(const CudaKernelCall &call, const cpu::ConvShape &cs,
                       DType dtype, const void *image, const void *w,
                       const void *bias, void *positions) {
  const cpu::WindowGeometry &g = cs.geom;
  auto win = convWindowOf(g, call.opType);
  if (!win)
    return win.takeError();
  int64_t cg = cs.imagePerGroup, mg = cs.positionPerGroup;
  int64_t inPlane = g.inputSize(), outPlane = g.outputSize();
  int64_t rows = cg * g.kernelSize();
  int64_t inChannels = cg * cs.group, outChannels = mg * cs.group;
  int64_t yBatch = cs.outBatchStride ? cs.outBatchStride : outChannels * outPlane;
  bool depthwise = cg == 1 && cs.group > 1 && !isPointwise(g);
  if (!depthwise && !call.gemm)
    return noContext(call);
  // Bias first; the GEMMs accumulate onto it (beta 1), as on the cpu.
  if (Error err = fillBias(call, dtype, positions, bias, cs.batch, outChannels,
                           outPlane, yBatch))
    return err;
  if (rows == 0 || outPlane == 0 || mg == 0 || cs.batch == 0)
    return Error::success();
  if (depthwise)
    return dispatchFloat(dtype, call.opType, [&](auto tag) -> Error {
      using T = decltype(tag);
      int64_t n = cs.batch * outChannels * outPlane;
      depthwiseKernel<T><<<gridFor(n, kThreads), kThreads, 0, call.stream>>>(
          *win, static_cast<const T *>(image), static_cast<const T *>(w),
          static_cast<const T *>(bias), cs.batch, cs.group, mg, yBatch,
          static_cast<T *>(positions));
      return checkLaunch(call.opType + " depthwise");
    });
  GemmDesc d = convGemm(call, dtype);
  d.m = mg;
  d.k = rows;
  d.beta = 1.0f;
  d.ldc = outPlane;
  d.strideC = yBatch;
  if (isPointwise(g)) {
    // The image planes are the columns already.
    d.n = outPlane;
    d.batch = cs.batch;
    d.strideB = inChannels * inPlane;
    for (int64_t grp = 0; grp < cs.group; ++grp)
      if (Error err = gemm(*call.gemm, d, advance(w, grp * mg * rows, dtype),
                           advance(image, grp * cg * inPlane, dtype),
                           advance(positions, grp * mg * outPlane, dtype),
                           call.stream))
        return err;
    return Error::success();
  }
  auto tiles = planConvTiles(call.opType, cs.batch, outPlane, g.output.back(),
                             inChannels * g.kernelSize(),
                             scratchBudget(call, dtype, 1));
  if (!tiles)
    return tiles.takeError();
  auto col = call.scratch<char>(tiles->items * tiles->positions * inChannels *
                                g.kernelSize() * dtypeSize(dtype));
  if (!col)
    return col.takeError();
  for (int64_t n0 = 0; n0 < cs.batch; n0 += tiles->items)
    for (int64_t p0 = 0; p0 < outPlane; p0 += tiles->positions) {
      int64_t items = std::min(tiles->items, cs.batch - n0);
      int64_t count = std::min(tiles->positions, outPlane - p0);
      ColumnLayout layout{items * rows * count, rows * count, count};
      if (Error err = im2col(call, dtype, *win,
                             advance(image, n0 * inChannels * inPlane, dtype),
                             inChannels * inPlane, inChannels, cg, items, p0,
                             count, layout, *col))
        return err;
      d.n = count;
      d.batch = items;
      d.strideB = rows * count;
      for (int64_t grp = 0; grp < cs.group; ++grp)
        if (Error err = gemm(
                *call.gemm, d, advance(w, grp * mg * rows, dtype),
                advance(*col, grp * layout.group, dtype),
                advance(positions, n0 * yBatch + grp * mg * outPlane + p0, dtype),
                call.stream))
          return err;
    }
  return Error::success();
}

Error convTransposeOnGpu(const CudaKernelCall &call, const cpu::ConvShape &cs,
                         DType dtype, const void *positions, const void *w,
                         const void *bias, void *image) {
  const cpu::WindowGeometry &g = cs.geom;
  auto win = convWindowOf(g, call.opType);
  if (!win)
    return win.takeError();
  int64_t cg = cs.positionPerGroup, mg = cs.imagePerGroup;
  int64_t xPlane = g.outputSize(), yPlane = g.inputSize();
  int64_t rows = mg * g.kernelSize();
  int64_t inChannels = cg * cs.group, outChannels = mg * cs.group;
  if (!call.gemm)
    return noContext(call);
  if (Error err = fillBias(call, dtype, image, bias, cs.batch, outChannels,
                           yPlane, outChannels * yPlane))
    return err;
  if (rows == 0 || xPlane == 0 || cg == 0 || cs.batch == 0)
    return Error::success();
  GemmDesc d = convGemm(call, dtype);
  // W's group rows are stored [Cg, Mg * taps]: transposed, they map a
  // position's channels to its column entries.
  d.transA = true;
  d.k = cg;
  d.ldb = xPlane;
  d.strideB = inChannels * xPlane;
  if (isPointwise(g)) {
    d.m = mg;
    d.n = xPlane;
    d.batch = cs.batch;
    d.beta = 1.0f;
    d.strideC = outChannels * yPlane;
    for (int64_t grp = 0; grp < cs.group; ++grp)
      if (Error err = gemm(*call.gemm, d, advance(w, grp * cg * rows, dtype),
                           advance(positions, grp * cg * xPlane, dtype),
                           advance(image, grp * mg * yPlane, dtype),
                           call.stream))
        return err;
    return Error::success();
  }
  auto tiles = planConvTiles(call.opType, cs.batch, xPlane, g.output.back(),
                             outChannels * g.kernelSize(),
                             scratchBudget(call, dtype, 1));
  if (!tiles)
    return tiles.takeError();
  auto col = call.scratch<char>(tiles->items * tiles->positions * outChannels *
                                g.kernelSize() * dtypeSize(dtype));
  if (!col)
    return col.takeError();
  d.m = rows;
  d.beta = 0.0f;
  for (int64_t n0 = 0; n0 < cs.batch; n0 += tiles->items)
    for (int64_t p0 = 0; p0 < xPlane; p0 += tiles->positions) {
      int64_t items = std::min(tiles->items, cs.batch - n0);
      int64_t count = std::min(tiles->positions, xPlane - p0);
      ColumnLayout layout{items * rows * count, rows * count, count};
      d.n = count;
      d.batch = items;
      d.strideC = rows * count;
      for (int64_t grp = 0; grp < cs.group; ++grp)
        if (Error err = gemm(
                *call.gemm, d, advance(w, grp * cg * rows, dtype),
                advance(positions, n0 * inChannels * xPlane + grp * cg * xPlane + p0,
                        dtype),
                advance(*col, grp * layout.group, dtype), call.stream))
          return err;
      Error err = dispatchFloat(dtype, call.opType, [&](auto tag) -> Error {
        using T = decltype(tag);
        int64_t n = items * outChannels * yPlane;
        col2imKernel<T><<<gridFor(n, kThreads), kThreads, 0, call.stream>>>(
            *win, reinterpret_cast<const T *>(*col), layout, outChannels, mg, items,
            p0, count,
            static_cast<T *>(advance(image, n0 * outChannels * yPlane, dtype)),
            outChannels * yPlane);
        return checkLaunch(call.opType + " col2im");
      });
      if (err)
        return err;
    }
  return Error::success();
}

Error convWeightGradOnGpu(const CudaKernelCall &call, const cpu::ConvShape &cs,
                          DType dtype, const void *image,
                          const void *positionGrad, void *dw) {
  const cpu::WindowGeometry &g = cs.geom;
  auto win = convWindowOf(g, call.opType);
  if (!win)
    return win.takeError();
  int64_t cg = cs.imagePerGroup, mg = cs.positionPerGroup;
  int64_t inPlane = g.inputSize(), outPlane = g.outputSize();
  int64_t rows = cg * g.kernelSize();
  int64_t imageChannels = cg * cs.group, positionChannels = mg * cs.group;
  if (!call.gemm)
    return noContext(call);
  if (rows == 0 || outPlane == 0 || mg == 0 || cs.batch == 0) {
    size_t bytes = positionChannels * rows * dtypeSize(dtype);
    if (bytes)
      if (Error err = checkCuda(cudaMemsetAsync(dw, 0, bytes, call.stream),
                                "cudaMemsetAsync"))
        return err;
    return Error::success();
  }
  // Per item and position: its column entries and its gradient row entries.
  auto tiles = planConvTiles(call.opType, cs.batch, outPlane, g.output.back(),
                             imageChannels * g.kernelSize() + positionChannels,
                             scratchBudget(call, dtype, 2));
  if (!tiles)
    return tiles.takeError();
  int64_t tileSpan = tiles->items * tiles->positions;
  auto col = call.scratch<char>(tileSpan * imageChannels * g.kernelSize() *
                                dtypeSize(dtype));
  if (!col)
    return col.takeError();
  auto gradRows = call.scratch<char>(tileSpan * positionChannels * dtypeSize(dtype));
  if (!gradRows)
    return gradRows.takeError();
  GemmDesc d = convGemm(call, dtype);
  d.transB = true;
  d.m = mg;
  d.n = rows;
  bool first = true;
  for (int64_t n0 = 0; n0 < cs.batch; n0 += tiles->items)
    for (int64_t p0 = 0; p0 < outPlane; p0 += tiles->positions) {
      int64_t items = std::min(tiles->items, cs.batch - n0);
      int64_t count = std::min(tiles->positions, outPlane - p0);
      int64_t span = items * count;
      ColumnLayout layout{rows * span, count, span};
      if (Error err = im2col(call, dtype, *win,
                             advance(image, n0 * imageChannels * inPlane, dtype),
                             imageChannels * inPlane, imageChannels, cg, items,
                             p0, count, layout, *col))
        return err;
      Error err = dispatchFloat(dtype, call.opType, [&](auto tag) -> Error {
        using T = decltype(tag);
        int64_t n = positionChannels * span;
        sideBySideKernel<T><<<gridFor(n, kThreads), kThreads, 0, call.stream>>>(
            static_cast<const T *>(
                advance(positionGrad, n0 * positionChannels * outPlane, dtype)),
            positionChannels, outPlane, items, p0, count,
            reinterpret_cast<T *>(*gradRows));
        return checkLaunch(call.opType + " gradient rows");
      });
      if (err)
        return err;
      // Later tiles add onto the earlier ones' sums.
      d.k = span;
      d.beta = first ? 0.0f : 1.0f;
      first = false;
      for (int64_t grp = 0; grp < cs.group; ++grp)
        if (Error err = gemm(*call.gemm, d,
                             advance(*gradRows, grp * mg * span, dtype),
                             advance(*col, grp * layout.group, dtype),
                             advance(dw, grp * mg * rows, dtype), call.stream))
          return err;
    }
  return Error::success();
}

} // namespace zinc::cuda
