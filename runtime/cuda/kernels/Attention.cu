//===- Attention.cu - zinc.Attention and its gradient on the GPU ----------===//
//
// The cpu kernel's algorithm (runtime/cpu/kernels/Attention.cpp), in f32
// arithmetic for f32, f16 and bf16 operands, on CUDA cores:
//  - forward: a block of 8 warps owns 8 query rows, a warp a row; tiles of
//    32 keys (Kt and V) are staged in shared memory and shared by the
//    block's rows; each lane scores one key of the tile and owns Dv / 32 of
//    the row's accumulator; the online softmax is AttentionMath.h's;
//  - backward pass A: a warp owns one key (its dKt column and dV row in
//    registers) and walks tiles of 32 query rows staged in shared memory;
//  - backward pass B: a warp owns one query row (its dQ in registers) and
//    walks the key tiles as the forward does; heads that share a trained
//    bias's matrix go to one block, in order, so that each dBias element
//    has one writer.
// Products are dot products reduced across a warp: correct everywhere, not
// yet the tensor-core tiles the op is meant to get.
//
//===----------------------------------------------------------------------===//
#include "AttentionMath.h"
#include "BlockReduce.cuh"
#include "CudaKernels.h"
#include "DeviceTypes.cuh"
#include "zinc/runtime/cuda/CudaCheck.h"
#include "zinc/support/AttentionOp.h"
#include "llvm/ADT/Twine.h"
#include <algorithm>
#include <climits>

using llvm::Error;
using llvm::Twine;

