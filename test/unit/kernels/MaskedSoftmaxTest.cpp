//===- MaskedSoftmaxTest.cpp - zinc.MaskedSoftmax -------------------------===//
//
// softmax(where(mask, -inf, x)) over the last axis, against that formula in
// double: a causal [T, T] mask broadcast over [B, H, T, T] scores, in f32
// (RowMath's rows, long enough to vectorise) and f64 (the scalar loop); the
// masked positions are exactly 0; a mask that does not broadcast through
// leading axes is refused.
//
//===----------------------------------------------------------------------===//
#include "test/unit/kernels/KernelCallHelpers.h"
#include <cmath>
#include <gtest/gtest.h>

using namespace zinc;
using namespace zinc::cpu;
using namespace zinc::cpu::test;

namespace {

std::string runMasked(const OwnedTensor &x, const OwnedTensor &mask,
                      OwnedTensor &y) {
  // The call refers to these; they outlive it.
  AttributeList attrs;
  std::vector<const TensorRef *> ins{&x.ref, &mask.ref};
  std::vector<TensorRef *> outs{&y.ref};
  KernelCall call{"MaskedSoftmax", "sm", 17, attrs, ins, outs};
  return errorText(runWithWorkspace(runMaskedSoftmax, call));
}

void checkCausal(DType dtype, int64_t t) {
  const int64_t b = 2, h = 3, n = b * h * t * t;
  std::vector<double> xs(n);
  for (int64_t i = 0; i < n; ++i)
    xs[i] = std::sin(0.37 * double(i)) * 4.0;
  OwnedTensor x = dtype == DType::F32 ? OwnedTensor::of<float>(dtype, {b, h, t, t}, xs)
                                      : OwnedTensor::of<double>(dtype, {b, h, t, t}, xs);
  OwnedTensor mask(DType::Bool, {1, 1, t, t});
  for (int64_t i = 0; i < t; ++i)
    for (int64_t j = 0; j < t; ++j)
      mask.ref.as<bool>()[i * t + j] = j > i; // masked: the future
  OwnedTensor y(dtype, {b, h, t, t});
  ASSERT_EQ(runMasked(x, mask, y), "");
  std::vector<double> got =
      dtype == DType::F32 ? y.values<float>() : y.values<double>();
  for (int64_t r = 0; r < b * h * t; ++r) {
    int64_t i = r % t;
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j <= i; ++j)
      mx = std::max(mx, xs[r * t + j]);
    for (int64_t j = 0; j <= i; ++j)
      sum += std::exp(xs[r * t + j] - mx);
    for (int64_t j = 0; j < t; ++j) {
      double want = j > i ? 0.0 : std::exp(xs[r * t + j] - mx) / sum;
      if (j > i)
        ASSERT_EQ(got[r * t + j], 0.0) << "row " << r << " col " << j;
      else
        ASSERT_NEAR(got[r * t + j], want, dtype == DType::F32 ? 2e-6 : 1e-14)
            << "row " << r << " col " << j;
    }
  }
}

TEST(MaskedSoftmaxKernel, CausalMaskF32) { checkCausal(DType::F32, 77); }
TEST(MaskedSoftmaxKernel, CausalMaskF64) { checkCausal(DType::F64, 9); }

// Rows whose mask is not a causal prefix: masked entries before the last
// clear one are 0 too, and a row masked whole is NaN (as in PyTorch), not
// cut short.
TEST(MaskedSoftmaxKernel, HolesAndWholeRowsF32) {
  const int64_t t = 70;
  std::vector<double> xs(2 * t);
  for (int64_t i = 0; i < 2 * t; ++i)
    xs[i] = std::cos(0.91 * double(i));
  OwnedTensor x = OwnedTensor::f32({2, t}, xs);
  OwnedTensor mask(DType::Bool, {2, t});
  for (int64_t j = 0; j < t; ++j) {
    mask.ref.as<bool>()[j] = j % 3 == 0 || j > 50; // holes, then a tail
    mask.ref.as<bool>()[t + j] = true;
  }
  OwnedTensor y(DType::F32, {2, t});
  ASSERT_EQ(runMasked(x, mask, y), "");
  std::vector<double> got = y.f32s();
  double mx = -INFINITY, sum = 0;
  for (int64_t j = 0; j < t; ++j)
    if (!mask.ref.as<bool>()[j])
      mx = std::max(mx, xs[j]);
  for (int64_t j = 0; j < t; ++j)
    if (!mask.ref.as<bool>()[j])
      sum += std::exp(xs[j] - mx);
  for (int64_t j = 0; j < t; ++j) {
    if (mask.ref.as<bool>()[j])
      EXPECT_EQ(got[j], 0.0) << "col " << j;
    else
      EXPECT_NEAR(got[j], std::exp(xs[j] - mx) / sum, 2e-6) << "col " << j;
    EXPECT_TRUE(std::isnan(got[t + j])) << "col " << j;
  }
}

TEST(MaskedSoftmaxKernel, MaskMustBroadcastThroughLeadingAxes) {
  OwnedTensor x = OwnedTensor::f32({2, 3, 4}, std::vector<double>(24, 1.0));
  OwnedTensor mask(DType::Bool, {2, 1, 4});
  OwnedTensor y(DType::F32, {2, 3, 4});
  // 8 mask elements divide 24, but [2,1,4] would need a stride over rows.
  // The kernel reads row r % 2, which is not this broadcast: refused by the
  // pass (lit fuse-masked-softmax.zir); the kernel refuses what it cannot
  // read at all.
  OwnedTensor wrong(DType::Bool, {5});
  EXPECT_NE(runMasked(x, wrong, y).find("unsupported: MaskedSoftmax with mask [5]"),
            std::string::npos);
  OwnedTensor notBool = OwnedTensor::f32({4}, {0, 0, 0, 0});
  EXPECT_NE(runMasked(x, notBool, y).find("the mask bool"), std::string::npos);
}

} // namespace
