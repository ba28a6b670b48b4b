//===- CublasLtGemm.cpp - Row-major (batched) GEMM through cuBLASLt -------===//
//
// cuBLASLt is column-major. A row-major C[M,N] is the column-major C^T[N,M]
// in the same memory, and C^T = op(B)^T op(A)^T, so each call multiplies B
// by A (swapped) with the column-major views of their own storage: no copy,
// no transpose kernel. A row-major matrix with row stride `ld` is the
// column-major one with leading dimension `ld`, so strided views and
// column ranges of a wider output cost nothing either. Descriptors and the
// heuristic's algorithm are made once per configuration and kept.
//
//===----------------------------------------------------------------------===//
#include "zinc/runtime/cuda/CublasLtGemm.h"
#include "zinc/runtime/cuda/CudaCheck.h"
#include "zinc/support/Error.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/Twine.h"
#include <algorithm>
#include <climits>
#include <string>
#include <utility>

namespace zinc::cuda {

/// Everything cublasLtMatmul needs besides pointers and scalars.
struct GemmContext::Plan {
  cublasLtMatmulDesc_t op = nullptr;
  /// Layouts of cuBLASLt's A (our B), B (our A) and C/D (our C).
  cublasLtMatrixLayout_t first = nullptr, second = nullptr, out = nullptr;
  cublasLtMatmulAlgo_t algo{};

  Plan() = default;
  Plan(const Plan &) = delete;
  Plan &operator=(const Plan &) = delete;
  // Destroy calls can only fail on a null or foreign handle, which these
  // are not; there is nobody to report to.
  ~Plan() {
    if (out)
      (void)cublasLtMatrixLayoutDestroy(out);
    if (second)
      (void)cublasLtMatrixLayoutDestroy(second);
    if (first)
      (void)cublasLtMatrixLayoutDestroy(first);
    if (op)
      (void)cublasLtMatmulDescDestroy(op);
  }
};

/// "bf16 GEMM [64,48]x[48,32]^T (batch 4)": the shape as the user wrote it.
static std::string describe(const GemmDesc &d) {
  std::string s =
      (dtypeName(d.dtype) + " GEMM [" + llvm::Twine(d.transA ? d.k : d.m) +
       "," + llvm::Twine(d.transA ? d.m : d.k) + "]" + (d.transA ? "^T" : "") +
       "x[" + llvm::Twine(d.transB ? d.n : d.k) + "," +
       llvm::Twine(d.transB ? d.k : d.n) + "]" + (d.transB ? "^T" : ""))
          .str();
  if (d.batch != 1)
    s += (" (batch " + llvm::Twine(d.batch) + ")").str();
  return s;
}

static llvm::Expected<cudaDataType_t> cudaTypeOf(const GemmDesc &d) {
  switch (d.dtype) {
  case DType::F32:
    return CUDA_R_32F;
  case DType::F16:
    return CUDA_R_16F;
  case DType::BF16:
    return CUDA_R_16BF;
  default:
    return makeError("unsupported: " + describe(d) +
                     " on the cuda backend (f32, f16 and bf16 only)");
  }
}

/// The alignment cuBLASLt may assume for a matrix, its rows and all its
/// batch items: the largest power of two, at most 256, dividing the
/// address, the row stride and the batch stride in bytes. The heuristic
/// must be told, or it may pick a kernel that needs more than a pointer
/// into the arena (or a row of a strided view) has.
static uint32_t alignmentOf(const void *p, int64_t ldBytes, int64_t batch,
                            int64_t strideBytes) {
  uint64_t bits =
      reinterpret_cast<uintptr_t>(p) | 256 | static_cast<uint64_t>(ldBytes);
  if (batch > 1)
    bits |= static_cast<uint64_t>(strideBytes);
  return static_cast<uint32_t>(bits & (~bits + 1));
}

template <typename T>
static llvm::Error setDescAttr(cublasLtMatmulDesc_t desc,
                               cublasLtMatmulDescAttributes_t attr,
                               const T &value, const char *what) {
  return checkCublas(
      cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof(value)),
      llvm::Twine("cublasLtMatmulDescSetAttribute(") + what + ")");
}

template <typename T>
static llvm::Error setLayoutAttr(cublasLtMatrixLayout_t layout,
                                 cublasLtMatrixLayoutAttribute_t attr,
                                 const T &value, const char *what) {
  return checkCublas(
      cublasLtMatrixLayoutSetAttribute(layout, attr, &value, sizeof(value)),
      llvm::Twine("cublasLtMatrixLayoutSetAttribute(") + what + ")");
}

template <typename T>
static llvm::Error setPrefAttr(cublasLtMatmulPreference_t pref,
                               cublasLtMatmulPreferenceAttributes_t attr,
                               const T &value, const char *what) {
  return checkCublas(
      cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value)),
      llvm::Twine("cublasLtMatmulPreferenceSetAttribute(") + what + ")");
}

