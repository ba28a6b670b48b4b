//===- CudaConvTest.cpp - Conv, ConvTranspose and their gradients on cuda -===//
//
// On every machine: the window indexing of ConvMath.h (im2col's
// imageElementOf, the gather's positionOf) reproduces the cpu's Conv and
// ConvGradInput through naive host loops, the tiling covers items before
// lines, and bad calls fail before any CUDA call. With a device: each conv
// kernel against the cpu kernel, over the geometries real networks use
// (ResNet's 7x7/2 stem, 3x3 pads, 1x1 downsamples, groups, depthwise,
// dilation, 1-D and 3-D), in f32 and bf16, and with a scratch small enough
// to force item and line tiles.
//
//===----------------------------------------------------------------------===//
#include "test/unit/cuda/DeviceTestSupport.h"
#include "runtime/cuda/kernels/ConvCores.h"
#include "runtime/cuda/kernels/CudaKernels.h"
#include "runtime/cpu/kernels/ConvLowering.h"
#include "zinc/runtime/cpu/Kernel.h"
#include <random>

using namespace zinc;
using namespace zinc::cuda;
using namespace zinc::cuda::test;
using cpu::test::attrs;
using cpu::test::intAttr;
using cpu::test::intsAttr;

namespace {

/// One convolution: X and W shapes and the attributes; Y's shape follows.
struct ConvCase {
  const char *name;
  std::vector<int64_t> x, w;
  std::vector<int64_t> strides, pads, dilations;
  int64_t group = 1;
};

const ConvCase kCases[] = {
    {"3x3 pad 1", {2, 5, 9, 11}, {6, 5, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}},
    {"7x7 stride 2 stem", {2, 3, 20, 18}, {4, 3, 7, 7}, {2, 2}, {3, 3, 3, 3},
     {1, 1}},
    {"1x1 stride 2", {3, 4, 9, 9}, {5, 4, 1, 1}, {2, 2}, {0, 0, 0, 0}, {1, 1}},
    {"pointwise", {2, 6, 5, 7}, {3, 6, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}},
    {"groups 2, uneven pads", {2, 4, 8, 6}, {6, 2, 3, 2}, {1, 2}, {1, 0, 2, 1},
     {1, 1}, 2},
    {"depthwise", {2, 3, 7, 7}, {6, 1, 3, 3}, {2, 1}, {1, 1, 1, 1}, {1, 1}, 3},
    {"1-D dilated", {3, 2, 17}, {4, 2, 3}, {1}, {2, 2}, {2}},
    {"3-D", {1, 2, 4, 5, 3}, {3, 2, 2, 3, 2}, {1, 2, 1}, {0, 1, 1, 1, 0, 0},
     {1, 1, 1}},
};

AttributeList attrsOf(const ConvCase &c) {
  return attrs({intsAttr("strides", c.strides), intsAttr("pads", c.pads),
                intsAttr("dilations", c.dilations), intAttr("group", c.group)});
}

/// ConvTranspose's attributes for mapping case `c`'s output back to its
/// input's shape: Conv's, plus the output_padding that restores the rows
/// the stride dropped.
AttributeList transposeAttrsOf(const ConvCase &c) {
  size_t rank = c.x.size() - 2;
  std::vector<int64_t> outputPadding;
  for (size_t d = 0; d < rank; ++d)
    outputPadding.push_back((c.x[d + 2] + c.pads[d] + c.pads[d + rank] -
                             c.dilations[d] * (c.w[d + 2] - 1) - 1) %
                            c.strides[d]);
  return attrs({intsAttr("strides", c.strides), intsAttr("pads", c.pads),
                intsAttr("dilations", c.dilations), intAttr("group", c.group),
                intsAttr("output_padding", outputPadding)});
}

/// Conv's output shape for case `c`.
std::vector<int64_t> convOutputShape(const ConvCase &c) {
  size_t rank = c.x.size() - 2;
  std::vector<int64_t> y = {c.x[0], c.w[0]};
  for (size_t d = 0; d < rank; ++d) {
    int64_t span = c.x[d + 2] + c.pads[d] + c.pads[d + rank] -
                   c.dilations[d] * (c.w[d + 2] - 1) - 1;
    y.push_back(span / c.strides[d] + 1);
  }
  return y;
}

/// The ConvShape the kernels resolve for case `c` (host shapes only).
cpu::ConvShape shapeOf(const ConvCase &c) {
  std::vector<int64_t> ys = convOutputShape(c);
  cpu::TensorRef x{DType::F32, {c.x.begin(), c.x.end()}, nullptr};
  cpu::TensorRef w{DType::F32, {c.w.begin(), c.w.end()}, nullptr};
  cpu::TensorRef y{DType::F32, {ys.begin(), ys.end()}, nullptr};
  auto cs = cpu::resolveConvShape("Conv", attrsOf(c), x, w, nullptr, y);
  EXPECT_TRUE(bool(cs)) << (cs ? "" : llvm::toString(cs.takeError()));
  return cs ? *cs : cpu::ConvShape{};
}

std::vector<double> randomValues(int64_t n, std::mt19937 &rng) {
  std::uniform_real_distribution<double> dist(-1, 1);
  std::vector<double> v(n);
  for (double &e : v)
    e = dist(rng);
  return v;
}

//===----------------------------------------------------------------------===//
// Host math
//===----------------------------------------------------------------------===//

TEST(CudaConvMath, PositionOfInvertsImageElementOf) {
  for (const ConvCase &c : kCases) {
    SCOPED_TRACE(c.name);
    cpu::ConvShape cs = shapeOf(c);
    ASSIGN_OR_FAIL(w, convWindowOf(cs.geom, "Conv"));
    int64_t reads = 0;
    for (int64_t tap = 0; tap < w.taps; ++tap) {
      for (int64_t p = 0; p < w.outPlane; ++p) {
        int64_t i = imageElementOf(w, tap, p);
        ASSERT_LT(i, w.inPlane);
        if (i >= 0) {
          ++reads;
          EXPECT_EQ(positionOf(w, tap, i), p) << "tap " << tap << " pos " << p;
        }
      }
      for (int64_t i = 0; i < w.inPlane; ++i) {
        int64_t p = positionOf(w, tap, i);
        ASSERT_LT(p, w.outPlane);
        if (p >= 0) {
          EXPECT_EQ(imageElementOf(w, tap, p), i) << "tap " << tap;
        }
      }
    }
    EXPECT_GT(reads, 0);
  }
}

TEST(CudaConvMath, Im2colIndexingReproducesCpuConv) {
  std::mt19937 rng(7);
  for (const ConvCase &c : kCases) {
    SCOPED_TRACE(c.name);
    cpu::ConvShape cs = shapeOf(c);
    ASSIGN_OR_FAIL(w, convWindowOf(cs.geom, "Conv"));
    std::vector<int64_t> yShape = convOutputShape(c);
    OwnedTensor x = tensorOf(DType::F32, c.x, randomValues(numElements(c.x), rng));
    OwnedTensor wt = tensorOf(DType::F32, c.w, randomValues(numElements(c.w), rng));
    OwnedTensor b = tensorOf(DType::F32, {c.w[0]}, randomValues(c.w[0], rng));
    OwnedTensor y(DType::F32, yShape);
    ASSERT_NO_ERROR(cpu::test::runKernel(cpu::lookupKernel("Conv"), "Conv",
                                         attrsOf(c), {&x, &wt, &b}, {&y}));
    // y[n][m][p] = b[m] + sum over the group's channels and taps.
    std::vector<double> xv = valuesOf(x), wv = valuesOf(wt), bv = valuesOf(b);
    int64_t cg = cs.imagePerGroup, mg = cs.positionPerGroup;
    std::vector<double> naive;
    for (int64_t n = 0; n < cs.batch; ++n)
      for (int64_t m = 0; m < mg * cs.group; ++m)
        for (int64_t p = 0; p < w.outPlane; ++p) {
          double acc = bv[m];
          int64_t grp = m / mg;
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t tap = 0; tap < w.taps; ++tap) {
              int64_t i = imageElementOf(w, tap, p);
              if (i >= 0)
                acc += wv[(m * cg + ci) * w.taps + tap] *
                       xv[((n * cs.group + grp) * cg + ci) * w.inPlane + i];
            }
          naive.push_back(acc);
        }
    expectValuesClose(tensorOf(DType::F32, yShape, naive), y, {1e-5, 1e-5});
  }
}

