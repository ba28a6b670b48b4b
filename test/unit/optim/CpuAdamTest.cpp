//===- CpuAdamTest.cpp - Vector Adam/AdamW against the scalar reference ---===//
//
// Each ISA the CPU has (the others skip) against adamReferenceSpan(): the
// kernels do the reference's float operations in its order, so the bound is
// 0 ulp on parameters and moments and equal bits in the f16/bf16 copy, over
// several steps, for every gradient and copy format, AdamW and Adam with and
// without weight decay, fp16 loss-scale unscaling, lengths around the vector
// width and one long enough for OpenMP tiles with a tail. The reference
// itself is checked against PyTorch's formula in double, and the cpu
// backend's AdamW/Adam kernels (Optimizers.cpp) against the reference with
// the mixed-precision operands (copy, found-inf, scale, applied steps).
//
//===----------------------------------------------------------------------===//
#include "zinc/runtime/optim/CpuAdam.h"
#include "Kernels.h"
#include "zinc/support/Float16.h"
#include <cmath>
#include <cstring>
#include <gtest/gtest.h>
#include <random>
#include <string>
#include <vector>

using namespace zinc;
using namespace zinc::optim;
using simd::IsaKind;

namespace {

/// The bound on |kernel - reference| in units in the last place: same
/// operations in the same order, so none.
constexpr uint32_t kMaxUlp = 0;

/// The distance in ulps between two floats (NaN: UINT32_MAX).
uint32_t ulpDistance(float a, float b) {
  if (std::isnan(a) || std::isnan(b))
    return UINT32_MAX;
  auto ordered = [](float f) {
    int32_t i;
    std::memcpy(&i, &f, 4);
    return i < 0 ? static_cast<int64_t>(INT32_MIN) - i
                 : static_cast<int64_t>(i);
  };
  int64_t d = ordered(a) - ordered(b);
  return static_cast<uint32_t>(d < 0 ? -d : d);
}

uint32_t maxUlp(const std::vector<float> &a, const std::vector<float> &b,
                size_t *where) {
  uint32_t worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    uint32_t d = ulpDistance(a[i], b[i]);
    if (d > worst) {
      worst = d;
      *where = i;
    }
  }
  return worst;
}

enum class ModeKind { AdamW, AdamWNoDecay, Adam, AdamL2 };

const char *modeName(ModeKind m) {
  switch (m) {
  case ModeKind::AdamW:
    return "adamw";
  case ModeKind::AdamWNoDecay:
    return "adamw_wd0";
  case ModeKind::Adam:
    return "adam";
  case ModeKind::AdamL2:
    return "adam_l2";
  }
  return "?";
}

const char *formatName(FloatFormat f) {
  switch (f) {
  case FloatFormat::F32:
    return "f32";
  case FloatFormat::F16:
    return "f16";
  case FloatFormat::BF16:
    return "bf16";
  }
  return "?";
}

/// One parameter's buffers.
struct State {
  std::vector<float> param, expAvg, expAvgSq;
  std::vector<uint16_t> copy;

  State(int64_t n, unsigned seed)
      : param(n), expAvg(n, 0.0f), expAvgSq(n, 0.0f), copy(n, 0) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    for (float &p : param)
      p = dist(rng);
  }
  AdamBuffers buffers(const void *grad, FloatFormat gradFormat, bool withCopy,
                      FloatFormat copyFormat) {
    AdamBuffers b;
    b.param = param.data();
    b.expAvg = expAvg.data();
    b.expAvgSq = expAvgSq.data();
    b.grad = grad;
    b.gradFormat = gradFormat;
    b.copy = withCopy ? copy.data() : nullptr;
    b.copyFormat = copyFormat;
    return b;
  }
};

/// Gradient of step `step` in `format` (scaled by `scale` for loss
/// scaling), as raw storage: mostly N(0, 0.05^2) with a few exact zeros and
/// a few large values, so the moments span several binades.
std::vector<uint32_t> makeGrad(int64_t n, FloatFormat format, float scale,
                               unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  std::vector<uint32_t> storage(n / 2 + n + 1);
  for (int64_t i = 0; i < n; ++i) {
    float g = i % 97 == 0 ? 0.0f : dist(rng) * (i % 31 == 0 ? 100.0f : 1.0f);
    g *= scale;
    switch (format) {
    case FloatFormat::F32:
      reinterpret_cast<float *>(storage.data())[i] = g;
      break;
    case FloatFormat::F16:
      reinterpret_cast<uint16_t *>(storage.data())[i] = floatToHalf(g);
      break;
    case FloatFormat::BF16:
      reinterpret_cast<uint16_t *>(storage.data())[i] = floatToBf16(g);
      break;
    }
  }
  return storage;
}

