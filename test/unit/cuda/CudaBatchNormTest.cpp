//===- CudaBatchNormTest.cpp - BatchNormalization and its gradient on cuda ===//
//
// On every machine: the geometry of BatchNormMath.h (each value of a channel
// summed once, each element written once), and the kernels' algorithm
// replayed on the host with BatchNormMath.h's formulas and that geometry,
// compared with the cpu kernels; then the argument checks, which must fail
// before any CUDA call. With a device: the kernels on random inputs (fixed
// seeds, odd sizes, f32 and 16-bit X, parameters of other float types)
// against the cpu kernels, in place, and run twice for the same bits.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/kernels/BatchNormMath.h"
#include "runtime/cuda/kernels/CudaKernels.h"
#include "test/unit/cuda/RowsTestHelpers.h"
#include <vector>

using namespace zinc;
using namespace zinc::cuda;
using namespace zinc::cuda::rowstest;
using cpu::test::attrs;
using cpu::test::floatAttr;
using cpu::test::intAttr;

namespace {

const DType kFloatTypes[] = {DType::F32, DType::F16, DType::BF16};

/// The device kernels' block size and elementwise tile (BatchNorm.cu).
constexpr int64_t kThreads = 256;
constexpr int64_t kTile = 4 * kThreads;

/// The shapes every comparison runs: planes read value by value (inner 1,
/// 7x7) and as runs (inner >= 64), channels split into several chunks whose
/// boundaries fall inside planes, and parameters (scale, B) and running
/// statistics (mean, var and outputs 1-4) of other float types than X, as
/// --precision=bf16 leaves them (bf16 scale, f32 statistics).
struct Case {
  std::vector<int64_t> x;
  DType params, running;
};
const Case kCases[] = {{{2, 3, 5, 7}, DType::F32, DType::F32},
                       {{16, 5}, DType::F32, DType::F32},
                       {{3, 2, 5000}, DType::F32, DType::F32},
                       {{9000, 3}, DType::F32, DType::F32},
                       {{2, 4, 70}, DType::F64, DType::F64},
                       {{4, 6, 7, 7}, DType::F16, DType::F16},
                       {{5, 3, 1, 1}, DType::BF16, DType::BF16},
                       {{2, 3, 11, 13}, DType::BF16, DType::F32}};

std::string describe(DType x, const Case &c) {
  return dtypeName(x).str() + " " + formatShape(c.x) + " params " +
         dtypeName(c.params).str() + " statistics " +
         dtypeName(c.running).str();
}

/// [N, C, S...] as [batch, channels, inner].
struct Dims {
  int64_t batch, channels, inner;
};
Dims dimsOf(llvm::ArrayRef<int64_t> shape) {
  return {shape[0], shape[1], numElements(shape.drop_front(2))};
}

std::vector<float> floatsOf(const OwnedTensor &t) {
  std::vector<double> v = valuesOf(t);
  return std::vector<float>(v.begin(), v.end());
}

/// BatchNormalization's inputs: X, scale, B, mean, var.
struct Inputs {
  OwnedTensor x, scale, bias, mean, var;
};

Inputs randomInputs(DType dtype, const Case &c, std::mt19937 &rng,
                    llvm::ArrayRef<int64_t> paramShape) {
  return {randomTensor(dtype, c.x, rng, -2, 3),
          randomTensor(c.params, paramShape, rng, 0.5, 1.5),
          randomTensor(c.params, paramShape, rng, -1, 1),
          randomTensor(c.running, paramShape, rng, -0.5, 0.5),
          randomTensor(c.running, paramShape, rng, 0.5, 2)};
}

/// The values of x the kernels read: the sum of f(offset) over each
/// channel, grouped as the kernels group it (each thread's values in its
/// order, then the threads', then the chunks' in chunk order; the warp
/// shuffles' tree is not replayed).
template <typename F>
std::vector<double> channelTotals(const ChannelSplit &g, F f) {
  std::vector<double> totals(g.channels);
  for (int64_t c = 0; c < g.channels; ++c) {
    double total = 0;
    for (int64_t s = 0; s < g.splits; ++s) {
      double chunk = 0;
      for (int64_t t = 0; t < kThreads; ++t) {
        double own = 0;
        forChannelValues(g, c, s, t, kThreads, [&](int64_t o) { own += f(o); });
        chunk += own;
      }
      total += chunk;
    }
    totals[c] = total;
  }
  return totals;
}

/// fn(element, param) over every element, as three blocks of the
/// elementwise kernels write them.
template <typename F> void forEachElement(const PlaneTiles &t, F fn) {
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t th = 0; th < kThreads; ++th)
      forPlaneElements(t, b, 3, th, kThreads, fn);
}