/// A column-major rows x cols layout with leading dimension `ld` (at least
/// `rows`), and the batch count and stride when there is more than one item.
static llvm::Error makeLayout(cublasLtMatrixLayout_t &layout,
                              cudaDataType_t type, int64_t rows, int64_t cols,
                              int64_t ld, int64_t batch, int64_t stride) {
  // cuBLASLt rejects a leading dimension of 0 even for empty matrices.
  ld = std::max<int64_t>(ld, 1);
  if (llvm::Error err =
          checkCublas(cublasLtMatrixLayoutCreate(&layout, type, rows, cols, ld),
                      "cublasLtMatrixLayoutCreate(" + llvm::Twine(rows) + "x" +
                          llvm::Twine(cols) + ")"))
    return err;
  if (batch == 1)
    return llvm::Error::success();
  int32_t count = static_cast<int32_t>(batch);
  if (llvm::Error err = setLayoutAttr(
          layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, count, "batch count"))
    return err;
  return setLayoutAttr(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                       stride, "batch stride");
}

//===----------------------------------------------------------------------===//
// GemmContext
//===----------------------------------------------------------------------===//

llvm::Expected<std::unique_ptr<GemmContext>>
GemmContext::create(void *workspace, size_t workspaceBytes) {
  std::unique_ptr<GemmContext> ctx(new GemmContext());
  if (llvm::Error err =
          checkCublas(cublasLtCreate(&ctx->handle), "cublasLtCreate"))
    return err;
  if (workspace) {
    if (reinterpret_cast<uintptr_t>(workspace) % 256 != 0)
      return makeError("GEMM workspace is not 256-byte aligned");
    ctx->workspace = workspace;
    ctx->workspaceBytes = workspaceBytes;
    return ctx;
  }
  // Start-up only: the one allocation this context ever makes.
  if (llvm::Error err = checkCuda(
          cudaMalloc(&ctx->workspace, kDefaultWorkspaceBytes),
          "cudaMalloc(" + llvm::Twine(uint64_t(kDefaultWorkspaceBytes)) +
              " bytes, GEMM workspace)"))
    return err;
  ctx->workspaceBytes = kDefaultWorkspaceBytes;
  ctx->ownsWorkspace = true;
  return ctx;
}

GemmContext::~GemmContext() {
  plans.clear();
  if (ownsWorkspace && workspace)
    (void)cudaFree(workspace);
  if (handle)
    (void)cublasLtDestroy(handle);
}

size_t GemmContext::cachedPlans() const {
  std::lock_guard<std::mutex> lock(mutex);
  return plans.size();
}

