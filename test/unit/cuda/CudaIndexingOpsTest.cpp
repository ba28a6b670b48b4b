//===- CudaIndexingOpsTest.cpp - CumSum, ArgMax/Min, Tile, GatherElements, -===//
//                              Pad, scatters, HardSigmoid, Mod: cuda vs cpu
//
// On the host: IndexingMath.h's per-line and per-element functions, walked
// over whole tensors as the kernels walk them, against the cpu kernels
// (floats and integers, exclusive and reverse scans, NaN and ties, negative
// indices). With a device: each kernel of IndexingOps.cu against its cpu
// kernel; without one those skip.
//
//===----------------------------------------------------------------------===//
#include "test/unit/cuda/TrainingTestHelpers.h"
#include "runtime/cuda/kernels/IndexingMath.h"
#include <cmath>
#include <limits>
#include <random>

using namespace zinc;
using namespace zinc::cuda;
using namespace zinc::cuda::test;
using zinc::cpu::test::attrs;
using zinc::cpu::test::floatAttr;
using zinc::cpu::test::intAttr;

namespace {

/// Runs the cpu kernel of ONNX op `op` on `ins` into `outs`.
void runCpuKernel(llvm::StringRef op, const AttributeList &a,
                  std::vector<const OwnedTensor *> ins, std::vector<OwnedTensor *> outs) {
  std::vector<const cpu::TensorRef *> inRefs;
  for (const OwnedTensor *t : ins)
    inRefs.push_back(t ? &t->ref : nullptr);
  std::vector<cpu::TensorRef *> outRefs;
  for (OwnedTensor *t : outs)
    outRefs.push_back(&t->ref);
  cpu::KernelFn fn = cpu::lookupKernel(op);
  if (!fn)
    fn = cpu::lookupZincKernel(op);
  ASSERT_NE(fn, nullptr) << op.str();
  cpu::KernelCall call{op, "test", 17, a, inRefs, outRefs};
  ASSERT_NO_ERROR(cpu::test::runWithWorkspace(fn, call));
}

TEST(CudaIndexingMath, CumSumLinesMatchTheCpu) {
  std::mt19937 rng(3);
  const std::vector<int64_t> shape = {3, 5, 4};
  for (DType dtype : {DType::F32, DType::I64})
    for (int axis : {0, 1, 2})
      for (bool exclusive : {false, true})
        for (bool reverse : {false, true}) {
          SCOPED_TRACE(dtypeName(dtype).str() + " axis " + std::to_string(axis) +
                       (exclusive ? " exclusive" : "") + (reverse ? " reverse" : ""));
          OwnedTensor x = randomTensor(dtype, shape, rng, -9, 9, DrawKind::FlooredForIntegers);
          OwnedTensor axisT = OwnedTensor::ints({}, {axis});
          OwnedTensor want(dtype, shape);
          runCpuKernel("CumSum",
                       attrs({intAttr("exclusive", exclusive), intAttr("reverse", reverse)}),
                       {&x, &axisT}, {&want});
          std::vector<double> xs = valuesOf(x), ys(xs.size());
          LineView v = lineView(shape.data(), 3, axis);
          for (int64_t c = 0; c < v.lines(); ++c)
            cumSumLine<double>(
                xs.data() + v.start(c), ys.data() + v.start(c), v.n, v.inner, exclusive,
                reverse, [](double e) { return e; },
                [&](double a) { return dtype == DType::F32 ? double(float(a)) : a; });
          std::vector<double> w = valuesOf(want);
          for (size_t i = 0; i < w.size(); ++i)
            EXPECT_EQ(ys[i], w[i]) << i;
        }
}

TEST(CudaIndexingMath, ArgExtremaMatchTheCpuWithNanAndTies) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<int64_t> shape = {2, 6};
  OwnedTensor x = tensorOf(DType::F32, shape, {1, 3, 3, -2, 0, 3, 4, nan, -1, nan, 4, -5});
  for (int axis : {0, 1})
    for (bool last : {false, true}) {
      for (bool isMax : {true, false}) {
        SCOPED_TRACE(std::string(isMax ? "ArgMax" : "ArgMin") + " axis " +
                     std::to_string(axis) + (last ? " last" : ""));
        std::vector<int64_t> outShape = shape;
        outShape[axis] = 1;
        OwnedTensor want(DType::I64, outShape);
        runCpuKernel(isMax ? "ArgMax" : "ArgMin",
                     attrs({intAttr("axis", axis), intAttr("select_last_index", last)}), {&x},
                     {&want});
        std::vector<double> xs = valuesOf(x);
        LineView v = lineView(shape.data(), 2, axis);
        for (int64_t c = 0; c < v.lines(); ++c) {
          auto value = [&](int64_t k) { return float(xs[v.start(c) + k * v.inner]); };
          int64_t got = isMax ? argExtremum<true, float>(v.n, last, value)
                              : argExtremum<false, float>(v.n, last, value);
          EXPECT_EQ(got, want.ref.as<int64_t>()[c]) << c;
        }
      }
    }
}

