//===- NormalizationLossGradTest.cpp - Normalisation/loss gradient kernels ===//
//
// The autodiff finite-difference tests check these kernels in float64; here
// the float32, float16 and bfloat16 paths are compared with the float64
// path on the same (rounded) inputs, and the LayerNorm kernel's two ways to
// get its statistics are compared with each other.
//
//===----------------------------------------------------------------------===//
#include "test/unit/kernels/KernelCallHelpers.h"
#include <cmath>
#include <gtest/gtest.h>
#include <random>

using namespace zinc;
using namespace zinc::cpu;
using namespace zinc::cpu::test;

namespace {

using V = std::vector<double>;

/// An operand: its values and shape, or an integer tensor used as is.
struct Operand {
  V values;
  std::vector<int64_t> shape;
  const OwnedTensor *ints = nullptr;
  bool absent = false;
};

Operand absent() {
  Operand o;
  o.absent = true;
  return o;
}

/// Runs `fn` with float operands stored as `dtype` and returns each output
/// converted to double; the float operands are first rounded to `dtype`
/// and that rounding is written back, so a float64 run on them is the
/// reference for the narrower run.
std::vector<V> runAs(DType dtype, KernelFn fn, llvm::StringRef op,
                     const AttributeList &a, std::vector<Operand> &ins,
                     const std::vector<std::vector<int64_t>> &outShapes) {
  return visitDType(dtype, [&](auto tag) -> std::vector<V> {
    using T = decltype(tag);
    std::vector<OwnedTensor> owned;
    owned.reserve(ins.size() + outShapes.size());
    for (Operand &o : ins) {
      if (o.ints || o.absent)
        continue;
      owned.push_back(OwnedTensor::of<T>(dtype, o.shape, o.values));
      o.values = owned.back().template values<T>();
    }
    std::vector<const TensorRef *> inRefs;
    size_t k = 0;
    for (const Operand &o : ins)
      inRefs.push_back(o.absent ? nullptr
                       : o.ints ? &o.ints->ref
                                : &owned[k++].ref);
    std::vector<TensorRef *> outRefs;
    for (const auto &s : outShapes) {
      owned.emplace_back(dtype, s);
      outRefs.push_back(&owned.back().ref);
    }
    KernelCall call{op, "test", 17, a, inRefs, outRefs};
    llvm::Error err = runWithWorkspace(fn, call);
    EXPECT_FALSE(static_cast<bool>(err)) << errorText(std::move(err));
    std::vector<V> outs;
    for (size_t i = owned.size() - outShapes.size(); i < owned.size(); ++i)
      outs.push_back(owned[i].template values<T>());
    return outs;
  });
}

/// Runs the kernel in each narrow type and compares it with float64 on the
/// same rounded inputs, within `tol` times (1 + |reference|) per element,
/// with tolerances per type (float32, float16, bfloat16).
void expectNarrowMatchesF64(KernelFn fn, llvm::StringRef op,
                            const AttributeList &a,
                            const std::vector<Operand> &ins,
                            const std::vector<std::vector<int64_t>> &outShapes,
                            std::array<double, 3> tol = {1e-5, 2e-2, 1.5e-1}) {
  const DType types[] = {DType::F32, DType::F16, DType::BF16};
  for (int t = 0; t < 3; ++t) {
    std::vector<Operand> rounded = ins;
    std::vector<V> got = runAs(types[t], fn, op, a, rounded, outShapes);
    std::vector<V> want = runAs(DType::F64, fn, op, a, rounded, outShapes);
    for (size_t o = 0; o < got.size(); ++o) {
      ASSERT_EQ(got[o].size(), want[o].size());
      double scale = 0;
      for (double w : want[o])
        scale = std::max(scale, std::fabs(w));
      for (size_t i = 0; i < got[o].size(); ++i)
        EXPECT_NEAR(got[o][i], want[o][i], tol[t] * (1 + scale))
            << op.str() << " as " << dtypeName(types[t]).str() << ", output "
            << o << " element " << i;
    }
  }
}

} // namespace

TEST(SoftmaxGradKernels, NarrowTypesMatchF64) {
  std::vector<int64_t> shape = {2, 3, 5};
  V x = randomValues(30, -2, 2, 1), dy = randomValues(30, -1, 1, 2);
  // y must be a softmax (resp. log-softmax) for the formulas to mean much;
  // the kernels do not care, so random probabilities suffice.
  V y = randomValues(30, 0.01, 0.5, 3), ly = randomValues(30, -4, -0.1, 4);
  for (auto [axis, flatten] :
       {std::pair<int64_t, int64_t>{2, 0}, {1, 0}, {1, 1}}) {
    AttributeList a =
        attrs({intAttr("axis", axis), intAttr("flatten", flatten)});
    expectNarrowMatchesF64(runSoftmaxGrad, "SoftmaxGrad", a,
                           {{y, shape}, {dy, shape}}, {shape});
    expectNarrowMatchesF64(runLogSoftmaxGrad, "LogSoftmaxGrad", a,
                           {{ly, shape}, {dy, shape}}, {shape});
  }
}