TEST(CudaConvMath, GatherIndexingReproducesCpuConvGradInput) {
  std::mt19937 rng(8);
  for (const ConvCase &c : kCases) {
    SCOPED_TRACE(c.name);
    cpu::ConvShape cs = shapeOf(c);
    ASSIGN_OR_FAIL(w, convWindowOf(cs.geom, "Conv"));
    std::vector<int64_t> yShape = convOutputShape(c);
    OwnedTensor dy = tensorOf(DType::F32, yShape,
                              randomValues(numElements(yShape), rng));
    OwnedTensor wt = tensorOf(DType::F32, c.w, randomValues(numElements(c.w), rng));
    OwnedTensor dx(DType::F32, c.x);
    ASSERT_NO_ERROR(cpu::test::runKernel(cpu::lookupZincKernel("ConvGradInput"),
                                         "ConvGradInput", attrsOf(c),
                                         {&dy, &wt}, {&dx}));
    // dx[n][c][i] = sum over the group's output channels and the taps whose
    // window position reads i: the col2im gather.
    std::vector<double> dyv = valuesOf(dy), wv = valuesOf(wt);
    int64_t cg = cs.imagePerGroup, mg = cs.positionPerGroup;
    std::vector<double> naive;
    for (int64_t n = 0; n < cs.batch; ++n)
      for (int64_t ch = 0; ch < cg * cs.group; ++ch)
        for (int64_t i = 0; i < w.inPlane; ++i) {
          double acc = 0;
          int64_t grp = ch / cg;
          for (int64_t tap = 0; tap < w.taps; ++tap) {
            int64_t p = positionOf(w, tap, i);
            if (p < 0)
              continue;
            for (int64_t mi = 0; mi < mg; ++mi) {
              int64_t m = grp * mg + mi;
              acc += wv[(m * cg + ch % cg) * w.taps + tap] *
                     dyv[(n * mg * cs.group + m) * w.outPlane + p];
            }
          }
          naive.push_back(acc);
        }
    expectValuesClose(tensorOf(DType::F32, c.x, naive), dx, {1e-5, 1e-5});
  }
}

