//===- CudaMatMulTest.cpp - cuda MatMul, FusedMatMul(Into), Gemm vs the cpu
//===//
//
// With a device, each product op runs on random inputs (fixed seed; f32,
// f16 and bf16; broadcast batches, transposes, flattened operands, biases,
// strided views of a fused projection, column ranges of a wider output,
// misaligned pointers) and is compared with the cpu kernel. Without one
// those tests skip; the argument checks, which must fail before any CUDA
// call, are tested on every machine.
//
//===----------------------------------------------------------------------===//
#include "test/unit/cuda/MatMulTestHelpers.h"
#include <cstring>

using namespace zinc;
using namespace zinc::cuda;
using namespace zinc::cuda::matmultest;
using zinc::cpu::test::attrs;
using zinc::cpu::test::floatAttr;
using zinc::cpu::test::intAttr;
using zinc::cpu::test::intsAttr;

namespace {

const DType kFloatTypes[] = {DType::F32, DType::F16, DType::BF16};

/// The dense tensor a strided view reads: `shape` with element strides
/// `view` = [offset, stride per axis] into `src`, as the view attributes
/// (viewA, viewB) describe it.
OwnedTensor materializeView(const OwnedTensor &src,
                            llvm::ArrayRef<int64_t> shape,
                            llvm::ArrayRef<int64_t> view) {
  OwnedTensor out(src.ref.dtype, shape);
  size_t elem = dtypeSize(src.ref.dtype);
  const auto *from = static_cast<const char *>(src.ref.data);
  auto *to = static_cast<char *>(out.ref.data);
  std::vector<int64_t> index(shape.size(), 0);
  for (int64_t e = 0; e < out.ref.numElements(); ++e) {
    int64_t offset = view[0];
    for (size_t d = 0; d < shape.size(); ++d)
      offset += index[d] * view[d + 1];
    std::memcpy(to + e * elem, from + offset * elem, elem);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++index[d] < shape[d])
        break;
      index[d] = 0;
    }
  }
  return out;
}

//===----------------------------------------------------------------------===//
// Without a device
//===----------------------------------------------------------------------===//