TEST(LayerNormalizationGradKernels, NarrowTypesMatchF64) {
  std::vector<int64_t> shape = {3, 4, 8};
  V x = randomValues(96, -2, 2, 5), dy = randomValues(96, -1, 1, 6);
  V s = randomValues(8, 0.5, 1.5, 7);
  AttributeList a = attrs({intAttr("axis", -1), floatAttr("epsilon", 1e-5)});
  // The scale and bias gradients sum 12 rows: wider tolerances in 16 bits.
  expectNarrowMatchesF64(runLayerNormalizationGrad, "LayerNormalizationGrad", a,
                         {{dy, shape}, {x, shape}, {s, {8}}}, {shape, {8}, {8}},
                         {1e-5, 3e-2, 2e-1});
}

// Given Mean / InvStdDev (as the forward kernel wrote them) or recomputed
// from x, the gradients agree.
TEST(LayerNormalizationGradKernels, GivenStatisticsMatchRecomputed) {
  std::vector<int64_t> shape = {2, 3, 6};
  V x = randomValues(36, -2, 2, 8), dy = randomValues(36, -1, 1, 9);
  V s = randomValues(6, 0.5, 1.5, 10), b = randomValues(6, -1, 1, 11);
  OwnedTensor xt = OwnedTensor::f32(shape, x),
              dyt = OwnedTensor::f32(shape, dy);
  OwnedTensor st = OwnedTensor::f32({6}, s), bt = OwnedTensor::f32({6}, b);
  OwnedTensor y(DType::F32, shape), mean(DType::F32, {2, 3, 1}),
      inv(DType::F32, {2, 3, 1});
  AttributeList a = attrs({intAttr("axis", 2), floatAttr("epsilon", 1e-3)});
  ASSERT_EQ(errorText(runKernel(runLayerNormalization, "LayerNormalization", a,
                                {&xt, &st, &bt}, {&y, &mean, &inv})),
            "");
  OwnedTensor dx1(DType::F32, shape), ds1(DType::F32, {6}),
      db1(DType::F32, {6});
  OwnedTensor dx2(DType::F32, shape), ds2(DType::F32, {6}),
      db2(DType::F32, {6});
  ASSERT_EQ(
      errorText(runKernel(runLayerNormalizationGrad, "LayerNormalizationGrad",
                          a, {&dyt, &xt, &st}, {&dx1, &ds1, &db1})),
      "");
  ASSERT_EQ(errorText(runKernel(
                runLayerNormalizationGrad, "LayerNormalizationGrad", a,
                {&dyt, &xt, &st, &mean, &inv}, {&dx2, &ds2, &db2})),
            "");
  for (auto [p, q] : {std::pair{&dx1, &dx2}, {&ds1, &ds2}, {&db1, &db2}}) {
    V u = p->f32s(), v = q->f32s();
    for (size_t i = 0; i < u.size(); ++i)
      EXPECT_NEAR(u[i], v[i], 1e-5 * (1 + std::fabs(u[i]))) << i;
  }
  // dbias is the column sum of dy.
  V db = db1.f32s();
  for (int64_t j = 0; j < 6; ++j) {
    double sum = 0;
    for (int64_t o = 0; o < 6; ++o)
      sum += static_cast<float>(dy[o * 6 + j]);
    EXPECT_NEAR(db[j], sum, 1e-5);
  }
}

TEST(LossGradKernels, NarrowTypesMatchF64) {
  std::vector<int64_t> shape = {2, 4, 3};
  V x = randomValues(24, -2, 2, 12), g = randomValues(24, -1, 1, 13);
  V w = {0.5, 2.0, 1.25, 0.75};
  OwnedTensor labels = OwnedTensor::ints({2, 3}, {0, 3, -100, 1, 2, 2});
  Operand lab;
  lab.ints = &labels;
  for (const char *red : {"mean", "sum", "none"}) {
    AttributeList a =
        attrs({stringAttr("reduction", red), intAttr("ignore_index", -100),
               intAttr("log_prob", 0)});
    bool none = std::string(red) == "none";
    Operand dloss{none ? randomValues(6, -1, 1, 14) : V{0.7},
                  none ? std::vector<int64_t>{2, 3} : std::vector<int64_t>{}};
    // From the scores, with weights and a log_prob gradient.
    expectNarrowMatchesF64(
        runSoftmaxCrossEntropyLossGrad, "SoftmaxCrossEntropyLossGrad", a,
        {dloss, {x, shape}, lab, {w, {4}}, {g, shape}}, {shape});
    // NLL, without weights.
    expectNarrowMatchesF64(runNegativeLogLikelihoodLossGrad,
                           "NegativeLogLikelihoodLossGrad", a, {dloss, lab},
                           {shape});
    // From log_prob with the weights absent but the log_prob gradient there.
    AttributeList fromLogProb = a;
    fromLogProb.set(intAttr("log_prob", 1));
    V lp = randomValues(24, -4, -0.1, 15);
    expectNarrowMatchesF64(
        runSoftmaxCrossEntropyLossGrad, "SoftmaxCrossEntropyLossGrad",
        fromLogProb, {dloss, {lp, shape}, lab, absent(), {g, shape}}, {shape});
  }
}

TEST(LossGradKernels, RejectsOutOfRangeTarget) {
  OwnedTensor dloss = OwnedTensor::f32({}, {1.0});
  OwnedTensor labels = OwnedTensor::ints({2}, {1, 4});
  OwnedTensor dx(DType::F32, {2, 4});
  std::string err = errorText(runKernel(runNegativeLogLikelihoodLossGrad,
                                        "NegativeLogLikelihoodLossGrad", {},
                                        {&dloss, &labels}, {&dx}));
  EXPECT_NE(err.find("target 4 at position 1 is out of range for 4 classes"),
            std::string::npos)
      << err;
}
