//===- GradClippingTest.cpp - --clip-grad-norm's kernels on the cpu -------===//
//
// SumGradSquares sums the (unscaled) gradients' squares; the updates turn
// the sum into clip_grad_norm_'s coefficient, clamp(max / (norm + 1e-6),
// max=1) with PyTorch's two roundings, and multiply each gradient by it
// after unscaling.
//
//===----------------------------------------------------------------------===//
#include "zinc/runtime/optim/CpuAdam.h"
#include "Kernels.h"
#include "OptimTestTensors.h"
#include "zinc/support/Float16.h"
#include "zinc/support/GradClipping.h"
#include <cmath>
#include <cstring>
#include <gtest/gtest.h>
#include <random>
#include <vector>

using namespace zinc;

namespace {

using test::floatAttr;
using test::intAttr;
using test::randomFloats;
using test::Tensor;

llvm::Error run(llvm::Error (*fn)(const cpu::KernelCall &), const char *op,
                std::vector<const cpu::TensorRef *> ins, AttributeList attrs,
                int64_t step = 1) {
  cpu::KernelCall call{op, "test", 17, attrs, ins, {}};
  call.step = step;
  return fn(call);
}

TEST(GradClipping, CoefficientIsPyTorchs) {
  // The reciprocal of (norm + 1e-6) in float, times max, in float:
  // torch.tensor(sqrt(5)) gives 0.3 / (norm + 1e-6) = 0.13416404, one
  // float division 0.13416402.
  float want = (1.0f / (std::sqrt(5.0f) + 1e-6f)) * 0.3f;
  EXPECT_EQ(clipCoefficient(5.0f, 0.3f), want);
  EXPECT_EQ(want, 0.13416404f);
  EXPECT_NE(want, 0.3f / (std::sqrt(5.0f) + 1e-6f)) << "the test cannot tell the roundings apart";
  // Below the maximum: clamped to exactly 1.
  EXPECT_EQ(clipCoefficient(0.25f, 1.0f), 1.0f);
  EXPECT_EQ(clipCoefficient(0.0f, 1.0f), 1.0f);
  // A non-finite norm: 0 for inf, NaN passes the clamp as in torch.clamp.
  EXPECT_EQ(clipCoefficient(INFINITY, 1.0f), 0.0f);
  EXPECT_TRUE(std::isnan(clipCoefficient(NAN, 1.0f)));
}

TEST(GradClipping, SumOfSquaresUnscalesAndAccumulates) {
  const int64_t n = 100003; // several chunks, one partial
  std::vector<float> a = randomFloats(n, -300, 300, 1);
  std::vector<float> b = randomFloats(37, -300, 300, 2);
  Tensor ga(DType::F32, {n}), gb(DType::F16, {37});
  std::memcpy(ga.ref.data, a.data(), n * 4);
  for (int64_t i = 0; i < 37; ++i)
    gb.ref.as<uint16_t>()[i] = floatToHalf(b[i]);
  Tensor sum = Tensor::f32({123.0f}), scale = Tensor::f32({1024.0f});
  const float inv = 1.0f / 1024.0f;
  double want = 0;
  for (float x : a)
    want += double(x * inv) * double(x * inv);
  for (int64_t i = 0; i < 37; ++i) {
    float x = halfToFloat(gb.ref.as<uint16_t>()[i]) * inv;
    want += double(x) * double(x);
  }
  ASSERT_FALSE(static_cast<bool>(
      run(cpu::runSumGradSquares, "SumGradSquares", {&sum.ref, &scale.ref, &ga.ref, &gb.ref}, {})));
  EXPECT_FLOAT_EQ(*sum.floats(), static_cast<float>(want)) << "the start value is not kept";
  // accumulate: added to the sum so far; no scale: the values as stored.
  AttributeList acc;
  acc.set(intAttr("accumulate", 1));
  Tensor small = Tensor::f32({3.0f, 4.0f});
  ASSERT_FALSE(static_cast<bool>(
      run(cpu::runSumGradSquares, "SumGradSquares", {&sum.ref, nullptr, &small.ref}, acc)));
  EXPECT_FLOAT_EQ(*sum.floats(), static_cast<float>(want + 25.0));
}

TEST(GradClipping, SumOfSquaresRefusesWhatItCannotRead) {
  Tensor sum = Tensor::f32({0}), ids(DType::I64, {4});
  llvm::Error err = run(cpu::runSumGradSquares, "SumGradSquares", {&sum.ref, nullptr, &ids.ref}, {});
  ASSERT_TRUE(static_cast<bool>(err));
  EXPECT_NE(llvm::toString(std::move(err)).find("gradient 0 is not f32, f16 or bf16"),
            std::string::npos);
}

TEST(GradClipping, SgdMultipliesTheGradientByTheCoefficient) {
  const int64_t n = 64;
  std::vector<float> p0 = randomFloats(n, -1, 1, 3), g = randomFloats(n, -2, 2, 4);
  Tensor param = Tensor::f32(p0), grad = Tensor::f32(g);
  Tensor sum = Tensor::f32({9.0f}); // norm 3
  AttributeList attrs;
  attrs.set(floatAttr("lr", 0.1));
  attrs.set(floatAttr("max_grad_norm", 0.75));
  // (param, grad, momentum slot, copy, found_inf, scale, applied, sum)
  ASSERT_FALSE(static_cast<bool>(run(cpu::runSGD, "SGD",
                                     {&param.ref, &grad.ref, nullptr, nullptr, nullptr, nullptr,
                                      nullptr, &sum.ref},
                                     attrs)));
  const float coef = clipCoefficient(9.0f, 0.75f);
  EXPECT_LT(coef, 0.26f);
  for (int64_t i = 0; i < n; ++i)
    EXPECT_EQ(param.floats()[i], p0[i] - 0.1f * (g[i] * coef)) << i;
}

TEST(GradClipping, AdamUnscalesThenClips) {
  const int64_t n = 1000;
  std::vector<float> p0 = randomFloats(n, -1, 1, 5), g = randomFloats(n, -500, 500, 6);
  Tensor param = Tensor::f32(p0), grad = Tensor::f32(g), m(DType::F32, {n}), v(DType::F32, {n});
  Tensor found = Tensor::f32({0}), scale = Tensor::f32({256.0f}), sum = Tensor::f32({4.0f});
  int64_t appliedSteps = 0;
  cpu::TensorRef applied;
  applied.dtype = DType::I64;
  applied.shape = {1};
  applied.data = &appliedSteps;
  AttributeList attrs;
  attrs.set(floatAttr("lr", 0.01));
  attrs.set(floatAttr("weight_decay", 0.1));
  attrs.set(floatAttr("max_grad_norm", 0.5));
  ASSERT_FALSE(static_cast<bool>(run(cpu::runAdamW, "AdamW",
                                     {&param.ref, &grad.ref, &m.ref, &v.ref, nullptr,
                                      &found.ref, &scale.ref, &applied, &sum.ref},
                                     attrs, 7)));
  // The reference: unscale by 1/256, then clip by clamp(0.5 / (2 + 1e-6)).
  optim::AdamConstants c = optim::makeAdamConstants(true, 0.01, 0.9, 0.999, 1e-8, 0.1, 1,
                                                    scale.floats());
  c.clip = true;
  c.clipCoef = clipCoefficient(4.0f, 0.5f);
  std::vector<float> p = p0, mm(n, 0), vv(n, 0);
  optim::AdamBuffers b;
  b.param = p.data();
  b.expAvg = mm.data();
  b.expAvgSq = vv.data();
  b.grad = g.data();
  optim::adamReferenceSpan(c, b, 0, n);
  EXPECT_EQ(std::memcmp(param.ref.data, p.data(), n * 4), 0);
  EXPECT_EQ(std::memcmp(v.ref.data, vv.data(), n * 4), 0);
  // Clipping changed the update (Adam's second moment sees the scale).
  c.clip = false;
  std::vector<float> unclipped = p0, m2(n, 0), v2(n, 0);
  b.param = unclipped.data();
  b.expAvg = m2.data();
  b.expAvgSq = v2.data();
  optim::adamReferenceSpan(c, b, 0, n);
  EXPECT_NE(std::memcmp(v2.data(), vv.data(), n * 4), 0);
}

TEST(GradClipping, UpdateRefusesASumWithoutAMaximum) {
  Tensor param = Tensor::f32({1}), grad = Tensor::f32({1}), sum = Tensor::f32({1});
  AttributeList attrs;
  attrs.set(floatAttr("lr", 0.1));
  llvm::Error err = run(cpu::runSGD, "SGD",
                        {&param.ref, &grad.ref, nullptr, nullptr, nullptr, nullptr, nullptr,
                         &sum.ref},
                        attrs);
  ASSERT_TRUE(static_cast<bool>(err));
  EXPECT_NE(llvm::toString(std::move(err)).find("max_grad_norm > 0"), std::string::npos);
}

} // namespace
