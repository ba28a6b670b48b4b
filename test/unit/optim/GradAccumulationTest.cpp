//===- GradAccumulationTest.cpp - Micro-batches' kernels on the cpu -------===//
//
// Gradient accumulation (zinc-compile --grad-accum=N): AccumulateGrad sums
// the micro-batches' gradients into an f32 accumulator, the first one
// overwriting it; fp16 loss scaling seeds the loss gradient with scale / N
// (scaler.scale(loss / N).backward()) and keeps found_inf set across the
// micro-batches of an optimizer step, so an overflow in any of them skips
// the step.
//
//===----------------------------------------------------------------------===//
#include "OptimTestTensors.h"
#include "Kernels.h"
#include "zinc/support/Float16.h"
#include <cstring>
#include <gtest/gtest.h>
#include <limits>
#include <random>
#include <vector>

using namespace zinc;

namespace {

using test::Tensor;
using test::randomFloats;

AttributeList floatAttrs(const char *name, double value) {
  AttributeList attrs;
  attrs.set(test::floatAttr(name, value));
  return attrs;
}

/// Runs `fn` as micro-batch `micro` of `micros` in optimizer step 2.
std::string run(cpu::KernelFn fn, const char *op,
                std::vector<const cpu::TensorRef *> ins,
                std::vector<cpu::TensorRef *> outs, const AttributeList &attrs,
                int64_t micro = 0, int64_t micros = 1) {
  cpu::KernelCall call{op, "test", 17, attrs, ins, outs};
  call.step = 2;
  call.microBatch = micro;
  call.microBatches = micros;
  llvm::Error err = fn(call);
  return err ? llvm::toString(std::move(err)) : "";
}

// The first micro-batch overwrites a stale sum (never zeroed), the others
// add; 16-bit gradients are widened exactly before the f32 addition.
TEST(GradAccumulation, FirstMicroBatchStoresOthersAdd) {
  const int64_t n = 70001; // past the parallel threshold
  for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtypeName(dtype).str());
    Tensor acc = Tensor::f32(randomFloats(n, 1e6f, 2e6f, 1));
    std::vector<float> want(n);
    for (int64_t micro = 0; micro < 3; ++micro) {
      std::vector<float> g = randomFloats(n, -4, 4, 2 + unsigned(micro));
      Tensor grad(dtype, {n});
      for (int64_t i = 0; i < n; ++i) {
        if (dtype == DType::F16)
          grad.ref.as<uint16_t>()[i] = floatToHalf(g[i]);
        else if (dtype == DType::BF16)
          grad.ref.as<uint16_t>()[i] = floatToBf16(g[i]);
        else
          grad.floats()[i] = g[i];
      }
      for (int64_t i = 0; i < n; ++i) {
        float v = dtype == DType::F16 ? halfToFloat(grad.ref.as<uint16_t>()[i])
                  : dtype == DType::BF16
                      ? bf16ToFloat(grad.ref.as<uint16_t>()[i])
                      : g[i];
        want[i] = micro == 0 ? v : want[i] + v;
      }
      ASSERT_EQ(run(cpu::runAccumulateGrad, "AccumulateGrad",
                    {&acc.ref, &grad.ref}, {}, {}, micro, 3),
                "");
      ASSERT_EQ(std::memcmp(acc.ref.data, want.data(), n * 4), 0)
          << "micro-batch " << micro;
    }
  }
}

TEST(GradAccumulation, AccumulateGradRefusesWhatItCannotSum) {
  Tensor half(DType::F16, {4}), f4 = Tensor::f32({0, 0, 0, 0}),
                                f5 = Tensor::f32({0, 0, 0, 0, 0}),
                                ids(DType::I64, {4});
  const char *shape = "AccumulateGrad expects an f32 accumulator (declared "
                      "written) and a gradient of its element count";
  EXPECT_EQ(run(cpu::runAccumulateGrad, "AccumulateGrad", {&half.ref, &f4.ref},
                {}, {}),
            shape);
  EXPECT_EQ(
      run(cpu::runAccumulateGrad, "AccumulateGrad", {&f4.ref, &f5.ref}, {}, {}),
      shape);
  EXPECT_EQ(run(cpu::runAccumulateGrad, "AccumulateGrad", {&f4.ref, &ids.ref},
                {}, {}),
            "AccumulateGrad: the gradient is i64, not f32, f16 or bf16");
}