TEST(CudaConvMath, TilesTakeWholeItemsThenLines) {
  // 10 items of 12 positions (lines of 4), 3 scratch elements each.
  ASSIGN_OR_FAIL(all, planConvTiles("Conv", 10, 12, 4, 3, 1000));
  EXPECT_EQ(all.items, 10);
  EXPECT_EQ(all.positions, 12);
  ASSIGN_OR_FAIL(some, planConvTiles("Conv", 10, 12, 4, 3, 36 * 3 + 5));
  EXPECT_EQ(some.items, 3);
  EXPECT_EQ(some.positions, 12);
  ASSIGN_OR_FAIL(lines, planConvTiles("Conv", 10, 12, 4, 3, 30));
  EXPECT_EQ(lines.items, 1);
  EXPECT_EQ(lines.positions, 8);
  // A line of 4 positions does not fit in 11: runs of 3 positions.
  ASSIGN_OR_FAIL(runs, planConvTiles("Conv", 10, 12, 4, 3, 11));
  EXPECT_EQ(runs.items, 1);
  EXPECT_EQ(runs.positions, 3);
  EXPECT_EQ(errorText(planConvTiles("Conv", 10, 12, 4, 3, 2).takeError()),
            "Conv: one position needs 3 scratch elements for its columns, "
            "more than the 2 the cuda kernel scratch has free");
}

//===----------------------------------------------------------------------===//
// Argument checks, before any CUDA call
//===----------------------------------------------------------------------===//

llvm::Error runUnlaunched(llvm::StringRef domain, llvm::StringRef op,
                          const AttributeList &a,
                          std::vector<const DeviceTensor *> ins,
                          std::vector<DeviceTensor *> outs) {
  CudaKernelFn fn = lookupCudaKernel(domain, op);
  if (!fn)
    return cudaKernelError("no cuda kernel for " + op);
  CudaKernelCall call{op, "test", 17, a, ins, outs};
  return fn(call);
}