TEST(CudaMatMulNoDevice, ArgumentErrorsComeBeforeAnyCudaCall) {
  // No stream, no cuBLASLt context, no storage: every one of these must be
  // refused on the host.
  auto f32 = [](llvm::ArrayRef<int64_t> shape) {
    return shapeOnly(DType::F32, shape);
  };
  DeviceTensor a = f32({2, 3}), b = f32({3, 5}), y = f32({2, 5});
  DeviceTensor b45 = f32({4, 5}), y52 = f32({5, 2});
  EXPECT_EQ(errorText(runCuda(false, "MatMul", attrs({}), {&a, &b45}, {&y})),
            "MatMul: shapes [2,3] and [4,5] do not multiply");
  EXPECT_EQ(errorText(runCuda(false, "MatMul", attrs({}), {&a, &b}, {&y52})),
            "MatMul: output shape [5,2], expected [2,5]");
  DeviceTensor i = shapeOnly(DType::I64, {2, 3}),
               j = shapeOnly(DType::I64, {3, 5}),
               iy = shapeOnly(DType::I64, {2, 5});
  EXPECT_EQ(errorText(runCuda(false, "MatMul", attrs({}), {&i, &j}, {&iy})),
            "unsupported: MatMul of i64 on the cuda backend (f32, f16 and "
            "bf16 only)");
  DeviceTensor h = shapeOnly(DType::F16, {3, 5});
  EXPECT_EQ(errorText(runCuda(false, "MatMul", attrs({}), {&a, &h}, {&y})),
            "unsupported: MatMul with element types f32, f16 -> f32");
  DeviceTensor bias4 = f32({4});
  EXPECT_EQ(errorText(runCuda(true, "FusedMatMul", attrs({}), {&a, &b, &bias4},
                              {&y})),
            "FusedMatMul: bias f32[4] is not a vector along the output's last "
            "axis [2,5]");
  DeviceTensor src = f32({2, 12});
  EXPECT_EQ(errorText(runCuda(true, "FusedMatMul",
                              attrs({intsAttr("shapeA", {2, 3}),
                                     intsAttr("viewA", {16, 12, 1})}),
                              {&src, &b}, {&y})),
            "FusedMatMul: viewA reads past its [2,12] operand");
  EXPECT_EQ(errorText(runCuda(true, "FusedMatMul",
                              attrs({intsAttr("shapeA", {2, 3}),
                                     intsAttr("viewA", {0, 2, 2})}),
                              {&src, &b}, {&y})),
            "unsupported: FusedMatMul reading operand A with strides no BLAS "
            "layout has");
  DeviceTensor wide = f32({2, 6});
  EXPECT_EQ(errorText(runCuda(true, "FusedMatMulInto",
                              attrs({intAttr("outColumn", 3)}),
                              {&a, &b, nullptr, &wide}, {})),
            "FusedMatMulInto: output shape [2,6] cannot hold columns from 3 "
            "of [2,5]");
  EXPECT_EQ(errorText(runCuda(false, "Gemm", attrs({}), {&a, &b45}, {&y})),
            "Gemm: inner dimensions 3 and 4 differ");
  DeviceTensor c3 = f32({3});
  EXPECT_EQ(errorText(runCuda(false, "Gemm", attrs({}), {&a, &b, &c3}, {&y})),
            "Gemm: C of shape [3] does not broadcast to [2,5]");
  // The triangular-products pass's attributes.
  DeviceTensor sq = f32({3, 3}), y35 = f32({3, 5});
  EXPECT_EQ(errorText(runCuda(true, "FusedMatMul",
                              attrs({intAttr("lowerA", 1), intAttr("lowerY", 1)}),
                              {&sq, &b}, {&y35})),
            "FusedMatMul: sets more than one of lowerA, lowerB, lowerY");
  EXPECT_EQ(errorText(runCuda(true, "FusedMatMul", attrs({intAttr("lowerY", 1)}),
                              {&a, &b}, {&y})),
            "FusedMatMul: lowerY needs square products written whole, not "
            "[2,5]");
  // Valid arguments: only then is the missing context noticed.
  EXPECT_EQ(errorText(runCuda(false, "MatMul", attrs({}), {&a, &b}, {&y})),
            "MatMul: no cuBLASLt context for the call's stream");
}

//===----------------------------------------------------------------------===//
// With a device
//===----------------------------------------------------------------------===//

class CudaMatMul : public CudaMatMulDevice {
protected:
  /// Runs `op` (zinc's own when `zinc`) on inputs a, b and the optional c
  /// on the cpu and on the GPU, and compares the outputs of `yShape`.
  /// `shiftA` misaligns A on the device by that many elements.
  void expectSameAsCpu(bool zinc, llvm::StringRef op,
                       const AttributeList &attributes, const OwnedTensor &a,
                       const OwnedTensor &b, const OwnedTensor *c,
                       llvm::ArrayRef<int64_t> yShape, int64_t k,
                       uint64_t shiftA = 0, uint64_t shiftC = 0) {
    DType dtype = a.ref.dtype;
    OwnedTensor want(dtype, yShape);
    ASSERT_NO_ERROR(runCpu(zinc, op, attributes, {&a, &b, c}, {&want}));
    ASSIGN_OR_FAIL(da, upload(a, shiftA));
    ASSIGN_OR_FAIL(db, upload(b));
    DeviceTensor dc;
    if (c) {
      ASSIGN_OR_FAIL(up, upload(*c, shiftC));
      dc = up;
    }
    ASSIGN_OR_FAIL(dy, allocate(dtype, yShape));
    ASSERT_NO_ERROR(
        run(zinc, op, attributes, {&da, &db, c ? &dc : nullptr}, {&dy}));
    ASSIGN_OR_FAIL(got, download(dy));
    expectClose(got, want, gemmTolerance(dtype, k));
  }
};