TEST(CudaIndexingMath, TileAndGatherElementsSourcesMatchTheCpu) {
  std::mt19937 rng(4);
  OwnedTensor x = randomTensor(DType::F32, {2, 3, 4}, rng);
  std::vector<double> xs = valuesOf(x);
  {
    OwnedTensor reps = OwnedTensor::ints({3}, {2, 1, 3});
    OwnedTensor want(DType::F32, {4, 3, 12});
    runCpuKernel("Tile", {}, {&x, &reps}, {&want});
    const int64_t out[] = {4, 3, 12}, in[] = {2, 3, 4};
    std::vector<double> w = valuesOf(want);
    for (int64_t e = 0; e < int64_t(w.size()); ++e)
      EXPECT_EQ(xs[tileSource(e, 3, out, in)], w[e]) << e;
  }
  for (int axis : {0, 1, 2}) {
    SCOPED_TRACE("GatherElements axis " + std::to_string(axis));
    const int64_t data[] = {2, 3, 4};
    int64_t out[] = {2, 3, 4};
    out[axis] = 5;
    std::vector<int64_t> idx(2 * 3 * 4 / data[axis] * 5);
    std::uniform_int_distribution<int64_t> pick(-data[axis], data[axis] - 1);
    for (int64_t &i : idx)
      i = pick(rng);
    OwnedTensor indices = OwnedTensor::ints({out[0], out[1], out[2]}, idx);
    OwnedTensor want(DType::F32, {out[0], out[1], out[2]});
    runCpuKernel("GatherElements", attrs({intAttr("axis", axis)}), {&x, &indices}, {&want});
    std::vector<double> w = valuesOf(want);
    for (int64_t e = 0; e < int64_t(w.size()); ++e) {
      int64_t wrapped = wrapIndex(idx[e], data[axis]);
      ASSERT_GE(wrapped, 0);
      EXPECT_EQ(xs[gatherElementsSource(e, 3, out, data, axis, wrapped)], w[e]) << e;
    }
  }
}

TEST(CudaIndexingMath, PadSourcesAndConstantPadGradientMatchTheCpu) {
  std::mt19937 rng(6);
  const std::vector<int64_t> shape = {2, 3, 5};
  OwnedTensor x = randomTensor(DType::F32, shape, rng);
  std::vector<double> xs = valuesOf(x);
  // pads: begins then ends; a negative one crops.
  const std::vector<int64_t> pads = {0, 2, 3, 1, -1, 4};
  for (auto [name, mode] : {std::pair{"constant", PadMode::Constant},
                            std::pair{"reflect", PadMode::Reflect},
                            std::pair{"edge", PadMode::Edge}, std::pair{"wrap", PadMode::Wrap}}) {
    SCOPED_TRACE(name);
    PadView v;
    v.rank = 3;
    v.mode = mode;
    for (int d = 0; d < 3; ++d) {
      v.in[d] = shape[d];
      v.before[d] = pads[d];
      v.out[d] = shape[d] + pads[d] + pads[d + 3];
    }
    std::vector<int64_t> outShape = {v.out[0], v.out[1], v.out[2]};
    OwnedTensor padsT = OwnedTensor::ints({6}, pads);
    OwnedTensor value = tensorOf(DType::F32, {}, {7.5});
    OwnedTensor want(DType::F32, outShape);
    runCpuKernel("Pad", attrs({zinc::cpu::test::stringAttr("mode", name)}), {&x, &padsT, &value},
                 {&want});
    std::vector<double> w = valuesOf(want);
    for (int64_t e = 0; e < int64_t(w.size()); ++e) {
      int64_t src = padSourceElement(v, e);
      EXPECT_EQ(src < 0 ? 7.5 : xs[src], w[e]) << e;
    }
    if (mode != PadMode::Constant)
      continue;
    OwnedTensor dy = randomTensor(DType::F32, outShape, rng);
    std::vector<double> dys = valuesOf(dy);
    OwnedTensor wantDx(DType::F32, shape);
    runCpuKernel("PadGrad",
                 attrs({zinc::cpu::test::stringAttr("mode", name),
                        zinc::cpu::test::intsAttr("shape", shape)}),
                 {&dy, &padsT}, {&wantDx});
    std::vector<double> wdx = valuesOf(wantDx);
    for (int64_t e = 0; e < int64_t(wdx.size()); ++e) {
      int64_t dst = padTargetElement(v, e);
      EXPECT_EQ(dst < 0 ? 0.0 : dys[dst], wdx[e]) << e;
    }
  }
}

