//===- DropoutTest.cpp - Dropout (inference and training) and DropoutGrad -===//
#include "test/unit/kernels/KernelCallHelpers.h"
#include "zinc/support/Philox.h"
#include <cmath>
#include <gtest/gtest.h>

using namespace zinc;
using namespace zinc::cpu;
using namespace zinc::cpu::test;

namespace {

using V = std::vector<double>;

/// Runs `fn` at a given step and seed (runKernel leaves them at 1 and 0).
llvm::Error runAt(KernelFn fn, llvm::StringRef op, const AttributeList &a,
                  std::initializer_list<const OwnedTensor *> ins,
                  std::initializer_list<OwnedTensor *> outs, int64_t step,
                  uint64_t seed) {
  std::vector<const TensorRef *> inRefs;
  for (const OwnedTensor *t : ins)
    inRefs.push_back(t ? &t->ref : nullptr);
  std::vector<TensorRef *> outRefs;
  for (OwnedTensor *t : outs)
    outRefs.push_back(t ? &t->ref : nullptr);
  KernelCall call{op, "test", 17, a, inRefs, outRefs, step, seed};
  return runWithWorkspace(fn, call);
}

TEST(DropoutKernels, InferenceCopiesAndMasksTrue) {
  OwnedTensor x = OwnedTensor::f32({2, 2}, {1, -2, 3, -4});
  OwnedTensor ratio = OwnedTensor::f32({}, {0.3});
  OwnedTensor y(DType::F32, {2, 2}), mask(DType::Bool, {2, 2});
  ASSERT_EQ(errorText(runKernel(runDropout, "Dropout", {}, {&x, &ratio},
                                {&y, &mask}, 13)),
            "");
  EXPECT_EQ(y.f32s(), (V{1, -2, 3, -4}));
  EXPECT_EQ(mask.values<bool>(), V(4, 1.0));

  // Before opset 10 the mask has the data's type.
  OwnedTensor floatMask(DType::F32, {2, 2});
  ASSERT_EQ(errorText(runKernel(runDropout, "Dropout",
                                attrs({floatAttr("ratio", 0.5)}), {&x},
                                {&y, &floatMask}, 7)),
            "");
  EXPECT_EQ(floatMask.f32s(), V(4, 1.0));
}

TEST(DropoutKernels, OnnxTrainingFormNeedsSeedIdAndRatioBelowOne) {
  OwnedTensor x = OwnedTensor::f32({3}, {1, 2, 3});
  OwnedTensor training = OwnedTensor::of<bool>(DType::Bool, {}, {1});
  OwnedTensor half = OwnedTensor::f32({}, {0.5}),
              one = OwnedTensor::f32({}, {1}), zero = OwnedTensor::f32({}, {0});
  OwnedTensor y(DType::F32, {3});
  EXPECT_EQ(errorText(runKernel(runDropout, "Dropout", {},
                                {&x, &half, &training}, {&y}, 13)),
            "Dropout: training_mode is true but build-training made no "
            "training form (no seed_id): give training_mode and ratio as "
            "Constant nodes");
  // The default ratio is 0.5, so training without a ratio drops too.
  EXPECT_NE(errorText(runKernel(runDropout, "Dropout", {},
                                {&x, nullptr, &training}, {&y}, 13)),
            "");
  EXPECT_EQ(
      errorText(runKernel(runDropout, "Dropout",
                          attrs({intAttr("seed_id", 0), floatAttr("ratio", 1)}),
                          {&x}, {&y}, 13)),
      "Dropout: ratio 1.000000 is outside [0, 1)");
  EXPECT_EQ(errorText(runKernel(runDropout, "Dropout",
                                attrs({intAttr("seed_id", 0)}), {&x}, {&y})),
            "Dropout: the ratio attribute is missing");
  // Ratio 0 keeps everything even in training, without a stream.
  ASSERT_EQ(errorText(runKernel(runDropout, "Dropout", {},
                                {&x, &zero, &training}, {&y}, 13)),
            "");
  EXPECT_EQ(y.f32s(), (V{1, 2, 3}));
}

/// Element i's keep decision as support/Philox.h defines the stream.
bool expectedKeep(uint64_t seed, int64_t step, uint32_t id, int64_t i,
                  float ratio) {
  Philox4x32Counter c = dropoutBlock(seed, step, id, i / 4);
  return dropoutKeeps(c.v[i % 4], ratio);
}

TEST(DropoutKernels, TrainingFollowsThePhiloxStreamAndScalesExactly) {
  const int64_t n = 1 << 18; // large enough for parallel ranges
  OwnedTensor x = OwnedTensor::f32({64, n / 64}, randomValues(n, -2, 2, 3));
  OwnedTensor y(DType::F32, {64, n / 64}), mask(DType::Bool, {64, n / 64});
  AttributeList a = attrs({intAttr("seed_id", 5), floatAttr("ratio", 0.1f)});
  ASSERT_EQ(
      errorText(runAt(runDropout, "Dropout", a, {&x}, {&y, &mask}, 7, 42)), "");
  const float scale = 1.0f / (1.0f - 0.1f);
  const float *xs = x.ref.as<float>(), *ys = y.ref.as<float>();
  const bool *ms = mask.ref.as<bool>();
  int64_t kept = 0, wrong = 0;
  for (int64_t i = 0; i < n; ++i) {
    bool keep = expectedKeep(42, 7, 5, i, 0.1f);
    kept += keep;
    float want = xs[i] * (keep ? 1.0f : 0.0f) * scale;
    wrong += ms[i] != keep || ys[i] != want;
  }
  EXPECT_EQ(wrong, 0);
  double sigma = std::sqrt(n * 0.9 * 0.1);
  EXPECT_LT(std::abs(kept - 0.9 * n), 4 * sigma);

  // Another step, seed or node draws another mask; the same ones repeat it.
  auto maskAt = [&](int64_t step, uint64_t seed, int64_t id) {
    OwnedTensor m(DType::Bool, {64, n / 64});
    EXPECT_EQ(errorText(runAt(
                  runDropout, "Dropout",
                  attrs({intAttr("seed_id", id), floatAttr("ratio", 0.1f)}),
                  {&x}, {&y, &m}, step, seed)),
              "");
    return m.values<bool>();
  };
  V first = mask.values<bool>();
  EXPECT_EQ(maskAt(7, 42, 5), first);
  EXPECT_NE(maskAt(8, 42, 5), first);
  EXPECT_NE(maskAt(7, 43, 5), first);
  EXPECT_NE(maskAt(7, 42, 6), first);
}

// With gradient accumulation every micro-batch draws its own mask: the
// stream is keyed by the count of batches run (sampleStep), so micro-batch
// k of optimizer step s with N per step draws what plain step
// (s - 1) * N + k + 1 draws, and the forward's mask is the gradient's.
TEST(DropoutKernels, EachMicroBatchDrawsItsOwnMask) {
  const int64_t n = 4096;
  OwnedTensor x = OwnedTensor::f32({n}, V(n, 1.0));
  AttributeList a = attrs({intAttr("seed_id", 2), floatAttr("ratio", 0.5)});
  auto maskOf = [&](int64_t step, int64_t micro, int64_t micros) {
    std::vector<const TensorRef *> ins{&x.ref};
    OwnedTensor y(DType::F32, {n}), m(DType::Bool, {n});
    std::vector<TensorRef *> outs{&y.ref, &m.ref};
    KernelCall call{"Dropout", "test", 17, a, ins, outs, step, 77};
    call.microBatch = micro;
    call.microBatches = micros;
    EXPECT_EQ(errorText(runWithWorkspace(runDropout, call)), "");
    return m.values<bool>();
  };
  auto gradOf = [&](int64_t step, int64_t micro, int64_t micros) {
    std::vector<const TensorRef *> ins{&x.ref};
    OwnedTensor dx(DType::F32, {n});
    std::vector<TensorRef *> outs{&dx.ref};
    KernelCall call{"DropoutGrad", "test", 17, a, ins, outs, step, 77};
    call.microBatch = micro;
    call.microBatches = micros;
    EXPECT_EQ(errorText(runWithWorkspace(runDropoutGrad, call)), "");
    V mask = dx.f32s();
    for (double &v : mask)
      v = v != 0;
    return mask;
  };
  std::vector<V> seen;
  for (int64_t step = 1; step <= 2; ++step)
    for (int64_t micro = 0; micro < 3; ++micro) {
      V m = maskOf(step, micro, 3);
      EXPECT_EQ(m, maskOf((step - 1) * 3 + micro + 1, 0, 1))
          << "step " << step << " micro-batch " << micro;
      EXPECT_EQ(gradOf(step, micro, 3), m);
      for (const V &other : seen)
        EXPECT_NE(m, other) << "step " << step << " micro-batch " << micro;
      seen.push_back(m);
    }
  // One micro-batch per step: the step itself keys the stream.
  V plain = maskOf(5, 0, 1);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(plain[i] != 0, expectedKeep(77, 5, 2, i, 0.5f)) << i;
}

TEST(DropoutKernels, TrainingInBFloat16) {
  OwnedTensor x = OwnedTensor::of<BFloat16>(DType::BF16, {16}, V(16, 1.5));
  OwnedTensor y(DType::BF16, {16}), mask(DType::Bool, {16});
  ASSERT_EQ(
      errorText(runAt(runDropout, "Dropout",
                      attrs({intAttr("seed_id", 0), floatAttr("ratio", 0.5)}),
                      {&x}, {&y, &mask}, 1, 0)),
      "");
  V ys = y.values<BFloat16>(), ms = mask.values<bool>();
  for (int i = 0; i < 16; ++i)
    EXPECT_EQ(ys[i], ms[i] ? 3.0 : 0.0) << i;
}

TEST(DropoutKernels, GradRegeneratesTheForwardMask) {
  const int64_t n = 1000;
  OwnedTensor x = OwnedTensor::f32({n}, V(n, 1.0));
  OwnedTensor y(DType::F32, {n}), mask(DType::Bool, {n});
  ASSERT_EQ(
      errorText(runAt(runDropout, "Dropout",
                      attrs({intAttr("seed_id", 3), floatAttr("ratio", 0.25)}),
                      {&x}, {&y, &mask}, 2, 9)),
      "");
  OwnedTensor dy = OwnedTensor::f32({n}, randomValues(n, -1, 1, 4));
  AttributeList g = attrs({floatAttr("ratio", 0.25f), intAttr("seed_id", 3)});
  OwnedTensor regenerated(DType::F32, {n}), stored(DType::F32, {n});
  ASSERT_EQ(errorText(runAt(runDropoutGrad, "DropoutGrad", g, {&dy},
                            {&regenerated}, 2, 9)),
            "");
  ASSERT_EQ(errorText(runAt(runDropoutGrad, "DropoutGrad", g, {&dy, &mask},
                            {&stored}, 2, 9)),
            "");
  const float scale = 1.0f / (1.0f - 0.25f);
  V want(n);
  for (int64_t i = 0; i < n; ++i)
    want[i] =
        dy.ref.as<float>()[i] * (mask.ref.as<bool>()[i] ? 1.0f : 0.0f) * scale;
  EXPECT_EQ(regenerated.f32s(), want);
  EXPECT_EQ(stored.f32s(), want);
  // The forward of ones is the mask times the scale.
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(y.ref.as<float>()[i], mask.ref.as<bool>()[i] ? scale : 0.0f);

  // Another step regenerates another mask.
  OwnedTensor other(DType::F32, {n});
  ASSERT_EQ(
      errorText(runAt(runDropoutGrad, "DropoutGrad", g, {&dy}, {&other}, 3, 9)),
      "");
  EXPECT_NE(other.f32s(), want);
  EXPECT_EQ(
      errorText(runAt(runDropoutGrad, "DropoutGrad",
                      attrs({intAttr("seed_id", 3)}), {&dy}, {&other}, 3, 9)),
      "DropoutGrad: the ratio attribute is missing");
}

} // namespace