TEST_F(CudaMatMul, MatMulMatchesCpu) {
  struct Case {
    std::vector<int64_t> a, b, y;
    /// Elements to misalign A by, to test the alignment hints.
    uint64_t shiftA = 0;
  };
  const Case cases[] = {
      {{17, 45}, {45, 33}, {17, 33}},             // one GEMM
      {{17, 45}, {45, 33}, {17, 33}, 1},          // ... A misaligned
      {{3, 17, 45}, {3, 45, 33}, {3, 17, 33}},    // strided batch
      {{4, 17, 45}, {45, 33}, {4, 17, 33}},       // shared B: one tall GEMM
      {{17, 45}, {3, 45, 33}, {3, 17, 33}},       // shared A: stride 0
      {{2, 3, 5, 7}, {3, 7, 9}, {2, 3, 5, 9}},    // B broadcast on the left
      {{2, 1, 5, 7}, {1, 3, 7, 9}, {2, 3, 5, 9}}, // both broadcast: runs
      {{45}, {45, 33}, {33}},                     // row vector
      {{17, 45}, {45}, {17}},                     // column vector
      {{3, 64, 128}, {3, 128, 64}, {3, 64, 64}},  // whole tiles
      {{0, 5}, {5, 3}, {0, 3}},                   // empty
      {{4, 0}, {0, 3}, {4, 3}},                   // K = 0: zeros
  };
  for (DType dtype : kFloatTypes)
    for (const Case &c : cases) {
      SCOPED_TRACE(dtypeName(dtype).str() + " " + formatShape(c.a) + " x " +
                   formatShape(c.b) + (c.shiftA ? " misaligned" : ""));
      OwnedTensor a = randomTensor(dtype, c.a, rng);
      OwnedTensor b = randomTensor(dtype, c.b, rng);
      expectSameAsCpu(false, "MatMul", attrs({}), a, b, nullptr, c.y,
                      c.a.back(), c.shiftA);
    }
}

TEST_F(CudaMatMul, FusedMatMulMatchesCpu) {
  struct Case {
    const char *what;
    std::vector<int64_t> a, b, y;
    int64_t k;
    bool transA, transB, flattenA, flattenB, bias;
    double alpha;
  };
  const Case cases[] = {
      {"x W^T + bias", {2, 7, 12}, {10, 12}, {2, 7, 10}, 12, 0, 1, 0, 0, 1, 1},
      {"weight gradient, flattened",
       {2, 7, 12},
       {2, 7, 10},
       {12, 10},
       14,
       1,
       0,
       1,
       1,
       0,
       1},
      {"both transposed, scaled",
       {3, 9, 6},
       {3, 5, 9},
       {3, 6, 5},
       9,
       1,
       1,
       0,
       0,
       0,
       -0.5},
      {"B flattened", {5, 6}, {2, 3, 8}, {5, 8}, 6, 0, 0, 0, 1, 0, 1},
      {"bias over a broadcast batch",
       {2, 1, 4, 6},
       {3, 6, 5},
       {2, 3, 4, 5},
       6,
       0,
       0,
       0,
       0,
       1,
       2},
  };
  for (DType dtype : kFloatTypes)
    for (const Case &c : cases) {
      SCOPED_TRACE(dtypeName(dtype).str() + " " + c.what);
      OwnedTensor a = randomTensor(dtype, c.a, rng);
      OwnedTensor b = randomTensor(dtype, c.b, rng);
      OwnedTensor bias = randomTensor(dtype, {c.y.back()}, rng);
      AttributeList at =
          attrs({intAttr("transA", c.transA), intAttr("transB", c.transB),
                 intAttr("flattenA", c.flattenA),
                 intAttr("flattenB", c.flattenB), floatAttr("alpha", c.alpha)});
      expectSameAsCpu(true, "FusedMatMul", at, a, b, c.bias ? &bias : nullptr,
                      c.y, c.k);
      if (c.bias) {
        // A bias off 16-byte alignment cannot ride on the epilogue: it is
        // copied into the rows first instead, with the same result.
        SCOPED_TRACE("bias misaligned");
        expectSameAsCpu(true, "FusedMatMul", at, a, b, &bias, c.y, c.k, 0, 1);
      }
    }
}