TEST(CudaIndexingMath, ScatterTargetsMatchTheCpu) {
  // Each update is a distinct value placed by the kernel's target math;
  // the cpu's output must hold it there (indices unique, negatives wrap).
  std::mt19937 rng(8);
  OwnedTensor data = randomTensor(DType::F32, {4, 3, 2}, rng);
  {
    std::vector<int64_t> idx = {1, -1, 3, 0, 0, 2};
    OwnedTensor indices = OwnedTensor::ints({3, 2}, idx);
    OwnedTensor updates = randomTensor(DType::F32, {3, 2}, rng);
    OwnedTensor want(DType::F32, {4, 3, 2});
    runCpuKernel("ScatterND", {}, {&data, &indices, &updates}, {&want});
    std::vector<double> w = valuesOf(want), u = valuesOf(updates);
    const int64_t dims[] = {4, 3, 2};
    for (int64_t t = 0; t < 3; ++t) {
      int64_t target = scatterNdTarget(idx.data(), t, 2, dims, 3);
      ASSERT_GE(target, 0);
      for (int64_t e = 0; e < 2; ++e)
        EXPECT_EQ(w[target + e], u[t * 2 + e]) << t;
    }
  }
  {
    std::vector<int64_t> idx = {2, 0, -1, 1, 3, 0};
    OwnedTensor indices = OwnedTensor::ints({1, 3, 2}, idx);
    OwnedTensor updates = randomTensor(DType::F32, {1, 3, 2}, rng);
    OwnedTensor want(DType::F32, {4, 3, 2});
    runCpuKernel("ScatterElements", attrs({intAttr("axis", 0)}), {&data, &indices, &updates},
                 {&want});
    std::vector<double> w = valuesOf(want), u = valuesOf(updates);
    const int64_t upd[] = {1, 3, 2}, dims[] = {4, 3, 2};
    for (int64_t p = 0; p < 6; ++p)
      EXPECT_EQ(w[gatherElementsSource(p, 3, upd, dims, 0, wrapIndex(idx[p], 4))], u[p]) << p;
  }
}

TEST(CudaIndexingMath, HardSigmoidMatchesTheCpu) {
  std::vector<double> values;
  for (int i = -40; i <= 40; ++i)
    values.push_back(i * 0.125);
  OwnedTensor x = tensorOf(DType::F32, {int64_t(values.size())}, values);
  OwnedTensor dy = tensorOf(DType::F32, {int64_t(values.size())}, values);
  AttributeList a = attrs({floatAttr("alpha", 1.0 / 6), floatAttr("beta", 0.5)});
  OwnedTensor y(DType::F32, x.ref.shape), dx(DType::F32, x.ref.shape);
  runCpuKernel("HardSigmoid", a, {&x}, {&y});
  runCpuKernel("HardSigmoidGrad", a, {&x, &dy}, {&dx});
  std::vector<double> ys = valuesOf(y), dxs = valuesOf(dx);
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_FLOAT_EQ(hardSigmoid(float(values[i]), 1.0f / 6, 0.5f), float(ys[i])) << values[i];
    EXPECT_FLOAT_EQ(hardSigmoidGrad(float(values[i]), float(values[i]), 1.0f / 6, 0.5f),
                    float(dxs[i]))
        << values[i];
  }
}

class CudaIndexingDevice : public CudaTrainingDevice {};

