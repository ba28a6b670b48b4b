//===- CudaTrainingTest.cpp - cuda Dropout, optimizers, data movement -----===//
//
// Host tests (every machine): TrainingMath.h's per-element math against
// the cpu code it mirrors, and the kernels' argument checks, which fail
// before anything touches a device. Device tests (skipped without one):
// each cuda kernel against the cpu kernel on the same operands; Dropout's
// masks must be bit-identical, the optimizers within float rounding.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/kernels/TrainingMath.h"
#include "test/unit/cuda/TrainingTestHelpers.h"
#include "zinc/runtime/optim/CpuAdam.h"
#include "zinc/support/GradClipping.h"
#include "zinc/support/Philox.h"
#include "SliceGeometry.h"
#include <cmath>
#include <random>

using namespace zinc;
using namespace zinc::cuda;
using namespace zinc::cuda::test;
using cpu::test::attrs;
using cpu::test::floatAttr;
using cpu::test::intAttr;
using cpu::test::intsAttr;

namespace {

/// `n` uniform values in [lo, hi) as a tensor of `dtype`.
OwnedTensor randomOf(DType dtype, llvm::ArrayRef<int64_t> shape, double lo,
                     double hi, unsigned seed) {
  std::vector<double> v =
      cpu::test::randomValues(numElements(shape), lo, hi, seed);
  return cpu::visitDType(dtype, [&](auto tag) {
    return OwnedTensor::of<decltype(tag)>(dtype, shape, v);
  });
}

std::vector<double> valuesOf(const OwnedTensor &t) {
  return cpu::visitDType(t.ref.dtype,
                         [&](auto tag) { return t.values<decltype(tag)>(); });
}

/// |got - want| <= rtol * |want| + atol for every element.
void expectNear(const OwnedTensor &got, const OwnedTensor &want, double rtol,
                double atol = 0) {
  std::vector<double> g = valuesOf(got), w = valuesOf(want);
  ASSERT_EQ(g.size(), w.size());
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < g.size(); ++i)
    if (!(std::fabs(g[i] - w[i]) <= rtol * std::fabs(w[i]) + atol) &&
        bad++ == 0)
      first = i;
  EXPECT_EQ(bad, 0u) << bad << " of " << g.size() << " differ; first at "
                     << first << ": got " << g[first] << ", want " << w[first];
}

//===----------------------------------------------------------------------===//
// TrainingMath.h against the cpu code (no device)
//===----------------------------------------------------------------------===//

TEST(CudaTrainingMath, AdamConstantsAreTheCpus) {
  const float scale = 1024.0f;
  const float *const unscaled = nullptr;
  for (bool decoupled : {true, false})
    for (int64_t step : {1, 2, 7, 1000})
      for (const float *s : {unscaled, &scale}) {
        AdamHyper h;
        h.decoupled = decoupled;
        h.lr = 3e-4;
        h.beta1 = 0.85;
        h.beta2 = 0.995;
        h.eps = 1e-6;
        h.weightDecay = 0.05;
        AdamStepConstants c = adamStepConstants(h, step, s);
        optim::AdamConstants w = optim::makeAdamConstants(
            decoupled, h.lr, h.beta1, h.beta2, h.eps, h.weightDecay, step, s);
        EXPECT_EQ(c.decoupled, w.decoupled);
        EXPECT_EQ(c.decay, w.decay);
        EXPECT_EQ(c.weightDecay, w.weightDecay);
        EXPECT_EQ(c.beta1, w.beta1);
        EXPECT_EQ(c.beta2, w.beta2);
        EXPECT_EQ(c.oneMinusBeta1, w.oneMinusBeta1);
        EXPECT_EQ(c.oneMinusBeta2, w.oneMinusBeta2);
        EXPECT_EQ(c.stepSize, w.stepSize) << "step " << step;
        EXPECT_EQ(c.bias2Sqrt, w.bias2Sqrt) << "step " << step;
        EXPECT_EQ(c.eps, w.eps);
        EXPECT_EQ(c.unscale, w.unscale);
        EXPECT_EQ(c.invScale, w.invScale);
      }
}

TEST(CudaTrainingMath, AdamUpdateIsTheReferenceSpan) {
  const int64_t n = 257;
  float scale = 512.0f;
  for (bool decoupled : {true, false}) {
    std::vector<double> p0 = cpu::test::randomValues(n, -1, 1, 1),
                        g0 = cpu::test::randomValues(n, -300, 300, 2);
    std::vector<float> p(p0.begin(), p0.end()), g(g0.begin(), g0.end());
    std::vector<float> m(n, 0), v(n, 0), pw = p, mw = m, vw = v;
    for (int64_t step = 1; step <= 3; ++step) {
      AdamHyper h;
      h.decoupled = decoupled;
      h.weightDecay = 0.01;
      AdamStepConstants c = adamStepConstants(h, step, &scale);
      optim::AdamConstants wc = optim::makeAdamConstants(
          decoupled, h.lr, h.beta1, h.beta2, h.eps, h.weightDecay, step,
          &scale);
      optim::AdamBuffers b;
      b.param = pw.data();
      b.expAvg = mw.data();
      b.expAvgSq = vw.data();
      b.grad = g.data();
      optim::adamReferenceSpan(wc, b, 0, n);
      for (int64_t i = 0; i < n; ++i)
        adamUpdate(c, g[i], p[i], m[i], v[i]);
    }
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_FLOAT_EQ(p[i], pw[i]) << i;
      EXPECT_FLOAT_EQ(m[i], mw[i]) << i;
      EXPECT_FLOAT_EQ(v[i], vw[i]) << i;
    }
  }
}