//===----------------------------------------------------------------------===//
// The kernels' algorithm, replayed on the host
//===----------------------------------------------------------------------===//

/// Inference mode's Y (`params` per channel, or per activation).
OwnedTensor replayInference(const Inputs &in, int64_t params, int64_t inner,
                            double epsilon) {
  std::vector<float> x = floatsOf(in.x);
  std::vector<double> s = valuesOf(in.scale), b = valuesOf(in.bias),
                      m = valuesOf(in.mean), v = valuesOf(in.var);
  int64_t planes = static_cast<int64_t>(x.size()) / (params * inner);
  std::vector<double> y(x.size());
  forEachElement(planPlaneTiles(planes * params, params, inner, kTile),
                 [&](int64_t e, int64_t p) {
                   y[e] = inferenceValue(
                       x[e], inferenceAffine(s[p], b[p], m[p], v[p], epsilon));
                 });
  return tensorOf(in.x.ref.dtype, in.x.ref.shape, y);
}

/// Training mode's Y and outputs 1-4.
struct TrainingOut {
  OwnedTensor y;
  std::vector<OwnedTensor> stats;
};

TrainingOut replayTraining(const Inputs &in, double epsilon, double momentum) {
  Dims d = dimsOf(in.x.ref.shape);
  ChannelSplit g = planChannelSplit(d.batch, d.channels, d.inner);
  std::vector<float> x = floatsOf(in.x);
  std::vector<double> sums =
      channelTotals(g, [&](int64_t o) { return double(x[o]); });
  std::vector<float> mean(d.channels);
  for (int64_t c = 0; c < d.channels; ++c)
    mean[c] = batchMean(sums[c], g.count);
  std::vector<double> squares = channelTotals(g, [&](int64_t o) {
    return double(squaredDeviation(x[o], mean[(o / d.inner) % d.channels]));
  });
  std::vector<double> s = valuesOf(in.scale), b = valuesOf(in.bias),
                      rm = valuesOf(in.mean), rv = valuesOf(in.var);
  std::vector<float> alpha(d.channels), beta(d.channels);
  std::vector<std::vector<double>> stats(4, std::vector<double>(d.channels));
  for (int64_t c = 0; c < d.channels; ++c) {
    BatchNormChannel ch =
        trainingChannel(mean[c], static_cast<float>(squares[c]), g.count, s[c],
                        b[c], rm[c], rv[c], epsilon, momentum);
    alpha[c] = ch.alpha;
    beta[c] = ch.beta;
    stats[0][c] = ch.runningMean;
    stats[1][c] = ch.runningVar;
    stats[2][c] = ch.batchMean;
    stats[3][c] = ch.invStd;
  }
  std::vector<double> y(x.size());
  forEachElement(
      planPlaneTiles(d.batch * d.channels, d.channels, d.inner, kTile),
      [&](int64_t e, int64_t c) {
        y[e] = trainingValue(x[e], alpha[c], beta[c]);
      });
  TrainingOut out{tensorOf(in.x.ref.dtype, in.x.ref.shape, y), {}};
  for (const auto &v : stats)
    out.stats.push_back(tensorOf(in.mean.ref.dtype, in.mean.ref.shape, v));
  return out;
}

/// BatchNormalizationGrad's dx, dscale, dbias (dscale and dbias of the
/// scale's type); `mean`/`invStd` null to recompute them.
struct GradOut {
  OwnedTensor dx, dscale, dbias;
};