/// Causal attention's triangles (triangular-products): lowerY writes
/// zeros above each output's diagonal, as the cpu does; lowerA and lowerB
/// read operands that are zero above theirs (the cpu skips those terms,
/// the GPU multiplies them).
TEST_F(CudaMatMul, TrianglesMatchCpu) {
  const int64_t s = 37, d = 16;
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(dtypeName(dtype).str());
    OwnedTensor q = randomTensor(dtype, {2, 3, s, d}, rng);
    OwnedTensor kk = randomTensor(dtype, {2, 3, s, d}, rng);
    expectSameAsCpu(true, "FusedMatMul",
                    attrs({intAttr("transB", 1), intAttr("lowerY", 1),
                           floatAttr("alpha", 0.125)}),
                    q, kk, nullptr, {2, 3, s, s}, d);
    // P: lower triangular, as the masked softmax makes it.
    OwnedTensor p = randomTensor(dtype, {2, 3, s, s}, rng);
    OwnedTensor lower(dtype, {2, 3, s, s});
    ASSERT_NO_ERROR(runCpu(false, "Trilu", attrs({intAttr("upper", 0)}),
                           {&p}, {&lower}));
    expectSameAsCpu(true, "FusedMatMul", attrs({intAttr("lowerA", 1)}), lower,
                    q, nullptr, {2, 3, s, d}, s);
    expectSameAsCpu(true, "FusedMatMul",
                    attrs({intAttr("transA", 1), intAttr("lowerA", 1)}), lower,
                    q, nullptr, {2, 3, s, d}, s);
    expectSameAsCpu(true, "FusedMatMul",
                    attrs({intAttr("transA", 1), intAttr("lowerB", 1)}), q,
                    lower, nullptr, {2, 3, d, s}, s);
  }
}

/// Attention reading its heads straight from the fused q,k,v projection
/// [B,T,3C] through strided views, against the cpu kernel on the same
/// views copied out densely (the cpu reads views of f32 and f64 only).
TEST_F(CudaMatMul, StridedViewsOfAFusedProjection) {
  const int64_t B = 2, T = 5, H = 2, D = 4, C = H * D, N = 6;
  struct Case {
    const char *what;
    bool transB;
    double alpha;
    /// A as a view (else the dense `denseA`), B always a view.
    std::vector<int64_t> shapeA, viewA, denseA, shapeB, viewB, y;
    int64_t k;
  };
  const Case cases[] = {
      {"scores q k^T",
       true,
       0.5,
       {B, H, T, D},
       {0, T * 3 * C, D, 3 * C, 1},
       {},
       {B, H, T, D},
       {C, T * 3 * C, D, 3 * C, 1},
       {B, H, T, T},
       D},
      {"scores with k^T stored with contiguous rows",
       false,
       0.5,
       {B, H, T, D},
       {0, T * 3 * C, D, 3 * C, 1},
       {},
       {B, H, D, T},
       {C, T * 3 * C, D, 1, 3 * C},
       {B, H, T, T},
       D},
      {"probabilities x v",
       false,
       1,
       {},
       {},
       {B, H, T, T},
       {B, H, T, D},
       {2 * C, T * 3 * C, D, 3 * C, 1},
       {B, H, T, D},
       T},
      {"q of every token x a weight: one tall GEMM with a leading dimension",
       false,
       1,
       {B, T, C},
       {0, T * 3 * C, 3 * C, 1},
       {},
       {C, N},
       {C * 2 * N + N, 2 * N, 1},
       {B, T, N},
       C},
  };
  for (DType dtype : kFloatTypes)
    for (const Case &c : cases) {
      SCOPED_TRACE(dtypeName(dtype).str() + " " + c.what);
      OwnedTensor qkv = randomTensor(dtype, {B, T, 3 * C}, rng);
      OwnedTensor weight = randomTensor(dtype, {3 * C, 2 * N}, rng);
      bool viewA = !c.shapeA.empty();
      OwnedTensor probs =
          randomTensor(dtype, viewA ? std::vector<int64_t>{0} : c.denseA, rng);
      const OwnedTensor &a = viewA ? qkv : probs;
      // The last case's B is a view of a wider weight, not of qkv.
      const OwnedTensor &b = c.shapeB.size() == 2 ? weight : qkv;
      OwnedTensor viewedA = viewA ? materializeView(a, c.shapeA, c.viewA)
                                  : OwnedTensor(dtype, {0});
      const OwnedTensor &wantA = viewA ? viewedA : a;
      OwnedTensor wantB = materializeView(b, c.shapeB, c.viewB);
      OwnedTensor want(dtype, c.y);
      ASSERT_NO_ERROR(runCpu(
          true, "FusedMatMul",
          attrs({intAttr("transB", c.transB), floatAttr("alpha", c.alpha)}),
          {&wantA, &wantB}, {&want}));

      AttributeList at =
          attrs({intAttr("transB", c.transB), floatAttr("alpha", c.alpha),
                 intsAttr("shapeB", c.shapeB), intsAttr("viewB", c.viewB)});
      if (viewA) {
        at.set(intsAttr("shapeA", c.shapeA));
        at.set(intsAttr("viewA", c.viewA));
      }
      ASSIGN_OR_FAIL(da, upload(a));
      ASSIGN_OR_FAIL(db, upload(b));
      ASSIGN_OR_FAIL(dy, allocate(dtype, c.y));
      ASSERT_NO_ERROR(run(true, "FusedMatMul", at, {&da, &db}, {&dy}));
      ASSIGN_OR_FAIL(got, download(dy));
      expectClose(got, want, gemmTolerance(dtype, c.k));
    }
}