TEST(CudaTrainingMath, SgdUpdateIsTheCpuKernels) {
  const int64_t n = 33;
  OwnedTensor param = randomOf(DType::F32, {n}, -1, 1, 3);
  OwnedTensor grad = randomOf(DType::F32, {n}, -1, 1, 4);
  OwnedTensor buf(DType::F32, {n});
  AttributeList a =
      attrs({floatAttr("lr", 0.1), floatAttr("momentum", 0.9),
             floatAttr("dampening", 0.1), floatAttr("weight_decay", 0.01),
             intAttr("nesterov", 1)});
  std::vector<float> p(param.ref.as<float>(), param.ref.as<float>() + n),
      b(n, 0);
  SgdConstants c;
  c.lr = 0.1f;
  c.momentum = 0.9f;
  c.dampening = 0.1f;
  c.weightDecay = 0.01f;
  c.nesterov = true;
  for (int64_t step = 1; step <= 3; ++step) {
    std::vector<const cpu::TensorRef *> ins{&param.ref, &grad.ref, &buf.ref};
    cpu::KernelCall call{"SGD", "test", 17, a, ins, {}};
    call.step = step;
    ASSERT_NO_ERROR(cpu::lookupZincKernel("SGD")(call));
    for (int64_t i = 0; i < n; ++i)
      p[i] = sgdUpdate(c, grad.ref.as<float>()[i], p[i], &b[i], step == 1);
  }
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_FLOAT_EQ(p[i], param.ref.as<float>()[i]) << i;
    EXPECT_FLOAT_EQ(b[i], buf.ref.as<float>()[i]) << i;
  }
}

// --clip-grad-norm: the cuda math multiplies by the coefficient after
// unscaling, as the cpu kernels do, for SGD and for Adam's reference span.
TEST(CudaTrainingMath, ClippedUpdatesAreTheCpuKernels) {
  const int64_t n = 65;
  OwnedTensor param = randomOf(DType::F32, {n}, -1, 1, 30);
  OwnedTensor grad = randomOf(DType::F32, {n}, -3, 3, 31);
  OwnedTensor sum = OwnedTensor::f32({}, {6.25f}); // norm 2.5
  std::vector<float> p(param.ref.as<float>(), param.ref.as<float>() + n);
  AttributeList a = attrs({floatAttr("lr", 0.1), floatAttr("max_grad_norm", 0.5)});
  std::vector<const cpu::TensorRef *> ins{&param.ref, &grad.ref, nullptr, nullptr,
                                          nullptr,    nullptr,   nullptr, &sum.ref};
  cpu::KernelCall call{"SGD", "test", 17, a, ins, {}};
  call.step = 1;
  ASSERT_NO_ERROR(cpu::lookupZincKernel("SGD")(call));
  SgdConstants c;
  c.lr = 0.1f;
  c.clip = true;
  c.clipCoef = clipCoefficient(6.25f, 0.5f);
  for (int64_t i = 0; i < n; ++i) {
    p[i] = sgdUpdate(c, grad.ref.as<float>()[i], p[i], nullptr, true);
    EXPECT_EQ(p[i], param.ref.as<float>()[i]) << i;
  }

  float scale = 64.0f;
  std::vector<double> g0 = cpu::test::randomValues(n, -100, 100, 32);
  std::vector<float> g(g0.begin(), g0.end()), pa(n, 0.5f), m(n, 0), v(n, 0);
  std::vector<float> pw = pa, mw = m, vw = v;
  AdamHyper h;
  AdamStepConstants ac = adamStepConstants(h, 1, &scale);
  ac.clip = true;
  ac.clipCoef = clipCoefficient(6.25f, 0.5f);
  optim::AdamConstants wc =
      optim::makeAdamConstants(h.decoupled, h.lr, h.beta1, h.beta2, h.eps, h.weightDecay, 1, &scale);
  wc.clip = true;
  wc.clipCoef = ac.clipCoef;
  optim::AdamBuffers b;
  b.param = pw.data();
  b.expAvg = mw.data();
  b.expAvgSq = vw.data();
  b.grad = g.data();
  optim::adamReferenceSpan(wc, b, 0, n);
  for (int64_t i = 0; i < n; ++i) {
    adamUpdate(ac, g[i], pa[i], m[i], v[i]);
    EXPECT_EQ(pa[i], pw[i]) << i;
    EXPECT_EQ(v[i], vw[i]) << i;
  }
}