AdamConstants constantsFor(ModeKind mode, int64_t step, const float *scale) {
  bool decoupled = mode == ModeKind::AdamW || mode == ModeKind::AdamWNoDecay;
  double wd = mode == ModeKind::AdamW    ? 0.1
              : mode == ModeKind::AdamL2 ? 0.05
                                         : 0.0;
  return makeAdamConstants(decoupled, 0.01, 0.9, 0.999, 1e-8, wd, step, scale);
}

struct Case {
  IsaKind isa;
  int64_t n;
  FloatFormat grad;
  bool withCopy;
  FloatFormat copy;
  ModeKind mode;
  bool lossScale;
};

std::string caseName(const Case &c) {
  return std::string(simd::isaName(c.isa)) + " n=" + std::to_string(c.n) +
         " grad=" + formatName(c.grad) +
         " copy=" + (c.withCopy ? formatName(c.copy) : "none") + " " +
         modeName(c.mode) + (c.lossScale ? " loss-scaled" : "");
}

/// Runs 3 steps on the kernel of `c.isa` (cpuAdam's tiles for long
/// inputs, the span kernel from element `begin` otherwise) and on the
/// reference, and checks they agree after every step.
void checkAgainstReference(const Case &c, int64_t begin = 0) {
  SCOPED_TRACE(caseName(c) + " begin=" + std::to_string(begin));
  State ref(c.n, 1), got(c.n, 1);
  const float scale = 1024.0f;
  for (int64_t step = 1; step <= 3; ++step) {
    std::vector<uint32_t> grad =
        makeGrad(c.n, c.grad, c.lossScale ? scale : 1.0f,
                 100 + static_cast<unsigned>(step));
    AdamConstants k =
        constantsFor(c.mode, step, c.lossScale ? &scale : nullptr);
    AdamBuffers rb = ref.buffers(grad.data(), c.grad, c.withCopy, c.copy);
    AdamBuffers gb = got.buffers(grad.data(), c.grad, c.withCopy, c.copy);
    adamReferenceSpan(k, rb, begin, c.n);
    if (begin == 0 && c.n > 4 * kAdamTile)
      cpuAdam(k, gb, c.n, c.isa);
    else
      adamSpanFor(c.isa)(k, gb, begin, c.n);
    size_t where = 0;
    ASSERT_LE(maxUlp(got.param, ref.param, &where), kMaxUlp)
        << "param, step " << step << ", element " << where << ": "
        << got.param[where] << " vs " << ref.param[where];
    ASSERT_LE(maxUlp(got.expAvg, ref.expAvg, &where), kMaxUlp)
        << "exp_avg, step " << step << ", element " << where;
    ASSERT_LE(maxUlp(got.expAvgSq, ref.expAvgSq, &where), kMaxUlp)
        << "exp_avg_sq, step " << step << ", element " << where;
    ASSERT_EQ(got.copy, ref.copy) << "compute copy, step " << step;
  }
  // The update moved the parameters (the comparison above is not between
  // two untouched copies) and, with a copy, wrote it.
  State initial(c.n, 1);
  if (c.n > begin + 16) {
    EXPECT_NE(ref.param[c.n - 1], initial.param[c.n - 1]);
    if (c.withCopy) {
      EXPECT_NE(ref.copy[c.n - 1], 0);
    }
  }
  for (int64_t i = 0; i < begin && i < c.n; ++i)
    ASSERT_EQ(got.param[i], initial.param[i])
        << "element " << i << " is before the span";
}

const IsaKind kAllIsas[] = {IsaKind::Scalar, IsaKind::Avx2, IsaKind::Avx512};
const FloatFormat kFormats[] = {FloatFormat::F32, FloatFormat::F16,
                                FloatFormat::BF16};
const ModeKind kModes[] = {ModeKind::AdamW, ModeKind::AdamWNoDecay,
                           ModeKind::Adam, ModeKind::AdamL2};