TEST(CudaConvNoDevice, BadCallsFailBeforeLaunching) {
  AttributeList none = attrs({});
  DeviceTensor x = shapeOnly(DType::F32, {1, 2, 5, 5});
  DeviceTensor w = shapeOnly(DType::F32, {3, 2, 3, 3});
  DeviceTensor y = shapeOnly(DType::F32, {1, 3, 3, 3});
  DeviceTensor wBf16 = shapeOnly(DType::BF16, {3, 2, 3, 3});
  EXPECT_EQ(errorText(runUnlaunched("", "Conv", none, {&x, &wBf16}, {&y})),
            "Conv: unsupported element types (X f32, W bf16, Y f32)");
  DeviceTensor w3 = shapeOnly(DType::F32, {3, 2, 3});
  EXPECT_EQ(errorText(runUnlaunched("", "Conv", none, {&x, &w3}, {&y})),
            "Conv: X [1,2,5,5], W [3,2,3] and Y [1,3,3,3] must have the same "
            "rank, at least 3");
  DeviceTensor yWrong = shapeOnly(DType::F32, {1, 3, 4, 4});
  EXPECT_NE(errorText(runUnlaunched("", "Conv", none, {&x, &w}, {&yWrong})),
            "");
  // A correct call still needs its stream's cuBLASLt context.
  EXPECT_EQ(errorText(runUnlaunched("", "Conv", none, {&x, &w}, {&y})),
            "Conv: no cuBLASLt context for the call's stream");
  DeviceTensor x6 = shapeOnly(DType::F32, {1, 2, 3, 3, 3, 3});
  DeviceTensor w6 = shapeOnly(DType::F32, {3, 2, 1, 1, 1, 1});
  DeviceTensor y6 = shapeOnly(DType::F32, {1, 3, 3, 3, 3, 3});
  EXPECT_EQ(errorText(runUnlaunched("", "Conv", none, {&x6, &w6}, {&y6})),
            "unsupported: Conv over 4 spatial axes on the cuda backend (1 to 3)");
  DeviceTensor wide = shapeOnly(DType::F32, {1, 4, 3, 3});
  EXPECT_EQ(errorText(runUnlaunched(kZincDomain, "ConvChannelsInto",
                                    attrs({intAttr("outChannel", 2)}),
                                    {&x, &w, nullptr, &wide}, {})),
            "ConvChannelsInto: channels [2, 5) are not in the output's 4");
  DeviceTensor x64 = shapeOnly(DType::F64, {1, 2, 5, 5});
  DeviceTensor w64 = shapeOnly(DType::F64, {3, 2, 3, 3});
  DeviceTensor y64 = shapeOnly(DType::F64, {1, 3, 3, 3});
  EXPECT_NE(errorText(runUnlaunched(kZincDomain, "ConvGradWeight", none,
                                    {&y64, &x64}, {&w64})),
            "");
}

//===----------------------------------------------------------------------===//
// With a device: against the cpu kernels
//===----------------------------------------------------------------------===//

class CudaConv : public DeviceTest {
protected:
  static constexpr uint64_t kScratchBytes = uint64_t(32) << 20;

  void SetUp() override {
    DeviceTest::SetUp();
    if (IsSkipped() || HasFatalFailure())
      return;
    ASSIGN_OR_FAIL(offset, arena.place(kScratchBytes));
    ASSIGN_OR_FAIL(ptr, arena.pointer(offset, kScratchBytes));
    scratch = ptr;
    ASSIGN_OR_FAIL(g, GemmContext::create());
    gemmContext = std::move(g);
  }

  llvm::Error runDevice(llvm::StringRef domain, llvm::StringRef op,
                        const AttributeList &a,
                        std::vector<const DeviceTensor *> ins,
                        std::vector<DeviceTensor *> outs,
                        uint64_t scratchBytes = kScratchBytes) {
    CudaKernelFn fn = lookupCudaKernel(domain, op);
    if (!fn)
      return cudaKernelError("no cuda kernel for " + op);
    CudaKernelCall call{op, "test", 17, a, ins, outs};
    call.stream = stream.get();
    call.gemm = gemmContext.get();
    call.workspace = scratch;
    call.workspaceBytes = scratchBytes;
    if (llvm::Error err = fn(call))
      return err;
    return stream.synchronize();
  }

  static Tolerance toleranceFor(DType t) {
    // bf16 rounds the GEMMs' column products once more than the cpu, which
    // widens everything to f32 first.
    return t == DType::F32 ? Tolerance{1e-4, 1e-4} : Tolerance{0.08, 0.03};
  }