GradOut replayGrad(const OwnedTensor &dyT, const OwnedTensor &xT,
                   const OwnedTensor &scaleT, const OwnedTensor *meanT,
                   const OwnedTensor *invStdT, double epsilon) {
  Dims d = dimsOf(xT.ref.shape);
  ChannelSplit g = planChannelSplit(d.batch, d.channels, d.inner);
  std::vector<float> x = floatsOf(xT), dy = floatsOf(dyT);
  auto channelOf = [&](int64_t o) { return (o / d.inner) % d.channels; };
  std::vector<double> mean, inv;
  if (meanT) {
    mean = valuesOf(*meanT);
    inv = valuesOf(*invStdT);
  } else {
    std::vector<double> sums =
        channelTotals(g, [&](int64_t o) { return double(x[o]); });
    mean.resize(d.channels);
    for (int64_t c = 0; c < d.channels; ++c)
      mean[c] = sums[c] / static_cast<double>(g.count);
    std::vector<double> squares = channelTotals(g, [&](int64_t o) {
      return squaredDeviationD(x[o], mean[channelOf(o)]);
    });
    inv.resize(d.channels);
    for (int64_t c = 0; c < d.channels; ++c)
      inv[c] = recomputedInvStd(squares[c], g.count, epsilon);
  }
  std::vector<double> sumDy =
      channelTotals(g, [&](int64_t o) { return double(dy[o]); });
  std::vector<double> sumDyXhat = channelTotals(g, [&](int64_t o) {
    int64_t c = channelOf(o);
    return dyXhat(dy[o], x[o], mean[c], inv[c]);
  });
  std::vector<double> s = valuesOf(scaleT);
  std::vector<BatchNormGradChannel> k(d.channels);
  for (int64_t c = 0; c < d.channels; ++c)
    k[c] = gradChannel(s[c], mean[c], inv[c], sumDy[c], sumDyXhat[c], g.count);
  std::vector<double> dx(x.size());
  forEachElement(
      planPlaneTiles(d.batch * d.channels, d.channels, d.inner, kTile),
      [&](int64_t e, int64_t c) { dx[e] = gradValue(x[e], dy[e], k[c]); });
  DType dt = xT.ref.dtype, st = scaleT.ref.dtype;
  return {tensorOf(dt, xT.ref.shape, dx),
          tensorOf(st, scaleT.ref.shape, sumDyXhat),
          tensorOf(st, scaleT.ref.shape, sumDy)};
}

//===----------------------------------------------------------------------===//
// Tolerances (the kernels and the cpu differ only in the order of double
// sums, so results agree to an ulp of their type)
//===----------------------------------------------------------------------===//

Tolerance valueTolerance(DType t) {
  double ulp = halfUlp(t);
  return ulp ? Tolerance{ulp, ulp} : Tolerance{1e-6, 1e-6};
}

/// Sums over up to 27,000 values: a larger absolute slack.
Tolerance sumTolerance(DType t) {
  double ulp = halfUlp(t);
  return ulp ? Tolerance{4 * ulp, ulp} : Tolerance{1e-5, 1e-6};
}

/// The cpu's Y, or Y and outputs 1-4 in training mode.
TrainingOut cpuForward(const Inputs &in, const AttributeList &a, bool training,
                       int64_t opset = 17) {
  TrainingOut want{OwnedTensor(in.x.ref.dtype, in.x.ref.shape), {}};
  if (training)
    for (int k = 0; k < 4; ++k)
      want.stats.emplace_back(in.mean.ref.dtype, in.mean.ref.shape);
  OwnedTensor *s[4] = {};
  for (size_t k = 0; k < want.stats.size(); ++k)
    s[k] = &want.stats[k];
  llvm::Error err =
      runCpu(cpu::lookupKernel("BatchNormalization"), "BatchNormalization", a,
             {&in.x, &in.scale, &in.bias, &in.mean, &in.var},
             {&want.y, s[0], s[1], s[2], s[3]}, opset);
  EXPECT_EQ(errorText(std::move(err)), "");
  return want;
}

GradOut cpuGrad(const OwnedTensor &dy, const OwnedTensor &x,
                const OwnedTensor &scale, const OwnedTensor *mean,
                const OwnedTensor *invStd, const AttributeList &a) {
  GradOut want{OwnedTensor(x.ref.dtype, x.ref.shape),
               OwnedTensor(scale.ref.dtype, scale.ref.shape),
               OwnedTensor(scale.ref.dtype, scale.ref.shape)};
  llvm::Error err =
      runCpu(cpu::lookupZincKernel("BatchNormalizationGrad"),
             "BatchNormalizationGrad", a, {&dy, &x, &scale, mean, invStd},
             {&want.dx, &want.dscale, &want.dbias});
  EXPECT_EQ(errorText(std::move(err)), "");
  return want;
}

AttributeList trainingAttrs() {
  return attrs({intAttr("training_mode", 1), floatAttr("epsilon", 1e-3),
                floatAttr("momentum", 0.8)});
}

//===----------------------------------------------------------------------===//
// Host math
//===----------------------------------------------------------------------===//