class CpuAdamIsaTest : public ::testing::TestWithParam<IsaKind> {
protected:
  void SetUp() override {
    if (!simd::simdSupported(GetParam()))
      GTEST_SKIP() << "this CPU has no " << simd::isaName(GetParam());
  }
};

TEST_P(CpuAdamIsaTest, ShortLengthsEveryFormatAndModeMatchReference) {
  for (int64_t n : {0, 1, 7, 8, 9, 15, 16, 17, 33, 100})
    for (FloatFormat grad : kFormats)
      for (int copy = 0; copy < 3; ++copy)
        for (ModeKind mode : kModes)
          for (bool lossScale : {false, true})
            checkAgainstReference(
                {GetParam(), n, grad, copy != 0,
                 copy == 2 ? FloatFormat::BF16 : FloatFormat::F16, mode,
                 lossScale});
}

TEST_P(CpuAdamIsaTest, SpanStartingOffVectorBoundaryMatchesReference) {
  for (int64_t begin : {1, 3, 5, 13})
    for (FloatFormat grad : kFormats)
      checkAgainstReference({GetParam(), 61, grad, true, FloatFormat::BF16,
                             ModeKind::AdamW, false},
                            begin);
}

TEST_P(CpuAdamIsaTest, LongTiledInputMatchesReference) {
  // 1000003 = 61 tiles of 16K and a tail, odd so every vector width has a
  // scalar remainder.
  const int64_t n = 1000003;
  checkAgainstReference({GetParam(), n, FloatFormat::F32, false,
                         FloatFormat::F16, ModeKind::AdamW, false});
  checkAgainstReference({GetParam(), n, FloatFormat::BF16, true,
                         FloatFormat::BF16, ModeKind::AdamL2, false});
  checkAgainstReference({GetParam(), n, FloatFormat::F16, true,
                         FloatFormat::F16, ModeKind::Adam, true});
}

INSTANTIATE_TEST_SUITE_P(Isas, CpuAdamIsaTest, ::testing::ValuesIn(kAllIsas),
                         [](const ::testing::TestParamInfo<IsaKind> &info) {
                           return std::string(simd::isaName(info.param));
                         });

TEST(CpuAdam, IsaChoiceIsSupported) {
  EXPECT_TRUE(simd::simdSupported(cpuAdamIsa()));
  EXPECT_EQ(adamSpanFor(IsaKind::Scalar), &adamReferenceSpan);
}

/// The reference against torch.optim.Adam/AdamW's formula evaluated in
/// double from the same float inputs: float rounding only.
TEST(CpuAdamReference, FollowsPyTorchFormula) {
  const int64_t n = 5000;
  for (ModeKind mode : kModes) {
    SCOPED_TRACE(modeName(mode));
    bool decoupled = mode == ModeKind::AdamW || mode == ModeKind::AdamWNoDecay;
    double wd = mode == ModeKind::AdamW    ? 0.1
                : mode == ModeKind::AdamL2 ? 0.05
                                           : 0.0;
    State s(n, 3);
    std::vector<double> p(s.param.begin(), s.param.end()), m(n, 0.0), v(n, 0.0);
    // m sums terms of both signs: its float error is relative to the sum
    // of their magnitudes.
    std::vector<double> mMagnitude(n, 0.0);
    for (int64_t step = 1; step <= 5; ++step) {
      std::vector<uint32_t> grad =
          makeGrad(n, FloatFormat::F32, 1.0f, 7 + step);
      const float *g32 = reinterpret_cast<const float *>(grad.data());
      AdamBuffers b =
          s.buffers(grad.data(), FloatFormat::F32, false, FloatFormat::F16);
      adamReferenceSpan(constantsFor(mode, step, nullptr), b, 0, n);
      double lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
      for (int64_t i = 0; i < n; ++i) {
        double g = g32[i];
        if (decoupled)
          p[i] *= 1 - lr * wd;
        else
          g += wd * p[i];
        m[i] = beta1 * m[i] + (1 - beta1) * g;
        mMagnitude[i] = beta1 * mMagnitude[i] + (1 - beta1) * std::fabs(g);
        v[i] = beta2 * v[i] + (1 - beta2) * g * g;
        double denom =
            std::sqrt(v[i]) / std::sqrt(1 - std::pow(beta2, step)) + eps;
        p[i] -= lr / (1 - std::pow(beta1, step)) * (m[i] / denom);
      }
    }
    for (int64_t i = 0; i < n; ++i) {
      // A few float roundings of the parameter per step, plus a relative
      // error in the update (of size at most lr / (1 - beta1)).
      EXPECT_NEAR(s.param[i], p[i], 1e-6 * std::fabs(p[i]) + 1e-6)
          << "element " << i;
      EXPECT_NEAR(s.expAvg[i], m[i], 1e-6 * mMagnitude[i] + 1e-12)
          << "element " << i;
      EXPECT_NEAR(s.expAvgSq[i], v[i], 1e-5 * std::fabs(v[i]) + 1e-15)
          << "element " << i;
    }
  }
}