namespace zinc::cuda {
namespace {
using namespace zinc::attention;

constexpr int kRows = 8;       // query rows (warps) per forward / pass B block
constexpr int kKeys = 32;      // keys per staged tile
constexpr int kKeyWarps = 8;   // keys (warps) per pass A block
constexpr int kRowTile = 32;   // query rows per pass A staged tile
constexpr int kPerLane = kMaxHeadDim / 32;

__device__ __forceinline__ float warpMaxF(float v) {
  for (int m = 16; m > 0; m >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, m));
  return v;
}

template <typename T>
__device__ float maskAndBias(const AttentionParams &p, const AttentionOperand &mask,
                             const bool *maskData, const AttentionOperand &bias,
                             const T *biasData, int64_t h, int64_t i, int64_t j, float dot,
                             bool &masked) {
  masked = maskData && maskData[mask.offset(mask.headBase(h), i, j)];
  float b = biasData ? loadF(biasData[bias.offset(bias.headBase(h), i, j)]) : 0.0f;
  return p.score(dot, masked, b);
}

template <typename T>
__global__ void attentionForwardKernel(AttentionParams p, const T *q, const T *kt, const T *v,
                                       AttentionOperand mask, const bool *maskData,
                                       AttentionOperand bias, const T *biasData, T *y,
                                       float *lse) {
  extern __shared__ float shared[];
  const int64_t d = p.d, dv = p.dv;
  float *qs = shared, *kts = qs + kRows * d, *vs = kts + d * kKeys;
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // One flat grid of (head, row block) pairs: heads may pass grid.y's 65535.
  int64_t rowBlocks = (p.tq + kRows - 1) / kRows;
  int64_t h = int64_t(blockIdx.x) / rowBlocks, firstRow = int64_t(blockIdx.x) % rowBlocks * kRows;
  int64_t i = firstRow + warp;
  bool rowValid = i < p.tq;
  for (int64_t idx = threadIdx.x; idx < kRows * d; idx += blockDim.x) {
    int64_t r = firstRow + idx / d;
    qs[idx] = r < p.tq ? loadF(q[(h * p.tq + r) * d + idx % d]) : 0.0f;
  }
  float acc[kPerLane];
  for (int k = 0; k < kPerLane; ++k)
    acc[k] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  int64_t rowEnd = firstRow + kRows < p.tq ? firstRow + kRows : p.tq;
  int64_t end = p.columnsEnd(rowEnd);
  for (int64_t j0 = 0; j0 < end; j0 += kKeys) {
    int64_t cols = end - j0 < kKeys ? end - j0 : kKeys;
    __syncthreads();
    for (int64_t idx = threadIdx.x; idx < d * kKeys; idx += blockDim.x) {
      int64_t c = idx % kKeys;
      kts[idx] = c < cols ? loadF(kt[(h * d + idx / kKeys) * p.tk + j0 + c]) : 0.0f;
    }
    for (int64_t idx = threadIdx.x; idx < kKeys * dv; idx += blockDim.x) {
      int64_t c = idx / dv;
      vs[idx] = c < cols ? loadF(v[(h * p.tk + j0 + c) * dv + idx % dv]) : 0.0f;
    }
    __syncthreads();
    if (!rowValid)
      continue;
    float s = -INFINITY;
    int64_t j = j0 + lane;
    if (lane < cols && !p.leftOut(i, j)) {
      float dot = 0.0f;
      for (int64_t e = 0; e < d; ++e)
        dot += qs[warp * d + e] * kts[e * kKeys + lane];
      bool masked;
      s = maskAndBias(p, mask, maskData, bias, biasData, h, i, j, dot, masked);
    }
    float top = fmaxf(m, warpMaxF(s));
    float w = softmaxWeight(s, top);
    float rescale = softmaxRescale(m, top);
    l = l * rescale + warpSum(w);
    m = top;
    for (int k = 0; k < kPerLane; ++k)
      acc[k] *= rescale;
    if (lane < cols && p.ratio > 0)
      w *= p.keepScale(h, i, j);
    for (int c = 0; c < cols; ++c) {
      float wc = __shfl_sync(0xffffffffu, w, c);
      for (int k = 0; k < kPerLane; ++k) {
        int64_t e = lane + 32 * k;
        if (e < dv)
          acc[k] += wc * vs[c * dv + e];
      }
    }
  }
  if (!rowValid)
    return;
  for (int k = 0; k < kPerLane; ++k) {
    int64_t e = lane + 32 * k;
    if (e < dv)
      y[(h * p.tq + i) * dv + e] = storeF<T>(acc[k] / l);
  }
  if (lane == 0)
    lse[h * p.tq + i] = m + logf(l);
}

/// Pass A: warp w of block (h, b) (flattened into blockIdx.x) owns key
/// j = b * kKeyWarps + w of head h.
template <typename T>
__global__ void attentionKeysKernel(AttentionParams p, const T *q, const T *kt, const T *v,
                                    AttentionOperand mask, const bool *maskData,
                                    AttentionOperand bias, const T *biasData, const T *y,
                                    const float *lse, const T *dy, T *dkt, T *dvOut) {
  extern __shared__ float shared[];
  const int64_t d = p.d, dv = p.dv;
  float *qs = shared, *dys = qs + kRowTile * d, *lses = dys + kRowTile * dv,
        *dots = lses + kRowTile;
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int64_t keyBlocks = (p.tk + kKeyWarps - 1) / kKeyWarps;
  int64_t h = int64_t(blockIdx.x) / keyBlocks;
  int64_t firstKey = int64_t(blockIdx.x) % keyBlocks * kKeyWarps, j = firstKey + warp;
  bool keyValid = j < p.tk;
  float kreg[kPerLane], vreg[kPerLane], dk[kPerLane], dvAcc[kPerLane];
  for (int k = 0; k < kPerLane; ++k) {
    int64_t e = lane + 32 * k;
    kreg[k] = keyValid && e < d ? loadF(kt[(h * d + e) * p.tk + j]) : 0.0f;
    vreg[k] = keyValid && e < dv ? loadF(v[(h * p.tk + j) * dv + e]) : 0.0f;
    dk[k] = dvAcc[k] = 0.0f;
  }
  for (int64_t i0 = p.rowsBegin(firstKey) / kRowTile * kRowTile; i0 < p.tq; i0 += kRowTile) {
    int64_t rows = p.tq - i0 < kRowTile ? p.tq - i0 : kRowTile;
    __syncthreads();
    for (int64_t idx = threadIdx.x; idx < kRowTile * d; idx += blockDim.x) {
      int64_t r = idx / d;
      qs[idx] = r < rows ? loadF(q[(h * p.tq + i0 + r) * d + idx % d]) : 0.0f;
    }
    for (int64_t idx = threadIdx.x; idx < kRowTile * dv; idx += blockDim.x) {
      int64_t r = idx / dv;
      dys[idx] = r < rows ? loadF(dy[(h * p.tq + i0 + r) * dv + idx % dv]) : 0.0f;
    }
    // rowsum(dY Y) of each staged row: warp w takes rows w, w + 8, ...
    for (int64_t r = warp; r < kRowTile; r += kKeyWarps) {
      float part = 0.0f;
      if (r < rows)
        for (int64_t e = lane; e < dv; e += 32)
          part += loadF(dy[(h * p.tq + i0 + r) * dv + e]) * loadF(y[(h * p.tq + i0 + r) * dv + e]);
      part = warpSum(part);
      if (lane == 0) {
        dots[r] = part;
        lses[r] = r < rows ? lse[h * p.tq + i0 + r] : 0.0f;
      }
    }
    __syncthreads();
    if (!keyValid)
      continue;
    for (int64_t r = 0; r < rows; ++r) {
      int64_t i = i0 + r;
      if (p.leftOut(i, j))
        continue;
      float dot = 0.0f, dpd = 0.0f;
      for (int k = 0; k < kPerLane; ++k) {
        int64_t e = lane + 32 * k;
        if (e < d)
          dot += qs[r * d + e] * kreg[k];
        if (e < dv)
          dpd += dys[r * dv + e] * vreg[k];
      }
      dot = warpSum(dot);
      dpd = warpSum(dpd);
      bool masked;
      float s = maskAndBias(p, mask, maskData, bias, biasData, h, i, j, dot, masked);
      float prob = softmaxWeight(s, lses[r]);
      float keep = p.keepScale(h, i, j);
      float ds = prob * (dpd * keep - dots[r]);
      float dsScores = masked ? 0.0f : ds;
      for (int k = 0; k < kPerLane; ++k) {
        int64_t e = lane + 32 * k;
        if (e < dv)
          dvAcc[k] += prob * keep * dys[r * dv + e];
        if (e < d)
          dk[k] += p.scale * dsScores * qs[r * d + e];
      }
    }
  }
  if (!keyValid)
    return;
  for (int k = 0; k < kPerLane; ++k) {
    int64_t e = lane + 32 * k;
    if (e < d)
      dkt[(h * d + e) * p.tk + j] = storeF<T>(dk[k]);
    if (e < dv)
      dvOut[(h * p.tk + j) * dv + e] = storeF<T>(dvAcc[k]);
  }
}

/// Pass B: warp w of block (group, b) (flattened into blockIdx.x) owns
/// query row i = b * kRows + w of every head of the group.
template <typename T>
__global__ void attentionQueriesKernel(AttentionParams p, const T *q, const T *kt, const T *v,
                                       AttentionOperand mask, const bool *maskData,
                                       AttentionOperand bias, const T *biasData, const T *y,
                                       const float *lse, const T *dy, T *dq, T *dbias) {
  extern __shared__ float shared[];
  const int64_t d = p.d, dv = p.dv;
  float *kts = shared, *vs = kts + d * kKeys;
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int64_t rowBlocks = (p.tq + kRows - 1) / kRows;
  int64_t myGroup = int64_t(blockIdx.x) / rowBlocks;
  int64_t firstRow = int64_t(blockIdx.x) % rowBlocks * kRows, i = firstRow + warp;
  bool rowValid = i < p.tq;
  int64_t rowEnd = firstRow + kRows < p.tq ? firstRow + kRows : p.tq;
  int64_t end = p.columnsEnd(rowEnd);
  for (int64_t h = 0; h < p.heads; ++h) {
    int64_t group = dbias ? bias.headBase(h) / (bias.rowStride * p.tq) : h;
    if (group != myGroup)
      continue;
    float qreg[kPerLane], dyreg[kPerLane], dqAcc[kPerLane];
    float rowDot = 0.0f, rowLse = 0.0f;
    for (int k = 0; k < kPerLane; ++k) {
      int64_t e = lane + 32 * k;
      qreg[k] = rowValid && e < d ? loadF(q[(h * p.tq + i) * d + e]) : 0.0f;
      dyreg[k] = rowValid && e < dv ? loadF(dy[(h * p.tq + i) * dv + e]) : 0.0f;
      if (rowValid && e < dv)
        rowDot += dyreg[k] * loadF(y[(h * p.tq + i) * dv + e]);
      dqAcc[k] = 0.0f;
    }
    rowDot = warpSum(rowDot);
    if (rowValid)
      rowLse = lse[h * p.tq + i];
    int64_t biasBase = dbias ? bias.headBase(h) : 0;
    for (int64_t j0 = 0; j0 < end; j0 += kKeys) {
      int64_t cols = end - j0 < kKeys ? end - j0 : kKeys;
      __syncthreads();
      for (int64_t idx = threadIdx.x; idx < d * kKeys; idx += blockDim.x) {
        int64_t c = idx % kKeys;
        kts[idx] = c < cols ? loadF(kt[(h * d + idx / kKeys) * p.tk + j0 + c]) : 0.0f;
      }
      for (int64_t idx = threadIdx.x; idx < kKeys * dv; idx += blockDim.x) {
        int64_t c = idx / dv;
        vs[idx] = c < cols ? loadF(v[(h * p.tk + j0 + c) * dv + idx % dv]) : 0.0f;
      }
      __syncthreads();
      if (!rowValid)
        continue;
      for (int64_t c = 0; c < cols; ++c) {
        int64_t j = j0 + c;
        if (p.leftOut(i, j))
          continue;
        float dot = 0.0f, dpd = 0.0f;
        for (int k = 0; k < kPerLane; ++k) {
          int64_t e = lane + 32 * k;
          if (e < d)
            dot += qreg[k] * kts[e * kKeys + c];
          if (e < dv)
            dpd += dyreg[k] * vs[c * dv + e];
        }
        dot = warpSum(dot);
        dpd = warpSum(dpd);
        bool masked;
        float s = maskAndBias(p, mask, maskData, bias, biasData, h, i, j, dot, masked);
        float prob = softmaxWeight(s, rowLse);
        float ds = prob * (dpd * p.keepScale(h, i, j) - rowDot);
        float dsScores = masked ? 0.0f : ds;
        for (int k = 0; k < kPerLane; ++k) {
          int64_t e = lane + 32 * k;
          if (e < d)
            dqAcc[k] += p.scale * dsScores * kts[e * kKeys + c];
        }
        if (dbias && lane == 0) {
          T &slot = dbias[bias.offset(biasBase, i, j)];
          slot = storeF<T>(loadF(slot) + ds);
        }
      }
    }
    if (rowValid)
      for (int k = 0; k < kPerLane; ++k) {
        int64_t e = lane + 32 * k;
        if (e < d)
          dq[(h * p.tq + i) * d + e] = storeF<T>(dqAcc[k]);
      }
  }
}

/// The call's sizes, attributes and broadcast layouts, checked as the cpu
/// kernel checks them.
struct Problem {
  AttentionParams p;
  AttentionOperand mask, bias;
};

llvm::Expected<Problem> problemOf(const CudaKernelCall &call) {
  const DeviceTensor *q = call.input(kQ), *kt = call.input(kKt), *v = call.input(kV);
  if (!q || !kt || !v)
    return cudaKernelError(call.opType + ": Q, Kt and V are required");
  size_t r = q->shape.size();
  if (r < 2 || kt->shape.size() != r || v->shape.size() != r)
    return cudaKernelError(call.opType + ": Q, Kt and V must have one rank, at least 2");
  if (kt->dtype != q->dtype || v->dtype != q->dtype)
    return cudaKernelError(call.opType + ": Q, Kt and V differ in type");
  Problem out;
  AttentionParams &p = out.p;
  p.heads = 1;
  for (size_t k = 0; k + 2 < r; ++k) {
    if (kt->shape[k] != q->shape[k] || v->shape[k] != q->shape[k])
      return cudaKernelError(call.opType + ": Q, Kt and V differ in their leading axes");
    p.heads *= q->shape[k];
  }
  p.tq = q->shape[r - 2];
  p.d = q->shape[r - 1];
  p.tk = kt->shape[r - 1];
  p.dv = v->shape[r - 1];
  if (kt->shape[r - 2] != p.d || v->shape[r - 2] != p.tk)
    return cudaKernelError(call.opType + ": Kt must be [..., D, Tk] and V [..., Tk, Dv]");
  if (p.d > kMaxHeadDim || p.dv > kMaxHeadDim)
    return cudaKernelError(call.opType + ": head dimensions " + Twine(p.d) + " and " +
                           Twine(p.dv) + " exceed the kernel's " + Twine(kMaxHeadDim));
  if (r - 2 > size_t(AttentionOperand::kMaxLead))
    return cudaKernelError(call.opType + ": more than " + Twine(AttentionOperand::kMaxLead) +
                           " leading axes");
  const int64_t *lead = q->shape.data();
  int leadRank = static_cast<int>(r - 2);
  if (const DeviceTensor *m = call.input(kMask)) {
    if (m->dtype != DType::Bool ||
        !attentionOperand(m->shape.data(), int(m->shape.size()), lead, leadRank, p.tq, p.tk,
                          out.mask))
      return cudaKernelError(call.opType + ": the mask must be bool and broadcast to the scores");
  }
  if (const DeviceTensor *b = call.input(kBias)) {
    if (b->dtype != q->dtype ||
        !attentionOperand(b->shape.data(), int(b->shape.size()), lead, leadRank, p.tq, p.tk,
                          out.bias))
      return cudaKernelError(call.opType +
                             ": the bias must have the queries' type and broadcast to the scores");
  }
  p.scale = static_cast<float>(call.attrs.getFloat("scale", 1));
  p.fill = static_cast<float>(call.attrs.getFloat("fill", 0));
  p.causal = call.attrs.getInt("causal", 0) != 0;
  double ratio = call.attrs.getFloat("ratio", 0);
  if (!(ratio >= 0 && ratio < 1))
    return cudaKernelError(call.opType + ": ratio outside [0, 1)");
  if (ratio > 0) {
    int64_t id = call.attrs.getInt("seed_id", -1);
    if (id < 0 || id > int64_t(UINT32_MAX))
      return cudaKernelError(call.opType + ": dropout needs a seed_id (a 32-bit unsigned integer)");
    p.ratio = static_cast<float>(ratio);
    p.seedId = static_cast<uint32_t>(id);
    p.seed = call.seed;
    p.step = call.sampleStep();
  }
  return out;
}

/// Lets `kernel` take `bytes` of dynamic shared memory (over the 48 KiB
/// every device gives without asking).
template <typename Kernel> Error allowShared(Kernel kernel, size_t bytes, const char *name) {
  if (bytes <= 48 * 1024)
    return Error::success();
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(bytes)) != cudaSuccess)
    return checkLaunch(name);
  return Error::success();
}