TEST(CudaBatchNormMath, SplitsFollowTheShape) {
  ChannelSplit resnet = planChannelSplit(32, 64, 56 * 56);
  EXPECT_EQ(resnet.splits, 16);
  EXPECT_EQ(resnet.chunk, 2 * 56 * 56);
  ChannelSplit late = planChannelSplit(8, 2048, 7 * 7);
  EXPECT_EQ(late.splits, 1);
  EXPECT_EQ(late.chunk, 8 * 49);
  ChannelSplit wide = planChannelSplit(1, 1, 10000000);
  EXPECT_EQ(wide.splits, kBatchNormMaxSplits);
  ChannelSplit odd = planChannelSplit(3, 2, 5000);
  EXPECT_EQ(odd.splits, 4);
  EXPECT_EQ(odd.chunk, 3750);
}

TEST(CudaBatchNormMath, EveryValueOfAChannelIsAddedOnce) {
  for (const Case &c : kCases) {
    SCOPED_TRACE(formatShape(c.x));
    Dims d = dimsOf(c.x);
    ChannelSplit g = planChannelSplit(d.batch, d.channels, d.inner);
    int64_t total = numElements(c.x);
    for (int64_t ch = 0; ch < d.channels; ++ch) {
      std::vector<int> seen(total, 0);
      for (int64_t s = 0; s < g.splits; ++s) {
        int64_t added = 0;
        for (int64_t t = 0; t < kThreads; ++t)
          forChannelValues(g, ch, s, t, kThreads, [&](int64_t o) {
            ASSERT_GE(o, 0);
            ASSERT_LT(o, total);
            ++seen[o];
            ++added;
          });
        EXPECT_GT(added, 0) << "chunk " << s << " is empty";
      }
      for (int64_t o = 0; o < total; ++o)
        ASSERT_EQ(seen[o], (o / d.inner) % d.channels == ch ? 1 : 0)
            << "channel " << ch << ", offset " << o;
    }
  }
}

TEST(CudaBatchNormMath, EveryElementIsWrittenOnce) {
  struct Shape {
    int64_t planes, params, inner;
  };
  // Value by value, tiled with a partial tile, per activation.
  const Shape shapes[] = {{80, 5, 1}, {6, 3, 35}, {4, 2, 2500}, {24, 12, 1}};
  for (const Shape &s : shapes) {
    PlaneTiles t = planPlaneTiles(s.planes, s.params, s.inner, kTile);
    EXPECT_EQ(t.tiled(), s.inner >= kBatchNormMinRun);
    std::vector<int> seen(s.planes * s.inner, 0);
    forEachElement(t, [&](int64_t e, int64_t p) {
      ASSERT_LT(e, static_cast<int64_t>(seen.size()));
      ++seen[e];
      EXPECT_EQ(p, (e / s.inner) % s.params);
    });
    for (int v : seen)
      ASSERT_EQ(v, 1);
  }
}

TEST(CudaBatchNormMath, FormulasOnExactValues) {
  // scale 2 / sqrt(3.75 + 0.25) = 1: (3 - 1) * 1 + 0.5.
  BatchNormAffine a = inferenceAffine(2, 0.5, 1, 3.75, 0.25);
  EXPECT_FLOAT_EQ(inferenceValue(3, a), 2.5f);
  // Values {1, 3}: mean 2, squares 2, population variance 1, unbiased 2.
  EXPECT_FLOAT_EQ(batchMean(4, 2), 2.0f);
  EXPECT_FLOAT_EQ(squaredDeviation(3, 2), 1.0f);
  BatchNormChannel ch = trainingChannel(2, 2, 2, 3, 1, 10, 10, 0, 0.75);
  EXPECT_FLOAT_EQ(ch.alpha, 3.0f);
  EXPECT_FLOAT_EQ(ch.beta, -5.0f);
  EXPECT_DOUBLE_EQ(ch.runningMean, 0.75 * 10 + 0.25 * 2);
  EXPECT_DOUBLE_EQ(ch.runningVar, 0.75 * 10 + 0.25 * 2);
  EXPECT_DOUBLE_EQ(ch.invStd, 1);
  EXPECT_FLOAT_EQ(trainingValue(3, ch.alpha, ch.beta), 4.0f);
  // dy {1, 0} at x {1, 3}, scale 1: xhat {-1, 1}, sum(dy) 1, sum(dy xhat) -1.
  EXPECT_DOUBLE_EQ(dyXhat(1, 1, 2, 1), -1);
  EXPECT_DOUBLE_EQ(recomputedInvStd(2, 2, 0), 1);
  BatchNormGradChannel k = gradChannel(1, 2, 1, 1, -1, 2);
  EXPECT_FLOAT_EQ(gradValue(1, 1, k), 0.0f); // 1 - 0.5 - (-1)(-0.5)
  EXPECT_FLOAT_EQ(gradValue(3, 0, k), 0.0f); // 0 - 0.5 - (1)(-0.5)
}