llvm::Expected<const GemmContext::Plan *>
GemmContext::planFor(const GemmDesc &d, const void *a, const void *b,
                     const void *c) {
  auto typeOr = cudaTypeOf(d);
  if (!typeOr)
    return typeOr.takeError();
  cudaDataType_t type = *typeOr;
  int64_t elem = static_cast<int64_t>(dtypeSize(d.dtype));
  uint32_t alignA = alignmentOf(a, d.lda * elem, d.batch, d.strideA * elem);
  uint32_t alignB = alignmentOf(b, d.ldb * elem, d.batch, d.strideB * elem);
  uint32_t alignC = alignmentOf(c, d.ldc * elem, d.batch, d.strideC * elem);
  bool tf32 = d.tf32 && d.dtype == DType::F32;
  PlanKey key{static_cast<int>(d.dtype),
              d.transA,
              d.transB,
              d.m,
              d.n,
              d.k,
              d.batch,
              d.strideA,
              d.strideB,
              d.strideC,
              d.lda,
              d.ldb,
              d.ldc,
              tf32,
              alignA,
              alignB,
              alignC,
              d.bias != nullptr};

  std::lock_guard<std::mutex> lock(mutex);
  auto found = plans.find(key);
  if (found != plans.end())
    return found->second.get();

  auto plan = std::make_unique<Plan>();
  // f32 compute for every type: strict f32 products (CUBLAS_COMPUTE_32F
  // never uses TF32) unless asked, and f32 accumulation for f16/bf16.
  cublasComputeType_t compute =
      tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  if (llvm::Error err =
          checkCublas(cublasLtMatmulDescCreate(&plan->op, compute, CUDA_R_32F),
                      "cublasLtMatmulDescCreate"))
    return err;
  // Swapped operands: cuBLASLt's A is our B, its B our A (see the top).
  cublasOperation_t opFirst = d.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opSecond = d.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (llvm::Error err =
          setDescAttr(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, opFirst, "transa"))
    return err;
  if (llvm::Error err = setDescAttr(plan->op, CUBLASLT_MATMUL_DESC_TRANSB,
                                    opSecond, "transb"))
    return err;
  // The bias runs along C's rows, which are the column-major output's
  // columns' entries: cuBLASLt's bias vector has one entry per output row
  // of its (column-major) D, our N. Its pointer is set again per call.
  if (d.bias) {
    cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    if (llvm::Error err = setDescAttr(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                      epilogue, "epilogue"))
      return err;
    if (llvm::Error err = setDescAttr(
            plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, d.bias, "bias pointer"))
      return err;
  }
  // Column-major views of the row-major storage: B stored [K,N] is [N,K],
  // B stored transposed as [N,K] is [K,N]; A likewise; C is [N,M]. The
  // row strides are the leading dimensions.
  if (llvm::Error err =
          makeLayout(plan->first, type, d.transB ? d.k : d.n,
                     d.transB ? d.n : d.k, d.ldb, d.batch, d.strideB))
    return err;
  if (llvm::Error err =
          makeLayout(plan->second, type, d.transA ? d.m : d.k,
                     d.transA ? d.k : d.m, d.lda, d.batch, d.strideA))
    return err;
  if (llvm::Error err =
          makeLayout(plan->out, type, d.n, d.m, d.ldc, d.batch, d.strideC))
    return err;

  cublasLtMatmulPreference_t pref = nullptr;
  if (llvm::Error err = checkCublas(cublasLtMatmulPreferenceCreate(&pref),
                                    "cublasLtMatmulPreferenceCreate"))
    return err;
  auto destroyPref = llvm::make_scope_exit(
      [&] { (void)cublasLtMatmulPreferenceDestroy(pref); });
  uint64_t wsBytes = workspaceBytes;
  if (llvm::Error err =
          setPrefAttr(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, wsBytes,
                      "max workspace"))
    return err;
  // Swapped again: cuBLASLt's A is our B.
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> aligns[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignB},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignA},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignC},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignC}};
  for (const auto &[attr, bytes] : aligns)
    if (llvm::Error err = setPrefAttr(pref, attr, bytes, "min alignment"))
      return err;
  // A split-K algorithm may add its partial sums in the output type, which
  // for f16/bf16 rounds several times where the cpu rounds once (seen as
  // bf16 results 4 units apart on an H200): allow only partial sums kept in
  // f32. In f32 the output type is the compute type, so all are fine.
  if (d.dtype != DType::F32) {
    uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    if (llvm::Error err =
            setPrefAttr(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                        schemes, "reduction scheme mask"))
      return err;
  }
  cublasLtMatmulHeuristicResult_t result{};
  int foundCount = 0;
  if (llvm::Error err =
          checkCublas(cublasLtMatmulAlgoGetHeuristic(
                          handle, plan->op, plan->first, plan->second,
                          plan->out, plan->out, pref, 1, &result, &foundCount),
                      describe(d) + ": cublasLtMatmulAlgoGetHeuristic"))
    return err;
  if (foundCount == 0 || result.state != CUBLAS_STATUS_SUCCESS)
    return makeError(describe(d) +
                     ": cublasLtMatmulAlgoGetHeuristic found "
                     "no algorithm (workspace " +
                     llvm::Twine(wsBytes) + " bytes" +
                     (d.bias ? ", bias epilogue" : "") + ")");
  plan->algo = result.algo;
  const Plan *p = plan.get();
  plans.emplace(key, std::move(plan));
  return p;
}

//===----------------------------------------------------------------------===//
// gemm
//===----------------------------------------------------------------------===//

/// `d` with its leading dimensions resolved: 0 becomes the stored row
/// length, so the plan's key and the checks see the real layout.
static GemmDesc withLeadingDims(const GemmDesc &d) {
  // At least 1, as cuBLASLt wants even for an empty dimension.
  GemmDesc r = d;
  if (r.lda == 0)
    r.lda = std::max<int64_t>(r.transA ? r.m : r.k, 1);
  if (r.ldb == 0)
    r.ldb = std::max<int64_t>(r.transB ? r.k : r.n, 1);
  if (r.ldc == 0)
    r.ldc = std::max<int64_t>(r.n, 1);
  return r;
}