// seed = scale / divisor in float, as autograd's gradient of loss / N under
// scaler.scale; no divisor leaves the scale as it is.
TEST(GradAccumulation, LossScaleSeedIsTheScaleOverTheMicroBatches) {
  for (float divisor : {3.0f, 4.0f, 7.0f}) {
    Tensor scale = Tensor::scalar(0), seed(DType::F32, {});
    AttributeList attrs = floatAttrs("divisor", divisor);
    Attribute init;
    init.name = "init_scale";
    init.kind = AttrKind::Float;
    init.f = 65536.0;
    attrs.set(init);
    ASSERT_EQ(
        run(cpu::runLossScale, "LossScale", {&scale.ref}, {&seed.ref}, attrs),
        "");
    EXPECT_EQ(*scale.floats(), 65536.0f) << "the scale itself is not divided";
    EXPECT_EQ(*seed.floats(), 65536.0f / divisor);
    // A scale that does not divide exactly rounds once, in float.
    *scale.floats() = 1000.0f;
    Tensor half(DType::F16, {});
    ASSERT_EQ(
        run(cpu::runLossScale, "LossScale", {&scale.ref}, {&half.ref}, attrs),
        "");
    EXPECT_EQ(*half.ref.as<uint16_t>(), floatToHalf(1000.0f / divisor));
  }
  Tensor scale = Tensor::scalar(3.0f), seed(DType::F32, {});
  ASSERT_EQ(run(cpu::runLossScale, "LossScale", {&scale.ref}, {&seed.ref}, {}),
            "");
  EXPECT_EQ(*seed.floats(), 3.0f);
  EXPECT_EQ(run(cpu::runLossScale, "LossScale", {&scale.ref}, {&seed.ref},
                floatAttrs("divisor", 0)),
            "LossScale: divisor 0.000000 is not positive");
}

// The first check of a step (no `accumulate`) clears found_inf only in the
// first micro-batch: an overflow in an earlier micro-batch still skips the
// optimizer step, and a finite one does not set it.
TEST(GradAccumulation, FoundInfResetsOnlyInTheFirstMicroBatch) {
  Tensor scale = Tensor::scalar(1024.0f);
  Tensor finite = Tensor::f32({1, -2, 3});
  Tensor overflow = Tensor::f32({1, std::numeric_limits<float>::infinity(), 3});
  for (int64_t micro = 0; micro < 4; ++micro) {
    SCOPED_TRACE("micro-batch " + std::to_string(micro));
    Tensor flag = Tensor::scalar(1.0f);
    ASSERT_EQ(run(cpu::runCheckFiniteGrads, "CheckFiniteGrads",
                  {&flag.ref, &scale.ref, &finite.ref}, {}, {}, micro, 4),
              "");
    EXPECT_EQ(*flag.floats(), micro == 0 ? 0.0f : 1.0f);
    *flag.floats() = 0;
    ASSERT_EQ(run(cpu::runCheckFiniteGrads, "CheckFiniteGrads",
                  {&flag.ref, &scale.ref, &finite.ref}, {}, {}, micro, 4),
              "");
    EXPECT_EQ(*flag.floats(), 0.0f);
    ASSERT_EQ(run(cpu::runCheckFiniteGrads, "CheckFiniteGrads",
                  {&flag.ref, &scale.ref, &overflow.ref}, {}, {}, micro, 4),
              "");
    EXPECT_EQ(*flag.floats(), 1.0f);
  }
  // Without accumulation (one micro-batch) the first check always resets.
  Tensor flag = Tensor::scalar(1.0f);
  ASSERT_EQ(run(cpu::runCheckFiniteGrads, "CheckFiniteGrads",
                {&flag.ref, &scale.ref, &finite.ref}, {}, {}),
            "");
  EXPECT_EQ(*flag.floats(), 0.0f);
}

} // namespace