// A learning-rate schedule (LrSchedule.h): the cuda math's AdamW and SGD,
// given the node's schedule, make the cpu kernels' updates step for step,
// warmup (a first rate of 0) and decay included, and differ from a
// constant rate's.
TEST(CudaTrainingMath, ScheduledUpdatesAreTheCpuKernels) {
  const int64_t n = 41;
  LrSchedule schedule{LrScheduleKind::Cosine, 2, 6};
  AttributeList scheduled = attrs(
      {floatAttr("lr", 0.01), floatAttr("weight_decay", 0.01),
       cpu::test::stringAttr("lr_schedule", "cosine"),
       intAttr("warmup_steps", 2), intAttr("total_steps", 6)});
  OwnedTensor grad = randomOf(DType::F32, {n}, -1, 1, 8);
  OwnedTensor param = randomOf(DType::F32, {n}, -1, 1, 9);
  OwnedTensor m(DType::F32, {n}), v(DType::F32, {n});
  std::vector<float> p(param.ref.as<float>(), param.ref.as<float>() + n),
      mm(n, 0), vv(n, 0), constant = p;
  AdamHyper h;
  h.lr = 0.01;
  h.weightDecay = 0.01;
  h.schedule = schedule;
  AdamHyper flat = h;
  flat.schedule = LrSchedule();
  std::vector<float> fm(n, 0), fv(n, 0);
  for (int64_t step = 1; step <= 8; ++step) {
    std::vector<const cpu::TensorRef *> ins{&param.ref, &grad.ref, &m.ref, &v.ref};
    cpu::KernelCall call{"AdamW", "test", 17, scheduled, ins, {}};
    call.step = step;
    ASSERT_NO_ERROR(cpu::lookupZincKernel("AdamW")(call));
    AdamStepConstants c = adamStepConstants(h, step, nullptr);
    AdamStepConstants f = adamStepConstants(flat, step, nullptr);
    for (int64_t i = 0; i < n; ++i) {
      adamUpdate(c, grad.ref.as<float>()[i], p[i], mm[i], vv[i]);
      adamUpdate(f, grad.ref.as<float>()[i], constant[i], fm[i], fv[i]);
    }
  }
  size_t differ = 0;
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(p[i], param.ref.as<float>()[i]) << i;
    differ += p[i] != constant[i];
  }
  EXPECT_EQ(differ, size_t(n)) << "the schedule changed no weight";

  OwnedTensor sgdParam = randomOf(DType::F32, {n}, -1, 1, 10);
  std::vector<float> sp(sgdParam.ref.as<float>(), sgdParam.ref.as<float>() + n);
  SgdConstants k;
  for (int64_t step = 1; step <= 8; ++step) {
    std::vector<const cpu::TensorRef *> ins{&sgdParam.ref, &grad.ref};
    cpu::KernelCall call{"SGD", "test", 17, scheduled, ins, {}};
    call.step = step;
    ASSERT_NO_ERROR(cpu::lookupZincKernel("SGD")(call));
    k.lr = sgdLr(0.01, schedule, step);
    k.weightDecay = 0.01f;
    for (int64_t i = 0; i < n; ++i)
      sp[i] = sgdUpdate(k, grad.ref.as<float>()[i], sp[i], nullptr, step == 1);
  }
  for (int64_t i = 0; i < n; ++i)
    EXPECT_EQ(sp[i], sgdParam.ref.as<float>()[i]) << i;
}

// A schedule the kernels cannot read is refused, naming the op.
TEST(CudaTrainingMath, UnknownScheduleIsRefusedByTheCpuKernel) {
  OwnedTensor param(DType::F32, {4}), grad(DType::F32, {4});
  AttributeList a = attrs({floatAttr("lr", 0.1), cpu::test::stringAttr("lr_schedule", "step")});
  std::vector<const cpu::TensorRef *> ins{&param.ref, &grad.ref};
  cpu::KernelCall call{"SGD", "test", 17, a, ins, {}};
  call.step = 1;
  EXPECT_EQ(cpu::test::errorText(cpu::lookupZincKernel("SGD")(call)),
            "SGD: lr_schedule 'step' is not constant, linear or cosine");
}

TEST(CudaTrainingMath, DropoutDecisionsAreTheCpuMask) {
  const int64_t n = 1003;
  OwnedTensor x = randomOf(DType::F32, {n}, -2, 2, 5);
  OwnedTensor y(DType::F32, {n}), mask(DType::Bool, {n});
  AttributeList a = attrs({floatAttr("ratio", 0.3), intAttr("seed_id", 7)});
  std::vector<const cpu::TensorRef *> ins{&x.ref};
  std::vector<cpu::TensorRef *> outs{&y.ref, &mask.ref};
  cpu::KernelCall call{"Dropout", "test", 17, a, ins, outs};
  call.step = 5;
  call.seed = 0x123456789abcull;
  ASSERT_NO_ERROR(cpu::lookupKernel("Dropout")(call));
  float ratio = 0.3f, scale = 1.0f / (1.0f - ratio);
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    bool keep = dropoutKeepAt(call.seed, 5, 7, ratio, uint64_t(i));
    kept += keep;
    ASSERT_EQ(keep, mask.ref.as<bool>()[i]) << i;
    ASSERT_EQ(dropoutApply(x.ref.as<float>()[i], keep, scale),
              y.ref.as<float>()[i])
        << i;
  }
  EXPECT_GT(kept, n / 2);
  EXPECT_LT(kept, n * 9 / 10);
}

TEST(CudaTrainingMath, LossScaleSeedIsTheCpus) {
  // scale / N in float, as autograd divides the gradient of loss / N; with
  // no divisor the seed is the scale itself.
  for (float scale : {65536.0f, 3.0f, 0.001f, 1.5e38f})
    for (double divisor : {0.0, 1.0, 3.0, 4.0, 7.0}) {
      OwnedTensor s = OwnedTensor::f32({}, {scale});
      OwnedTensor seed(DType::F32, {});
      AttributeList a = divisor > 0 ? attrs({floatAttr("divisor", divisor)})
                                    : AttributeList();
      std::vector<const cpu::TensorRef *> ins{&s.ref};
      std::vector<cpu::TensorRef *> outs{&seed.ref};
      cpu::KernelCall call{"LossScale", "test", 17, a, ins, outs};
      ASSERT_NO_ERROR(cpu::lookupZincKernel("LossScale")(call));
      float want = lossScaleSeed(scale, divisor > 0 ? float(divisor) : 1.0f);
      EXPECT_EQ(*seed.ref.as<float>(), want) << scale << " / " << divisor;
      if (divisor <= 1) {
        EXPECT_EQ(want, scale);
      }
    }
}

