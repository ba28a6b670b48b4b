//===- ConvPoolGradTest.cpp - Conv and pooling gradient kernels -----------===//
//
// The gradient rules are checked against finite differences in f64
// (test/unit/autodiff); here the kernels' other dtypes are compared with
// their f64 results, and MaxPoolGrad's tie rule is pinned down.
//
//===----------------------------------------------------------------------===//
#include "KernelCallHelpers.h"
#include "gtest/gtest.h"
#include <cmath>
#include <random>

using namespace zinc;
using namespace zinc::cpu;
using namespace zinc::cpu::test;

namespace {

struct Operand {
  std::vector<int64_t> shape;
  std::vector<double> values;
};

Operand randomOperand(std::vector<int64_t> shape, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  Operand o{shape, {}};
  o.values.resize(numElements(shape));
  for (double &v : o.values)
    v = dist(rng);
  return o;
}

/// Runs `fn` with operands of storage type T and returns the output as
/// doubles. `rounded` receives the operands as T holds them, so the f64
/// reference sees the same inputs.
template <typename T>
std::vector<double>
runAs(DType dtype, KernelFn fn, llvm::StringRef op, const AttributeList &a,
      const std::vector<Operand> &ins, llvm::ArrayRef<int64_t> outShape,
      std::vector<Operand> *rounded = nullptr) {
  // Reserved: a reallocation would copy the tensors and leave their refs
  // pointing into freed buffers.
  std::vector<OwnedTensor> owned;
  owned.reserve(ins.size());
  for (const Operand &o : ins)
    owned.push_back(OwnedTensor::of<T>(dtype, o.shape, o.values));
  if (rounded)
    for (size_t i = 0; i < ins.size(); ++i)
      rounded->push_back({ins[i].shape, owned[i].template values<T>()});
  OwnedTensor out(dtype, outShape);
  std::vector<const TensorRef *> inRefs;
  for (const OwnedTensor &t : owned)
    inRefs.push_back(&t.ref);
  std::vector<TensorRef *> outRefs{&out.ref};
  KernelCall call{op, "test", 17, a, inRefs, outRefs};
  EXPECT_EQ(errorText(runWithWorkspace(fn, call)), "") << op.str();
  return out.template values<T>();
}

/// The kernel in f32, f16 and bf16 against itself in f64 on the same
/// (rounded) inputs; tolerances relative to the output's largest value.
void expectDTypesAgree(KernelFn fn, llvm::StringRef op, const AttributeList &a,
                       const std::vector<Operand> &ins,
                       llvm::ArrayRef<int64_t> outShape) {
  auto compare = [&](const std::vector<double> &got,
                     const std::vector<Operand> &rounded, double tol,
                     const char *name) {
    std::vector<double> want =
        runAs<double>(DType::F64, fn, op, a, rounded, outShape);
    ASSERT_EQ(got.size(), want.size());
    double scale = 1e-3;
    for (double v : want)
      scale = std::max(scale, std::fabs(v));
    bool anyNonZero = false;
    for (size_t i = 0; i < got.size(); ++i) {
      anyNonZero |= want[i] != 0;
      EXPECT_NEAR(got[i], want[i], tol * scale)
          << op.str() << " " << name << " element " << i;
    }
    EXPECT_TRUE(anyNonZero) << op.str() << ": a test of zeros shows nothing";
  };
  std::vector<Operand> r32, r16, rb16;
  compare(runAs<float>(DType::F32, fn, op, a, ins, outShape, &r32), r32, 1e-5,
          "f32");
  compare(runAs<Half>(DType::F16, fn, op, a, ins, outShape, &r16), r16, 4e-3,
          "f16");
  compare(runAs<BFloat16>(DType::BF16, fn, op, a, ins, outShape, &rb16), rb16,
          2e-2, "bf16");
}

} // namespace

