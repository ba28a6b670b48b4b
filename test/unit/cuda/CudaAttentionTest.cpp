//===- CudaAttentionTest.cpp - zinc.Attention and its gradient: cuda vs cpu -===//
//
// On the host: the per-element math and the online softmax of
// AttentionMath.h, run over each row a tile of 32 keys at a time as the
// forward kernel runs them (and the per-pair gradient formula of its pass
// B), against the cpu kernels (f32; masks, biases, causal, dropout, more
// keys than queries). With a device: both kernels of Attention.cu against
// the cpu kernels, f32 and bf16. Without one those skip.
//
//===----------------------------------------------------------------------===//
#include "test/unit/cuda/SoftmaxTestHelpers.h"
#include "runtime/cuda/kernels/AttentionMath.h"
#include <cmath>
#include <random>

using namespace zinc;
using namespace zinc::cuda;
using namespace zinc::cuda::softmaxtest;
using zinc::cpu::test::attrs;
using zinc::cpu::test::floatAttr;
using zinc::cpu::test::intAttr;

namespace {

struct Case {
  const char *name;
  int64_t heads, tq, tk, d, dv;
  std::vector<int64_t> maskShape, biasShape; // empty: absent
  bool causal;
  double ratio;
};

const Case kCases[] = {
    {"plain", 3, 5, 7, 4, 3, {}, {}, false, 0},
    {"mask and bias", 2, 9, 40, 8, 5, {9, 40}, {2, 1, 40}, false, 0},
    {"causal across tiles", 2, 70, 70, 16, 16, {}, {}, true, 0},
    {"dropout", 2, 33, 33, 8, 8, {}, {}, false, 0.25},
};

AttributeList attributesOf(const Case &c) {
  AttributeList a = attrs({floatAttr("scale", 0.5), floatAttr("fill", -1e4)});
  if (c.causal)
    a.set(intAttr("causal", 1));
  if (c.ratio > 0) {
    a.set(floatAttr("ratio", c.ratio));
    a.set(intAttr("seed_id", 3));
  }
  return a;
}

/// The operands of a case: Q, Kt, V, mask, bias (empty tensors where absent).
std::vector<OwnedTensor> operandsOf(const Case &c, DType dtype, std::mt19937 &rng) {
  std::vector<OwnedTensor> t;
  t.push_back(randomTensor(dtype, {c.heads, c.tq, c.d}, rng, -2, 2));
  t.push_back(randomTensor(dtype, {c.heads, c.d, c.tk}, rng, -2, 2));
  t.push_back(randomTensor(dtype, {c.heads, c.tk, c.dv}, rng));
  t.push_back(c.maskShape.empty() ? OwnedTensor(DType::Bool, {0})
                                  : randomMask(c.maskShape, rng, 0.2));
  t.push_back(c.biasShape.empty() ? OwnedTensor(dtype, {0})
                                  : randomTensor(dtype, c.biasShape, rng));
  return t;
}

std::vector<const OwnedTensor *> inputsOf(const Case &c, const std::vector<OwnedTensor> &t) {
  return {&t[0], &t[1], &t[2], c.maskShape.empty() ? nullptr : &t[3],
          c.biasShape.empty() ? nullptr : &t[4]};
}

AttentionParams paramsOf(const Case &c) {
  AttentionParams p;
  p.heads = c.heads;
  p.tq = c.tq;
  p.tk = c.tk;
  p.d = c.d;
  p.dv = c.dv;
  p.scale = 0.5f;
  p.fill = -1e4f;
  p.causal = c.causal;
  p.ratio = static_cast<float>(c.ratio);
  p.seedId = 3;
  p.seed = 0;
  p.step = 1;
  return p;
}

TEST(CudaAttentionMath, OperandLayoutIsNumpyBroadcasting) {
  const int64_t lead[] = {2, 3};
  AttentionOperand a;
  const int64_t rowMask[] = {3, 1, 5};
  ASSERT_TRUE(attentionOperand(rowMask, 3, lead, 2, 4, 5, a));
  EXPECT_EQ(a.rowStride, 0);
  EXPECT_EQ(a.colStride, 1);
  EXPECT_EQ(a.headBase(0), 0);
  EXPECT_EQ(a.headBase(4), 5); // head (1, 1): batch broadcast, head 1
  const int64_t wrong[] = {4, 4};
  EXPECT_FALSE(attentionOperand(wrong, 2, lead, 2, 4, 5, a));
}

TEST(CudaAttentionMath, RowsTileByTileMatchTheCpuKernels) {
  std::mt19937 rng(7);
  for (const Case &c : kCases) {
    SCOPED_TRACE(c.name);
    std::vector<OwnedTensor> t = operandsOf(c, DType::F32, rng);
    std::vector<const OwnedTensor *> ins = inputsOf(c, t);
    AttributeList a = attributesOf(c);
    OwnedTensor y(DType::F32, {c.heads, c.tq, c.dv}), lse(DType::F32, {c.heads, c.tq});
    ASSERT_NO_ERROR(runOnCpu("Attention", true, a, 17, ins, {&y, &lse}));
    OwnedTensor dy = randomTensor(DType::F32, {c.heads, c.tq, c.dv}, rng);
    OwnedTensor dq(DType::F32, {c.heads, c.tq, c.d}), dkt(DType::F32, {c.heads, c.d, c.tk}),
        dv(DType::F32, {c.heads, c.tk, c.dv});
    std::vector<const OwnedTensor *> gradIns = ins;
    gradIns.push_back(&y);
    gradIns.push_back(&lse);
    gradIns.push_back(&dy);
    ASSERT_NO_ERROR(runOnCpu("AttentionGrad", true, a, 17, gradIns, {&dq, &dkt, &dv}));

    AttentionParams p = paramsOf(c);
    AttentionOperand mask, bias;
    if (!c.maskShape.empty())
      ASSERT_TRUE(attentionOperand(c.maskShape.data(), int(c.maskShape.size()), &c.heads, 1,
                                   c.tq, c.tk, mask));
    if (!c.biasShape.empty())
      ASSERT_TRUE(attentionOperand(c.biasShape.data(), int(c.biasShape.size()), &c.heads, 1,
                                   c.tq, c.tk, bias));
    const float *q = t[0].ref.as<float>(), *kt = t[1].ref.as<float>(), *v = t[2].ref.as<float>();
    const bool *maskData = c.maskShape.empty() ? nullptr : t[3].ref.as<bool>();
    const float *biasData = c.biasShape.empty() ? nullptr : t[4].ref.as<float>();
    auto score = [&](int64_t h, int64_t i, int64_t j, bool &masked) {
      float dot = 0;
      for (int64_t e = 0; e < c.d; ++e)
        dot += q[(h * c.tq + i) * c.d + e] * kt[(h * c.d + e) * c.tk + j];
      masked = maskData && maskData[mask.offset(mask.headBase(h), i, j)];
      float b = biasData ? biasData[bias.offset(bias.headBase(h), i, j)] : 0.0f;
      return p.score(dot, masked, b);
    };
    std::vector<double> wantY = valuesOf(y), wantLse = valuesOf(lse), wantDq = valuesOf(dq);
    const float *dyData = dy.ref.as<float>(), *yData = y.ref.as<float>();
    for (int64_t h = 0; h < c.heads; ++h)
      for (int64_t i = 0; i < c.tq; ++i) {
        // The forward kernel's row: tiles of 32 keys, online softmax.
        float m = -INFINITY, l = 0;
        std::vector<float> acc(c.dv, 0.0f);
        for (int64_t j0 = 0; j0 < p.columnsEnd(i + 1); j0 += 32) {
          std::vector<float> s(32, -INFINITY);
          float tileMax = -INFINITY;
          for (int64_t j = j0; j < std::min<int64_t>(j0 + 32, c.tk); ++j) {
            bool masked;
            if (!p.leftOut(i, j))
              s[j - j0] = score(h, i, j, masked);
            tileMax = std::max(tileMax, s[j - j0]);
          }
          float top = std::max(m, tileMax), rescale = softmaxRescale(m, top), sum = 0;
          for (float x : s)
            sum += softmaxWeight(x, top);
          l = l * rescale + sum;
          m = top;
          for (float &x : acc)
            x *= rescale;
          for (int64_t j = j0; j < std::min<int64_t>(j0 + 32, c.tk); ++j) {
            float w = softmaxWeight(s[j - j0], top) * p.keepScale(h, i, j);
            for (int64_t e = 0; e < c.dv; ++e)
              acc[e] += w * v[(h * c.tk + j) * c.dv + e];
          }
        }
        for (int64_t e = 0; e < c.dv; ++e)
          EXPECT_NEAR(acc[e] / l, wantY[(h * c.tq + i) * c.dv + e], 1e-5) << h << " " << i;
        EXPECT_NEAR(m + std::log(l), wantLse[h * c.tq + i], 1e-5);
        // Pass B's row: dQ from the per-pair gradient.
        float rowDot = 0;
        for (int64_t e = 0; e < c.dv; ++e)
          rowDot += dyData[(h * c.tq + i) * c.dv + e] * yData[(h * c.tq + i) * c.dv + e];
        std::vector<float> dqRow(c.d, 0.0f);
        for (int64_t j = 0; j < p.columnsEnd(i + 1); ++j) {
          if (p.leftOut(i, j))
            continue;
          bool masked;
          float s = score(h, i, j, masked), dpd = 0;
          for (int64_t e = 0; e < c.dv; ++e)
            dpd += dyData[(h * c.tq + i) * c.dv + e] * v[(h * c.tk + j) * c.dv + e];
          float prob = softmaxWeight(s, float(wantLse[h * c.tq + i]));
          float ds = prob * (dpd * p.keepScale(h, i, j) - rowDot);
          for (int64_t e = 0; e < c.d; ++e)
            dqRow[e] += p.scale * (masked ? 0.0f : ds) * kt[(h * c.d + e) * c.tk + j];
        }
        for (int64_t e = 0; e < c.d; ++e)
          EXPECT_NEAR(dqRow[e], wantDq[(h * c.tq + i) * c.d + e], 1e-4) << h << " " << i;
      }
  }
}

class CudaAttention : public CudaSoftmax {};

TEST_F(CudaAttention, ForwardAndBackwardMatchCpu) {
  for (DType dtype : {DType::F32, DType::BF16})
    for (const Case &c : kCases) {
      SCOPED_TRACE(std::string(c.name) + " " + dtypeName(dtype).str());
      std::vector<OwnedTensor> t = operandsOf(c, dtype, rng);
      std::vector<const OwnedTensor *> ins = inputsOf(c, t);
      AttributeList a = attributesOf(c);
      Tolerance tol = dtype == DType::F32 ? Tolerance{1e-5, 1e-4} : Tolerance{2e-2, 2e-2};
      OwnedTensor y(dtype, {c.heads, c.tq, c.dv}), lse(DType::F32, {c.heads, c.tq});
      expectMatchesCpu("Attention", true, a, ins, {&y, &lse}, tol);
      OwnedTensor dy = randomTensor(dtype, {c.heads, c.tq, c.dv}, rng);
      std::vector<const OwnedTensor *> gradIns = ins;
      gradIns.push_back(&y);
      gradIns.push_back(&lse);
      gradIns.push_back(&dy);
      OwnedTensor dq(dtype, {c.heads, c.tq, c.d}), dkt(dtype, {c.heads, c.d, c.tk}),
          dv(dtype, {c.heads, c.tk, c.dv});
      expectMatchesCpu("AttentionGrad", true, a, gradIns, {&dq, &dkt, &dv}, tol);
    }
}

} // namespace