TEST_F(CudaIndexingDevice, EachKernelMatchesCpu) {
  std::mt19937 rng(9);
  std::vector<OpRun> runs;
  for (DType dtype : {DType::F32, DType::BF16, DType::I64, DType::I32}) {
    OpRun cumsum;
    cumsum.op = "CumSum";
    cumsum.attrs = attrs({intAttr("exclusive", 1), intAttr("reverse", 1)});
    cumsum.inputs = {randomTensor(dtype, {4, 33, 3}, rng, -9, 9, DrawKind::FlooredForIntegers),
                     OwnedTensor::ints({}, {1})};
    cumsum.hostInputs = {1};
    cumsum.outputs = {OwnedTensor(dtype, {4, 33, 3})};
    runs.push_back(cumsum);
    for (const char *op : {"ArgMax", "ArgMin"}) {
      OpRun arg;
      arg.op = op;
      arg.attrs = attrs({intAttr("axis", -1), intAttr("keepdims", 0)});
      arg.inputs = {randomTensor(dtype, {5, 77}, rng, -3, 3, DrawKind::FlooredForIntegers)};
      arg.outputs = {OwnedTensor(DType::I64, {5})};
      runs.push_back(arg);
    }
  }
  OpRun tile;
  tile.op = "Tile";
  tile.inputs = {randomTensor(DType::F16, {3, 1, 5}, rng), OwnedTensor::ints({3}, {2, 4, 3})};
  tile.hostInputs = {1};
  tile.outputs = {OwnedTensor(DType::F16, {6, 4, 15})};
  runs.push_back(tile);
  OpRun gather;
  gather.op = "GatherElements";
  gather.attrs = attrs({intAttr("axis", 1)});
  gather.inputs = {randomTensor(DType::F32, {3, 7}, rng),
                   OwnedTensor::ints({3, 4}, {0, -1, 6, 2, 1, 1, 0, -7, 3, 5, 4, 2})};
  gather.outputs = {OwnedTensor(DType::F32, {3, 4})};
  runs.push_back(gather);
  OpRun pad;
  pad.op = "Pad";
  pad.attrs = attrs({zinc::cpu::test::stringAttr("mode", "reflect")});
  pad.inputs = {randomTensor(DType::BF16, {2, 3, 9}, rng), OwnedTensor::ints({6}, {0, 1, 2, 0, 2, 3})};
  pad.hostInputs = {1};
  pad.outputs = {OwnedTensor(DType::BF16, {2, 6, 14})};
  runs.push_back(pad);
  OpRun padGrad;
  padGrad.op = "PadGrad";
  padGrad.domain = "zinc";
  padGrad.attrs = attrs({zinc::cpu::test::stringAttr("mode", "constant"),
                         zinc::cpu::test::intsAttr("shape", {2, 3, 9})});
  padGrad.inputs = {randomTensor(DType::F32, {2, 6, 10}, rng),
                    OwnedTensor::ints({6}, {0, 1, 2, 0, 2, -1})};
  padGrad.hostInputs = {1};
  padGrad.outputs = {OwnedTensor(DType::F32, {2, 3, 9})};
  runs.push_back(padGrad);
  OpRun scatterNd;
  scatterNd.op = "ScatterND";
  scatterNd.attrs = attrs({zinc::cpu::test::stringAttr("reduction", "add")});
  scatterNd.inputs = {randomTensor(DType::F32, {5, 40}, rng),
                      OwnedTensor::ints({4, 1}, {1, -1, 1, 3}),
                      randomTensor(DType::F32, {4, 40}, rng)};
  scatterNd.outputs = {OwnedTensor(DType::F32, {5, 40})};
  runs.push_back(scatterNd);
  OpRun scatterElements;
  scatterElements.op = "ScatterElements";
  scatterElements.attrs = attrs({intAttr("axis", 1)});
  scatterElements.inputs = {OwnedTensor::ints({2, 5}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}),
                            OwnedTensor::ints({2, 2}, {4, 0, -2, 4}),
                            OwnedTensor::ints({2, 2}, {-1, -2, -3, -4})};
  scatterElements.outputs = {OwnedTensor(DType::I64, {2, 5})};
  runs.push_back(scatterElements);
  for (int fmod : {0, 1}) {
    OpRun mod;
    mod.op = "Mod";
    mod.attrs = attrs({intAttr("fmod", fmod)});
    mod.inputs = {OwnedTensor::ints({2, 4}, {7, -7, 7, -7, 0, 9, -9, 5}),
                  OwnedTensor::ints({4}, {3, -3, 2, -5})};
    mod.outputs = {OwnedTensor(DType::I64, {2, 4})};
    runs.push_back(mod);
  }
  for (const char *op : {"HardSigmoid", "HardSigmoidGrad"}) {
    OpRun hs;
    hs.op = op;
    hs.domain = std::string(op) == "HardSigmoid" ? "" : "zinc";
    hs.attrs = attrs({floatAttr("alpha", 1.0 / 6), floatAttr("beta", 0.5)});
    hs.inputs = {randomTensor(DType::BF16, {1000}, rng, -5, 5)};
    if (hs.domain == "zinc")
      hs.inputs.push_back(randomTensor(DType::BF16, {1000}, rng));
    hs.outputs = {OwnedTensor(DType::BF16, {1000})};
    runs.push_back(hs);
  }
  for (const OpRun &run : runs) {
    SCOPED_TRACE(run.op);
    ASSIGN_OR_FAIL(want, runCpu(run));
    ASSIGN_OR_FAIL(got, runCuda(run));
    // Floats sum in double on both; bf16 rounds once at the store.
    for (size_t i = 0; i < want.outputs.size(); ++i)
      expectValuesClose(*got.outputs[i], *want.outputs[i], {1e-6, 1e-6});
  }
}

} // namespace