// The cpu backend's kernels: operands (param, grad, exp_avg, exp_avg_sq,
// copy, found_inf, scale, applied steps).

struct Tensor {
  cpu::TensorRef ref;
  std::vector<uint64_t> storage;
  Tensor(DType dtype, int64_t n) {
    ref.dtype = dtype;
    ref.shape = {n};
    storage.assign((n * dtypeSize(dtype)) / 8 + 1, 0);
    ref.data = storage.data();
  }
  Tensor(DType dtype, const void *src, int64_t n) : Tensor(dtype, n) {
    std::memcpy(ref.data, src, n * dtypeSize(dtype));
  }
};

AttributeList adamAttrs(double weightDecay) {
  AttributeList attrs;
  auto set = [&](const char *name, double value) {
    Attribute a;
    a.name = name;
    a.kind = AttrKind::Float;
    a.f = value;
    attrs.set(a);
  };
  set("lr", 0.01);
  set("beta1", 0.9);
  set("beta2", 0.999);
  set("eps", 1e-8);
  set("weight_decay", weightDecay);
  return attrs;
}

/// Runs `fn` on a state after `initialSteps` reference updates, with an f16
/// gradient scaled by 512, an f16 copy and the loss-scaling operands.
void checkKernelWithLossScaling(cpu::KernelFn fn, ModeKind mode,
                                float foundInf) {
  SCOPED_TRACE(std::string(modeName(mode)) +
               (foundInf != 0 ? " overflow" : ""));
  const int64_t n = 70000; // more than 4 tiles: the OpenMP path
  const float scaleValue = 512.0f;
  State ref(n, 5);
  std::vector<uint32_t> grad = makeGrad(n, FloatFormat::F16, scaleValue, 42);
  // Earlier steps: 4 applied updates (the loss-scaled step count), while
  // the executor's own step counter says 9 (skipped steps in between).
  for (int64_t step = 1; step <= 4; ++step)
    adamReferenceSpan(
        constantsFor(mode, step, &scaleValue),
        ref.buffers(grad.data(), FloatFormat::F16, true, FloatFormat::F16), 0,
        n);
  Tensor param(DType::F32, ref.param.data(), n), g(DType::F16, grad.data(), n),
      m(DType::F32, ref.expAvg.data(), n),
      v(DType::F32, ref.expAvgSq.data(), n),
      copy(DType::F16, ref.copy.data(), n), found(DType::F32, &foundInf, 1),
      scale(DType::F32, &scaleValue, 1);
  int64_t appliedSteps = 4;
  Tensor applied(DType::I64, &appliedSteps, 1);
  AttributeList attrs = adamAttrs(mode == ModeKind::AdamW ? 0.1 : 0.05);
  std::vector<const cpu::TensorRef *> ins = {
      &param.ref, &g.ref,     &m.ref,     &v.ref,
      &copy.ref,  &found.ref, &scale.ref, &applied.ref};
  cpu::KernelCall call{
      mode == ModeKind::AdamW ? "AdamW" : "Adam", "update", 17, attrs, ins, {}};
  call.step = 9;
  llvm::Error err = fn(call);
  ASSERT_FALSE(static_cast<bool>(err)) << llvm::toString(std::move(err));
  if (foundInf == 0)
    adamReferenceSpan(
        constantsFor(mode, 5, &scaleValue),
        ref.buffers(grad.data(), FloatFormat::F16, true, FloatFormat::F16), 0,
        n);
  EXPECT_EQ(std::memcmp(param.ref.data, ref.param.data(), n * 4), 0) << "param";
  EXPECT_EQ(std::memcmp(m.ref.data, ref.expAvg.data(), n * 4), 0) << "exp_avg";
  EXPECT_EQ(std::memcmp(v.ref.data, ref.expAvgSq.data(), n * 4), 0)
      << "exp_avg_sq";
  EXPECT_EQ(std::memcmp(copy.ref.data, ref.copy.data(), n * 2), 0) << "copy";
  EXPECT_EQ(*applied.ref.as<int64_t>(), 4)
      << "UpdateLossScale counts steps, not the update";
}

