//===- CudaNllLossTest.cpp - NLL loss and its gradient: cuda vs cpu -------===//
//
// On every machine: the per-element indexing and the loss and gradient
// formulas the kernels apply (MiscMath.h, SoftmaxMath.h) against the cpu
// kernels, and the argument checks, which fail with the cpu's messages
// before any CUDA call. With a device: both kernels against the cpu kernels
// for every reduction, with and without weights and ignore_index, over one
// block and many (whose sums must not change from run to run), and the
// NaN that marks a target out of range where the cpu refuses it.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/kernels/MiscMath.h"
#include "runtime/cuda/kernels/SoftmaxMath.h"
#include "test/unit/cuda/MiscTestHelpers.h"
#include <cmath>
#include <cstring>

using namespace zinc;
using namespace zinc::cuda;
using namespace zinc::cuda::misctest;
using cpu::test::attrs;
using cpu::test::intAttr;
using cpu::test::stringAttr;

namespace {

const char *const kLoss = "NegativeLogLikelihoodLoss";
const char *const kGrad = "NegativeLogLikelihoodLossGrad";

/// Targets for `shape` (the input's without C) in [0, classes), with about
/// one in `ignoreEvery` set to `ignoreIndex` when that is nonzero.
OwnedTensor randomTargets(DType dtype, llvm::ArrayRef<int64_t> shape,
                          int64_t classes, std::mt19937 &rng,
                          int64_t ignoreEvery, int64_t ignoreIndex) {
  std::vector<double> t(numElements(shape));
  std::uniform_int_distribution<int64_t> pick(0, classes - 1);
  for (double &v : t)
    v = double(ignoreEvery && rng() % ignoreEvery == 0 ? ignoreIndex
                                                       : pick(rng));
  return tensorOf(dtype, shape, t);
}

std::vector<int64_t> targetShape(const std::vector<int64_t> &input) {
  std::vector<int64_t> s(input);
  s.erase(s.begin() + 1);
  return s;
}

//===----------------------------------------------------------------------===//
// The kernels' math on the host
//===----------------------------------------------------------------------===//

TEST(CudaNllLossMath, ElementIndexing) {
  const int64_t n = 3, c = 4, d = 5;
  for (int64_t e = 0; e < n * c * d; ++e) {
    int64_t p, cls;
    misc::nllElement(e, c, d, p, cls);
    EXPECT_EQ(cls, (e / d) % c);
    EXPECT_EQ(p, (e / (c * d)) * d + e % d);
    EXPECT_EQ(misc::nllInputOffset(p, cls, c, d), e);
  }
}

TEST(CudaNllLossMath, LossAndGradientMatchCpu) {
  std::mt19937 rng(3);
  const std::vector<int64_t> shape = {4, 6, 5};
  OwnedTensor x = randomTensor(DType::F32, shape, rng, -4, 0);
  OwnedTensor w = randomTensor(DType::F32, {6}, rng, 0.5, 2);
  OwnedTensor t =
      randomTargets(DType::I64, targetShape(shape), 6, rng, 5, int64_t(-1));
  AttributeList a =
      attrs({stringAttr("reduction", "none"), intAttr("ignore_index", -1)});
  OwnedTensor loss(DType::F32, targetShape(shape));
  ASSERT_NO_ERROR(
      runCpu(cpu::lookupKernel(kLoss), kLoss, a, {&x, &t, &w}, {&loss}));
  std::vector<double> xs = x.f32s(), ws = w.f32s(), ls = loss.f32s();
  const int64_t classes = 6, inner = 5, positions = 20;
  for (int64_t p = 0; p < positions; ++p) {
    int64_t tp = t.ref.as<int64_t>()[p];
    float want = 0;
    if (classifyTarget(tp, classes, true, -1) == TargetKind::Class)
      want = sceLoss(float(xs[misc::nllInputOffset(p, tp, classes, inner)]),
                     0.0f, float(ws[tp]));
    EXPECT_EQ(want, float(ls[p])) << "position " << p;
  }

  // The gradient of the mean: a = -dloss w[t] / sum of the weights.
  AttributeList mean = attrs({intAttr("ignore_index", -1)});
  OwnedTensor dloss = OwnedTensor::f32({}, {0.75});
  OwnedTensor dx(DType::F32, shape);
  ASSERT_NO_ERROR(runCpu(cpu::lookupZincKernel(kGrad), kGrad, mean,
                         {&dloss, &t, &w}, {&dx}));
  double den = 0;
  for (int64_t p = 0; p < positions; ++p) {
    int64_t tp = t.ref.as<int64_t>()[p];
    if (tp != -1)
      den += float(ws[tp]);
  }
  std::vector<double> dxs = dx.f32s();
  for (int64_t e = 0; e < int64_t(dxs.size()); ++e) {
    int64_t p, cls;
    misc::nllElement(e, classes, inner, p, cls);
    int64_t tp = t.ref.as<int64_t>()[p];
    double want =
        tp != -1 && cls == tp ? sceCoefficient(0.75, float(ws[tp]), den) : 0.0;
    EXPECT_EQ(float(want), float(dxs[e])) << "element " << e;
  }
}

//===----------------------------------------------------------------------===//
// Argument checks, before any CUDA call
//===----------------------------------------------------------------------===//

TEST(CudaNllLossNoDevice, BadCallsFailBeforeLaunching) {
  DeviceTensor x = shapeOnly(DType::F32, {4, 5});
  DeviceTensor t = shapeOnly(DType::I64, {4});
  DeviceTensor loss = shapeOnly(DType::F32, {});
  auto lossError = [&](const AttributeList &a,
                       std::vector<const DeviceTensor *> ins,
                       DeviceTensor *out) {
    return errorText(runUnlaunched(runNegativeLogLikelihoodLoss, kLoss, a,
                                   std::move(ins), {out}));
  };
  EXPECT_EQ(lossError(attrs({stringAttr("reduction", "avg")}), {&x, &t}, &loss),
            "NegativeLogLikelihoodLoss: unknown reduction 'avg'");
  DeviceTensor tf = shapeOnly(DType::F32, {4});
  EXPECT_EQ(
      lossError(attrs({}), {&x, &tf}, &loss),
      "NegativeLogLikelihoodLoss: target must be int32 or int64, not f32");
  DeviceTensor v = shapeOnly(DType::F32, {5});
  EXPECT_EQ(lossError(attrs({}), {&v, &t}, &loss),
            "NegativeLogLikelihoodLoss: input must be [N, C, ...], it is [5]");
  DeviceTensor t3 = shapeOnly(DType::I64, {3});
  EXPECT_EQ(lossError(attrs({}), {&x, &t3}, &loss),
            "NegativeLogLikelihoodLoss: target shape [3] does not match input "
            "shape [4,5]");
  DeviceTensor w4 = shapeOnly(DType::F32, {4});
  EXPECT_EQ(lossError(attrs({}), {&x, &t, &w4}, &loss),
            "NegativeLogLikelihoodLoss: weight must be a [5] f32 tensor, it is "
            "f32[4]");
  EXPECT_EQ(
      lossError(attrs({stringAttr("reduction", "none")}), {&x, &t}, &loss),
      "NegativeLogLikelihoodLoss: loss output must hold 4 f32 elements, "
      "it is f32[]");
  DeviceTensor xi = shapeOnly(DType::I64, {4, 5});
  EXPECT_EQ(lossError(attrs({}), {&xi, &t}, &loss),
            "unsupported: NegativeLogLikelihoodLoss on i64 input");
  DeviceTensor xd = shapeOnly(DType::F64, {4, 5});
  DeviceTensor ld = shapeOnly(DType::F64, {});
  EXPECT_EQ(lossError(attrs({}), {&xd, &t}, &ld),
            "unsupported: NegativeLogLikelihoodLoss of f64 on the cuda backend "
            "(f32, f16, bf16)");
  EXPECT_EQ(lossError(attrs({}), {&x}, &loss),
            "NegativeLogLikelihoodLoss: needs input, target and a loss output");

  DeviceTensor dx = shapeOnly(DType::F32, {4, 5});
  DeviceTensor dloss1 = shapeOnly(DType::F32, {1});
  EXPECT_EQ(errorText(runUnlaunched(runNegativeLogLikelihoodLossGrad, kGrad,
                                    attrs({stringAttr("reduction", "none")}),
                                    {&dloss1, &t}, {&dx})),
            "NegativeLogLikelihoodLossGrad: dloss is f32[1], expected 4 f32 "
            "elements");
  DeviceTensor dxi = shapeOnly(DType::I64, {4, 5});
  EXPECT_EQ(errorText(runUnlaunched(runNegativeLogLikelihoodLossGrad, kGrad,
                                    attrs({}), {&dloss1, &t}, {&dxi})),
            "NegativeLogLikelihoodLossGrad: output must be a float [N, C, "
            "...], it is i64[4,5]");
  EXPECT_EQ(errorText(runUnlaunched(runNegativeLogLikelihoodLossGrad, kGrad,
                                    attrs({}), {&dloss1, &t, &w4}, {&dx})),
            "NegativeLogLikelihoodLossGrad: weight must be a [5] f32 tensor, "
            "it is f32[4]");
  EXPECT_EQ(errorText(runUnlaunched(runNegativeLogLikelihoodLossGrad, kGrad,
                                    attrs({}), {&dloss1, &t3}, {&dx})),
            "NegativeLogLikelihoodLossGrad: target shape [3] does not match "
            "input shape [4,5]");
}

TEST(CudaNllLossNoDevice, KernelTableHasTheNllOps) {
  EXPECT_EQ(lookupCudaKernel("", kLoss), &runNegativeLogLikelihoodLoss);
  EXPECT_EQ(lookupCudaKernel("zinc", kGrad), &runNegativeLogLikelihoodLossGrad);
}

//===----------------------------------------------------------------------===//
// With a device: against the cpu kernels
//===----------------------------------------------------------------------===//

class CudaNllLoss : public CudaMiscDevice {};

struct LossCase {
  std::vector<int64_t> input;
  bool weighted;
  bool ignore;
  DType targetType;
};

const LossCase kCases[] = {
    {{16, 5}, false, false, DType::I64},
    {{16, 5}, true, true, DType::I32},
    {{3, 4, 7}, true, false, DType::I64}, // one k-dimension
    {{2, 3, 2, 5}, false, true, DType::I64},
    {{3000, 10}, true, true, DType::I64},   // many blocks
    {{300000, 2}, false, true, DType::I32}, // more blocks than the cap
};

Tolerance lossTolerance(DType t) {
  double ulp = halfUlp(t);
  return ulp ? Tolerance{ulp, ulp} : Tolerance{1e-6, 1e-6};
}

TEST_F(CudaNllLoss, LossMatchesCpu) {
  for (DType dtype : kFloatTypes)
    for (const LossCase &c : kCases)
      for (const char *red : {"none", "sum", "mean"}) {
        SCOPED_TRACE(dtypeName(dtype).str() + " " + formatShape(c.input) + " " +
                     red + (c.weighted ? " weighted" : "") +
                     (c.ignore ? " ignoring" : ""));
        int64_t classes = c.input[1];
        AttributeList a = attrs({stringAttr("reduction", red)});
        if (c.ignore)
          a.set(intAttr("ignore_index", -100));
        OwnedTensor x = randomTensor(dtype, c.input, rng, -5, 0);
        OwnedTensor w = randomTensor(dtype, {classes}, rng, 0.5, 2);
        OwnedTensor t = randomTargets(c.targetType, targetShape(c.input),
                                      classes, rng, c.ignore ? 7 : 0, -100);
        std::vector<int64_t> lossShape = std::string(red) == "none"
                                             ? targetShape(c.input)
                                             : std::vector<int64_t>{};
        const OwnedTensor *weight = c.weighted ? &w : nullptr;
        OwnedTensor want(dtype, lossShape);
        ASSERT_NO_ERROR(runCpu(cpu::lookupKernel(kLoss), kLoss, a,
                               {&x, &t, weight}, {&want}));
        ASSIGN_OR_FAIL(gx, upload(x));
        ASSIGN_OR_FAIL(gt, upload(t));
        ASSIGN_OR_FAIL(gw, upload(w));
        ASSIGN_OR_FAIL(gl, allocate(dtype, lossShape));
        ASSERT_NO_ERROR(runDevice(runNegativeLogLikelihoodLoss, kLoss, a,
                                  {&gx, &gt, c.weighted ? &gw : nullptr},
                                  {&gl}));
        ASSIGN_OR_FAIL(got, download(gl));
        expectValuesClose(got, want, lossTolerance(dtype));
      }
}

TEST_F(CudaNllLoss, GradMatchesCpu) {
  for (DType dtype : kFloatTypes)
    for (const LossCase &c : kCases)
      for (const char *red : {"none", "sum", "mean"}) {
        SCOPED_TRACE(dtypeName(dtype).str() + " " + formatShape(c.input) + " " +
                     red + (c.weighted ? " weighted" : "") +
                     (c.ignore ? " ignoring" : ""));
        int64_t classes = c.input[1];
        AttributeList a = attrs({stringAttr("reduction", red)});
        if (c.ignore)
          a.set(intAttr("ignore_index", 2));
        OwnedTensor w = randomTensor(dtype, {classes}, rng, 0.5, 2);
        OwnedTensor t = randomTargets(c.targetType, targetShape(c.input),
                                      classes, rng, c.ignore ? 5 : 0, 2);
        std::vector<int64_t> dlossShape = std::string(red) == "none"
                                              ? targetShape(c.input)
                                              : std::vector<int64_t>{};
        OwnedTensor dloss = randomTensor(dtype, dlossShape, rng, 0.5, 1.5);
        const OwnedTensor *weight = c.weighted ? &w : nullptr;
        OwnedTensor want(dtype, c.input);
        ASSERT_NO_ERROR(runCpu(cpu::lookupZincKernel(kGrad), kGrad, a,
                               {&dloss, &t, weight}, {&want}));
        ASSIGN_OR_FAIL(gdl, upload(dloss));
        ASSIGN_OR_FAIL(gt, upload(t));
        ASSIGN_OR_FAIL(gw, upload(w));
        ASSIGN_OR_FAIL(gdx, allocate(dtype, c.input));
        ASSERT_NO_ERROR(runDevice(runNegativeLogLikelihoodLossGrad, kGrad, a,
                                  {&gdl, &gt, c.weighted ? &gw : nullptr},
                                  {&gdx}));
        ASSIGN_OR_FAIL(got, download(gdx));
        expectValuesClose(got, want, lossTolerance(dtype));
      }
}

TEST_F(CudaNllLoss, EveryTargetIgnored) {
  // The mean is 0/0 = NaN, as on the cpu and in PyTorch; no gradient.
  AttributeList a = attrs({intAttr("ignore_index", 1)});
  OwnedTensor x = randomTensor(DType::F32, {6, 3}, rng, -3, 0);
  OwnedTensor t = tensorOf(DType::I64, {6}, {1, 1, 1, 1, 1, 1});
  OwnedTensor want(DType::F32, {});
  ASSERT_NO_ERROR(
      runCpu(cpu::lookupKernel(kLoss), kLoss, a, {&x, &t}, {&want}));
  ASSIGN_OR_FAIL(gx, upload(x));
  ASSIGN_OR_FAIL(gt, upload(t));
  ASSIGN_OR_FAIL(gl, allocate(DType::F32, {}));
  ASSERT_NO_ERROR(
      runDevice(runNegativeLogLikelihoodLoss, kLoss, a, {&gx, &gt}, {&gl}));
  ASSIGN_OR_FAIL(got, download(gl));
  expectValuesClose(got, want, {0, 0});

  OwnedTensor dloss = OwnedTensor::f32({}, {1});
  OwnedTensor wantDx(DType::F32, {6, 3});
  ASSERT_NO_ERROR(
      runCpu(cpu::lookupZincKernel(kGrad), kGrad, a, {&dloss, &t}, {&wantDx}));
  ASSIGN_OR_FAIL(gdl, upload(dloss));
  ASSIGN_OR_FAIL(gdx, allocate(DType::F32, {6, 3}));
  ASSERT_NO_ERROR(runDevice(runNegativeLogLikelihoodLossGrad, kGrad, a,
                            {&gdl, &gt}, {&gdx}));
  ASSIGN_OR_FAIL(gotDx, download(gdx));
  expectValuesClose(gotDx, wantDx, {0, 0});
}

TEST_F(CudaNllLoss, ManyBlocksSumTheSameEveryRun) {
  AttributeList a = attrs({});
  OwnedTensor x = randomTensor(DType::F32, {50000, 7}, rng, -6, 0);
  OwnedTensor w = randomTensor(DType::F32, {7}, rng, 0.1, 3);
  OwnedTensor t = randomTargets(DType::I64, {50000}, 7, rng, 0, 0);
  ASSIGN_OR_FAIL(gx, upload(x));
  ASSIGN_OR_FAIL(gt, upload(t));
  ASSIGN_OR_FAIL(gw, upload(w));
  ASSIGN_OR_FAIL(gl, allocate(DType::F32, {}));
  std::vector<float> runs;
  for (int run = 0; run < 3; ++run) {
    ASSERT_NO_ERROR(runDevice(runNegativeLogLikelihoodLoss, kLoss, a,
                              {&gx, &gt, &gw}, {&gl}));
    ASSIGN_OR_FAIL(got, download(gl));
    runs.push_back(got.ref.as<float>()[0]);
  }
  EXPECT_EQ(std::memcmp(&runs[0], &runs[1], sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(&runs[0], &runs[2], sizeof(float)), 0);
}

TEST_F(CudaNllLoss, OutOfRangeTargetsGiveNaNWhereTheCpuRefuses) {
  AttributeList none = attrs({stringAttr("reduction", "none")});
  OwnedTensor x = randomTensor(DType::F32, {4, 3}, rng, -3, 0);
  OwnedTensor t = tensorOf(DType::I64, {4}, {0, 3, 2, -1});
  OwnedTensor cpuLoss(DType::F32, {4});
  EXPECT_NE(errorText(runCpu(cpu::lookupKernel(kLoss), kLoss, none, {&x, &t},
                             {&cpuLoss})),
            "");
  ASSIGN_OR_FAIL(gx, upload(x));
  ASSIGN_OR_FAIL(gt, upload(t));
  ASSIGN_OR_FAIL(gl, allocate(DType::F32, {4}));
  ASSERT_NO_ERROR(
      runDevice(runNegativeLogLikelihoodLoss, kLoss, none, {&gx, &gt}, {&gl}));
  ASSIGN_OR_FAIL(got, download(gl));
  std::vector<double> l = got.f32s();
  EXPECT_FALSE(std::isnan(l[0]));
  EXPECT_TRUE(std::isnan(l[1]));
  EXPECT_FALSE(std::isnan(l[2]));
  EXPECT_TRUE(std::isnan(l[3]));

  OwnedTensor dloss = OwnedTensor::f32({4}, {1, 1, 1, 1});
  ASSIGN_OR_FAIL(gdl, upload(dloss));
  ASSIGN_OR_FAIL(gdx, allocate(DType::F32, {4, 3}));
  ASSERT_NO_ERROR(runDevice(runNegativeLogLikelihoodLossGrad, kGrad, none,
                            {&gdl, &gt}, {&gdx}));
  ASSIGN_OR_FAIL(gotDx, download(gdx));
  std::vector<double> g = gotDx.f32s();
  for (int64_t c = 0; c < 3; ++c) {
    EXPECT_FALSE(std::isnan(g[0 * 3 + c]));
    EXPECT_TRUE(std::isnan(g[1 * 3 + c]));
    EXPECT_TRUE(std::isnan(g[3 * 3 + c]));
  }
}

} // namespace