TEST(CudaBatchNormMath, ReplayedKernelsMatchCpu) {
  std::mt19937 rng(20240612);
  for (DType dtype : kFloatTypes)
    for (const Case &c : kCases) {
      SCOPED_TRACE(describe(dtype, c));
      Dims d = dimsOf(c.x);
      Inputs in = randomInputs(dtype, c, rng, {d.channels});
      AttributeList infer = attrs({floatAttr("epsilon", 1e-3)});
      TrainingOut want = cpuForward(in, infer, false);
      expectValuesClose(replayInference(in, d.channels, d.inner, 1e-3), want.y,
                        valueTolerance(dtype));

      TrainingOut trained = cpuForward(in, trainingAttrs(), true);
      TrainingOut got = replayTraining(in, 1e-3, 0.8);
      expectValuesClose(got.y, trained.y, valueTolerance(dtype));
      for (int k = 0; k < 4; ++k) {
        SCOPED_TRACE("output " + std::to_string(k + 1));
        expectValuesClose(got.stats[k], trained.stats[k],
                          valueTolerance(c.running));
      }

      OwnedTensor dy = randomTensor(dtype, c.x, rng, -1, 1);
      AttributeList ga = attrs({floatAttr("epsilon", 1e-3)});
      for (bool given : {true, false}) {
        SCOPED_TRACE(given ? "statistics given" : "statistics recomputed");
        const OwnedTensor *m = given ? &trained.stats[2] : nullptr,
                          *i = given ? &trained.stats[3] : nullptr;
        GradOut wantGrad = cpuGrad(dy, in.x, in.scale, m, i, ga);
        GradOut gotGrad = replayGrad(dy, in.x, in.scale, m, i, 1e-3);
        expectValuesClose(gotGrad.dx, wantGrad.dx, valueTolerance(dtype));
        expectValuesClose(gotGrad.dscale, wantGrad.dscale,
                          sumTolerance(c.params));
        expectValuesClose(gotGrad.dbias, wantGrad.dbias,
                          sumTolerance(c.params));
      }
    }
}

TEST(CudaBatchNormMath, ReplayedPerActivationMatchesCpu) {
  std::mt19937 rng(7);
  Case c{{3, 2, 4, 5}, DType::F32, DType::F32};
  Inputs in = randomInputs(DType::F32, c, rng, {2, 4, 5});
  AttributeList a = attrs({intAttr("spatial", 0), floatAttr("epsilon", 1e-3)});
  TrainingOut want = cpuForward(in, a, false, 7);
  expectValuesClose(replayInference(in, 40, 1, 1e-3), want.y,
                    valueTolerance(DType::F32));
}

//===----------------------------------------------------------------------===//
// Argument checks, before any CUDA call
//===----------------------------------------------------------------------===//