template <typename T> const T *dataOf(const DeviceTensor *t) {
  return t ? static_cast<const T *>(t->data) : nullptr;
}

} // namespace

Error runAttention(const CudaKernelCall &call) {
  auto problem = problemOf(call);
  if (!problem)
    return problem.takeError();
  const AttentionParams &p = problem->p;
  DeviceTensor *y = call.output(0), *lse = call.output(1);
  DType type = call.input(kQ)->dtype;
  if (!y || y->dtype != type || y->numElements() != p.heads * p.tq * p.dv)
    return cudaKernelError(call.opType + ": Y must be [..., Tq, Dv] of the queries' type");
  if (!lse || lse->dtype != DType::F32 || lse->numElements() != p.heads * p.tq)
    return cudaKernelError(call.opType + ": LSE must be [..., Tq] of f32");
  return dispatchFloat(type, call.opType, [&](auto tag) -> Error {
    using T = decltype(tag);
    if (p.heads == 0 || p.tq == 0)
      return Error::success();
    size_t shared = sizeof(float) * (kRows * p.d + p.d * kKeys + kKeys * p.dv);
    if (Error e = allowShared(attentionForwardKernel<T>, shared, "attentionForwardKernel"))
      return e;
    int64_t blocks = (p.tq + kRows - 1) / kRows * p.heads;
    if (blocks > int64_t(INT32_MAX))
      return cudaKernelError(call.opType + ": " + Twine(blocks) + " blocks exceed a grid");
    dim3 grid(static_cast<unsigned>(blocks));
    attentionForwardKernel<T><<<grid, kRows * 32, shared, call.stream>>>(
        p, dataOf<T>(call.input(kQ)), dataOf<T>(call.input(kKt)), dataOf<T>(call.input(kV)),
        problem->mask, dataOf<bool>(call.input(kMask)), problem->bias,
        dataOf<T>(call.input(kBias)), static_cast<T *>(y->data), static_cast<float *>(lse->data));
    return checkLaunch("attentionForwardKernel");
  });
}