/// Products written into columns [outColumn, outColumn + n) of a wider
/// tensor: the other columns keep their values.
TEST_F(CudaMatMul, FusedMatMulIntoWritesItsColumns) {
  struct Case {
    const char *what;
    std::vector<int64_t> a, b, y;
    int64_t outColumn, k;
    bool transB, bias;
  };
  const Case cases[] = {
      {"shared weight", {2, 5, 6}, {6, 8}, {2, 5, 20}, 6, 6, false, false},
      {"shared weight, bias",
       {2, 5, 6},
       {6, 8},
       {2, 5, 20},
       12,
       6,
       false,
       true},
      {"batched, transposed",
       {2, 5, 6},
       {2, 8, 6},
       {2, 5, 20},
       3,
       6,
       true,
       false},
      {"batched, bias", {3, 4, 7}, {3, 7, 5}, {3, 4, 11}, 0, 7, false, true},
  };
  for (DType dtype : kFloatTypes)
    for (const Case &c : cases) {
      SCOPED_TRACE(dtypeName(dtype).str() + " " + c.what);
      OwnedTensor a = randomTensor(dtype, c.a, rng);
      OwnedTensor b = randomTensor(dtype, c.b, rng);
      int64_t n = c.transB ? c.b[c.b.size() - 2] : c.b.back();
      OwnedTensor bias = randomTensor(dtype, {n}, rng);
      OwnedTensor before = randomTensor(dtype, c.y, rng);
      AttributeList at = attrs(
          {intAttr("transB", c.transB), intAttr("outColumn", c.outColumn)});
      OwnedTensor want = tensorOf(dtype, c.y, valuesOf(before));
      ASSERT_NO_ERROR(runCpu(true, "FusedMatMulInto", at,
                             {&a, &b, c.bias ? &bias : nullptr, &want}, {}));
      ASSIGN_OR_FAIL(da, upload(a));
      ASSIGN_OR_FAIL(db, upload(b));
      ASSIGN_OR_FAIL(dbias, upload(bias));
      ASSIGN_OR_FAIL(dy, upload(before));
      ASSERT_NO_ERROR(run(true, "FusedMatMulInto", at,
                          {&da, &db, c.bias ? &dbias : nullptr, &dy}, {}));
      ASSIGN_OR_FAIL(got, download(dy));
      expectClose(got, want, gemmTolerance(dtype, c.k));
    }
}

TEST_F(CudaMatMul, GemmMatchesCpu) {
  const int64_t m = 17, n = 33, k = 45;
  struct Case {
    const char *what;
    bool transA, transB;
    /// C's shape; empty for no C.
    std::vector<int64_t> c;
    double alpha, beta;
  };
  const Case cases[] = {
      {"no C", false, false, {}, 1, 1},
      {"full C", false, false, {m, n}, 0.5, 1.5},
      {"row C, A^T", true, false, {n}, 1, 1},
      {"column C, B^T", false, true, {m, 1}, -1, 0.25},
      {"scalar C, both transposed", true, true, {1}, 2, -1},
      {"C ignored with beta 0", false, false, {m, n}, 1, 0},
  };
  for (DType dtype : kFloatTypes)
    for (const Case &c : cases) {
      SCOPED_TRACE(dtypeName(dtype).str() + " " + c.what);
      OwnedTensor a =
          randomTensor(dtype, {c.transA ? k : m, c.transA ? m : k}, rng);
      OwnedTensor b =
          randomTensor(dtype, {c.transB ? n : k, c.transB ? k : n}, rng);
      OwnedTensor cc = randomTensor(dtype, c.c, rng);
      AttributeList at =
          attrs({intAttr("transA", c.transA), intAttr("transB", c.transB),
                 floatAttr("alpha", c.alpha), floatAttr("beta", c.beta)});
      expectSameAsCpu(false, "Gemm", at, a, b, c.c.empty() ? nullptr : &cc,
                      {m, n}, k);
    }
}