  /// Every conv kernel of case `c` in `dtype` against the cpu, with
  /// `scratchBytes` of scratch.
  void checkCase(const ConvCase &c, DType dtype, uint64_t scratchBytes) {
    std::vector<int64_t> yShape = convOutputShape(c);
    AttributeList a = attrsOf(c);
    OwnedTensor x = randomTensor(dtype, c.x, rng);
    OwnedTensor w = randomTensor(dtype, c.w, rng);
    OwnedTensor b = randomTensor(dtype, {c.w[0]}, rng);
    OwnedTensor dy = randomTensor(dtype, yShape, rng);
    Tolerance tol = toleranceFor(dtype);
    ASSIGN_OR_FAIL(gx, upload(x));
    ASSIGN_OR_FAIL(gw, upload(w));
    ASSIGN_OR_FAIL(gb, upload(b));
    ASSIGN_OR_FAIL(gdy, upload(dy));
    {
      SCOPED_TRACE("Conv");
      OwnedTensor y(dtype, yShape);
      ASSERT_NO_ERROR(cpu::test::runKernel(cpu::lookupKernel("Conv"), "Conv",
                                           a, {&x, &w, &b}, {&y}));
      ASSIGN_OR_FAIL(gy, allocate(dtype, yShape));
      ASSERT_NO_ERROR(
          runDevice("", "Conv", a, {&gx, &gw, &gb}, {&gy}, scratchBytes));
      ASSIGN_OR_FAIL(got, download(gy));
      expectValuesClose(got, y, tol);
    }
    {
      SCOPED_TRACE("ConvGradInput");
      OwnedTensor dx(dtype, c.x);
      ASSERT_NO_ERROR(cpu::test::runKernel(cpu::lookupZincKernel("ConvGradInput"),
                                           "ConvGradInput", a, {&dy, &w}, {&dx}));
      ASSIGN_OR_FAIL(gdx, allocate(dtype, c.x));
      ASSERT_NO_ERROR(runDevice(kZincDomain, "ConvGradInput", a, {&gdy, &gw},
                                {&gdx}, scratchBytes));
      ASSIGN_OR_FAIL(got, download(gdx));
      expectValuesClose(got, dx, tol);
    }
    {
      SCOPED_TRACE("ConvGradWeight");
      OwnedTensor dw(dtype, c.w);
      ASSERT_NO_ERROR(cpu::test::runKernel(cpu::lookupZincKernel("ConvGradWeight"),
                                           "ConvGradWeight", a, {&dy, &x}, {&dw}));
      ASSIGN_OR_FAIL(gdw, allocate(dtype, c.w));
      ASSERT_NO_ERROR(runDevice(kZincDomain, "ConvGradWeight", a, {&gdy, &gx},
                                {&gdw}, scratchBytes));
      ASSIGN_OR_FAIL(got, download(gdw));
      expectValuesClose(got, dw, dtype == DType::F32 ? Tolerance{1e-3, 1e-4}
                                                     : Tolerance{0.3, 0.03});
    }
    if (c.group == 1) {
      // ConvTranspose maps Conv's output back to its input's shape: W is
      // read [C_in of the transpose = Conv's M, M/group, taps].
      SCOPED_TRACE("ConvTranspose and its gradients");
      AttributeList a = transposeAttrsOf(c);
      OwnedTensor bt = randomTensor(dtype, {c.w[1]}, rng);
      ASSIGN_OR_FAIL(gbt, upload(bt));
      OwnedTensor t(dtype, c.x);
      ASSERT_NO_ERROR(cpu::test::runKernel(cpu::lookupKernel("ConvTranspose"),
                                           "ConvTranspose", a, {&dy, &w, &bt},
                                           {&t}));
      ASSIGN_OR_FAIL(gt, allocate(dtype, c.x));
      ASSERT_NO_ERROR(runDevice("", "ConvTranspose", a, {&gdy, &gw, &gbt},
                                {&gt}, scratchBytes));
      ASSIGN_OR_FAIL(got, download(gt));
      expectValuesClose(got, t, tol);
      // Its input gradient is a Conv of the output gradient (x's shape).
      OwnedTensor gi(dtype, yShape);
      ASSERT_NO_ERROR(cpu::test::runKernel(
          cpu::lookupZincKernel("ConvTransposeGradInput"),
          "ConvTransposeGradInput", a, {&x, &w}, {&gi}));
      ASSIGN_OR_FAIL(ggi, allocate(dtype, yShape));
      ASSERT_NO_ERROR(runDevice(kZincDomain, "ConvTransposeGradInput", a,
                                {&gx, &gw}, {&ggi}, scratchBytes));
      ASSIGN_OR_FAIL(gotGi, download(ggi));
      expectValuesClose(gotGi, gi, tol);
      OwnedTensor gwt(dtype, c.w);
      ASSERT_NO_ERROR(cpu::test::runKernel(
          cpu::lookupZincKernel("ConvTransposeGradWeight"),
          "ConvTransposeGradWeight", a, {&x, &dy}, {&gwt}));
      ASSIGN_OR_FAIL(ggwt, allocate(dtype, c.w));
      ASSERT_NO_ERROR(runDevice(kZincDomain, "ConvTransposeGradWeight", a,
                                {&gx, &gdy}, {&ggwt}, scratchBytes));
      ASSIGN_OR_FAIL(gotGw, download(ggwt));
      expectValuesClose(gotGw, gwt, dtype == DType::F32 ? Tolerance{1e-3, 1e-4}
                                                        : Tolerance{0.3, 0.03});
    }
  }

