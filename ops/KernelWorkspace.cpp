//===- KernelWorkspace.cpp - The scratch bytes a cpu kernel call takes ----===//
//
// One function per kernel family that takes scratch, each mirroring the
// pieces its kernel takes (the kernels' files say which); an op's Workspace
// column in Ops.def names its function. A call the kernel
// would refuse (bad shapes, unsupported types) needs nothing. The cpu
// kernels' unit tests run every call with exactly this many bytes, so a
// kernel that takes more than counted here fails there.
//
//===----------------------------------------------------------------------===//
#include "zinc/ops/KernelWorkspace.h"
#include "zinc/ops/OpDefinition.h"
#include "zinc/support/MatMulGeometry.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

namespace zinc {

using Operands = llvm::ArrayRef<KernelOperand>;

static const KernelOperand *operand(Operands ops, size_t i) {
  return i < ops.size() && ops[i].present ? &ops[i] : nullptr;
}

static int64_t elements(const KernelOperand *t) {
  return t ? numElements(t->shape) : 0;
}

static bool isFloat16(DType t) { return t == DType::F16 || t == DType::BF16; }

/// Bytes of ComputeT (and GemmT) of a float type: double for f64, float for
/// the others.
static uint64_t computeBytes(DType t) { return t == DType::F64 ? 8 : 4; }

/// `n` elements of `size` bytes as one piece.
static uint64_t piece(int64_t n, uint64_t size) {
  return workspacePiece(static_cast<uint64_t>(std::max<int64_t>(n, 0)) * size);
}

/// The kernels' normalizeAxis: -1 for an axis out of range.
static int64_t normalizeAxis(int64_t axis, int64_t rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  return a < 0 || a >= std::max<int64_t>(rank, 1) ? -1 : a;
}

//===----------------------------------------------------------------------===//
// MatMul and Gemm (MatMul.cpp: takeWidenedBlocks)
//===----------------------------------------------------------------------===//

static uint64_t widenedBlocksBytes(int64_t m, int64_t n, int64_t k) {
  int64_t bm = std::min(m, kWidenBlockM), bn = std::min(n, kWidenBlockN),
          bk = std::min(k, kWidenBlockK);
  return piece(bm * bk, 4) + piece(bk * bn, 4) + piece(bm * bn, 4);
}

/// MatMul, and zinc.FusedMatMul with its transposes and flattenings.
static uint64_t matMulBytes(Operands ins, const AttributeList &attrs) {
  const KernelOperand *a = operand(ins, 0), *b = operand(ins, 1);
  if (!a || !b || !isFloat16(a->dtype))
    return 0;
  auto g = fusedMatMulGeometry(a->shape, b->shape, attrs);
  if (!g) {
    // The kernel refuses such shapes itself.
    llvm::consumeError(g.takeError());
    return 0;
  }
  if (g->rows() == 0 || g->n == 0)
    return 0;
  return widenedBlocksBytes(g->rows(), g->n, g->k);
}

static uint64_t gemmBytes(Operands ins, const AttributeList &attrs) {
  const KernelOperand *a = operand(ins, 0), *b = operand(ins, 1);
  if (!a || !b || !isFloat16(a->dtype) || a->shape.size() != 2 ||
      b->shape.size() != 2)
    return 0;
  bool ta = attrs.getInt("transA", 0) != 0, tb = attrs.getInt("transB", 0) != 0;
  int64_t m = ta ? a->shape[1] : a->shape[0];
  int64_t k = ta ? a->shape[0] : a->shape[1];
  int64_t n = tb ? b->shape[0] : b->shape[1];
  if (m == 0 || n == 0)
    return 0;
  return widenedBlocksBytes(m, n, k);
}

//===----------------------------------------------------------------------===//
// Conv and its gradients (ConvLowering.h: dispatchConvFloat,
// convColumnElements)
//===----------------------------------------------------------------------===//

namespace {
enum class Lowering { Forward, Transpose, WeightGrad };

/// Which operand plays which role in a convolution kernel (ConvLowering.h).
struct ConvRoles {
  const KernelOperand *image = nullptr, *positions = nullptr, *w = nullptr;
  Lowering lowering = Lowering::Forward;
  /// ConvTranspose's geometry: pads follow from output_shape, auto_pad and
  /// output_padding too.
  bool transposeGeometry = false;
};
} // namespace

static bool convRoles(llvm::StringRef op, Operands ins, Operands outs,
                      ConvRoles &r) {
  const KernelOperand *i0 = operand(ins, 0), *i1 = operand(ins, 1),
                      *o0 = operand(outs, 0);
  if (op == "Conv" || op == "ConvChannels")
    r = {i0, o0, i1, Lowering::Forward, false};
  else if (op == "ConvChannelsInto")
    r = {i0, operand(ins, 3), i1, Lowering::Forward, false};
  else if (op == "ConvTranspose")
    r = {o0, i0, i1, Lowering::Transpose, true};
  else if (op == "ConvGradInput")
    r = {o0, i0, i1, Lowering::Transpose, false};
  else if (op == "ConvGradWeight")
    r = {i1, i0, o0, Lowering::WeightGrad, false};
  else if (op == "ConvTransposeGradInput")
    r = {i0, o0, i1, Lowering::Forward, true};
  else if (op == "ConvTransposeGradWeight")
    r = {i0, i1, o0, Lowering::WeightGrad, true};
  else
    return false;
  return r.image && r.positions && r.w;
}

static bool allZero(llvm::ArrayRef<int64_t> v) {
  return llvm::all_of(v, [](int64_t x) { return x == 0; });
}

/// Elements of the column tile (convColumnElements).
static int64_t convColumns(const ConvRoles &r, const AttributeList &attrs) {
  llvm::ArrayRef<int64_t> image = r.image->shape,
                          positions = r.positions->shape, w = r.w->shape;
  if (image.size() < 3 || positions.size() != image.size() ||
      w.size() != image.size())
    return 0;
  int64_t group = attrs.getInt("group", 1);
  if (group < 1)
    return 0;
  int64_t imagePerGroup = image[1] / group,
          positionPerGroup = positions[1] / group;
  llvm::ArrayRef<int64_t> taps = w.drop_front(2);
  llvm::ArrayRef<int64_t> imageSpatial = image.drop_front(2),
                          positionSpatial = positions.drop_front(2);
  int64_t rows = imagePerGroup * numElements(taps);
  int64_t outPlane = numElements(positionSpatial);
  if (rows == 0 || outPlane == 0 || positionPerGroup == 0)
    return 0;
  // Pointwise: a one-tap kernel at stride 1 over an unchanged spatial shape
  // (which for Conv leaves no room for padding). ConvTranspose's pads may
  // also come from output_shape, auto_pad or output_padding: only plain
  // zero pads count there.
  llvm::ArrayRef<int64_t> strides = attrs.getInts("strides");
  bool pointwise = llvm::all_of(taps, [](int64_t t) { return t == 1; }) &&
                   llvm::all_of(strides, [](int64_t s) { return s == 1; }) &&
                   imageSpatial == positionSpatial;
  if (pointwise && r.transposeGeometry)
    pointwise = allZero(attrs.getInts("pads")) &&
                allZero(attrs.getInts("output_padding")) &&
                attrs.getInts("output_shape").empty() &&
                attrs.getString("auto_pad", "NOTSET") == "NOTSET";
  if (pointwise)
    return 0;
  if (r.lowering == Lowering::Forward && imagePerGroup == 1 && group > 1)
    return 0; // the depthwise kernel
  int64_t len = positionSpatial.back();
  int64_t lines = outPlane / std::max<int64_t>(len, 1);
  return rows * convLinesPerTile(rows, len, lines) * len;
}

static uint64_t convBytes(llvm::StringRef op, Operands ins, Operands outs,
                          const AttributeList &attrs) {
  ConvRoles r;
  if (!convRoles(op, ins, outs, r) || !isFloatDType(r.image->dtype))
    return 0;
  DType t = r.image->dtype;
  uint64_t bytes = piece(convColumns(r, attrs), computeBytes(t));
  if (isFloat16(t)) {
    // Every operand widened to f32 once: the inputs and the output.
    for (const KernelOperand &in : ins)
      if (in.present)
        bytes += piece(numElements(in.shape), 4);
    bytes += piece(elements(operand(outs, 0)), 4);
  }
  return bytes;
}

//===----------------------------------------------------------------------===//
// Normalisations (Normalization.cpp, BatchNorm.cpp, grad/NormalizationGrad.cpp,
// grad/BatchNormGrad.cpp)
//===----------------------------------------------------------------------===//

/// [outer, d] of a LayerNormalization's input at its axis; false when the
/// kernel refuses the axis.
static bool layerNormSplit(const KernelOperand *x, const AttributeList &attrs,
                           int64_t &outer, int64_t &d) {
  if (!x || !isFloatDType(x->dtype))
    return false;
  int64_t rank = static_cast<int64_t>(x->shape.size());
  int64_t axis = normalizeAxis(attrs.getInt("axis", -1), rank);
  if (axis < 0)
    return false;
  axis = std::min(axis, rank);
  outer = numElements(x->shape.take_front(axis));
  d = numElements(x->shape.drop_front(axis));
  return true;
}

static uint64_t layerNormBytes(Operands ins, const AttributeList &attrs) {
  int64_t outer, d;
  if (!layerNormSplit(operand(ins, 0), attrs, outer, d))
    return 0;
  // Scale and B over the normalised shape.
  return 2 * piece(d, computeBytes(ins[0].dtype));
}

static uint64_t layerNormGradBytes(Operands ins, Operands outs,
                                   const AttributeList &attrs) {
  const KernelOperand *x = operand(ins, 1);
  int64_t outer, d;
  if (!layerNormSplit(x, attrs, outer, d))
    return 0;
  const KernelOperand *dscale = operand(outs, 1), *dbias = operand(outs, 2);
  // Row means and inverse deviations, Scale, the column sums of dScale and
  // dB, and the buffer they are reduced into.
  return 2 * piece(outer, 8) + piece(d, computeBytes(x->dtype)) + piece(d, 8) +
         piece(dbias ? d : 0, 8) +
         piece(std::max(elements(dscale), elements(dbias)), 8);
}

static uint64_t batchNormBytes(Operands ins, const AttributeList &attrs) {
  const KernelOperand *x = operand(ins, 0);
  if (!x || x->shape.size() < 2 || attrs.getInt("training_mode", 0) == 0)
    return 0;
  int64_t channels = x->shape[1];
  // Per channel: the batch statistics (two doubles), then running mean and
  // variance, batch mean, inverse deviation, alpha and beta.
  return piece(channels, 16) + 6 * piece(channels, 8);
}

static uint64_t batchNormGradBytes(Operands ins) {
  const KernelOperand *x = operand(ins, 1);
  if (!x || x->shape.size() < 2)
    return 0;
  // Scale, mean, inverse deviation, sum(dy), sum(dy * xhat).
  return 5 * piece(x->shape[1], 8);
}

//===----------------------------------------------------------------------===//
// Losses (Loss.cpp, grad/LossGrad.cpp)
//===----------------------------------------------------------------------===//

/// N and the positions per sample D of a [N, C, d1..dk] loss operand.
static bool lossSplit(const KernelOperand *t, int64_t &n, int64_t &d) {
  if (!t || t->shape.size() < 2 || !isFloatDType(t->dtype))
    return false;
  n = t->shape[0];
  d = numElements(t->shape.drop_front(2));
  return true;
}

static uint64_t lossBytes(bool softmax, Operands ins) {
  int64_t n, d;
  if (!lossSplit(operand(ins, 0), n, d))
    return 0;
  uint64_t c = computeBytes(ins[0].dtype);
  // Per position the log-sum-exp (and the maximum for a softmax over
  // several positions), per sample the sums of loss and weight.
  return piece(n * d, c) + (softmax && d > 1 ? piece(n * d, c) : 0) +
         2 * piece(n, 8);
}

static uint64_t lossGradBytes(bool softmax, Operands outs,
                              const AttributeList &attrs) {
  int64_t n, d;
  if (!lossSplit(operand(outs, 0), n, d))
    return 0;
  uint64_t coef = piece(n * d, 8);
  if (!softmax)
    return coef;
  // The coefficients, log-sum-exp, sum of G, targets, and the maximum when
  // the input is the scores.
  bool logProb = attrs.getInt("log_prob", 0) != 0;
  return 4 * coef + (logProb ? 0 : coef);
}

//===----------------------------------------------------------------------===//
// Reductions (Reduction.cpp: the strided walk's accumulators)
//===----------------------------------------------------------------------===//

static uint64_t reduceBytes(Operands ins, Operands outs,
                            const AttributeList &attrs) {
  const KernelOperand *x = operand(ins, 0), *y = operand(outs, 0);
  if (!x || !y || x->dtype == DType::Bool)
    return 0;
  int64_t outCount = numElements(y->shape);
  if (outCount == 0)
    return 0;
  uint64_t upperBound = piece(outCount, 8);
  int64_t rank = static_cast<int64_t>(x->shape.size());
  llvm::SmallVector<bool, 6> reduced(rank, false);
  bool keepdims = attrs.getInt("keepdims", 1) != 0;
  if (operand(ins, 1)) {
    // Axes given as a tensor: the kept dimensions show which were reduced
    // (size-1 dimensions never matter); without them, assume the worst.
    if (!keepdims || static_cast<int64_t>(y->shape.size()) != rank)
      return upperBound;
    for (int64_t d = 0; d < rank; ++d)
      reduced[d] = y->shape[d] == 1 && x->shape[d] != 1;
  } else {
    llvm::ArrayRef<int64_t> axes = attrs.getInts("axes");
    if (axes.empty())
      return 0; // all reduced (one group), or a copy
    for (int64_t a : axes) {
      int64_t d = normalizeAxis(a, rank);
      if (d < 0)
        return 0;
      if (rank > 0)
        reduced[d] = true;
    }
  }
  // The kernel's grouping: size-1 dimensions dropped, neighbours of one
  // status merged; more than one reduced group takes the strided walk.
  int64_t reducedGroups = 0;
  bool haveLast = false, last = false;
  for (int64_t d = 0; d < rank; ++d) {
    if (x->shape[d] == 1)
      continue;
    if (!haveLast || last != reduced[d])
      reducedGroups += reduced[d];
    haveLast = true;
    last = reduced[d];
  }
  return reducedGroups > 1 ? upperBound : 0;
}

//===----------------------------------------------------------------------===//
// Pools (PoolWindows.cpp: makePool3; grad/PoolGrad.cpp: accumulators)
//===----------------------------------------------------------------------===//

static uint64_t poolBytes(const KernelOperand *positions,
                          const KernelOperand *gradient) {
  if (!positions || positions->shape.size() < 3 || positions->shape.size() > 5)
    return 0;
  llvm::ArrayRef<int64_t> spatial = positions->shape.drop_front(2);
  // The per-position tables of three axes (missing leading axes have one
  // position).
  int64_t sum = static_cast<int64_t>(3 - spatial.size());
  for (int64_t o : spatial)
    sum += o;
  uint64_t bytes = piece(4 * sum, 8);
  if (gradient && isFloat16(gradient->dtype))
    bytes += piece(elements(gradient), 4);
  return bytes;
}

//===----------------------------------------------------------------------===//
// Gradients of data movement (grad/DataMovementGrad.cpp)
//===----------------------------------------------------------------------===//

static uint64_t gatherGradBytes(Operands ins) {
  int64_t count = elements(operand(ins, 0));
  // Indices, their sorted order, and the starts of the runs.
  return 2 * piece(count, 8) + piece(count + 1, 8);
}

//===----------------------------------------------------------------------===//
// The Workspace column of Ops.def
//===----------------------------------------------------------------------===//

namespace ops::workspace {

uint64_t matMul(const WorkspaceQuery &q) {
  return matMulBytes(q.inputs, q.attrs);
}
uint64_t gemm(const WorkspaceQuery &q) { return gemmBytes(q.inputs, q.attrs); }
uint64_t conv(const WorkspaceQuery &q) {
  return convBytes(q.op, q.inputs, q.outputs, q.attrs);
}
uint64_t layerNorm(const WorkspaceQuery &q) {
  return layerNormBytes(q.inputs, q.attrs);
}
uint64_t layerNormGrad(const WorkspaceQuery &q) {
  return layerNormGradBytes(q.inputs, q.outputs, q.attrs);
}
uint64_t batchNorm(const WorkspaceQuery &q) {
  return batchNormBytes(q.inputs, q.attrs);
}
uint64_t batchNormGrad(const WorkspaceQuery &q) {
  return batchNormGradBytes(q.inputs);
}
uint64_t softmaxCrossEntropy(const WorkspaceQuery &q) {
  return lossBytes(/*softmax=*/true, q.inputs);
}
uint64_t nllLoss(const WorkspaceQuery &q) {
  return lossBytes(/*softmax=*/false, q.inputs);
}
uint64_t softmaxCrossEntropyGrad(const WorkspaceQuery &q) {
  return lossGradBytes(/*softmax=*/true, q.outputs, q.attrs);
}
uint64_t nllLossGrad(const WorkspaceQuery &q) {
  return lossGradBytes(/*softmax=*/false, q.outputs, q.attrs);
}
uint64_t reduce(const WorkspaceQuery &q) {
  return reduceBytes(q.inputs, q.outputs, q.attrs);
}
uint64_t reduceMaxGrad(const WorkspaceQuery &q) {
  return piece(elements(operand(q.inputs, 1)), 8);
}
uint64_t pool(const WorkspaceQuery &q) {
  return poolBytes(operand(q.outputs, 0), nullptr);
}
uint64_t poolGrad(const WorkspaceQuery &q) {
  return poolBytes(operand(q.inputs, 0), operand(q.outputs, 0));
}
uint64_t gatherGrad(const WorkspaceQuery &q) {
  return gatherGradBytes(q.inputs);
}

/// AllReduce and ReduceScatter: 16-bit sums and means go through f32 a chunk
/// at a time; a bucket's tensors one after another, through the same chunk.
uint64_t collective(const WorkspaceQuery &q) {
  if (q.attrs.getString("op", "sum") == "max")
    return 0;
  int64_t chunk = 0;
  for (size_t i = 0; i < q.inputs.size(); ++i)
    if (const KernelOperand *x = operand(q.inputs, i); x && isFloat16(x->dtype))
      chunk = std::max<int64_t>(
          chunk, std::min<int64_t>(elements(x), kCollectiveChunkElements));
  return chunk ? piece(chunk, 4) : 0;
}

} // namespace ops::workspace

uint64_t kernelWorkspaceBytes(llvm::StringRef domain, llvm::StringRef op,
                              int64_t opsetVersion, Operands ins, Operands outs,
                              const AttributeList &attrs) {
  const ops::OpDefinition *def = ops::lookupOp(domain, op);
  if (!def || !def->workspace)
    return 0;
  return def->workspace(WorkspaceQuery{op, opsetVersion, ins, outs, attrs});
}

} // namespace zinc
