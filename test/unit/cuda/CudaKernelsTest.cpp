//===- CudaKernelsTest.cpp - cuda backend vs the cpu kernels, and its errors
//===//
//
// With a device, every cuda kernel and GEMM runs on random inputs (fixed
// seeds, broadcast shapes, odd sizes, misaligned pointers) and is compared
// with the cpu kernel for the same op. Without one those tests skip; the
// error formatting, device discovery and argument checking are tested on
// every machine.
//
//===----------------------------------------------------------------------===//
#include "test/unit/cuda/DeviceTestSupport.h"
#include "zinc/runtime/cuda/CublasLtGemm.h"
#include "zinc/runtime/cuda/Elementwise.h"
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>

using namespace zinc;
using namespace zinc::cuda;
using namespace zinc::cuda::test;
using zinc::cpu::test::attrs;
using zinc::cpu::test::floatAttr;
using zinc::cpu::test::intAttr;

namespace {

const DType kFloatTypes[] = {DType::F32, DType::F16, DType::BF16};

/// expectValuesClose: any shapes of as many elements.
void expectClose(const OwnedTensor &got, const OwnedTensor &want,
                 Tolerance tol) {
  expectValuesClose(got, want, tol);
}

//===----------------------------------------------------------------------===//
// Without a device
//===----------------------------------------------------------------------===//

TEST(CudaNoDevice, DeviceCountIsACountNotACrash) {
  llvm::Expected<int> count = cudaDeviceCount();
  ASSERT_TRUE(static_cast<bool>(count)) << llvm::toString(count.takeError());
  EXPECT_GE(*count, 0);
  // A machine without a GPU reports why cudaMalloc fails, naming the call.
  if (*count == 0) {
    auto arena = DeviceArena::create(1024);
    ASSERT_FALSE(static_cast<bool>(arena));
    EXPECT_EQ(errorText(arena.takeError()).rfind("cudaMalloc(1024 bytes): ", 0),
              0u);
  }
}

TEST(CudaNoDevice, ErrorsNameTheCall) {
  EXPECT_EQ(errorText(checkCuda(cudaErrorMemoryAllocation,
                                "cudaMalloc(" + llvm::Twine(2147483648ULL) +
                                    " bytes)")),
            "cudaMalloc(2147483648 bytes): out of memory");
  EXPECT_FALSE(static_cast<bool>(checkCuda(cudaSuccess, "cudaFree")));
  EXPECT_EQ(errorText(checkCublas(CUBLAS_STATUS_NOT_SUPPORTED,
                                  "cublasLtMatmul(f32 GEMM)"))
                .rfind("cublasLtMatmul(f32 GEMM): ", 0),
            0u);
  std::string text =
      errorText(checkCublas(CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatmul"));
  EXPECT_NE(text.find("(CUBLAS_STATUS_NOT_SUPPORTED)"), std::string::npos)
      << text;
  EXPECT_FALSE(
      static_cast<bool>(checkCublas(CUBLAS_STATUS_SUCCESS, "cublasLtCreate")));

  // The macro names the call by its own text; -1 is never a device.
  auto setBadDevice = []() -> llvm::Error {
    ZINC_CUDA_TRY(cudaSetDevice(-1));
    return llvm::Error::success();
  };
  text = errorText(setBadDevice());
  EXPECT_EQ(text.rfind("cudaSetDevice(-1): ", 0), 0u) << text;
}

TEST(CudaNoDevice, ElementwiseChecksBeforeTouchingTheDevice) {
  auto t = shapeOnly;
  cudaStream_t s = nullptr;
  EXPECT_EQ(
      errorText(launchBinary(BinaryOpKind::Add, t(DType::F32, {2, 3}),
                             t(DType::F32, {4}), t(DType::F32, {2, 3}), s)),
      "Add: shapes [2,3] and [4] do not broadcast");
  EXPECT_EQ(
      errorText(launchBinary(BinaryOpKind::Mul, t(DType::F32, {2, 3}),
                             t(DType::F32, {3}), t(DType::F32, {3, 2}), s)),
      "Mul: output shape [3,2], expected [2,3]");
  EXPECT_EQ(errorText(launchBinary(BinaryOpKind::Sub, t(DType::F32, {3}),
                                   t(DType::BF16, {3}), t(DType::F32, {3}), s)),
            "Sub: element types f32, bf16 -> f32 differ");
  EXPECT_EQ(errorText(launchBinary(BinaryOpKind::Div, t(DType::U16, {3}),
                                   t(DType::U16, {3}), t(DType::U16, {3}), s)),
            "unsupported: Div on the cuda backend with element type u16");
  // Alternating broadcast in 7 dimensions cannot be merged below 7.
  std::string text = errorText(
      launchBinary(BinaryOpKind::Add, t(DType::F32, {2, 3, 2, 3, 2, 3, 2}),
                   t(DType::F32, {2, 1, 2, 1, 2, 1, 2}),
                   t(DType::F32, {2, 3, 2, 3, 2, 3, 2}), s));
  EXPECT_NE(text.find("needs 7 broadcast dimensions, more than 6"),
            std::string::npos)
      << text;
  EXPECT_EQ(errorText(launchUnary(UnaryOpKind::Gelu, t(DType::F16, {4}),
                                  t(DType::F16, {5}), s)),
            "Gelu: output shape [5], expected [4]");
  // Empty outputs queue nothing, so null pointers are fine.
  EXPECT_EQ(
      errorText(launchBinary(BinaryOpKind::Add, t(DType::F32, {0, 3}),
                             t(DType::F32, {3}), t(DType::F32, {0, 3}), s)),
      "");
}

//===----------------------------------------------------------------------===//
// With a device
//===----------------------------------------------------------------------===//

class CudaDevice : public DeviceTest {
protected:
  static constexpr uint64_t kArenaBytes = uint64_t(64) << 20;

  CudaDevice() : DeviceTest(kArenaBytes) {}

  std::mt19937 rng{20240611};
};

TEST_F(CudaDevice, ArenaHandsOutAlignedOffsetsAndChecksRanges) {
  ASSIGN_OR_FAIL(first, arena.place(10));
  EXPECT_EQ(first, 0u);
  ASSIGN_OR_FAIL(second, arena.place(10));
  EXPECT_EQ(second, DeviceArena::kAlignment);
  ASSIGN_OR_FAIL(third, arena.place(1, 4096));
  EXPECT_EQ(third, 4096u);
  EXPECT_EQ(arena.used(), 4097u);
  std::string text = errorText(arena.place(kArenaBytes).takeError());
  EXPECT_NE(text.find("do not fit"), std::string::npos) << text;
  EXPECT_NE(errorText(arena.place(8, 3).takeError()), "");
  ASSIGN_OR_FAIL(whole, arena.pointer(0, kArenaBytes));
  EXPECT_EQ(whole, arena.base());
  EXPECT_NE(errorText(arena.pointer(kArenaBytes - 1, 2).takeError()), "");
  EXPECT_NE(errorText(arena.pointer(UINT64_MAX, 2).takeError()), "");
  DeviceArena moved = std::move(arena);
  EXPECT_EQ(arena.base(), nullptr);
  ASSERT_NO_ERROR(moved.release());
  EXPECT_EQ(moved.base(), nullptr);
}

TEST_F(CudaDevice, ReportedErrorsAreNotBlamedOnTheNextLaunch) {
  // Without a driver every call fails anyway; with one, a failed call is
  // not sticky and must be consumed where it was reported.
  EXPECT_NE(errorText(checkCuda(cudaSetDevice(-1), "cudaSetDevice(-1)")), "");
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  ASSIGN_OR_FAIL(x, allocate(DType::F32, {16}));
  ASSERT_NO_ERROR(launchUnary(UnaryOpKind::Relu, x, x, stream.get()));
  ASSERT_NO_ERROR(stream.synchronize());
}

TEST_F(CudaDevice, PinnedCopiesOrderedAcrossStreamsByEvents) {
  constexpr uint64_t kBytes = uint64_t(4) << 20;
  ASSIGN_OR_FAIL(in, PinnedBuffer::create(kBytes));
  ASSIGN_OR_FAIL(out, PinnedBuffer::create(kBytes));
  auto *src = static_cast<uint32_t *>(in.data());
  for (uint64_t i = 0; i < kBytes / 4; ++i)
    src[i] = static_cast<uint32_t>(i * 2654435761u);
  std::memset(out.data(), 0, kBytes);
  ASSIGN_OR_FAIL(offset, arena.place(kBytes));
  ASSIGN_OR_FAIL(dev, arena.pointer(offset, kBytes));
  ASSIGN_OR_FAIL(other, Stream::create());
  ASSIGN_OR_FAIL(uploaded, Event::create());
  ASSIGN_OR_FAIL(done, Event::create());

  ASSERT_NO_ERROR(
      checkCuda(cudaMemcpyAsync(dev, in.data(), kBytes, cudaMemcpyHostToDevice,
                                stream.get()),
                "cudaMemcpyAsync"));
  ASSERT_NO_ERROR(uploaded.record(stream));
  ASSERT_NO_ERROR(other.wait(uploaded));
  ASSERT_NO_ERROR(
      checkCuda(cudaMemcpyAsync(out.data(), dev, kBytes, cudaMemcpyDeviceToHost,
                                other.get()),
                "cudaMemcpyAsync"));
  ASSERT_NO_ERROR(done.record(other));
  ASSERT_NO_ERROR(done.synchronize());
  ASSIGN_OR_FAIL(finished, done.isDone());
  EXPECT_TRUE(finished);
  EXPECT_EQ(std::memcmp(in.data(), out.data(), kBytes), 0);
}

TEST_F(CudaDevice, BinaryOpsMatchCpu) {
  struct Case {
    std::vector<int64_t> a, b;
    /// Bytes to misalign a by, to take the unpacked path.
    uint64_t shiftA = 0;
    /// Write the result over a.
    bool inPlace = false;
  };
  const Case cases[] = {
      {{1024}, {1024}},                               // flat, whole packs
      {{1003}, {1003}},                               // flat with a tail
      {{1003}, {1003}, 2},                            // flat, misaligned
      {{4, 37, 64}, {64}},                            // bias over rows, packed
      {{4, 37, 64}, {64}, 0, true},                   // ... in place
      {{4, 37, 63}, {63}},                            // rows not a whole pack
      {{64}, {4, 37, 64}},                            // broadcast on the left
      {{5, 1, 7}, {1, 6, 1}},                         // both broadcast
      {{}, {3, 5}},                                   // scalar operand
      {{3, 40}, {1}},                                 // one-element operand
      {{2, 3, 4, 5, 6, 7}, {2, 1, 4, 1, 6, 1}},       // six unmergeable dims
      {{2, 3, 4, 5, 6, 7, 8}, {2, 3, 4, 5, 6, 7, 8}}, // merges to one
      {{3, 1, 2, 1, 2, 1, 2},
       {1, 5, 2, 1, 2, 1, 2}}, // 7-d, merges to 3, packed
  };
  const BinaryOpKind ops[] = {BinaryOpKind::Add, BinaryOpKind::Sub,
                              BinaryOpKind::Mul, BinaryOpKind::Div};
  for (DType dtype : kFloatTypes)
    for (BinaryOpKind op : ops)
      for (const Case &c : cases) {
        SCOPED_TRACE(opName(op).str() + " " + dtypeName(dtype).str() + " " +
                     formatShape(c.a) + " " + formatShape(c.b) +
                     (c.shiftA ? " misaligned" : "") +
                     (c.inPlace ? " in place" : ""));
        OwnedTensor a = randomTensor(dtype, c.a, rng, -2, 2);
        OwnedTensor b =
            op == BinaryOpKind::Div
                ? randomTensor(dtype, c.b, rng, 0.5, 2, DrawKind::AwayFromZero)
                : randomTensor(dtype, c.b, rng, -2, 2);
        ASSIGN_OR_FAIL(shape, cpu::broadcastShapes(c.a, c.b));
        OwnedTensor want(dtype, shape);
        ASSERT_NO_ERROR(cpu::test::runKernel(cpu::lookupKernel(opName(op)),
                                             opName(op), attrs({}), {&a, &b},
                                             {&want}));
        ASSIGN_OR_FAIL(da, upload(a, c.shiftA));
        ASSIGN_OR_FAIL(db, upload(b));
        DeviceTensor dy = da;
        if (!c.inPlace) {
          ASSIGN_OR_FAIL(fresh, allocate(dtype, shape));
          dy = fresh;
        }
        ASSERT_NO_ERROR(launchBinary(op, da, db, dy, stream.get()));
        ASSIGN_OR_FAIL(got, download(dy));
        // One correctly rounded float operation, then one rounding to the
        // storage type, on both sides: bit-identical.
        expectClose(got, want, {0, 0});
      }
}

TEST_F(CudaDevice, UnaryOpsMatchCpu) {
  struct Case {
    std::vector<int64_t> shape;
    uint64_t shift = 0;
    bool inPlace = false;
  };
  const Case cases[] = {
      {{4, 256}}, {{1003}}, {{1003}, 2}, {{7, 9}, 0, true}, {{}}};
  const UnaryOpKind ops[] = {UnaryOpKind::Relu, UnaryOpKind::Gelu,
                             UnaryOpKind::Exp, UnaryOpKind::Tanh};
  const double inf = std::numeric_limits<double>::infinity();
  for (DType dtype : kFloatTypes)
    for (UnaryOpKind op : ops)
      for (const Case &c : cases) {
        SCOPED_TRACE(opName(op).str() + " " + dtypeName(dtype).str() + " " +
                     formatShape(c.shape) + (c.shift ? " misaligned" : "") +
                     (c.inPlace ? " in place" : ""));
        std::uniform_real_distribution<double> dist(-4, 4);
        std::vector<double> v(numElements(c.shape));
        for (double &x : v)
          x = dist(rng);
        // NaN passes through Relu, and infinities hit every op's limits.
        const double specials[] = {std::nan(""), inf, -inf, 0.0};
        for (size_t i = 0; i < v.size() && i < 4; ++i)
          v[i] = specials[i];
        OwnedTensor x = tensorOf(dtype, c.shape, v);
        OwnedTensor want(dtype, c.shape);
        ASSERT_NO_ERROR(cpu::test::runKernel(cpu::lookupKernel(opName(op)),
                                             opName(op), attrs({}), {&x},
                                             {&want}));
        ASSIGN_OR_FAIL(dx, upload(x, c.shift));
        DeviceTensor dy = dx;
        if (!c.inPlace) {
          ASSIGN_OR_FAIL(fresh, allocate(dtype, c.shape));
          dy = fresh;
        }
        ASSERT_NO_ERROR(launchUnary(op, dx, dy, stream.get()));
        ASSIGN_OR_FAIL(got, download(dy));
        // erff, expf and tanhf are within a few ulps of glibc in f32; a
        // 16-bit result may round the other way once.
        Tolerance tol = op == UnaryOpKind::Relu ? Tolerance{0, 0}
                        : dtype == DType::F32   ? Tolerance{1e-6, 4e-6}
                                              : Tolerance{1e-6, halfUlp(dtype)};
        expectClose(got, want, tol);
      }
}

//===----------------------------------------------------------------------===//
// GEMM
//===----------------------------------------------------------------------===//

/// f32 must be strict f32: TF32 would be off by ~1e-3 at these sizes. The
/// 16-bit types round a f32 sum once, so they differ by at most an ulp.
Tolerance gemmTolerance(DType dtype, int64_t k) {
  double atol = 2e-6 * static_cast<double>(k);
  return {atol, dtype == DType::F32 ? 1e-5 : halfUlp(dtype)};
}

TEST_F(CudaDevice, GemmMatchesCpuGemm) {
  struct Shape {
    int64_t m, n, k;
  };
  const Shape shapes[] = {
      {1, 1, 1}, {17, 33, 45}, {64, 64, 64}, {5, 130, 7}, {128, 96, 300}};
  struct Scale {
    float alpha, beta;
  };
  const Scale scales[] = {{1.0f, 0.0f}, {0.5f, 1.5f}};
  ASSIGN_OR_FAIL(ctx, GemmContext::create());
  for (DType dtype : kFloatTypes)
    for (const Shape &s : shapes)
      for (int trans = 0; trans < 4; ++trans)
        for (const Scale &sc : scales) {
          bool ta = trans & 1, tb = trans & 2;
          SCOPED_TRACE(dtypeName(dtype).str() + " M=" + std::to_string(s.m) +
                       " N=" + std::to_string(s.n) +
                       " K=" + std::to_string(s.k) + (ta ? " A^T" : "") +
                       (tb ? " B^T" : "") + " beta=" + std::to_string(sc.beta));
          llvm::SmallVector<int64_t, 2> aShape{ta ? s.k : s.m, ta ? s.m : s.k};
          llvm::SmallVector<int64_t, 2> bShape{tb ? s.n : s.k, tb ? s.k : s.n};
          OwnedTensor a = randomTensor(dtype, aShape, rng, -1, 1);
          OwnedTensor b = randomTensor(dtype, bShape, rng, -1, 1);
          OwnedTensor c = randomTensor(dtype, {s.m, s.n}, rng, -1, 1);
          OwnedTensor want(dtype, {s.m, s.n});
          ASSERT_NO_ERROR(cpu::test::runKernel(
              cpu::lookupKernel("Gemm"), "Gemm",
              attrs({intAttr("transA", ta), intAttr("transB", tb),
                     floatAttr("alpha", sc.alpha), floatAttr("beta", sc.beta)}),
              {&a, &b, &c}, {&want}));
          ASSIGN_OR_FAIL(da, upload(a));
          ASSIGN_OR_FAIL(db, upload(b));
          // With beta = 0, C starts as NaN: it must not be read.
          DeviceTensor dc;
          if (sc.beta != 0) {
            ASSIGN_OR_FAIL(up, upload(c));
            dc = up;
          } else {
            ASSIGN_OR_FAIL(fresh, allocate(dtype, {s.m, s.n}));
            dc = fresh;
          }
          GemmDesc desc;
          desc.dtype = dtype;
          desc.transA = ta;
          desc.transB = tb;
          desc.m = s.m;
          desc.n = s.n;
          desc.k = s.k;
          desc.alpha = sc.alpha;
          desc.beta = sc.beta;
          ASSERT_NO_ERROR(
              gemm(*ctx, desc, da.data, db.data, dc.data, stream.get()));
          ASSIGN_OR_FAIL(got, download(dc));
          expectClose(got, want, gemmTolerance(dtype, s.k));
        }
}

TEST_F(CudaDevice, BatchedGemmMatchesCpuMatMul) {
  struct Case {
    std::vector<int64_t> a, b;
  };
  const Case cases[] = {
      {{3, 17, 45}, {3, 45, 33}},   // strided batch
      {{4, 17, 45}, {45, 33}},      // shared B: one tall GEMM
      {{17, 45}, {3, 45, 33}},      // shared A: batch stride 0
      {{2, 3, 5, 7}, {2, 3, 7, 9}}, // two batch dimensions
      {{6, 64, 128}, {6, 128, 64}}, // whole tiles
  };
  // The workspace comes from the arena, as the executor will place it.
  ASSIGN_OR_FAIL(wsOffset, arena.place(GemmContext::kDefaultWorkspaceBytes));
  ASSIGN_OR_FAIL(ws,
                 arena.pointer(wsOffset, GemmContext::kDefaultWorkspaceBytes));
  ASSIGN_OR_FAIL(ctx,
                 GemmContext::create(ws, GemmContext::kDefaultWorkspaceBytes));
  for (DType dtype : kFloatTypes)
    for (const Case &c : cases) {
      SCOPED_TRACE(dtypeName(dtype).str() + " " + formatShape(c.a) + " x " +
                   formatShape(c.b));
      OwnedTensor a = randomTensor(dtype, c.a, rng, -1, 1);
      OwnedTensor b = randomTensor(dtype, c.b, rng, -1, 1);
      int64_t m = c.a[c.a.size() - 2], k = c.a.back(), n = c.b.back();
      llvm::ArrayRef<int64_t> batchA = llvm::makeArrayRef(c.a).drop_back(2);
      llvm::ArrayRef<int64_t> batchB = llvm::makeArrayRef(c.b).drop_back(2);
      ASSIGN_OR_FAIL(batch, cpu::broadcastShapes(batchA, batchB));
      llvm::SmallVector<int64_t, 6> yShape(batch);
      yShape.push_back(m);
      yShape.push_back(n);
      OwnedTensor want(dtype, yShape);
      ASSERT_NO_ERROR(cpu::test::runKernel(
          cpu::lookupKernel("MatMul"), "MatMul", attrs({}), {&a, &b}, {&want}));
      ASSIGN_OR_FAIL(da, upload(a));
      ASSIGN_OR_FAIL(db, upload(b));
      ASSIGN_OR_FAIL(dy, allocate(dtype, yShape));
      GemmDesc desc;
      desc.dtype = dtype;
      desc.m = m;
      desc.n = n;
      desc.k = k;
      desc.batch = numElements(batch);
      desc.strideA = numElements(batchA) == 1 ? 0 : m * k;
      desc.strideB = numElements(batchB) == 1 ? 0 : k * n;
      desc.strideC = m * n;
      ASSERT_NO_ERROR(
          gemm(*ctx, desc, da.data, db.data, dy.data, stream.get()));
      ASSIGN_OR_FAIL(got, download(dy));
      expectClose(got, want, gemmTolerance(dtype, k));
    }
}

/// Item `i` of a [batch, ...] tensor as a tensor of its own.
OwnedTensor itemOf(const OwnedTensor &t, int64_t i) {
  llvm::ArrayRef<int64_t> itemShape =
      llvm::makeArrayRef(t.ref.shape).drop_front();
  OwnedTensor item(t.ref.dtype, itemShape);
  std::memcpy(item.ref.data,
              static_cast<const char *>(t.ref.data) + i * item.ref.byteSize(),
              item.ref.byteSize());
  return item;
}

TEST_F(CudaDevice, BatchedTransposedGemmMatchesCpuPerItem) {
  const int64_t batch = 3, m = 19, n = 21, k = 35;
  ASSIGN_OR_FAIL(ctx, GemmContext::create());
  for (DType dtype : kFloatTypes)
    for (int trans = 0; trans < 4; ++trans) {
      bool ta = trans & 1, tb = trans & 2;
      SCOPED_TRACE(dtypeName(dtype).str() + (ta ? " A^T" : "") +
                   (tb ? " B^T" : ""));
      OwnedTensor a =
          randomTensor(dtype, {batch, ta ? k : m, ta ? m : k}, rng, -1, 1);
      OwnedTensor b =
          randomTensor(dtype, {batch, tb ? n : k, tb ? k : n}, rng, -1, 1);
      OwnedTensor c = randomTensor(dtype, {batch, m, n}, rng, -1, 1);
      ASSIGN_OR_FAIL(da, upload(a));
      ASSIGN_OR_FAIL(db, upload(b));
      ASSIGN_OR_FAIL(dc, upload(c));
      GemmDesc desc;
      desc.dtype = dtype;
      desc.transA = ta;
      desc.transB = tb;
      desc.m = m;
      desc.n = n;
      desc.k = k;
      desc.batch = batch;
      desc.strideA = m * k;
      desc.strideB = k * n;
      desc.strideC = m * n;
      desc.alpha = -0.75f;
      desc.beta = 0.25f;
      ASSERT_NO_ERROR(
          gemm(*ctx, desc, da.data, db.data, dc.data, stream.get()));
      ASSIGN_OR_FAIL(got, download(dc));
      for (int64_t i = 0; i < batch; ++i) {
        SCOPED_TRACE("item " + std::to_string(i));
        OwnedTensor ai = itemOf(a, i), bi = itemOf(b, i), ci = itemOf(c, i);
        OwnedTensor want(dtype, {m, n});
        ASSERT_NO_ERROR(cpu::test::runKernel(
            cpu::lookupKernel("Gemm"), "Gemm",
            attrs({intAttr("transA", ta), intAttr("transB", tb),
                   floatAttr("alpha", desc.alpha),
                   floatAttr("beta", desc.beta)}),
            {&ai, &bi, &ci}, {&want}));
        expectClose(itemOf(got, i), want, gemmTolerance(dtype, k));
      }
    }
  // Four transpose combinations per type, each planned once.
  EXPECT_EQ(ctx->cachedPlans(), 12u);
}

TEST_F(CudaDevice, GemmEdgeCasesAndErrors) {
  ASSIGN_OR_FAIL(ctx, GemmContext::create());
  // K = 0 with beta = 0: C becomes zeros (it starts as NaN).
  ASSIGN_OR_FAIL(dc, allocate(DType::F32, {2, 5, 3}));
  GemmDesc empty;
  empty.m = 5;
  empty.n = 3;
  empty.k = 0;
  empty.batch = 2;
  empty.strideC = 15;
  ASSERT_NO_ERROR(gemm(*ctx, empty, nullptr, nullptr, dc.data, stream.get()));
  ASSIGN_OR_FAIL(zeros, download(dc));
  for (double v : valuesOf(zeros))
    EXPECT_EQ(v, 0.0);

  GemmDesc bad;
  bad.dtype = DType::I64;
  bad.m = bad.n = bad.k = 4;
  std::string text =
      errorText(gemm(*ctx, bad, dc.data, dc.data, dc.data, stream.get()));
  EXPECT_EQ(text, "unsupported: i64 GEMM [4,4]x[4,4] on the cuda backend "
                  "(f32, f16 and bf16 only)");
  GemmDesc overlap;
  overlap.m = overlap.n = overlap.k = 4;
  overlap.batch = 2;
  overlap.strideA = overlap.strideB = 16;
  overlap.strideC = 8;
  text =
      errorText(gemm(*ctx, overlap, dc.data, dc.data, dc.data, stream.get()));
  EXPECT_NE(text.find("C's batch stride 8 makes items overlap"),
            std::string::npos)
      << text;
  EXPECT_EQ(ctx->cachedPlans(), 0u);
}

} // namespace
