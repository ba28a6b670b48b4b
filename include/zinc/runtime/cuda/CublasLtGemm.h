//===- CublasLtGemm.h - Row-major (batched) GEMM through cuBLASLt ---------===//
#ifndef ZINC_RUNTIME_CUDA_CUBLASLTGEMM_H
#define ZINC_RUNTIME_CUDA_CUBLASLTGEMM_H

#include "zinc/support/DType.h"
#include "llvm/Support/Error.h"
#include <cstddef>
#include <cstdint>
#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

namespace zinc::cuda {

/// The shape of one GEMM, or a strided batch of them, on row-major
/// matrices: for i < batch,
///   C_i[M,N] = alpha * op(A_i) * op(B_i) + beta * C_i
/// with op(A) = A [M,K] or, transposed, A stored as [K,M] (B likewise).
/// A, B and C share one element type: f32 (computed in strict f32 unless
/// `tf32`, so results agree with the cpu), or f16/bf16 accumulated in f32.
struct GemmDesc {
  DType dtype = DType::F32;
  bool transA = false;
  bool transB = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t batch = 1;
  /// Elements from one batch item to the next. 0 for A or B shares one
  /// matrix across the batch; C's items must not overlap.
  int64_t strideA = 0, strideB = 0, strideC = 0;
  /// Elements from one stored row to the next (a strided view of a wider
  /// tensor, or C's columns of a wider output); 0 is dense: the stored row
  /// length (K or M for A, N or K for B, N for C).
  int64_t lda = 0, ldb = 0, ldc = 0;
  float alpha = 1.0f;
  /// 0 means C is only written (its old contents may be garbage).
  float beta = 0.0f;
  /// f32 products on TF32 tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32):
  /// faster, about 10 bits of mantissa. Ignored for f16 and bf16.
  bool tf32 = false;
  /// N elements of the GEMM's type added to every row of every C_i after
  /// the product, in the same kernel (cuBLASLt's bias epilogue): a linear
  /// layer's bias without a pass of its own. Device memory, 16-byte
  /// aligned; null for none. Needs K > 0.
  const void *bias = nullptr;
};

/// The cuBLASLt handle, a workspace, and the descriptors and chosen
/// algorithm of every GEMM shape seen so far: a training step repeats the
/// same shapes, so the heuristic query runs once per shape, not per call.
/// One context per stream, because concurrent GEMMs cannot share its
/// workspace.
class GemmContext {
public:
  /// What cuBLASLt recommends for Hopper; Ampere needs less.
  static constexpr size_t kDefaultWorkspaceBytes = size_t(32) << 20;

  /// Uses `workspace` (device memory, placed in the arena at start-up, at
  /// least 256-byte aligned) when given, or allocates kDefaultWorkspaceBytes
  /// once here.
  static llvm::Expected<std::unique_ptr<GemmContext>>
  create(void *workspace = nullptr, size_t workspaceBytes = 0);
  ~GemmContext();
  GemmContext(const GemmContext &) = delete;
  GemmContext &operator=(const GemmContext &) = delete;

  /// Number of distinct GEMM configurations planned so far.
  size_t cachedPlans() const;

private:
  struct Plan;
  /// dtype, transA, transB, m, n, k, batch, strideA, strideB, strideC,
  /// lda, ldb, ldc (resolved, never 0), tf32, the alignments of A, B, C,
  /// and whether a bias epilogue is fused.
  using PlanKey =
      std::tuple<int, bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t,
                 int64_t, int64_t, int64_t, int64_t, int64_t, bool, uint32_t,
                 uint32_t, uint32_t, bool>;

  GemmContext() = default;
  llvm::Expected<const Plan *> planFor(const GemmDesc &desc, const void *a,
                                       const void *b, const void *c);

  cublasLtHandle_t handle = nullptr;
  void *workspace = nullptr;
  size_t workspaceBytes = 0;
  bool ownsWorkspace = false;
  mutable std::mutex mutex;
  std::map<PlanKey, std::unique_ptr<Plan>> plans;

  friend llvm::Error gemm(GemmContext &, const GemmDesc &, const void *,
                          const void *, void *, cudaStream_t);
};

/// Queues the GEMM `desc` on `stream` with A at `a`, B at `b` and C at `c`
/// (device memory). Errors name the shape and the failing cuBLASLt call;
/// shapes are checked before anything is queued.
llvm::Error gemm(GemmContext &ctx, const GemmDesc &desc, const void *a,
                 const void *b, void *c, cudaStream_t stream);

} // namespace zinc::cuda

#endif