TEST(CpuAdamKernels, LossScaledUpdateUsesAppliedStepsAndInverseScale) {
  checkKernelWithLossScaling(cpu::runAdamW, ModeKind::AdamW, 0.0f);
  checkKernelWithLossScaling(cpu::runAdam, ModeKind::AdamL2, 0.0f);
}

TEST(CpuAdamKernels, OverflowSkipsTheUpdate) {
  checkKernelWithLossScaling(cpu::runAdamW, ModeKind::AdamW, 1.0f);
  checkKernelWithLossScaling(cpu::runAdam, ModeKind::AdamL2, 1.0f);
}

TEST(CpuAdamKernels, PlainF32UpdateUsesTheExecutorsStep) {
  const int64_t n = 1000;
  State ref(n, 9);
  std::vector<uint32_t> grad = makeGrad(n, FloatFormat::F32, 1.0f, 3);
  Tensor param(DType::F32, ref.param.data(), n), g(DType::F32, grad.data(), n),
      m(DType::F32, ref.expAvg.data(), n),
      v(DType::F32, ref.expAvgSq.data(), n);
  AttributeList attrs = adamAttrs(0.1);
  std::vector<const cpu::TensorRef *> ins = {&param.ref, &g.ref, &m.ref,
                                             &v.ref};
  cpu::KernelCall call{"AdamW", "update", 17, attrs, ins, {}};
  call.step = 3;
  llvm::Error err = cpu::runAdamW(call);
  ASSERT_FALSE(static_cast<bool>(err)) << llvm::toString(std::move(err));
  adamReferenceSpan(
      constantsFor(ModeKind::AdamW, 3, nullptr),
      ref.buffers(grad.data(), FloatFormat::F32, false, FloatFormat::F16), 0,
      n);
  EXPECT_EQ(std::memcmp(param.ref.data, ref.param.data(), n * 4), 0);
  EXPECT_EQ(std::memcmp(v.ref.data, ref.expAvgSq.data(), n * 4), 0);
}

// The kernel updates only what its op declares written: handed effects that
// declare nothing (a plan whose ordering treats every operand as read), it
// refuses instead of writing behind the plan's back.
TEST(CpuAdamKernels, WritesOnlyWhatTheOpDeclares) {
  const int64_t n = 16;
  State ref(n, 9);
  std::vector<uint32_t> grad = makeGrad(n, FloatFormat::F32, 1.0f, 3);
  Tensor param(DType::F32, ref.param.data(), n), g(DType::F32, grad.data(), n),
      m(DType::F32, ref.expAvg.data(), n), v(DType::F32, ref.expAvgSq.data(), n);
  std::vector<float> before(static_cast<float *>(param.ref.data),
                            static_cast<float *>(param.ref.data) + n);
  AttributeList attrs = adamAttrs(0.1);
  std::vector<const cpu::TensorRef *> ins = {&param.ref, &g.ref, &m.ref, &v.ref};
  cpu::KernelCall call{"AdamW", "update", 17, attrs, ins, {}};
  const OpEffects readsOnly{};
  call.effects = &readsOnly;
  llvm::Error err = cpu::runAdamW(call);
  ASSERT_TRUE(static_cast<bool>(err));
  EXPECT_NE(llvm::toString(std::move(err)).find("not declared written"), std::string::npos);
  EXPECT_EQ(std::memcmp(param.ref.data, before.data(), n * 4), 0);
  // The declared effects hand out the parameter and moments, not the gradient.
  call.effects = lookupOpEffects(kZincDomain, "AdamW");
  EXPECT_EQ(call.updated(0), &param.ref);
  EXPECT_EQ(call.updated(1), nullptr);
  EXPECT_EQ(call.updated(3), &v.ref);
}

} // namespace