TEST(CudaTrainingMath, AccumulateGradIsTheCpus) {
  // Three micro-batches into an accumulator holding a stale sum: the first
  // overwrites it, the others add, in f32 from every gradient type.
  const int64_t n = 517;
  for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
    OwnedTensor acc = randomOf(DType::F32, {n}, -9, 9, 20);
    std::vector<float> want(acc.ref.as<float>(), acc.ref.as<float>() + n);
    for (int64_t micro = 0; micro < 3; ++micro) {
      OwnedTensor g = randomOf(dtype, {n}, -2, 2, 21 + unsigned(micro));
      std::vector<double> gv = valuesOf(g);
      std::vector<const cpu::TensorRef *> ins{&acc.ref, &g.ref};
      std::vector<cpu::TensorRef *> outs;
      AttributeList none;
      cpu::KernelCall call{"AccumulateGrad", "test", 17, none, ins, outs};
      call.microBatch = micro;
      call.microBatches = 3;
      ASSERT_NO_ERROR(cpu::lookupZincKernel("AccumulateGrad")(call));
      for (int64_t i = 0; i < n; ++i) {
        want[i] =
            accumulateGradAt(want[i], static_cast<float>(gv[i]), micro == 0);
        ASSERT_EQ(acc.ref.as<float>()[i], want[i])
            << dtypeName(dtype).str() << " micro-batch " << micro << " at "
            << i;
      }
    }
  }
}

//===----------------------------------------------------------------------===//
// Argument checks (no device needed: they fail before any CUDA call)
//===----------------------------------------------------------------------===//

/// Runs the cuda kernel of `op` on shape-only tensors.
std::string checkError(llvm::StringRef domain, llvm::StringRef op,
                       const AttributeList &a,
                       std::vector<DeviceTensor> inputs,
                       std::vector<DeviceTensor> outputs, int64_t opset = 17) {
  std::vector<const DeviceTensor *> ins;
  std::vector<DeviceTensor *> outs;
  for (DeviceTensor &t : inputs)
    ins.push_back(&t);
  for (DeviceTensor &t : outputs)
    outs.push_back(&t);
  CudaKernelCall call{op, "test", opset, a, ins, outs};
  return errorText(lookupCudaKernel(domain, op)(call));
}

TEST(CudaTrainingNoDevice, ArgumentErrorsNameTheOp) {
  DeviceTensor f4 = shapeOnly(DType::F32, {4});
  EXPECT_EQ(checkError("", "Dropout",
                       attrs({floatAttr("ratio", 1.0), intAttr("seed_id", 1)}),
                       {f4}, {f4}),
            "Dropout: ratio 1.000000 is outside [0, 1)");
  EXPECT_EQ(checkError("zinc", "DropoutGrad", attrs({floatAttr("ratio", 0.1)}),
                       {f4}, {f4}),
            "DropoutGrad: the seed_id attribute is missing");
  EXPECT_EQ(checkError("", "Dropout",
                       attrs({floatAttr("ratio", 0.1), intAttr("seed_id", 1)}),
                       {f4}, {shapeOnly(DType::F32, {5})}),
            "Dropout: output shape [5] differs from data shape [4]");
  DeviceTensor h4 = shapeOnly(DType::F16, {4});
  EXPECT_EQ(checkError("zinc", "AdamW", {}, {h4, f4, f4, f4}, {}),
            "unsupported: AdamW on a parameter and states that are not all "
            "f32 of one size, or a gradient that is not f32, f16 or bf16 of "
            "that size");
  EXPECT_EQ(checkError("zinc", "SGD", {}, {f4, f4, f4, h4, f4, f4, f4}, {}),
            "SGD: loss scaling operands must be found_inf f32[], scale f32[] "
            "and the applied-step count i64[]");
  EXPECT_EQ(checkError("zinc", "UpdateLossScale", {}, {f4}, {}),
            "UpdateLossScale expects scale f32[], growth_tracker i64[], "
            "found_inf f32[], applied steps i64[]");
  DeviceTensor f0 = shapeOnly(DType::F32, {});
  EXPECT_EQ(checkError("zinc", "LossScale", attrs({floatAttr("divisor", 0)}),
                       {f0}, {f0}),
            "LossScale: divisor 0.000000 is not positive");
  EXPECT_EQ(checkError("zinc", "AccumulateGrad", {}, {h4, f4}, {}),
            "AccumulateGrad expects an f32 accumulator (declared written) and "
            "a gradient of its element count");
  EXPECT_EQ(checkError("zinc", "AccumulateGrad", {},
                       {f4, shapeOnly(DType::I64, {4})}, {}),
            "AccumulateGrad: the gradient is i64, not f32, f16 or bf16");
  EXPECT_EQ(checkError("", "Concat", attrs({intAttr("axis", 1)}),
                       {shapeOnly(DType::F32, {2, 3}),
                        shapeOnly(DType::F32, {3, 3})},
                       {shapeOnly(DType::F32, {2, 6})}),
            "Concat: input 1 (f32[3,3]) does not fit output f32[2,6] along "
            "axis 1");
  EXPECT_EQ(checkError("", "Split",
                       attrs({intAttr("axis", 0), intsAttr("split", {1, 2})}),
                       {f4}, {shapeOnly(DType::F32, {1}),
                              shapeOnly(DType::F32, {2})},
                       /*opset=*/11),
            "Split: split sizes add up to 3 in 2 parts, but axis has 4 and "
            "there are 2 outputs");
  EXPECT_EQ(checkError("", "Reshape", {}, {f4}, {shapeOnly(DType::F32, {5})}),
            "Reshape: input shape [4] and output shape [5] have different "
            "element counts");
  EXPECT_EQ(checkError("", "Expand", {}, {shapeOnly(DType::F32, {2, 3})},
                       {shapeOnly(DType::F32, {4, 3})}),
            "Expand: input shape [2,3] does not broadcast to output shape "
            "[4,3]");
  // Empty tensors queue nothing.
  DeviceTensor e = shapeOnly(DType::F32, {0, 3});
  EXPECT_EQ(checkError("", "Reshape", {}, {e}, {shapeOnly(DType::F32, {0})}),
            "");
}