TEST(ConvGradKernels, DTypesAgreeWithF64) {
  AttributeList conv =
      attrs({intsAttr("pads", {1, 0, 1, 2}), intsAttr("strides", {2, 1}),
             intAttr("group", 2)});
  // X [2, 4, 5, 6], W [6, 2, 3, 3] -> Y [2, 6, 3, 6].
  Operand dy = randomOperand({2, 6, 3, 6}, 1),
          w = randomOperand({6, 2, 3, 3}, 2),
          x = randomOperand({2, 4, 5, 6}, 3);
  expectDTypesAgree(runConvGradInput, "ConvGradInput", conv, {dy, w},
                    {2, 4, 5, 6});
  expectDTypesAgree(runConvGradWeight, "ConvGradWeight", conv, {dy, x},
                    {6, 2, 3, 3});
  // ConvTranspose X [2, 4, 3, 3], W [4, 3, 2, 2] group 2 -> Y [2, 6, 6, 6].
  AttributeList convT =
      attrs({intsAttr("strides", {2, 2}), intAttr("group", 2)});
  Operand tdy = randomOperand({2, 6, 6, 6}, 4),
          tw = randomOperand({4, 3, 2, 2}, 5),
          tx = randomOperand({2, 4, 3, 3}, 6);
  expectDTypesAgree(runConvTransposeGradInput, "ConvTransposeGradInput", convT,
                    {tdy, tw}, {2, 4, 3, 3});
  expectDTypesAgree(runConvTransposeGradWeight, "ConvTransposeGradWeight",
                    convT, {tdy, tx}, {4, 3, 2, 2});
}

TEST(PoolGradKernels, DTypesAgreeWithF64) {
  AttributeList pool =
      attrs({intsAttr("kernel_shape", {3, 3}), intsAttr("strides", {2, 2}),
             intsAttr("pads", {1, 1, 1, 1}), intAttr("ceil_mode", 1)});
  Operand dy = randomOperand({2, 3, 4, 4}, 7),
          x = randomOperand({2, 3, 6, 6}, 8);
  expectDTypesAgree(runMaxPoolGrad, "MaxPoolGrad", pool, {dy, x}, {2, 3, 6, 6});
  expectDTypesAgree(runAveragePoolGrad, "AveragePoolGrad", pool, {dy},
                    {2, 3, 6, 6});
}

// PyTorch routes a window's gradient to its first maximum on ties, in
// row-major order of the window.
TEST(PoolGradKernels, MaxPoolGradTiesGoToTheFirstMaximum) {
  OwnedTensor x = OwnedTensor::f32({1, 1, 3, 4}, std::vector<double>(12, 1.0));
  OwnedTensor dy = OwnedTensor::f32({1, 1, 2, 3}, {1, 2, 3, 4, 5, 6});
  OwnedTensor dx(DType::F32, {1, 1, 3, 4});
  AttributeList a = attrs({intsAttr("kernel_shape", {2, 2})});
  ASSERT_EQ(
      errorText(runKernel(runMaxPoolGrad, "MaxPoolGrad", a, {&dy, &x}, {&dx})),
      "");
  EXPECT_EQ(dx.f32s(),
            (std::vector<double>{1, 2, 3, 0, 4, 5, 6, 0, 0, 0, 0, 0}));
}

// With count_include_pad=0 a corner window divides by its real inputs only.
TEST(PoolGradKernels, AveragePoolGradDividesByTheForwardCount) {
  OwnedTensor dy = OwnedTensor::f32({1, 1, 1, 1}, {6});
  OwnedTensor dx(DType::F32, {1, 1, 2, 2});
  AttributeList exclude =
      attrs({intsAttr("kernel_shape", {3, 3}), intsAttr("pads", {1, 1, 0, 0})});
  ASSERT_EQ(errorText(runKernel(runAveragePoolGrad, "AveragePoolGrad", exclude,
                                {&dy}, {&dx})),
            "");
  EXPECT_EQ(dx.f32s(), (std::vector<double>{1.5, 1.5, 1.5, 1.5}));
  AttributeList include =
      attrs({intsAttr("kernel_shape", {3, 3}), intsAttr("pads", {1, 1, 0, 0}),
             intAttr("count_include_pad", 1)});
  ASSERT_EQ(errorText(runKernel(runAveragePoolGrad, "AveragePoolGrad", include,
                                {&dy}, {&dx})),
            "");
  // The window holds 3x3 taps of the padded input, 4 of them real.
  EXPECT_NEAR(dx.f32s()[0], 6.0 / 9.0, 1e-6);
}