TEST(CudaBatchNormNoDevice, BadCallsFailBeforeLaunching) {
  EXPECT_EQ(lookupCudaKernel("", "BatchNormalization"), &runBatchNormalization);
  EXPECT_EQ(lookupCudaKernel("zinc", "BatchNormalizationGrad"),
            &runBatchNormalizationGrad);
  DeviceTensor x = shapeOnly(DType::F32, {2, 3, 5});
  DeviceTensor y = shapeOnly(DType::F32, {2, 3, 5});
  DeviceTensor p = shapeOnly(DType::F32, {3});
  DeviceTensor p4 = shapeOnly(DType::F32, {4});
  DeviceTensor ip = shapeOnly(DType::I64, {3});
  AttributeList none = attrs({});
  AttributeList train = attrs({intAttr("training_mode", 1)});
  auto forward = [&](const AttributeList &a, const DeviceTensor *in,
                     const DeviceTensor *param, DeviceTensor *out,
                     DeviceTensor *extra) {
    return errorText(runUnlaunched(runBatchNormalization, "BatchNormalization",
                                   a, {in, param, &p, &p, &p}, {out, extra}));
  };
  EXPECT_EQ(forward(none, &x, &p, &y, &p),
            "BatchNormalization: outputs beyond Y need training_mode=1");
  EXPECT_EQ(forward(none, &x, &p4, &y, nullptr),
            "BatchNormalization: parameter shape [4] does not match input "
            "[2,3,5] (expected 3 elements)");
  EXPECT_EQ(forward(none, &x, &ip, &y, nullptr),
            "BatchNormalization: parameter of type i64 is not a float type");
  EXPECT_EQ(forward(train, &x, &p, &y, &p4),
            "BatchNormalization: output 1 is f32[4], expected 3 float "
            "elements");
  DeviceTensor one = shapeOnly(DType::F32, {1, 3});
  EXPECT_EQ(forward(train, &one, &p, &one, nullptr),
            "BatchNormalization: training mode needs more than one value per "
            "channel, got input shape [1,3]");
  DeviceTensor x64 = shapeOnly(DType::F64, {2, 3, 5});
  EXPECT_EQ(forward(none, &x64, &p, &x64, nullptr),
            "unsupported: BatchNormalization of f64 on the cuda backend (f32, "
            "f16, bf16)");
  EXPECT_EQ(forward(none, &x, &p, &one, nullptr),
            "BatchNormalization: input shape [2,3,5] and output shape [1,3] "
            "must be equal, [N, C, ...]");

  auto grad = [&](std::vector<const DeviceTensor *> ins,
                  std::vector<DeviceTensor *> outs) {
    return errorText(runUnlaunched(runBatchNormalizationGrad,
                                   "BatchNormalizationGrad", none, ins, outs));
  };
  EXPECT_EQ(grad({&x, &x, &p, &p, nullptr}, {&y, &p, &p}),
            "BatchNormalizationGrad: mean and invstd must be given together");
  EXPECT_EQ(grad({&x, &x, &p}, {&one, &p, &p}),
            "BatchNormalizationGrad: dx must be like x");
  EXPECT_EQ(grad({&x, &x, &p}, {&y, &p4, &p}),
            "BatchNormalizationGrad: per-channel tensor f32[4] does not have "
            "3 float elements");
  EXPECT_EQ(grad({&x, &one, &p}, {&y, &p, &p}),
            "BatchNormalizationGrad: dy f32[2,3,5] and x f32[1,3] must be the "
            "same float type and shape [N, C, ...]");
  DeviceTensor empty = shapeOnly(DType::F32, {0, 3});
  EXPECT_EQ(grad({&empty, &empty, &p}, {&empty, &p, &p}),
            "BatchNormalizationGrad: no values per channel in [0,3]");
  EXPECT_EQ(grad({&x64, &x64, &p}, {&x64, &p, &p}),
            "unsupported: BatchNormalizationGrad of f64 on the cuda backend "
            "(f32, f16, bf16)");
}

//===----------------------------------------------------------------------===//
// With a device: against the cpu kernels
//===----------------------------------------------------------------------===//

class CudaBatchNorm : public CudaRows {};

TEST_F(CudaBatchNorm, InferenceMatchesCpu) {
  for (DType dtype : kFloatTypes)
    for (const Case &c : kCases) {
      SCOPED_TRACE(describe(dtype, c));
      Dims d = dimsOf(c.x);
      Inputs in = randomInputs(dtype, c, rng, {d.channels});
      AttributeList a = attrs({floatAttr("epsilon", 1e-3)});
      TrainingOut want = cpuForward(in, a, false);
      ASSIGN_OR_FAIL(gx, upload(in.x));
      ASSIGN_OR_FAIL(gs, upload(in.scale));
      ASSIGN_OR_FAIL(gb, upload(in.bias));
      ASSIGN_OR_FAIL(gm, upload(in.mean));
      ASSIGN_OR_FAIL(gv, upload(in.var));
      ASSIGN_OR_FAIL(gy, allocate(dtype, c.x));
      ASSERT_NO_ERROR(runDevice(runBatchNormalization, "BatchNormalization", a,
                                {&gx, &gs, &gb, &gm, &gv}, {&gy}));
      ASSIGN_OR_FAIL(got, download(gy));
      expectValuesClose(got, want.y, valueTolerance(dtype));
    }
}