//===----------------------------------------------------------------------===//
// Device: Dropout
//===----------------------------------------------------------------------===//

TEST_F(CudaTrainingDevice, DropoutMasksAreBitIdentical) {
  for (DType dtype : {DType::F32, DType::F16, DType::BF16})
    for (DType maskType : {DType::Bool, DType::F32}) {
      OpRun run;
      run.op = "Dropout";
      run.attrs = attrs({floatAttr("ratio", 0.25), intAttr("seed_id", 3)});
      run.step = 11;
      run.seed = 0xfeedface12345ull;
      run.inputs = {randomOf(dtype, {7, 143}, -3, 3, 6)};
      run.outputs = {OwnedTensor(dtype, {7, 143}),
                     OwnedTensor(maskType, {7, 143})};
      ASSIGN_OR_FAIL(want, runCpu(run));
      ASSIGN_OR_FAIL(got, runCuda(run));
      EXPECT_TRUE(sameBytes(*got.outputs[1], *want.outputs[1]))
          << dtypeName(dtype).str() << " mask " << dtypeName(maskType).str();
      EXPECT_TRUE(sameBytes(*got.outputs[0], *want.outputs[0]))
          << dtypeName(dtype).str();
    }
}

TEST_F(CudaTrainingDevice, DropoutGradRegeneratesOrReadsTheMask) {
  OpRun fwd;
  fwd.op = "Dropout";
  fwd.attrs = attrs({floatAttr("ratio", 0.5), intAttr("seed_id", 9)});
  fwd.step = 2;
  fwd.seed = 42;
  fwd.inputs = {randomOf(DType::F32, {1001}, -1, 1, 7)};
  fwd.outputs = {OwnedTensor(DType::F32, {1001}), OwnedTensor(DType::Bool, {1001})};
  ASSIGN_OR_FAIL(mask, runCpu(fwd));
  for (bool withMask : {false, true}) {
    OpRun run;
    run.domain = "zinc";
    run.op = "DropoutGrad";
    run.attrs = fwd.attrs;
    run.step = fwd.step;
    run.seed = fwd.seed;
    run.inputs = {randomOf(DType::BF16, {1001}, -1, 1, 8)};
    if (withMask)
      run.inputs.push_back(*mask.outputs[1]);
    run.outputs = {OwnedTensor(DType::BF16, {1001})};
    ASSIGN_OR_FAIL(want, runCpu(run));
    ASSIGN_OR_FAIL(got, runCuda(run));
    EXPECT_TRUE(sameBytes(*got.outputs[0], *want.outputs[0]))
        << "with mask " << withMask;
  }
}

TEST_F(CudaTrainingDevice, InferenceDropoutCopiesAndKeepsAll) {
  OpRun run;
  run.op = "Dropout";
  run.inputs = {randomOf(DType::F16, {5, 3}, -1, 1, 9)};
  run.outputs = {OwnedTensor(DType::F16, {5, 3}), OwnedTensor(DType::Bool, {5, 3})};
  ASSIGN_OR_FAIL(want, runCpu(run));
  ASSIGN_OR_FAIL(got, runCuda(run));
  EXPECT_TRUE(sameBytes(*got.outputs[0], *want.outputs[0]));
  EXPECT_TRUE(sameBytes(*got.outputs[1], *want.outputs[1]));
}

//===----------------------------------------------------------------------===//
// Device: optimizers and loss scaling
//===----------------------------------------------------------------------===//

/// Runs `run` for steps 1..3 on both backends, each from its own previous
/// state, and compares every updated input.
void expectStepsAgree(llvm::function_ref<llvm::Expected<OpResult>(const OpRun &)>
                          cpuRun,
                      llvm::function_ref<llvm::Expected<OpResult>(const OpRun &)>
                          cudaRun,
                      OpRun run, double rtol) {
  OpRun cpuState = run, cudaState = run;
  for (int64_t step = 1; step <= 3; ++step) {
    cpuState.step = cudaState.step = step;
    ASSIGN_OR_FAIL(want, cpuRun(cpuState));
    ASSIGN_OR_FAIL(got, cudaRun(cudaState));
    cpuState.inputs = want.inputs;
    cudaState.inputs = got.inputs;
  }
  // A 16-bit compute copy may round the other way where the f32
  // parameters differ in their last bit.
  for (size_t i = 0; i < run.inputs.size(); ++i) {
    if (!run.inputs[i])
      continue;
    DType t = run.inputs[i]->ref.dtype;
    double tol = t == DType::BF16 ? 1.0 / 128 : t == DType::F16 ? 1.0 / 1024 : rtol;
    expectNear(*cudaState.inputs[i], *cpuState.inputs[i], tol, 1e-7);
  }
}

