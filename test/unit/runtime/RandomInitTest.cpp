//===- RandomInitTest.cpp - --init=random: what is filled, and with what --===//
#include "PlanBuilder.h"
#include "zinc/runtime/RandomInit.h"
#include "zinc/support/Float16.h"
#include <cmath>

using namespace zinc;
using namespace zinc::rt;
using namespace zinc::rt::test;

namespace {

void setInit(plan::Plan &p, int id, const std::string &name,
             const std::string &file = "") {
  p.mutable_tensors(id)->mutable_init()->set_name(name);
  p.mutable_tensors(id)->mutable_init()->set_file(file);
}

/// The values `target`'s tensor gets, as floats.
std::vector<float> generate(const plan::Plan &p, unsigned rank, int id,
                            uint64_t seed = 7) {
  auto targets = planRandomInit(p, rank);
  EXPECT_TRUE(static_cast<bool>(targets)) << llvm::toString(targets.takeError());
  for (const RandomInitTarget &t : *targets)
    if (t.tensor == static_cast<uint32_t>(id)) {
      const plan::Tensor &pt = p.tensors(id);
      std::vector<float> out(pt.size_bytes() / 4);
      cpu::TensorRef ref{DType::F32, {}, out.data()};
      ref.shape.assign(pt.shape().begin(), pt.shape().end());
      fillRandomInit(t, ref, seed);
      return out;
    }
  ADD_FAILURE() << "tensor " << id << " is not generated";
  return {};
}

// Matrices are random, norm scales (LayerNormalization's, through a copy,
// and a Mul's factor) one, biases zero, running_var one, running_mean zero;
// what no optimizer trains (a frozen vector, a scalar) keeps the model's.
TEST(RandomInit, ClassifiesByStructure) {
  PlanBuilder b;
  int x = b.tensor("x", {2, 3}), y = b.tensor("y", {2, 3}), z = b.tensor("z", {2, 3});
  int w = b.tensor("w", {3, 3}, plan::TIER_GPU, 1, plan::ROLE_PARAMETER);
  int g = b.tensor("ln.weight", {3}, plan::TIER_CPU, 1, plan::ROLE_PARAMETER);
  int gCopy = b.tensor("ln.weight.gpu", {3});
  int bias = b.tensor("ln.bias", {3}, plan::TIER_GPU, 1, plan::ROLE_PARAMETER);
  int s = b.tensor("rms.weight", {3}, plan::TIER_GPU, 1, plan::ROLE_PARAMETER);
  int mean = b.tensor("bn.running_mean", {3}, plan::TIER_GPU, 1, plan::ROLE_MODEL_STATE);
  int var = b.tensor("bn.running_var", {3}, plan::TIER_GPU, 1, plan::ROLE_MODEL_STATE);
  int tracked = b.tensor("bn.num_batches_tracked", {}, plan::TIER_GPU, 7,
                         plan::ROLE_MODEL_STATE);
  int frozen = b.tensor("frozen", {3}, plan::TIER_GPU, 1, plan::ROLE_PARAMETER);
  int scalar = b.tensor("scale", {}, plan::TIER_GPU, 1, plan::ROLE_PARAMETER);
  int grad = b.tensor("grad", {3});
  b.add("fetch", "Copy", {g}, {gCopy}, plan::STREAM_H2D);
  b.add("ln", "LayerNormalization", {x, gCopy, bias}, {y});
  b.add("mul", "Mul", {y, s}, {z});
  b.add("bn", "BatchNormalization", {z, frozen, frozen, mean, var}, {y});
  b.add("scaled", "Mul", {y, scalar}, {z});
  for (int p : {w, g, bias, s})
    b.add("adam", "AdamW", {p, grad}, {});
  plan::Plan p = b.finish();
  for (int id : {w, g, bias, s, mean, var, tracked, frozen, scalar})
    setInit(p, id, p.tensors(id).name());
  std::vector<RandomFillKind> kinds = classifyRandomInit(p);
  EXPECT_EQ(kinds[w], RandomFillKind::Normal);
  EXPECT_EQ(kinds[g], RandomFillKind::One);
  EXPECT_EQ(kinds[bias], RandomFillKind::Zero);
  EXPECT_EQ(kinds[s], RandomFillKind::One);
  EXPECT_EQ(kinds[mean], RandomFillKind::Zero);
  EXPECT_EQ(kinds[var], RandomFillKind::One);
  EXPECT_EQ(kinds[tracked], RandomFillKind::Zero);
  EXPECT_EQ(kinds[frozen], RandomFillKind::Model);
  EXPECT_EQ(kinds[scalar], RandomFillKind::Model);
  EXPECT_EQ(kinds[x], RandomFillKind::Model);
}

// An inference plan trains nothing: every float parameter of rank >= 1 is
// generated.
TEST(RandomInit, InferencePlansGenerateEveryParameter) {
  PlanBuilder b;
  int x = b.tensor("x", {2, 3}), y = b.tensor("y", {2, 3});
  int w = b.tensor("w", {3, 3}, plan::TIER_GPU, 1, plan::ROLE_PARAMETER);
  int bias = b.tensor("b", {3}, plan::TIER_GPU, 1, plan::ROLE_PARAMETER);
  int scalar = b.tensor("s", {}, plan::TIER_GPU, 1, plan::ROLE_PARAMETER);
  b.add("add", "Add", {x, bias}, {y});
  plan::Plan p = b.finish();
  for (int id : {w, bias, scalar})
    setInit(p, id, p.tensors(id).name());
  std::vector<RandomFillKind> kinds = classifyRandomInit(p);
  EXPECT_EQ(kinds[w], RandomFillKind::Normal);
  EXPECT_EQ(kinds[bias], RandomFillKind::Zero);
  EXPECT_EQ(kinds[scalar], RandomFillKind::Model);
}

/// A plan whose only tensors are a trained [rows, cols] matrix "w" (id 0)
/// and the extra tensors `extra` adds.
plan::Plan matrixPlan(int64_t rows, int64_t cols,
                      std::function<void(PlanBuilder &, plan::Plan &)> edit = nullptr) {
  PlanBuilder b;
  int w = b.tensor("w", {rows, cols}, plan::TIER_GPU, 1, plan::ROLE_PARAMETER);
  int grad = b.tensor("grad", {1});
  b.add("adam", "AdamW", {w, grad}, {});
  plan::Plan p = b.finish();
  setInit(p, w, "w");
  if (edit)
    edit(b, p);
  return p;
}

// normal(0, 0.02): mean and deviation of 64k elements, and the values are
// the seed's and the name's.
TEST(RandomInit, MatricesAreNormalWithDeviationPointZeroTwo) {
  plan::Plan p = matrixPlan(256, 256);
  std::vector<float> v = generate(p, 0, 0);
  double sum = 0, squares = 0;
  for (float f : v) {
    ASSERT_TRUE(std::isfinite(f));
    sum += f;
    squares += double(f) * f;
  }
  double mean = sum / v.size(), sd = std::sqrt(squares / v.size() - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.02 * 4 / std::sqrt(double(v.size())));
  EXPECT_NEAR(sd, 0.02, 0.02 * 0.02);
  EXPECT_EQ(generate(p, 0, 0, 7), v);
  EXPECT_NE(generate(p, 0, 0, 8), v);
  p.mutable_tensors(0)->mutable_init()->set_name("w2");
  EXPECT_NE(generate(p, 0, 0), v);
}

// The loader's fill, a run at a time, gives each element the value of the
// one-element formula the cuda kernel evaluates.
TEST(RandomInit, RunsMatchTheElementFormula) {
  plan::Plan p = matrixPlan(3, 7);
  std::vector<float> v = generate(p, 0, 0, 11);
  uint64_t key = randomInitKey("w", 1);
  for (uint64_t e = 0; e < v.size(); ++e)
    EXPECT_EQ(v[e], randomInitNormal(randomInitBlock(11, key, e / 4),
                                     static_cast<unsigned>(e % 4), kRandomInitStd))
        << e;
}

// A tile (columns [2, 5) of a [6, 8] matrix) holds exactly the whole
// matrix's elements there.
TEST(RandomInit, TilesHoldTheirShareOfTheWhole) {
  std::vector<float> whole = generate(matrixPlan(6, 8), 0, 0);
  plan::Plan tile = matrixPlan(6, 3, [](PlanBuilder &, plan::Plan &p) {
    plan::InitializerSource *src = p.mutable_tensors(0)->mutable_init();
    src->add_whole_shape(6);
    src->add_whole_shape(8);
    src->set_slice_axis(1);
    src->set_slice_begin(2);
  });
  std::vector<float> share = generate(tile, 0, 0);
  for (int r = 0; r < 6; ++r)
    for (int c = 0; c < 3; ++c)
      EXPECT_EQ(share[r * 3 + c], whole[r * 8 + 2 + c]) << r << "," << c;
}

// ZeRO shards over 3 ranks of a [5, 7] matrix (35 elements, 12 a rank):
// rank r holds the one-rank elements [12 r, 12 r + 12), zeros past 35.
TEST(RandomInit, ShardsHoldTheOneRankValues) {
  std::vector<float> whole = generate(matrixPlan(5, 7), 0, 0);
  PlanBuilder b;
  int shard = b.tensor("w.shard", {12}, plan::TIER_GPU, 1, plan::ROLE_PARAMETER);
  int grad = b.tensor("grad", {1});
  b.add("adam", "AdamW", {shard, grad}, {});
  plan::Plan p = b.finish();
  setInit(p, shard, "w");
  p.mutable_tensors(shard)->add_shard_of(5);
  p.mutable_tensors(shard)->add_shard_of(7);
  std::vector<float> joined;
  for (unsigned rank = 0; rank < 3; ++rank) {
    std::vector<float> part = generate(p, rank, shard);
    joined.insert(joined.end(), part.begin(), part.end());
  }
  for (size_t i = 0; i < joined.size(); ++i)
    EXPECT_EQ(joined[i], i < whole.size() ? whole[i] : 0.0f) << i;
}

// A 16-bit copy holds the fp32 values rounded; an integer model state
// holds zeros.
TEST(RandomInit, NarrowTypesAreRounded) {
  plan::Plan p = matrixPlan(4, 4);
  std::vector<float> f32 = generate(p, 0, 0);
  auto targets = planRandomInit(p, 0);
  ASSERT_TRUE(static_cast<bool>(targets));
  std::vector<uint16_t> bits(16);
  cpu::TensorRef bf16{DType::BF16, {4, 4}, bits.data()};
  fillRandomInit((*targets)[0], bf16, 7);
  for (int i = 0; i < 16; ++i)
    EXPECT_EQ(bits[i], floatToBf16(f32[i]));
}

// A tile that is not a share of its initializer is refused, naming it.
TEST(RandomInit, BadTileIsRefused) {
  plan::Plan tile = matrixPlan(6, 3, [](PlanBuilder &, plan::Plan &p) {
    plan::InitializerSource *src = p.mutable_tensors(0)->mutable_init();
    src->add_whole_shape(6);
    src->add_whole_shape(4);
    src->set_slice_axis(1);
    src->set_slice_begin(2);
  });
  EXPECT_EQ(errorOf(planRandomInit(tile, 0)),
            "initializer 'w': the plan's tile [6,3] at 2 on axis 1 is not a "
            "share of it");
}

// No weights file is read: the plan names an external file that does not
// exist, and only --init=random loads it.
TEST(RandomInit, LoadsWithoutTheWeightsFile) {
  PlanBuilder b;
  int w = b.tensor("w", {8, 8}, plan::TIER_GPU, 1, plan::ROLE_PARAMETER);
  int c = b.tensor("w.cpu", {8, 8}, plan::TIER_CPU, 1, plan::ROLE_PARAMETER);
  int grad = b.tensor("grad", {1}), cpuGrad = b.tensor("grad.cpu", {1}, plan::TIER_CPU);
  b.add("adam", "AdamW", {w, grad}, {});
  b.add("adam2", "AdamW", {c, cpuGrad}, {}, plan::STREAM_HOST);
  plan::Plan p = b.finish();
  // External data is named relative to the model's directory.
  p.set_model_path("/nonexistent/model.onnx");
  setInit(p, w, "w", "weights.bin");
  setInit(p, c, "c", "weights.bin");
  std::string refused = errorOf(Program::fromPlan(p));
  EXPECT_NE(refused.find("/nonexistent/weights.bin: cannot open external data"),
            std::string::npos)
      << refused;
  LoadOptions opts;
  opts.randomInit = true;
  opts.initSeed = 7;
  std::unique_ptr<Program> program = loadOrFail(p, opts);
  ASSERT_TRUE(program);
  EXPECT_EQ(values(*program, w), generate(p, 0, w));
  EXPECT_EQ(values(*program, c), generate(p, 0, c));
  EXPECT_TRUE(program->deviceInit().empty());

  // A device backend generates the GPU tier itself.
  opts.deviceGeneratesGpuTier = true;
  program = loadOrFail(p, opts);
  ASSERT_TRUE(program);
  ASSERT_EQ(program->deviceInit().size(), 1u);
  EXPECT_EQ(program->deviceInit()[0].tensor, static_cast<uint32_t>(w));
  EXPECT_EQ(values(*program, c), generate(p, 0, c));
}

} // namespace