/// TF32 is opt-in (zinc-run --allow-tf32): a plan of its own, and results
/// within TF32's 10-bit mantissa.
TEST_F(CudaMatMul, Tf32IsAPlanOfItsOwn) {
  const int64_t m = 64, n = 64, k = 256;
  OwnedTensor a = randomTensor(DType::F32, {m, k}, rng);
  OwnedTensor b = randomTensor(DType::F32, {k, n}, rng);
  OwnedTensor want(DType::F32, {m, n});
  ASSERT_NO_ERROR(runCpu(false, "MatMul", attrs({}), {&a, &b}, {&want}));
  ASSIGN_OR_FAIL(da, upload(a));
  ASSIGN_OR_FAIL(db, upload(b));
  ASSIGN_OR_FAIL(dy, allocate(DType::F32, {m, n}));
  ASSERT_NO_ERROR(run(false, "MatMul", attrs({}), {&da, &db}, {&dy}));
  ASSIGN_OR_FAIL(strict, download(dy));
  expectClose(strict, want, gemmTolerance(DType::F32, k));
  EXPECT_EQ(gemmContext->cachedPlans(), 1u);
  ASSERT_NO_ERROR(run(false, "MatMul", attrs({}), {&da, &db}, {&dy},
                      /*allowTf32=*/true));
  ASSIGN_OR_FAIL(fast, download(dy));
  expectClose(fast, want, {0.05, 0.01});
  EXPECT_EQ(gemmContext->cachedPlans(), 2u);
}

TEST_F(CudaMatMul, LeadingDimensionsAreChecked) {
  ASSIGN_OR_FAIL(buf, allocate(DType::F32, {64}));
  GemmDesc d;
  d.m = 2;
  d.n = 3;
  d.k = 4;
  d.lda = 3;
  EXPECT_EQ(errorText(cuda::gemm(*gemmContext, d, buf.data, buf.data, buf.data,
                                 stream.get())),
            "f32 GEMM [2,4]x[4,3]: A's leading dimension 3 is less than its "
            "rows' 4 elements");
  d.lda = 0;
  d.ldc = 2;
  EXPECT_EQ(errorText(cuda::gemm(*gemmContext, d, buf.data, buf.data, buf.data,
                                 stream.get())),
            "f32 GEMM [2,4]x[4,3]: C's leading dimension 2 is less than its "
            "rows' 3 elements");
  d.ldc = 5;
  d.batch = 2;
  d.strideA = 8;
  d.strideB = 12;
  d.strideC = 7;
  std::string text = errorText(
      cuda::gemm(*gemmContext, d, buf.data, buf.data, buf.data, stream.get()));
  EXPECT_NE(text.find("C's batch stride 7 makes items overlap"),
            std::string::npos)
      << text;
  d.batch = 1;
  d.strideA = d.strideB = d.strideC = 0;
  d.bias = static_cast<char *>(buf.data) + 4;
  EXPECT_EQ(errorText(cuda::gemm(*gemmContext, d, buf.data, buf.data, buf.data,
                                 stream.get())),
            "f32 GEMM [2,4]x[4,3]: the bias epilogue's vector is not 16-byte "
            "aligned");
  d.bias = buf.data;
  d.k = 0;
  EXPECT_EQ(errorText(cuda::gemm(*gemmContext, d, buf.data, buf.data, buf.data,
                                 stream.get())),
            "unsupported: f32 GEMM [2,0]x[0,3] with a bias epilogue and K = 0");
  EXPECT_EQ(this->gemmContext->cachedPlans(), 0u);
}

} // namespace