class CudaOptimizer : public CudaTrainingDevice {
protected:
  void expectAgree(const OpRun &run, double rtol) {
    expectStepsAgree(
        [&](const OpRun &r) { return runCpu(r); },
        [&](const OpRun &r) { return runCuda(r); }, run, rtol);
  }
};

TEST_F(CudaOptimizer, AdamWAndAdamMatchCpu) {
  for (const char *op : {"AdamW", "Adam"})
    for (DType gradType : {DType::F32, DType::BF16}) {
      OpRun run;
      run.domain = "zinc";
      run.op = op;
      run.attrs = attrs({floatAttr("lr", 1e-2), floatAttr("weight_decay", 0.1)});
      run.inputs = {randomOf(DType::F32, {1037}, -1, 1, 10),
                    randomOf(gradType, {1037}, -1, 1, 11),
                    OwnedTensor(DType::F32, {1037}),
                    OwnedTensor(DType::F32, {1037}),
                    OwnedTensor(DType::F16, {1037})};
      SCOPED_TRACE(std::string(op) + " " + dtypeName(gradType).str());
      expectAgree(run, 1e-6);
    }
}

TEST_F(CudaOptimizer, AdamWWithLossScalingMatchesCpu) {
  for (float found : {0.0f, 1.0f}) {
    OpRun run;
    run.domain = "zinc";
    run.op = "AdamW";
    run.attrs = attrs({intAttr("delayed_steps", 1)});
    run.inputs = {randomOf(DType::F32, {300}, -1, 1, 12),
                  randomOf(DType::F16, {300}, -500, 500, 13),
                  OwnedTensor(DType::F32, {300}),
                  OwnedTensor(DType::F32, {300}),
                  std::nullopt,
                  OwnedTensor::f32({}, {found}),
                  OwnedTensor::f32({}, {1024}),
                  OwnedTensor::i64({}, {4})};
    SCOPED_TRACE(found);
    expectAgree(run, 1e-6);
  }
}

TEST_F(CudaOptimizer, SgdMatchesCpu) {
  for (int nesterov : {0, 1}) {
    OpRun run;
    run.domain = "zinc";
    run.op = "SGD";
    run.attrs = attrs({floatAttr("lr", 0.05), floatAttr("momentum", 0.9),
                       floatAttr("weight_decay", 1e-3),
                       intAttr("nesterov", nesterov)});
    run.inputs = {randomOf(DType::F32, {777}, -1, 1, 14),
                  randomOf(DType::F32, {777}, -1, 1, 15),
                  OwnedTensor(DType::F32, {777}),
                  OwnedTensor(DType::BF16, {777})};
    expectAgree(run, 1e-6);
  }
}

TEST_F(CudaOptimizer, ClippedUpdatesMatchCpu) {
  for (const char *op : {"AdamW", "SGD"}) {
    OpRun run;
    run.domain = "zinc";
    run.op = op;
    run.attrs = attrs({floatAttr("lr", 0.05), floatAttr("max_grad_norm", 0.3)});
    run.inputs = {randomOf(DType::F32, {515}, -1, 1, 40),
                  randomOf(DType::F16, {515}, -500, 500, 41),
                  OwnedTensor(DType::F32, {515})};
    if (std::string(op) == "AdamW")
      run.inputs.push_back(OwnedTensor(DType::F32, {515}));
    run.inputs.push_back(OwnedTensor(DType::F16, {515}));
    run.inputs.push_back(OwnedTensor::f32({}, {0}));
    run.inputs.push_back(OwnedTensor::f32({}, {512}));
    run.inputs.push_back(OwnedTensor::i64({}, {2}));
    run.inputs.push_back(OwnedTensor::f32({}, {7.5f}));
    SCOPED_TRACE(op);
    expectAgree(run, 1e-6);
  }
}

TEST_F(CudaTrainingDevice, SumGradSquaresMatchesCpu) {
  for (bool scaled : {false, true}) {
    OpRun sum;
    sum.domain = "zinc";
    sum.op = "SumGradSquares";
    sum.attrs = attrs({intAttr("accumulate", 1)});
    sum.inputs = {OwnedTensor::f32({}, {2.0f})};
    if (scaled)
      sum.inputs.push_back(OwnedTensor::f32({}, {1024.0f}));
    else
      sum.inputs.push_back(std::nullopt);
    sum.inputs.push_back(randomOf(DType::F32, {70001}, -1, 1, 42));
    sum.inputs.push_back(randomOf(DType::BF16, {333}, -50, 50, 43));
    ASSIGN_OR_FAIL(want, runCpu(sum));
    ASSIGN_OR_FAIL(got, runCuda(sum));
    // Both sum in double, in different orders: the float results agree to
    // the last bit or two.
    expectNear(*got.inputs[0], *want.inputs[0], 1e-6, 0);
  }
}

