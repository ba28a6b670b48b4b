//===- WorkspaceTest.cpp - Kernels' scratch comes from the planned workspace //
//
// Every kernel test runs with exactly kernelWorkspaceBytes of workspace
// (KernelCallHelpers.h), so a kernel taking more fails there. These cases
// pin the two the plan used not to count at all (a 16-bit GEMM's widened
// operands, im2col's columns) to the bytes the planner gives them, and show
// that a call given less fails instead of touching memory it was not given.
//
//===----------------------------------------------------------------------===//
#include "KernelCallHelpers.h"
#include "gtest/gtest.h"

using namespace zinc;
using namespace zinc::cpu;
using namespace zinc::cpu::test;

namespace {

using V = std::vector<double>;

/// Small integers: exact in bf16, and their products' sums exact in f32.
V smallInts(int64_t n, int salt) {
  V v(n);
  for (int64_t i = 0; i < n; ++i)
    v[i] = ((i * 7 + salt) % 9) - 4;
  return v;
}

KernelCall callOf(llvm::StringRef op, const AttributeList &a,
                  std::vector<const TensorRef *> &ins,
                  std::vector<TensorRef *> &outs) {
  return KernelCall{op, "test", 17, a, ins, outs};
}

// Y is [600, 1100] from K = 600: two blocks along every axis (512, 1024,
// 512), so the widened blocks are reused and the sum over K spans blocks.
// The f32 sums are exact, so Y is the exact product rounded once.
TEST(KernelWorkspace, Bf16MatMulWidensBlocksIntoExactlyThePlannedBytes) {
  int64_t m = 600, k = 600, n = 1100;
  V av = smallInts(m * k, 1), bv = smallInts(k * n, 2);
  OwnedTensor a = OwnedTensor::of<BFloat16>(DType::BF16, {m, k}, av);
  OwnedTensor b = OwnedTensor::of<BFloat16>(DType::BF16, {k, n}, bv);
  OwnedTensor y(DType::BF16, {m, n});
  std::vector<const TensorRef *> ins{&a.ref, &b.ref};
  std::vector<TensorRef *> outs{&y.ref};
  AttributeList none;
  KernelCall call = callOf("MatMul", none, ins, outs);
  uint64_t planned = plannedWorkspace(runMatMul, call);
  EXPECT_EQ(planned, (512u * 512 + 512 * 1024 + 512 * 1024) * 4);
  uint64_t used = 0;
  ASSERT_EQ(errorText(runWithWorkspace(runMatMul, call, &used)), "");
  EXPECT_EQ(used, planned);
  V got = y.values<BFloat16>();
  for (int64_t i = 0; i < m; i += 37)
    for (int64_t j = 0; j < n; j += 53) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p)
        sum += av[i * k + p] * bv[p * n + j];
      ASSERT_EQ(got[i * n + j], load(store<BFloat16>(sum))) << i << "," << j;
    }
}

// Gemm reads A and B transposed while widening, and starts each block of Y
// from beta * C.
TEST(KernelWorkspace, Bf16GemmTransposesAndBiasAcrossBlocks) {
  int64_t m = 530, k = 540, n = 1030;
  V av = smallInts(k * m, 3), bv = smallInts(n * k, 4), cv = smallInts(n, 5);
  OwnedTensor a = OwnedTensor::of<BFloat16>(DType::BF16, {k, m}, av);
  OwnedTensor b = OwnedTensor::of<BFloat16>(DType::BF16, {n, k}, bv);
  OwnedTensor c = OwnedTensor::of<BFloat16>(DType::BF16, {n}, cv);
  OwnedTensor y(DType::BF16, {m, n});
  AttributeList a2 = attrs({intAttr("transA", 1), intAttr("transB", 1),
                            floatAttr("alpha", 0.5), floatAttr("beta", 2)});
  std::vector<const TensorRef *> ins{&a.ref, &b.ref, &c.ref};
  std::vector<TensorRef *> outs{&y.ref};
  KernelCall call = callOf("Gemm", a2, ins, outs);
  uint64_t used = 0;
  ASSERT_EQ(errorText(runWithWorkspace(runGemm, call, &used)), "");
  EXPECT_EQ(used, plannedWorkspace(runGemm, call));
  V got = y.values<BFloat16>();
  for (int64_t i = 0; i < m; i += 29)
    for (int64_t j = 0; j < n; j += 41) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p)
        sum += av[p * m + i] * bv[j * k + p];
      double want = 0.5 * sum + 2 * cv[j];
      ASSERT_EQ(got[i * n + j], load(store<BFloat16>(want))) << i << "," << j;
    }
}