TEST_F(CudaBatchNorm, PerActivationBeforeOpset9MatchesCpu) {
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(dtypeName(dtype).str());
    Case c{{3, 2, 4, 5}, DType::F32, DType::F32};
    Inputs in = randomInputs(dtype, c, rng, {2, 4, 5});
    AttributeList a =
        attrs({intAttr("spatial", 0), floatAttr("epsilon", 1e-3)});
    TrainingOut want = cpuForward(in, a, false, 7);
    ASSIGN_OR_FAIL(gx, upload(in.x));
    ASSIGN_OR_FAIL(gs, upload(in.scale));
    ASSIGN_OR_FAIL(gb, upload(in.bias));
    ASSIGN_OR_FAIL(gm, upload(in.mean));
    ASSIGN_OR_FAIL(gv, upload(in.var));
    ASSIGN_OR_FAIL(gy, allocate(dtype, c.x));
    ASSERT_NO_ERROR(runDevice(runBatchNormalization, "BatchNormalization", a,
                              {&gx, &gs, &gb, &gm, &gv}, {&gy}, 7));
    ASSIGN_OR_FAIL(got, download(gy));
    expectValuesClose(got, want.y, valueTolerance(dtype));
  }
}

TEST_F(CudaBatchNorm, TrainingMatchesCpu) {
  for (DType dtype : kFloatTypes)
    for (const Case &c : kCases) {
      SCOPED_TRACE(describe(dtype, c));
      Dims d = dimsOf(c.x);
      Inputs in = randomInputs(dtype, c, rng, {d.channels});
      TrainingOut want = cpuForward(in, trainingAttrs(), true);
      ASSIGN_OR_FAIL(gx, upload(in.x));
      ASSIGN_OR_FAIL(gs, upload(in.scale));
      ASSIGN_OR_FAIL(gb, upload(in.bias));
      ASSIGN_OR_FAIL(gm, upload(in.mean));
      ASSIGN_OR_FAIL(gv, upload(in.var));
      ASSIGN_OR_FAIL(gy, allocate(dtype, c.x));
      DeviceTensor stats[4];
      for (DeviceTensor &t : stats) {
        ASSIGN_OR_FAIL(s, allocate(c.running, {d.channels}));
        t = s;
      }
      ASSERT_NO_ERROR(
          runDevice(runBatchNormalization, "BatchNormalization",
                    trainingAttrs(), {&gx, &gs, &gb, &gm, &gv},
                    {&gy, &stats[0], &stats[1], &stats[2], &stats[3]}));
      ASSIGN_OR_FAIL(got, download(gy));
      expectValuesClose(got, want.y, valueTolerance(dtype));
      for (int k = 0; k < 4; ++k) {
        SCOPED_TRACE("output " + std::to_string(k + 1));
        ASSIGN_OR_FAIL(s, download(stats[k]));
        expectValuesClose(s, want.stats[k], valueTolerance(c.running));
      }
    }
}

/// The running statistics updated in place and Y written over X, as a plan
/// may place them; and the same bits on a second run.
TEST_F(CudaBatchNorm, TrainingInPlaceAndReproducible) {
  Case c{{3, 2, 5000}, DType::F32, DType::F32};
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(dtypeName(dtype).str());
    Inputs in = randomInputs(dtype, c, rng, {2});
    TrainingOut want = cpuForward(in, trainingAttrs(), true);
    OwnedTensor first[3] = {OwnedTensor(dtype, c.x),
                            OwnedTensor(DType::F32, {2}),
                            OwnedTensor(DType::F32, {2})};
    for (int run = 0; run < 2; ++run) {
      ASSIGN_OR_FAIL(gx, upload(in.x));
      ASSIGN_OR_FAIL(gs, upload(in.scale));
      ASSIGN_OR_FAIL(gb, upload(in.bias));
      ASSIGN_OR_FAIL(gm, upload(in.mean));
      ASSIGN_OR_FAIL(gv, upload(in.var));
      ASSERT_NO_ERROR(runDevice(runBatchNormalization, "BatchNormalization",
                                trainingAttrs(), {&gx, &gs, &gb, &gm, &gv},
                                {&gx, &gm, &gv}));
      ASSIGN_OR_FAIL(y, download(gx));
      ASSIGN_OR_FAIL(rm, download(gm));
      ASSIGN_OR_FAIL(rv, download(gv));
      expectValuesClose(y, want.y, valueTolerance(dtype));
      expectValuesClose(rm, want.stats[0], valueTolerance(DType::F32));
      expectValuesClose(rv, want.stats[1], valueTolerance(DType::F32));
      if (run == 0) {
        first[0] = y;
        first[1] = rm;
        first[2] = rv;
        continue;
      }
      expectValuesClose(y, first[0], {0, 0});
      expectValuesClose(rm, first[1], {0, 0});
      expectValuesClose(rv, first[2], {0, 0});
    }
  }
}