TEST_F(CudaTrainingDevice, LossScalingOpsMatchCpu) {
  // LossScale starts the scale; CheckFiniteGrads sees an inf only in the
  // second set of gradients; UpdateLossScale backs off or counts a step.
  OpRun scale;
  scale.domain = "zinc";
  scale.op = "LossScale";
  scale.attrs = attrs({floatAttr("init_scale", 256.0)});
  scale.inputs = {OwnedTensor::f32({}, {0})};
  scale.outputs = {OwnedTensor(DType::F16, {})};
  ASSIGN_OR_FAIL(wantScale, runCpu(scale));
  ASSIGN_OR_FAIL(gotScale, runCuda(scale));
  EXPECT_TRUE(sameBytes(*gotScale.inputs[0], *wantScale.inputs[0]));
  EXPECT_TRUE(sameBytes(*gotScale.outputs[0], *wantScale.outputs[0]));

  for (bool overflow : {false, true}) {
    OwnedTensor g = randomOf(DType::F16, {129}, -100, 100, 16);
    if (overflow)
      g.ref.as<uint16_t>()[77] = 0x7C00; // +inf
    OpRun check;
    check.domain = "zinc";
    check.op = "CheckFiniteGrads";
    check.inputs = {OwnedTensor::f32({}, {0}), *wantScale.inputs[0],
                    randomOf(DType::F32, {40}, -1, 1, 17), g};
    ASSIGN_OR_FAIL(wantCheck, runCpu(check));
    ASSIGN_OR_FAIL(gotCheck, runCuda(check));
    EXPECT_TRUE(sameBytes(*gotCheck.inputs[0], *wantCheck.inputs[0]))
        << "overflow " << overflow;

    OpRun update;
    update.domain = "zinc";
    update.op = "UpdateLossScale";
    update.attrs = attrs({intAttr("growth_interval", 1)});
    update.inputs = {*wantScale.inputs[0], OwnedTensor::i64({}, {0}),
                     *wantCheck.inputs[0], OwnedTensor::i64({}, {3})};
    ASSIGN_OR_FAIL(wantUpdate, runCpu(update));
    ASSIGN_OR_FAIL(gotUpdate, runCuda(update));
    for (size_t i : {0, 1, 3})
      EXPECT_TRUE(sameBytes(*gotUpdate.inputs[i], *wantUpdate.inputs[i]))
          << "overflow " << overflow << " input " << i;
  }
}

TEST_F(CudaTrainingDevice, LossScalingAcrossMicroBatchesMatchesCpu) {
  // The seed divided by the micro-batch count; the first check (no
  // `accumulate`) clears a set flag only in micro-batch 0 and ORs into it
  // in the others, on both backends.
  OpRun scale;
  scale.domain = "zinc";
  scale.op = "LossScale";
  scale.attrs =
      attrs({floatAttr("init_scale", 1024.0), floatAttr("divisor", 3.0)});
  scale.inputs = {OwnedTensor::f32({}, {0})};
  scale.outputs = {OwnedTensor(DType::F16, {})};
  ASSIGN_OR_FAIL(wantScale, runCpu(scale));
  ASSIGN_OR_FAIL(gotScale, runCuda(scale));
  EXPECT_TRUE(sameBytes(*gotScale.outputs[0], *wantScale.outputs[0]));
  EXPECT_TRUE(sameBytes(*gotScale.inputs[0], *wantScale.inputs[0]));

  for (int64_t micro : {0, 1, 3}) {
    OpRun check;
    check.domain = "zinc";
    check.op = "CheckFiniteGrads";
    check.microBatch = micro;
    check.microBatches = 4;
    check.inputs = {OwnedTensor::f32({}, {1}), *wantScale.inputs[0],
                    randomOf(DType::BF16, {300}, -1, 1, 24)};
    ASSIGN_OR_FAIL(want, runCpu(check));
    ASSIGN_OR_FAIL(got, runCuda(check));
    EXPECT_TRUE(sameBytes(*got.inputs[0], *want.inputs[0])) << micro;
    EXPECT_EQ(*got.inputs[0]->ref.as<float>(), micro == 0 ? 0.0f : 1.0f)
        << micro;
  }
}

TEST_F(CudaTrainingDevice, AccumulateGradMatchesCpu) {
  for (DType dtype : {DType::F32, DType::F16, DType::BF16}) {
    std::optional<OwnedTensor> cpuAcc =
        randomOf(DType::F32, {70001}, -5, 5, 25);
    std::optional<OwnedTensor> cudaAcc = cpuAcc;
    for (int64_t micro = 0; micro < 3; ++micro) {
      OpRun run;
      run.domain = "zinc";
      run.op = "AccumulateGrad";
      run.microBatch = micro;
      run.microBatches = 3;
      OwnedTensor g = randomOf(dtype, {70001}, -3, 3, 26 + unsigned(micro));
      run.inputs = {cpuAcc, g};
      ASSIGN_OR_FAIL(want, runCpu(run));
      run.inputs = {cudaAcc, g};
      ASSIGN_OR_FAIL(got, runCuda(run));
      cpuAcc = want.inputs[0];
      cudaAcc = got.inputs[0];
      EXPECT_TRUE(sameBytes(*cudaAcc, *cpuAcc))
          << dtypeName(dtype).str() << " micro-batch " << micro;
    }
  }
}

//===----------------------------------------------------------------------===//
// Device: data movement (bytes must be identical)
//===----------------------------------------------------------------------===//

void expectSameOutputs(const OpResult &got, const OpResult &want) {
  ASSERT_EQ(got.outputs.size(), want.outputs.size());
  for (size_t i = 0; i < got.outputs.size(); ++i) {
    if (want.outputs[i]) {
      EXPECT_TRUE(sameBytes(*got.outputs[i], *want.outputs[i]))
          << "output " << i;
    }
  }
}