Error runAttentionGrad(const CudaKernelCall &call) {
  auto problem = problemOf(call);
  if (!problem)
    return problem.takeError();
  const AttentionParams &p = problem->p;
  DType type = call.input(kQ)->dtype;
  const DeviceTensor *y = call.input(kY), *lse = call.input(kLse), *dy = call.input(kDy);
  if (!y || !dy || y->dtype != type || dy->dtype != type ||
      y->numElements() != p.heads * p.tq * p.dv || dy->numElements() != y->numElements())
    return cudaKernelError(call.opType + ": Y and dY must be [..., Tq, Dv] of the queries' type");
  if (!lse || lse->dtype != DType::F32 || lse->numElements() != p.heads * p.tq)
    return cudaKernelError(call.opType + ": LSE must be [..., Tq] of f32");
  for (unsigned o = kDq; o <= kDv; ++o) {
    const DeviceTensor *out = call.output(o), *in = call.input(o);
    if (!out || out->dtype != type || out->shape != in->shape)
      return cudaKernelError(call.opType + ": gradient " + Twine(o) +
                             " must have its operand's type and shape");
  }
  DeviceTensor *dbias = call.output(kDbias);
  int64_t groups = p.heads;
  if (dbias) {
    const DeviceTensor *bias = call.input(kBias);
    if (!bias || dbias->dtype != type || dbias->shape != bias->shape)
      return cudaKernelError(call.opType + ": dBias must have the bias's type and shape");
    const AttentionOperand &b = problem->bias;
    if (b.rowStride == 0 || b.colStride == 0)
      return cudaKernelError(call.opType + ": a trained bias must cover whole [Tq, Tk] matrices");
    groups = 1;
    for (int k = 0; k < b.rank; ++k)
      if (b.headStrides[k] != 0)
        groups *= b.headDims[k];
  }
  return dispatchFloat(type, call.opType, [&](auto tag) -> Error {
    using T = decltype(tag);
    if (p.heads == 0 || p.tq == 0 || p.tk == 0) {
      // No (query, key) pair: every gradient is zero (the cpu's too).
      for (unsigned o = kDq; o <= kDbias; ++o)
        if (DeviceTensor *out = call.output(o); out && out->byteSize() > 0 &&
            cudaMemsetAsync(out->data, 0, out->byteSize(), call.stream) != cudaSuccess)
          return checkLaunch("cudaMemsetAsync of a gradient");
      return Error::success();
    }
    const T *q = dataOf<T>(call.input(kQ)), *kt = dataOf<T>(call.input(kKt)),
            *v = dataOf<T>(call.input(kV)), *bias = dataOf<T>(call.input(kBias));
    const bool *mask = dataOf<bool>(call.input(kMask));
    const float *lseData = static_cast<const float *>(lse->data);
    size_t sharedA = sizeof(float) * (kRowTile * p.d + kRowTile * p.dv + 2 * kRowTile);
    if (Error e = allowShared(attentionKeysKernel<T>, sharedA, "attentionKeysKernel"))
      return e;
    int64_t blocksA = (p.tk + kKeyWarps - 1) / kKeyWarps * p.heads;
    int64_t blocksB = (p.tq + kRows - 1) / kRows * groups;
    if (std::max(blocksA, blocksB) > int64_t(INT32_MAX))
      return cudaKernelError(call.opType + ": too many blocks for a grid");
    dim3 gridA(static_cast<unsigned>(blocksA));
    attentionKeysKernel<T><<<gridA, kKeyWarps * 32, sharedA, call.stream>>>(
        p, q, kt, v, problem->mask, mask, problem->bias, bias, dataOf<T>(y), lseData,
        dataOf<T>(dy), static_cast<T *>(call.output(kDkt)->data),
        static_cast<T *>(call.output(kDv)->data));
    if (Error e = checkLaunch("attentionKeysKernel"))
      return e;
    if (dbias && cudaMemsetAsync(dbias->data, 0, dbias->numElements() * sizeof(T),
                                 call.stream) != cudaSuccess)
      return checkLaunch("cudaMemsetAsync of dBias");
    size_t sharedB = sizeof(float) * (p.d * kKeys + kKeys * p.dv);
    if (Error e = allowShared(attentionQueriesKernel<T>, sharedB, "attentionQueriesKernel"))
      return e;
    dim3 gridB(static_cast<unsigned>(blocksB));
    attentionQueriesKernel<T><<<gridB, kRows * 32, sharedB, call.stream>>>(
        p, q, kt, v, problem->mask, mask, problem->bias, bias, dataOf<T>(y), lseData,
        dataOf<T>(dy), static_cast<T *>(call.output(kDq)->data),
        dbias ? static_cast<T *>(dbias->data) : nullptr);
    return checkLaunch("attentionQueriesKernel");
  });
}

} // namespace zinc::cuda