// A 3x3 Conv builds its im2col columns (2 channels x 9 taps rows, 7x7
// positions) in the workspace: exactly the planned bytes.
TEST(KernelWorkspace, ConvColumnsComeFromTheWorkspace) {
  OwnedTensor x = OwnedTensor::f32({1, 2, 9, 9}, smallInts(162, 6));
  OwnedTensor w = OwnedTensor::f32({3, 2, 3, 3}, smallInts(54, 7));
  OwnedTensor y(DType::F32, {1, 3, 7, 7});
  std::vector<const TensorRef *> ins{&x.ref, &w.ref};
  std::vector<TensorRef *> outs{&y.ref};
  AttributeList none;
  KernelCall call = callOf("Conv", none, ins, outs);
  uint64_t planned = plannedWorkspace(runConv, call);
  EXPECT_EQ(planned, workspacePiece(18 * 49 * 4));
  uint64_t used = 0;
  ASSERT_EQ(errorText(runWithWorkspace(runConv, call, &used)), "");
  EXPECT_EQ(used, planned);
  // A pointwise Conv multiplies X in place: no columns.
  OwnedTensor w1 = OwnedTensor::f32({3, 2, 1, 1}, smallInts(6, 8));
  OwnedTensor y1(DType::F32, {1, 3, 9, 9});
  std::vector<const TensorRef *> ins1{&x.ref, &w1.ref};
  std::vector<TensorRef *> outs1{&y1.ref};
  EXPECT_EQ(plannedWorkspace(runConv, callOf("Conv", none, ins1, outs1)), 0u);
}

// A call given less than it needs fails, naming the sizes, and takes
// nothing: the 16-bit MatMul one piece short, the Conv with none at all.
TEST(KernelWorkspace, TooLittleFailsLoudly) {
  OwnedTensor a =
      OwnedTensor::of<BFloat16>(DType::BF16, {4, 8}, smallInts(32, 1));
  OwnedTensor b =
      OwnedTensor::of<BFloat16>(DType::BF16, {8, 4}, smallInts(32, 2));
  OwnedTensor y(DType::BF16, {4, 4});
  std::vector<const TensorRef *> ins{&a.ref, &b.ref};
  std::vector<TensorRef *> outs{&y.ref};
  AttributeList none;
  KernelCall call = callOf("MatMul", none, ins, outs);
  uint64_t planned = plannedWorkspace(runMatMul, call);
  // A [4, 8], B [8, 4] and Y [4, 4] in f32: 128 + 128 + 64 bytes.
  ASSERT_EQ(planned, 320u);
  std::vector<uint64_t> storage(planned / 8);
  Workspace shortBy(storage.data(), planned - kWorkspaceAlignment);
  call.workspace = &shortBy;
  EXPECT_EQ(errorText(runMatMul(call)),
            "kernel workspace exhausted: a piece of 64 bytes after 256 of the "
            "256 bytes planned for this call");

  OwnedTensor x = OwnedTensor::f32({1, 1, 4, 4}, smallInts(16, 3));
  OwnedTensor w = OwnedTensor::f32({1, 1, 3, 3}, smallInts(9, 4));
  OwnedTensor cy(DType::F32, {1, 1, 2, 2});
  std::vector<const TensorRef *> cins{&x.ref, &w.ref};
  std::vector<TensorRef *> couts{&cy.ref};
  KernelCall conv = callOf("Conv", none, cins, couts);
  EXPECT_EQ(errorText(runConv(conv)),
            "kernel workspace exhausted: a piece of 192 bytes after 0 of the "
            "0 bytes planned for this call");
}

} // namespace