  void *scratch = nullptr;
  std::unique_ptr<GemmContext> gemmContext;
  std::mt19937 rng{20261126};
};

TEST_F(CudaConv, EveryLoweringMatchesCpu) {
  for (DType dtype : {DType::F32, DType::BF16})
    for (const ConvCase &c : kCases) {
      SCOPED_TRACE(dtypeName(dtype).str() + " " + c.name);
      checkCase(c, dtype, kScratchBytes);
    }
}

TEST_F(CudaConv, SmallScratchTilesItemsAndLines) {
  // 8 KiB holds a few lines of the 3x3 and the stem's columns, not a whole
  // item's: line tiles. 2 KiB holds less than one of the stem's lines: runs
  // of 2-3 positions. 1280 bytes hold two of the 1x1/2 case's three items
  // for the forward and the adjoint (an item tile and a partial one), and
  // four of an item's five lines for the weight gradient.
  const std::pair<ConvCase, uint64_t> cases[] = {{kCases[0], 8192},
                                                 {kCases[1], 8192},
                                                 {kCases[1], 2048},
                                                 {kCases[2], 1280}};
  for (const auto &[c, bytes] : cases) {
    SCOPED_TRACE(std::string("f32 ") + c.name + ", " + std::to_string(bytes) +
                 " bytes of scratch");
    checkCase(c, DType::F32, bytes);
  }
}

TEST_F(CudaConv, ScratchTooSmallForOnePositionIsAnError) {
  const ConvCase &c = kCases[1];
  OwnedTensor x = randomTensor(DType::F32, c.x, rng);
  OwnedTensor w = randomTensor(DType::F32, c.w, rng);
  ASSIGN_OR_FAIL(gx, upload(x));
  ASSIGN_OR_FAIL(gw, upload(w));
  ASSIGN_OR_FAIL(gy, allocate(DType::F32, convOutputShape(c)));
  std::string err = errorText(
      runDevice("", "Conv", attrsOf(c), {&gx, &gw}, {&gy}, 512));
  EXPECT_NE(err.find("Conv: one position needs"), std::string::npos)
      << err;
}

TEST_F(CudaConv, ChannelTilesWriteTheirSliceOfAWiderOutput) {
  const ConvCase &c = kCases[0];
  AttributeList a = attrs({intsAttr("strides", c.strides),
                           intsAttr("pads", c.pads), intAttr("outChannel", 2)});
  std::vector<int64_t> yShape = convOutputShape(c);
  std::vector<int64_t> wideShape = yShape;
  wideShape[1] = 9;
  OwnedTensor x = randomTensor(DType::F32, c.x, rng);
  OwnedTensor w = randomTensor(DType::F32, c.w, rng);
  OwnedTensor b = randomTensor(DType::F32, {c.w[0]}, rng);
  OwnedTensor wide = randomTensor(DType::F32, wideShape, rng);
  OwnedTensor want = wide;
  ASSERT_NO_ERROR(cpu::test::runKernel(cpu::lookupZincKernel("ConvChannelsInto"),
                                       "ConvChannelsInto", a,
                                       {&x, &w, &b, &want}, {}));
  ASSIGN_OR_FAIL(gx, upload(x));
  ASSIGN_OR_FAIL(gw, upload(w));
  ASSIGN_OR_FAIL(gb, upload(b));
  ASSIGN_OR_FAIL(gwide, upload(wide));
  ASSERT_NO_ERROR(runDevice(kZincDomain, "ConvChannelsInto", a,
                            {&gx, &gw, &gb, &gwide}, {}));
  ASSIGN_OR_FAIL(got, download(gwide));
  expectValuesClose(got, want, {1e-4, 1e-4});
}

} // namespace