TEST_F(CudaBatchNorm, GradMatchesCpu) {
  for (DType dtype : kFloatTypes)
    for (const Case &c : kCases)
      for (bool given : {true, false}) {
        SCOPED_TRACE(describe(dtype, c) +
                     (given ? ", statistics given" : ", recomputed"));
        Dims d = dimsOf(c.x);
        Inputs in = randomInputs(dtype, c, rng, {d.channels});
        // The statistics, as the forward kernel gives them.
        TrainingOut fwd = cpuForward(in, trainingAttrs(), true);
        OwnedTensor dy = randomTensor(dtype, c.x, rng, -1, 1);
        AttributeList a = attrs({floatAttr("epsilon", 1e-3)});
        const OwnedTensor *m = given ? &fwd.stats[2] : nullptr,
                          *i = given ? &fwd.stats[3] : nullptr;
        GradOut want = cpuGrad(dy, in.x, in.scale, m, i, a);
        ASSIGN_OR_FAIL(gdy, upload(dy));
        ASSIGN_OR_FAIL(gx, upload(in.x));
        ASSIGN_OR_FAIL(gs, upload(in.scale));
        ASSIGN_OR_FAIL(gm, upload(fwd.stats[2]));
        ASSIGN_OR_FAIL(gi, upload(fwd.stats[3]));
        ASSIGN_OR_FAIL(gdx, allocate(dtype, c.x));
        ASSIGN_OR_FAIL(gds, allocate(c.params, {d.channels}));
        ASSIGN_OR_FAIL(gdb, allocate(c.params, {d.channels}));
        ASSERT_NO_ERROR(runDevice(
            runBatchNormalizationGrad, "BatchNormalizationGrad", a,
            {&gdy, &gx, &gs, given ? &gm : nullptr, given ? &gi : nullptr},
            {&gdx, &gds, &gdb}));
        ASSIGN_OR_FAIL(hdx, download(gdx));
        ASSIGN_OR_FAIL(hds, download(gds));
        ASSIGN_OR_FAIL(hdb, download(gdb));
        expectValuesClose(hdx, want.dx, valueTolerance(dtype));
        expectValuesClose(hds, want.dscale, sumTolerance(c.params));
        expectValuesClose(hdb, want.dbias, sumTolerance(c.params));
      }
}

/// dx written over dy, and only the parameter gradients asked for.
TEST_F(CudaBatchNorm, GradInPlaceAndPartialOutputs) {
  Case c{{4, 6, 7, 7}, DType::F32, DType::F32};
  OwnedTensor x = randomTensor(DType::BF16, c.x, rng, -2, 3);
  OwnedTensor dy = randomTensor(DType::BF16, c.x, rng, -1, 1);
  OwnedTensor s = randomTensor(DType::F32, {6}, rng, 0.5, 1.5);
  AttributeList a = attrs({floatAttr("epsilon", 1e-5)});
  GradOut want = cpuGrad(dy, x, s, nullptr, nullptr, a);
  ASSIGN_OR_FAIL(gdy, upload(dy));
  ASSIGN_OR_FAIL(gx, upload(x));
  ASSIGN_OR_FAIL(gs, upload(s));
  ASSIGN_OR_FAIL(gdb, allocate(DType::F32, {6}));
  ASSERT_NO_ERROR(runDevice(runBatchNormalizationGrad, "BatchNormalizationGrad",
                            a, {&gdy, &gx, &gs}, {&gdy, nullptr, &gdb}));
  ASSIGN_OR_FAIL(hdx, download(gdy));
  ASSIGN_OR_FAIL(hdb, download(gdb));
  expectValuesClose(hdx, want.dx, valueTolerance(DType::BF16));
  expectValuesClose(hdb, want.dbias, sumTolerance(DType::F32));
  // Only the bias gradient: no dx kernel, nothing written over dy.
  ASSIGN_OR_FAIL(gdy2, upload(dy));
  ASSIGN_OR_FAIL(gdb2, allocate(DType::F32, {6}));
  ASSERT_NO_ERROR(runDevice(runBatchNormalizationGrad, "BatchNormalizationGrad",
                            a, {&gdy2, &gx, &gs}, {nullptr, nullptr, &gdb2}));
  ASSIGN_OR_FAIL(same, download(gdy2));
  expectValuesClose(same, dy, {0, 0});
  ASSIGN_OR_FAIL(hdb2, download(gdb2));
  expectValuesClose(hdb2, want.dbias, sumTolerance(DType::F32));
}

} // namespace