/// Shapes, strides and leading dimensions a GEMM may not have (`d` has its
/// leading dimensions resolved); checked before any CUDA call.
static llvm::Error checkDesc(const GemmDesc &d) {
  if (d.m < 0 || d.n < 0 || d.k < 0 || d.batch < 0)
    return makeError(describe(d) + ": negative dimension");
  if (d.batch > INT32_MAX)
    return makeError("unsupported: " + describe(d) +
                     ": cuBLASLt's batch count is 32-bit");
  if (d.strideA < 0 || d.strideB < 0 || d.strideC < 0)
    return makeError(describe(d) + ": negative batch stride");
  // A stored row must fit in its row stride, or rows would overlap.
  const std::tuple<const char *, int64_t, int64_t> lds[] = {
      {"A", d.lda, d.transA ? d.m : d.k},
      {"B", d.ldb, d.transB ? d.k : d.n},
      {"C", d.ldc, d.n}};
  for (const auto &[name, ld, width] : lds)
    if (ld < std::max<int64_t>(width, 1))
      return makeError(describe(d) + ": " + name + "'s leading dimension " +
                       llvm::Twine(ld) + " is less than its rows' " +
                       llvm::Twine(width) + " elements");
  if (d.batch > 1 && d.m > 0 && d.n > 0 && d.strideC < (d.m - 1) * d.ldc + d.n)
    return makeError(describe(d) + ": C's batch stride " +
                     llvm::Twine(d.strideC) + " makes items overlap (" +
                     llvm::Twine(d.m) + "x" + llvm::Twine(d.n) +
                     " each, leading dimension " + llvm::Twine(d.ldc) + ")");
  if (d.dtype != DType::F32 && d.dtype != DType::F16 && d.dtype != DType::BF16)
    return makeError("unsupported: " + describe(d) +
                     " on the cuda backend (f32, f16 and bf16 only)");
  if (d.bias && d.k == 0)
    return makeError("unsupported: " + describe(d) +
                     " with a bias epilogue and K = 0");
  if (reinterpret_cast<uintptr_t>(d.bias) % 16 != 0)
    return makeError(describe(d) + ": the bias epilogue's vector is not "
                                   "16-byte aligned");
  return llvm::Error::success();
}

/// C = 0 for a GEMM without products (K = 0), one 2-D memset per item so
/// that columns of C outside the product keep their values.
static llvm::Error zeroOutput(const GemmDesc &d, void *c, cudaStream_t stream) {
  size_t elem = dtypeSize(d.dtype);
  for (int64_t i = 0; i < d.batch; ++i)
    if (llvm::Error err = checkCuda(
            cudaMemset2DAsync(static_cast<char *>(c) + i * d.strideC * elem,
                              d.ldc * elem, 0, d.n * elem, d.m, stream),
            "cudaMemset2DAsync(" + llvm::Twine(d.m) + " rows of " +
                llvm::Twine(uint64_t(d.n * elem)) + " bytes, " + describe(d) +
                " with K = 0)"))
      return err;
  return llvm::Error::success();
}

llvm::Error gemm(GemmContext &ctx, const GemmDesc &desc, const void *a,
                 const void *b, void *c, cudaStream_t stream) {
  GemmDesc d = withLeadingDims(desc);
  if (llvm::Error err = checkDesc(d))
    return err;
  if (d.m == 0 || d.n == 0 || d.batch == 0)
    return llvm::Error::success();
  if (!c || (d.k > 0 && (!a || !b)))
    return makeError(describe(d) + ": null device pointer");

  if (d.k == 0) {
    // No products: C = beta * C. cuBLASLt rejects K = 0, and only the
    // scales that need no kernel occur in practice.
    if (d.beta == 1.0f)
      return llvm::Error::success();
    if (d.beta != 0.0f)
      return makeError("unsupported: " + describe(d) + " with K = 0 and beta " +
                       std::to_string(d.beta));
    return zeroOutput(d, c, stream);
  }

  // A batch that shares one B, with each item's rows continuing where the
  // previous item's ended (in A and in C), is a single tall [batch*M, K]
  // product, the shape of every linear layer: one bigger GEMM instead of
  // many small ones.
  if (d.batch > 1 && d.strideB == 0 && !d.transA && d.strideA == d.m * d.lda &&
      d.strideC == d.m * d.ldc) {
    d.m *= d.batch;
    d.batch = 1;
  }
  if (d.batch == 1)
    d.strideA = d.strideB = d.strideC = 0;

  auto planOr = ctx.planFor(d, a, b, c);
  if (!planOr)
    return planOr.takeError();
  const GemmContext::Plan &plan = **planOr;
  // The plan's descriptor is this context's alone, and a context serves
  // one stream from one thread, so the pointer set here is the one read.
  if (d.bias)
    if (llvm::Error err = setDescAttr(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                      d.bias, "bias pointer"))
      return err;
  return checkCublas(cublasLtMatmul(ctx.handle, plan.op, &d.alpha, b,
                                    plan.first, a, plan.second, &d.beta, c,
                                    plan.out, c, plan.out, &plan.algo,
                                    ctx.workspace, ctx.workspaceBytes, stream),
                     "cublasLtMatmul(" + describe(desc) + ")");
}

} // namespace zinc::cuda