TEST_F(CudaTrainingDevice, ConcatSplitMatchCpu) {
  for (DType dtype : {DType::F32, DType::F16, DType::I64, DType::Bool}) {
    OpRun concat;
    concat.op = "Concat";
    concat.attrs = attrs({intAttr("axis", 1)});
    concat.inputs = {randomOf(dtype, {3, 2, 5}, 0, 2, 18),
                     randomOf(dtype, {3, 4, 5}, 0, 2, 19),
                     randomOf(dtype, {3, 1, 5}, 0, 2, 20)};
    concat.outputs = {OwnedTensor(dtype, {3, 7, 5})};
    ASSIGN_OR_FAIL(wantConcat, runCpu(concat));
    ASSIGN_OR_FAIL(gotConcat, runCuda(concat));
    expectSameOutputs(gotConcat, wantConcat);

    OpRun split;
    split.op = "Split";
    split.attrs = attrs({intAttr("axis", -1)});
    split.inputs = {randomOf(dtype, {4, 12}, 0, 9, 21),
                    OwnedTensor::i64({3}, {2, 8, 2})};
    split.hostInputs = {1};
    split.outputs = {OwnedTensor(dtype, {4, 2}), std::nullopt,
                     OwnedTensor(dtype, {4, 2})};
    ASSIGN_OR_FAIL(wantSplit, runCpu(split));
    ASSIGN_OR_FAIL(gotSplit, runCuda(split));
    expectSameOutputs(gotSplit, wantSplit);
  }
}

TEST_F(CudaTrainingDevice, SliceAndSliceGradMatchCpu) {
  struct Case {
    std::vector<int64_t> shape, starts, ends, axes, steps;
  };
  const Case cases[] = {
      {{6, 16}, {1, 4}, {5, 12}, {0, 1}, {1, 1}},      // rows, 16-byte words
      {{4, 5, 6}, {-1, 4}, {-100, 0}, {0, 2}, {-2, -1}}, // backwards
      {{7, 9}, {0}, {9}, {1}, {3}},                       // strided columns
      {{2, 3, 4}, {1}, {2}, {1}, {1}},                    // one plane
  };
  for (DType dtype : {DType::F32, DType::BF16}) {
    for (const Case &c : cases) {
      auto list = [](const std::vector<int64_t> &v) {
        return OwnedTensor::ints({int64_t(v.size())}, v);
      };
      ASSIGN_OR_FAIL(view, cpu::computeSliceView("Slice", c.shape, c.starts,
                                                 c.ends, c.axes, c.steps));
      OpRun slice;
      slice.op = "Slice";
      slice.inputs = {randomOf(dtype, c.shape, -5, 5, 22), list(c.starts),
                      list(c.ends), list(c.axes), list(c.steps)};
      slice.hostInputs = {1, 2, 3, 4};
      slice.outputs = {OwnedTensor(dtype, view.shape)};
      ASSIGN_OR_FAIL(want, runCpu(slice));
      ASSIGN_OR_FAIL(got, runCuda(slice));
      expectSameOutputs(got, want);

      OpRun grad = slice;
      grad.domain = "zinc";
      grad.op = "SliceGrad";
      grad.attrs = attrs({intsAttr("shape", c.shape)});
      grad.inputs[0] = randomOf(dtype, view.shape, -5, 5, 23);
      grad.outputs = {OwnedTensor(dtype, c.shape)};
      ASSIGN_OR_FAIL(wantGrad, runCpu(grad));
      ASSIGN_OR_FAIL(gotGrad, runCuda(grad));
      expectSameOutputs(gotGrad, wantGrad);
    }
  }
}

TEST_F(CudaTrainingDevice, SliceListsInDeviceMemoryAreRefused) {
  OpRun slice;
  slice.op = "Slice";
  slice.inputs = {randomOf(DType::F32, {8}, 0, 1, 24),
                  OwnedTensor::ints({1}, {2}), OwnedTensor::ints({1}, {5})};
  slice.outputs = {OwnedTensor(DType::F32, {3})};
  auto got = runCuda(slice);
  ASSERT_FALSE(static_cast<bool>(got));
  std::string text = errorText(got.takeError());
  EXPECT_NE(text.find("unsupported: Slice with its starts in device memory"),
            std::string::npos)
      << text;
}

TEST_F(CudaTrainingDevice, ExpandAndReshapeMatchCpu) {
  for (DType dtype : {DType::F32, DType::F16, DType::U8}) {
    OpRun expand;
    expand.op = "Expand";
    expand.inputs = {randomOf(dtype, {3, 1, 5}, 0, 9, 25),
                     OwnedTensor::ints({4}, {2, 1, 4, 1})};
    expand.hostInputs = {1};
    expand.outputs = {OwnedTensor(dtype, {2, 3, 4, 5})};
    ASSIGN_OR_FAIL(want, runCpu(expand));
    ASSIGN_OR_FAIL(got, runCuda(expand));
    expectSameOutputs(got, want);

    OpRun reshape;
    reshape.op = "Reshape";
    reshape.inputs = {randomOf(dtype, {6, 5}, 0, 9, 26),
                      OwnedTensor::ints({2}, {3, 10})};
    reshape.hostInputs = {1};
    reshape.outputs = {OwnedTensor(dtype, {3, 10})};
    ASSIGN_OR_FAIL(wantReshape, runCpu(reshape));
    ASSIGN_OR_FAIL(gotReshape, runCuda(reshape));
    expectSameOutputs(gotReshape, wantReshape);
  }
}

} // namespace
