//===- CudaSoftmaxTest.cpp - Softmax family and SCE loss: cuda vs cpu -----===//
//
// With a device, each kernel of Softmax.cu runs on random inputs (fixed
// seeds; rows of 1, 7, 1000 and 5000 so that every thread layout and ragged
// tails are hit) and is compared with the cpu kernel of the same op.
// Without one those skip; the per-element math of SoftmaxMath.h is checked
// against the cpu kernels on the host, and the argument checks (the cpu's
// messages, before any CUDA call) on every machine.
//
//===----------------------------------------------------------------------===//
#include "test/unit/cuda/SoftmaxTestHelpers.h"
#include "runtime/cuda/kernels/SoftmaxMath.h"
#include <cmath>
#include <cstring>
#include <limits>

using namespace zinc;
using namespace zinc::cuda;
using namespace zinc::cuda::softmaxtest;
using zinc::cpu::test::attrs;
using zinc::cpu::test::intAttr;
using zinc::cpu::test::stringAttr;

namespace {

const DType kFloatTypes[] = {DType::F32, DType::F16, DType::BF16};
/// Row lengths: one element, a warp's ragged tail, a block, several passes
/// of a 1024-thread block.
const int64_t kLengths[] = {1, 7, 1000, 5000};
const double kInf = std::numeric_limits<double>::infinity();

std::vector<float> floatsOf(const OwnedTensor &t) {
  std::vector<double> v = valuesOf(t);
  return std::vector<float>(v.begin(), v.end());
}

//===----------------------------------------------------------------------===//
// SoftmaxMath.h on the host
//===----------------------------------------------------------------------===//

TEST(CudaSoftmaxMath, RowsMatchTheCpuGeometry) {
  const std::vector<int64_t> shapes[] = {{}, {5}, {2, 3, 4}, {3, 1, 7, 2}};
  for (const auto &shape : shapes)
    for (int64_t axis = -5; axis <= 5; ++axis)
      for (bool flatten : {false, true}) {
        SCOPED_TRACE(formatShape(shape) + " axis " + std::to_string(axis) +
                     (flatten ? " flattened" : ""));
        SoftmaxRows rows;
        bool ok = softmaxRows(shape.data(), int64_t(shape.size()), axis,
                              flatten, rows);
        auto want = cpu::softmaxGeometry(shape, axis, flatten);
        ASSERT_EQ(ok, static_cast<bool>(want));
        if (!want) {
          llvm::consumeError(want.takeError());
          continue;
        }
        EXPECT_EQ(rows.outer, want->outer);
        EXPECT_EQ(rows.d, want->d);
        EXPECT_EQ(rows.inner, want->inner);
      }
}

TEST(CudaSoftmaxMath, RowIndexing) {
  // [2, 3, 4] along axis 1: row 5 is (o, i) = (1, 1).
  EXPECT_EQ(rowBase(5, 3, 4), 1 * 3 * 4 + 1);
  EXPECT_EQ(rowBase(7, 10, 1), 70);
  EXPECT_EQ(maskRowOf(7, 3), 1);
  EXPECT_EQ(maskRowOf(2, 1), 0);
}

TEST(CudaSoftmaxMath, LayoutsAndGrids) {
  EXPECT_EQ(chooseRowLayout(1, 1), RowLayoutKind::Warp);
  EXPECT_EQ(chooseRowLayout(kWarpRowMax, 1), RowLayoutKind::Warp);
  EXPECT_EQ(chooseRowLayout(kWarpRowMax + 1, 1), RowLayoutKind::Block256);
  EXPECT_EQ(chooseRowLayout(kBlock256RowMax + 1, 1),
            RowLayoutKind::Block1024);
  EXPECT_EQ(chooseRowLayout(5000, 3), RowLayoutKind::Column);
  EXPECT_EQ(rowLayoutThreads(RowLayoutKind::Block1024), 1024);
  EXPECT_EQ(rowLayoutThreads(RowLayoutKind::Column),
            kColumnRows * kColumnThreads);

  SoftmaxRows g;
  g.outer = 17;
  g.d = 7;
  EXPECT_EQ(rowBlocks(RowLayoutKind::Warp, g), 3); // 17 rows, 8 a block
  g.inner = 33;
  EXPECT_EQ(rowBlocks(RowLayoutKind::Column, g), 17 * 2);
  g.outer = int64_t(1) << 30;
  EXPECT_EQ(rowBlocks(RowLayoutKind::Block256, g), kMaxRowBlocks);
  EXPECT_EQ(lossPartialBlocks(RowLayoutKind::Block256, g), kLossPartialBlocks);
  g.outer = 0;
  EXPECT_EQ(rowBlocks(RowLayoutKind::Warp, g), 1); // never an empty grid
  EXPECT_EQ(lossScratchBytes(kLossPartialBlocks), 16384u);
  EXPECT_EQ(lossScratchBytes(1), 256u);
  EXPECT_EQ(meanGradBlocks(2112, 16384), 2112 < (1 << 26) / 16384
                                             ? 2112
                                             : (1 << 26) / 16384);
  EXPECT_EQ(meanGradBlocks(2112, int64_t(1) << 40), 132);
}

TEST(CudaSoftmaxMath, Targets) {
  EXPECT_EQ(classifyTarget(3, 5, false, 0), TargetKind::Class);
  EXPECT_EQ(classifyTarget(5, 5, false, 0), TargetKind::OutOfRange);
  EXPECT_EQ(classifyTarget(-1, 5, false, 0), TargetKind::OutOfRange);
  EXPECT_EQ(classifyTarget(-100, 5, true, -100), TargetKind::Ignored);
  // An ignored class inside the range is ignored, not a class.
  EXPECT_EQ(classifyTarget(1, 5, true, 1), TargetKind::Ignored);
  EXPECT_EQ(classifyTarget(0, 5, true, 1), TargetKind::Class);
}

/// Runs a single-input, single-output f32 cpu kernel.
OwnedTensor cpuResult(llvm::StringRef op, bool zinc, const AttributeList &a,
                      const std::vector<const OwnedTensor *> &ins,
                      DType dtype, llvm::ArrayRef<int64_t> shape) {
  OwnedTensor out(dtype, shape);
  llvm::Error err = runOnCpu(op, zinc, a, 17, ins, {&out});
  EXPECT_EQ(errorText(std::move(err)), "");
  return out;
}

/// The kernels' row math, done on the host one row at a time.
std::vector<double> hostSoftmax(const std::vector<float> &x, bool isLog) {
  float m = -INFINITY;
  for (float v : x)
    m = std::fmax(m, v);
  double s = 0;
  for (float v : x)
    s += expf(v - m);
  std::vector<double> y;
  for (float v : x)
    y.push_back(isLog ? logSoftmaxValue(v, m, float(std::log(s)))
                      : softmaxValue(v, m, float(1.0 / s)));
  return y;
}

void expectNear(const std::vector<double> &got, const OwnedTensor &want,
                Tolerance tol) {
  expectClose(OwnedTensor::f32(want.ref.shape, got), want, tol);
}

TEST(CudaSoftmaxMath, SoftmaxRowMatchesCpu) {
  std::mt19937 rng(7);
  for (int64_t d : kLengths)
    for (bool isLog : {false, true}) {
      SCOPED_TRACE(std::to_string(d) + (isLog ? " log" : ""));
      OwnedTensor x = randomTensor(DType::F32, {1, d}, rng, -8, 8);
      OwnedTensor want = cpuResult(isLog ? "LogSoftmax" : "Softmax", false,
                                   attrs({}), {&x}, DType::F32, {1, d});
      expectNear(hostSoftmax(floatsOf(x), isLog), want,
                 softmaxTolerance(DType::F32));
    }
}

TEST(CudaSoftmaxMath, MaskedRowsMatchCpuInEachType) {
  // Row 0 partly masked, row 1 wholly: NaN in f32, zeros in 16-bit floats.
  const int64_t d = 70;
  std::mt19937 rng(8);
  OwnedTensor mask(DType::Bool, {2, d});
  for (int64_t j = 0; j < 2 * d; ++j)
    mask.ref.as<bool>()[j] = j >= d || j % 3 == 0;
  for (DType dtype : {DType::F32, DType::F16}) {
    SCOPED_TRACE(dtypeName(dtype).str());
    OwnedTensor x = randomTensor(dtype, {2, d}, rng, -4, 4);
    OwnedTensor want = cpuResult("MaskedSoftmax", true, attrs({}),
                                 {&x, &mask}, dtype, {2, d});
    bool zeroMasked = dtype != DType::F32;
    std::vector<float> xs = floatsOf(x);
    std::vector<double> got;
    for (int64_t r = 0; r < 2; ++r) {
      const bool *m = mask.ref.as<bool>() + r * d;
      float mx = -INFINITY;
      double s = 0;
      for (int64_t j = 0; j < d; ++j)
        mx = std::fmax(mx, maskedScore(xs[r * d + j], m[j]));
      for (int64_t j = 0; j < d; ++j)
        if (!(zeroMasked && m[j]))
          s += expf(maskedScore(xs[r * d + j], m[j]) - mx);
      for (int64_t j = 0; j < d; ++j)
        got.push_back(maskedSoftmaxValue(xs[r * d + j], m[j], mx,
                                         float(1.0 / s), zeroMasked));
    }
    expectClose(tensorOf(dtype, {2, d}, got), want, softmaxTolerance(dtype));
    EXPECT_EQ(std::isnan(valuesOf(want)[d]), !zeroMasked);
  }
}

/// What a gradient sees as y: the cpu forward kernel's output on random
/// scores, so that rows sum to 1 (for random y, sum(dy * y) cancels badly
/// and the cpu's f32 dot product alone is off by 1e-4).
OwnedTensor forwardOutput(DType dtype, llvm::ArrayRef<int64_t> shape,
                          int64_t axis, bool flatten, bool isLog,
                          std::mt19937 &rng) {
  OwnedTensor x = randomTensor(dtype, shape, rng, -6, 6);
  OwnedTensor y(dtype, shape);
  llvm::Error err = runOnCpu(isLog ? "LogSoftmax" : "Softmax", false,
                             attrs({intAttr("axis", axis)}), flatten ? 11 : 13,
                             {&x}, {&y});
  EXPECT_EQ(errorText(std::move(err)), "");
  return y;
}

TEST(CudaSoftmaxMath, SoftmaxGradRowMatchesCpu) {
  std::mt19937 rng(9);
  for (int64_t d : kLengths)
    for (bool isLog : {false, true}) {
      SCOPED_TRACE(std::to_string(d) + (isLog ? " log" : ""));
      OwnedTensor y = forwardOutput(DType::F32, {1, d}, 1, false, isLog, rng);
      OwnedTensor dy = randomTensor(DType::F32, {1, d}, rng, -1, 1);
      OwnedTensor want =
          cpuResult(isLog ? "LogSoftmaxGrad" : "SoftmaxGrad", true,
                    attrs({intAttr("axis", 1)}), {&y, &dy}, DType::F32, {1, d});
      std::vector<float> ys = floatsOf(y), dys = floatsOf(dy);
      double s = 0;
      for (int64_t j = 0; j < d; ++j)
        s += softmaxGradTerm(ys[j], dys[j], isLog);
      std::vector<double> got;
      for (int64_t j = 0; j < d; ++j)
        got.push_back(softmaxGradValue(ys[j], dys[j], float(s), isLog));
      expectNear(got, want, softmaxTolerance(DType::F32));
    }
}

TEST(CudaSoftmaxMath, CrossEntropyMatchesCpu) {
  // [N, C] with weights, reduction none, one target ignored; then the
  // gradient of the same loss with a dloss per position.
  const int64_t n = 4, c = 9;
  std::mt19937 rng(10);
  OwnedTensor x = randomTensor(DType::F32, {n, c}, rng, -4, 4);
  OwnedTensor w = randomTensor(DType::F32, {c}, rng, 0.5, 2);
  OwnedTensor t = OwnedTensor::i64({n}, {3, 8, 2, 0});
  AttributeList a = attrs({stringAttr("reduction", "none"),
                           intAttr("ignore_index", 2)});
  OwnedTensor loss(DType::F32, {n});
  ASSERT_NO_ERROR(
      runOnCpu("SoftmaxCrossEntropyLoss", false, a, 17, {&x, &t, &w}, {&loss}));
  OwnedTensor dloss = randomTensor(DType::F32, {n}, rng, -1, 1);
  OwnedTensor dx(DType::F32, {n, c});
  ASSERT_NO_ERROR(runOnCpu("SoftmaxCrossEntropyLossGrad", true, a, 17,
                           {&dloss, &x, &t, &w}, {&dx}));

  std::vector<float> xs = floatsOf(x), ws = floatsOf(w), gs = floatsOf(dloss);
  std::vector<double> losses, grads;
  for (int64_t r = 0; r < n; ++r) {
    const float *row = xs.data() + r * c;
    float m = -INFINITY;
    double s = 0;
    for (int64_t j = 0; j < c; ++j)
      m = std::fmax(m, row[j]);
    for (int64_t j = 0; j < c; ++j)
      s += expf(row[j] - m);
    float lse = logSumExp(m, s);
    int64_t tr = t.ref.as<int64_t>()[r];
    bool counted = classifyTarget(tr, c, true, 2) == TargetKind::Class;
    losses.push_back(counted ? sceLoss(row[tr], lse, ws[tr]) : 0.0);
    double coef = counted ? sceCoefficient(gs[r], ws[tr], 1.0) : 0.0;
    for (int64_t j = 0; j < c; ++j)
      grads.push_back(sceGradValue(row[j], float(double(m) + std::log(s)),
                                   float(coef), 0, false, float(coef),
                                   counted && j == tr));
  }
  expectNear(losses, loss, softmaxTolerance(DType::F32));
  expectNear(grads, dx, softmaxTolerance(DType::F32));
}

//===----------------------------------------------------------------------===//
// Argument checks, without a device
//===----------------------------------------------------------------------===//

/// A tensor of a case: type and shape, or absent.
struct Spec {
  DType dtype;
  std::vector<int64_t> shape;
  bool present = true;
};
const Spec kAbsent{DType::F32, {}, false};

/// A call the cpu refuses: the cuda kernel must refuse it with the same
/// message, from the shapes alone.
struct BadCall {
  const char *op;
  bool zinc;
  AttributeList attrs;
  std::vector<Spec> ins, outs;
  int64_t opset = 17;
};

TEST(CudaSoftmaxNoDevice, BadShapesGetTheCpuMessageBeforeAnyCudaCall) {
  const DType f32 = DType::F32, f16 = DType::F16, i64 = DType::I64;
  const BadCall calls[] = {
      {"Softmax", false, attrs({}), {{f32, {2, 3}}}, {{f32, {3, 2}}}},
      {"Softmax", false, attrs({}), {{f32, {2, 3}}}, {{f16, {2, 3}}}},
      {"Softmax", false, attrs({intAttr("axis", 2)}), {{f32, {2, 3}}},
       {{f32, {2, 3}}}},
      {"LogSoftmax", false, attrs({intAttr("axis", -3)}), {{f32, {2, 3}}},
       {{f32, {2, 3}}}, 11},
      {"LogSoftmax", false, attrs({}), {{f32, {2, 3}}}, {}},
      {"MaskedSoftmax", true, attrs({}), {{f32, {2, 3}}, {DType::Bool, {5}}},
       {{f32, {2, 3}}}},
      {"MaskedSoftmax", true, attrs({}), {{f32, {2, 3}}, {f32, {3}}},
       {{f32, {2, 3}}}},
      {"SoftmaxGrad", true, attrs({}), {{f32, {2, 3}}, {f32, {2, 4}}},
       {{f32, {2, 3}}}},
      {"SoftmaxGrad", true, attrs({}), {{f32, {2, 3}}, kAbsent},
       {{f32, {2, 3}}}},
      {"LogSoftmaxGrad", true, attrs({intAttr("axis", 4)}),
       {{f32, {2, 3}}, {f32, {2, 3}}}, {{f32, {2, 3}}}},
      {"LogSoftmaxGrad", true, attrs({}), {{f32, {2, 3}}, {f32, {2, 3}}},
       {{f16, {2, 3}}}},
      {"SoftmaxCrossEntropyLoss", false, attrs({}),
       {{f32, {2, 5, 4}}, {i64, {2, 5}}}, {{f32, {}}}},
      {"SoftmaxCrossEntropyLoss", false, attrs({}),
       {{f32, {2, 5}}, {f32, {2}}}, {{f32, {}}}},
      {"SoftmaxCrossEntropyLoss", false, attrs({}), {{f32, {5}}, {i64, {}}},
       {{f32, {}}}},
      {"SoftmaxCrossEntropyLoss", false, attrs({}),
       {{f32, {2, 5}}, {i64, {2}}, {f32, {4}}}, {{f32, {}}}},
      {"SoftmaxCrossEntropyLoss", false,
       attrs({stringAttr("reduction", "none")}), {{f32, {2, 5}}, {i64, {2}}},
       {{f32, {}}}},
      {"SoftmaxCrossEntropyLoss", false, attrs({}),
       {{f32, {2, 5}}, {i64, {2}}}, {{f32, {}}, {f32, {5, 2}}}},
      {"SoftmaxCrossEntropyLoss", false,
       attrs({stringAttr("reduction", "avg")}), {{f32, {2, 5}}, {i64, {2}}},
       {{f32, {}}}},
      {"SoftmaxCrossEntropyLossGrad", true, attrs({}),
       {{f32, {2}}, {f32, {2, 5}}, {i64, {2}}}, {{f32, {2, 5}}}},
      {"SoftmaxCrossEntropyLossGrad", true, attrs({}),
       {{f32, {}}, {f32, {2, 6}}, {i64, {2}}}, {{f32, {2, 5}}}},
      {"SoftmaxCrossEntropyLossGrad", true, attrs({}),
       {{f32, {}}, {f32, {2, 5}}, {i64, {2}}, kAbsent, {f16, {2, 5}}},
       {{f32, {2, 5}}}},
      {"SoftmaxCrossEntropyLossGrad", true, attrs({}),
       {{f32, {}}, {f32, {5}}, {i64, {}}}, {{f32, {5}}}},
      {"SoftmaxCrossEntropyLossGrad", true, attrs({}),
       {{f32, {}}, {f32, {2, 5}}, {DType::F32, {2}}}, {{f32, {2, 5}}}},
  };
  for (const BadCall &c : calls) {
    std::vector<OwnedTensor> hostIns, hostOuts;
    std::vector<DeviceTensor> devIns, devOuts;
    hostIns.reserve(c.ins.size());
    hostOuts.reserve(c.outs.size());
    devIns.reserve(c.ins.size());
    devOuts.reserve(c.outs.size());
    std::vector<const OwnedTensor *> hi;
    std::vector<OwnedTensor *> ho;
    std::vector<const DeviceTensor *> di;
    std::vector<DeviceTensor *> dout;
    for (const Spec &s : c.ins) {
      hostIns.emplace_back(s.dtype, s.shape);
      devIns.push_back(shapeOnly(s.dtype, s.shape));
      hi.push_back(s.present ? &hostIns.back() : nullptr);
      di.push_back(s.present ? &devIns.back() : nullptr);
    }
    for (const Spec &s : c.outs) {
      hostOuts.emplace_back(s.dtype, s.shape);
      devOuts.push_back(shapeOnly(s.dtype, s.shape));
      ho.push_back(s.present ? &hostOuts.back() : nullptr);
      dout.push_back(s.present ? &devOuts.back() : nullptr);
    }
    std::string want =
        errorText(runOnCpu(c.op, c.zinc, c.attrs, c.opset, hi, ho));
    SCOPED_TRACE(std::string(c.op) + ": " + want);
    ASSERT_NE(want, "");
    // Null device pointers: a kernel that got as far as queueing work
    // would fail differently (or, without a device, name a CUDA call).
    EXPECT_EQ(errorText(runShapesOnly(c.op, c.zinc, c.attrs, c.opset, di,
                                      dout)),
              want);
  }
}

TEST(CudaSoftmaxNoDevice, WiderFloatsAreRefusedAndEmptyTensorsQueueNothing) {
  DeviceTensor x = shapeOnly(DType::F64, {2, 3}), y = x;
  EXPECT_EQ(errorText(runShapesOnly("Softmax", false, attrs({}), 17, {&x},
                                    {&y})),
            "unsupported: Softmax of f64 on the cuda backend (f32, f16, bf16)");
  // Nothing to compute: success without touching the (absent) device.
  DeviceTensor e = shapeOnly(DType::F32, {0, 5}), ey = e;
  EXPECT_EQ(errorText(runShapesOnly("LogSoftmax", false, attrs({}), 17, {&e},
                                    {&ey})),
            "");
  DeviceTensor ge = shapeOnly(DType::F32, {3, 0}), gdy = ge, gdx = ge;
  EXPECT_EQ(errorText(runShapesOnly("SoftmaxGrad", true, attrs({}), 17,
                                    {&ge, &gdy}, {&gdx})),
            "");
  DeviceTensor sx = shapeOnly(DType::F32, {0, 5}),
               st = shapeOnly(DType::I64, {0}),
               sl = shapeOnly(DType::F32, {0});
  EXPECT_EQ(errorText(runShapesOnly(
                "SoftmaxCrossEntropyLoss", false,
                attrs({stringAttr("reduction", "none")}), 17, {&sx, &st},
                {&sl})),
            "");
}

//===----------------------------------------------------------------------===//
// With a device
//===----------------------------------------------------------------------===//

TEST_F(CudaSoftmax, SoftmaxAndLogSoftmaxMatchCpu) {
  struct Case {
    std::vector<int64_t> shape;
    int64_t axis, opset;
  };
  for (int64_t d : kLengths) {
    const Case cases[] = {
        {{5, d}, -1, 17},    // contiguous rows
        {{2, d, 3}, 1, 13},  // strided rows, one tile
        {{2, 3, d}, 1, 11},  // flattened to [2, 3 * d]
        {{d, 37}, 0, 13},    // strided rows, two tiles, a ragged one
    };
    for (DType dtype : kFloatTypes)
      for (const char *op : {"Softmax", "LogSoftmax"})
        for (const Case &c : cases) {
          SCOPED_TRACE(std::string(op) + " " + dtypeName(dtype).str() + " " +
                       formatShape(c.shape) + " axis " +
                       std::to_string(c.axis) + " opset " +
                       std::to_string(c.opset));
          OwnedTensor x = randomTensor(dtype, c.shape, rng, -8, 8);
          OwnedTensor want(dtype, c.shape);
          expectMatchesCpu(op, false, attrs({intAttr("axis", c.axis)}), {&x},
                           {&want}, softmaxTolerance(dtype), c.opset);
        }
  }
}

TEST_F(CudaSoftmax, SoftmaxOfInfinitiesAndLargeValues) {
  // Row 0 partly -inf, row 1 all -inf (NaN, as on the cpu), row 2 large.
  const int64_t d = 100;
  std::vector<double> v(3 * d);
  std::uniform_real_distribution<double> dist(-3e4, 3e4);
  for (int64_t j = 0; j < d; ++j) {
    v[j] = j % 4 == 0 ? -kInf : dist(rng) / 1e4;
    v[d + j] = -kInf;
    v[2 * d + j] = dist(rng);
  }
  for (DType dtype : kFloatTypes)
    for (const char *op : {"Softmax", "LogSoftmax"}) {
      SCOPED_TRACE(std::string(op) + " " + dtypeName(dtype).str());
      OwnedTensor x = tensorOf(dtype, {3, d}, v);
      OwnedTensor want(dtype, {3, d});
      expectMatchesCpu(op, false, attrs({}), {&x}, {&want},
                       softmaxTolerance(dtype));
    }
}

TEST_F(CudaSoftmax, MaskedSoftmaxMatchesCpu) {
  for (int64_t d : kLengths)
    for (DType dtype : kFloatTypes)
      for (bool fullMask : {false, true}) {
        SCOPED_TRACE(dtypeName(dtype).str() + " d " + std::to_string(d) +
                     (fullMask ? " mask per row" : " mask broadcast"));
        std::vector<int64_t> shape = {2, 3, d};
        OwnedTensor x = randomTensor(dtype, shape, rng, -6, 6);
        OwnedTensor mask = fullMask ? randomMask(shape, rng, 0.3)
                                    : randomMask({3, d}, rng, 0.3);
        // One row wholly masked: NaN in f32, zeros in 16-bit floats.
        for (int64_t j = 0; j < d; ++j)
          mask.ref.as<bool>()[d + j] = true;
        OwnedTensor want(dtype, shape);
        expectMatchesCpu("MaskedSoftmax", true, attrs({}), {&x, &mask},
                         {&want}, softmaxTolerance(dtype));
      }
}

TEST_F(CudaSoftmax, SoftmaxGradsMatchCpu) {
  struct Case {
    std::vector<int64_t> shape;
    int64_t axis;
    bool flatten;
  };
  for (int64_t d : kLengths) {
    const Case cases[] = {
        {{5, d}, -1, false},
        {{2, d, 3}, 1, false},
        {{2, 3, d}, 1, true},
        {{d, 37}, 0, false},
    };
    for (DType dtype : kFloatTypes)
      for (bool isLog : {false, true})
        for (const Case &c : cases) {
          const char *op = isLog ? "LogSoftmaxGrad" : "SoftmaxGrad";
          SCOPED_TRACE(std::string(op) + " " + dtypeName(dtype).str() + " " +
                       formatShape(c.shape) + " axis " +
                       std::to_string(c.axis) +
                       (c.flatten ? " flattened" : ""));
          OwnedTensor y =
              forwardOutput(dtype, c.shape, c.axis, c.flatten, isLog, rng);
          OwnedTensor dy = randomTensor(dtype, c.shape, rng, -1, 1);
          OwnedTensor want(dtype, c.shape);
          expectMatchesCpu(op, true,
                           attrs({intAttr("axis", c.axis),
                                  intAttr("flatten", c.flatten)}),
                           {&y, &dy}, {&want}, softmaxTolerance(dtype));
        }
  }
}

/// Targets in [0, classes), every third one `ignore` when given.
OwnedTensor lossTargets(DType dtype, llvm::ArrayRef<int64_t> shape,
                        int64_t classes, std::mt19937 &rng, bool ignore,
                        int64_t ignoreIndex) {
  OwnedTensor t = randomTargets(DType::I64, shape, classes, rng);
  std::vector<double> v = t.i64s();
  if (ignore)
    for (size_t i = 0; i < v.size(); i += 3)
      v[i] = static_cast<double>(ignoreIndex);
  return dtype == DType::I32 ? OwnedTensor::of<int32_t>(DType::I32, shape, v)
                             : OwnedTensor::of<int64_t>(DType::I64, shape, v);
}

/// The target's shape: the input's without the class dimension.
std::vector<int64_t> targetShape(llvm::ArrayRef<int64_t> input) {
  std::vector<int64_t> s(input.begin(), input.end());
  s.erase(s.begin() + 1);
  return s;
}

TEST_F(CudaSoftmax, CrossEntropyLossMatchesCpu) {
  int counter = 0;
  for (int64_t c : kLengths) {
    const std::vector<int64_t> shapes[] = {{6, c}, {3, c, 5}, {2, c, 37}};
    for (const auto &shape : shapes)
      for (DType dtype : kFloatTypes)
        for (const char *red : {"none", "sum", "mean"})
          for (int variant = 0; variant < 4; ++variant, ++counter) {
            bool weighted = variant & 1, ignore = variant & 2;
            bool logProb = counter % 2, i32 = counter % 3 == 0;
            bool withScratch = counter % 5 != 0;
            // ignore_index inside the class range, or PyTorch's -100.
            int64_t ignoreIndex = counter % 4 < 2 ? std::min<int64_t>(1, c - 1)
                                                  : -100;
            SCOPED_TRACE(dtypeName(dtype).str() + " " + formatShape(shape) +
                         " " + red + (weighted ? " weighted" : "") +
                         (ignore ? " ignore " + std::to_string(ignoreIndex)
                                 : "") +
                         (logProb ? " log_prob" : "") + (i32 ? " i32" : "") +
                         (withScratch ? "" : " no scratch"));
            std::vector<int64_t> tshape = targetShape(shape);
            OwnedTensor x = randomTensor(dtype, shape, rng, -6, 6);
            OwnedTensor t =
                lossTargets(i32 ? DType::I32 : DType::I64, tshape, c, rng,
                            ignore, ignoreIndex);
            OwnedTensor w = randomTensor(dtype, {c}, rng, 0.25, 2);
            AttributeList a = attrs({stringAttr("reduction", red)});
            if (ignore)
              a.set(intAttr("ignore_index", ignoreIndex));
            bool none = std::string(red) == "none";
            OwnedTensor loss(dtype, none ? llvm::ArrayRef<int64_t>(tshape)
                                         : llvm::ArrayRef<int64_t>{});
            OwnedTensor lp(dtype, shape);
            expectMatchesCpu("SoftmaxCrossEntropyLoss", false, a,
                             {&x, &t, weighted ? &w : nullptr},
                             {&loss, logProb ? &lp : nullptr},
                             softmaxTolerance(dtype), 17, withScratch);
          }
  }
}

TEST_F(CudaSoftmax, CrossEntropyOverManyBlocksIsDeterministic) {
  // Enough positions for several hundred partial sums, in both layouts.
  const std::vector<int64_t> shapes[] = {{4096, 7}, {8, 3, 3000}};
  for (const auto &shape : shapes)
    for (const char *red : {"sum", "mean"}) {
      SCOPED_TRACE(formatShape(shape) + " " + red);
      OwnedTensor x = randomTensor(DType::F32, shape, rng, -6, 6);
      OwnedTensor t =
          lossTargets(DType::I64, targetShape(shape), shape[1], rng, true, 0);
      AttributeList a = attrs(
          {stringAttr("reduction", red), intAttr("ignore_index", 0)});
      OwnedTensor want(DType::F32, {});
      expectMatchesCpu("SoftmaxCrossEntropyLoss", false, a, {&x, &t},
                       {&want}, {1e-6, 2e-5});
      ASSIGN_OR_FAIL(first, runOnDevice("SoftmaxCrossEntropyLoss", false, a,
                                        17, {&x, &t}, {&want}));
      ASSIGN_OR_FAIL(second, runOnDevice("SoftmaxCrossEntropyLoss", false, a,
                                         17, {&x, &t}, {&want}));
      EXPECT_EQ(std::memcmp(first[0].ref.data, second[0].ref.data, 4), 0);
    }
}

TEST_F(CudaSoftmax, OutOfRangeTargetsGiveNaNWhereTheCpuRefuses) {
  OwnedTensor x = randomTensor(DType::F32, {3, 5}, rng, -2, 2);
  OwnedTensor t = OwnedTensor::i64({3}, {1, 7, 2});
  OwnedTensor loss(DType::F32, {3});
  AttributeList none = attrs({stringAttr("reduction", "none")});
  EXPECT_NE(errorText(runOnCpu("SoftmaxCrossEntropyLoss", false, none, 17,
                               {&x, &t}, {&loss})),
            "");
  ASSIGN_OR_FAIL(got, runOnDevice("SoftmaxCrossEntropyLoss", false, none, 17,
                                  {&x, &t}, {&loss}));
  std::vector<double> l = valuesOf(got[0]);
  EXPECT_FALSE(std::isnan(l[0]));
  EXPECT_TRUE(std::isnan(l[1]));
  EXPECT_FALSE(std::isnan(l[2]));
  OwnedTensor dloss = OwnedTensor::f32({}, {1});
  OwnedTensor dx(DType::F32, {3, 5});
  ASSIGN_OR_FAIL(grad, runOnDevice("SoftmaxCrossEntropyLossGrad", true,
                                   attrs({}), 17, {&dloss, &x, &t}, {&dx}));
  for (double v : valuesOf(grad[0]))
    EXPECT_TRUE(std::isnan(v)); // the mean's denominator is NaN
}

TEST_F(CudaSoftmax, CrossEntropyGradMatchesCpu) {
  int counter = 0;
  for (int64_t c : kLengths) {
    const std::vector<int64_t> shapes[] = {{6, c}, {3, c, 5}};
    for (const auto &shape : shapes)
      for (DType dtype : kFloatTypes)
        for (const char *red : {"none", "sum", "mean"})
          for (int variant = 0; variant < 8; ++variant, ++counter) {
            bool weighted = variant & 1, ignore = variant & 2;
            bool isLogProb = variant & 4;
            bool withG = counter % 2, i32 = counter % 3 == 0;
            int64_t ignoreIndex = counter % 4 < 2 ? std::min<int64_t>(1, c - 1)
                                                  : -100;
            SCOPED_TRACE(dtypeName(dtype).str() + " " + formatShape(shape) +
                         " " + red + (weighted ? " weighted" : "") +
                         (ignore ? " ignore " + std::to_string(ignoreIndex)
                                 : "") +
                         (isLogProb ? " from log_prob" : " from scores") +
                         (withG ? " dlog_prob" : "") + (i32 ? " i32" : ""));
            std::vector<int64_t> tshape = targetShape(shape);
            bool none = std::string(red) == "none";
            OwnedTensor dloss = randomTensor(
                dtype,
                none ? llvm::ArrayRef<int64_t>(tshape)
                     : llvm::ArrayRef<int64_t>{},
                rng, -2, 2);
            OwnedTensor x = randomTensor(dtype, shape, rng,
                                         isLogProb ? -9 : -6,
                                         isLogProb ? 0 : 6);
            OwnedTensor t =
                lossTargets(i32 ? DType::I32 : DType::I64, tshape, c, rng,
                            ignore, ignoreIndex);
            OwnedTensor w = randomTensor(dtype, {c}, rng, 0.25, 2);
            OwnedTensor g = randomTensor(dtype, shape, rng, -1, 1);
            AttributeList a = attrs({stringAttr("reduction", red),
                                     intAttr("log_prob", isLogProb)});
            if (ignore)
              a.set(intAttr("ignore_index", ignoreIndex));
            OwnedTensor want(dtype, shape);
            expectMatchesCpu("SoftmaxCrossEntropyLossGrad", true, a,
                             {&dloss, &x, &t, weighted ? &w : nullptr,
                              withG ? &g : nullptr},
                             {&want}, softmaxTolerance(dtype));
          }
  }
}

} // namespace
