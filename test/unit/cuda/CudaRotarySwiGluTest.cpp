//===- CudaRotarySwiGluTest.cpp - Rotary.cu's kernels vs the cpu ----------===//
//
// On every machine: RotaryMath.h's indexing and math, run on the host over
// every element, against the cpu kernels in double (tables broadcast three
// ways), and the kernels' refusals, which come before any launch. With a
// device: zinc.Rotary, zinc.RotaryGrad, zinc.SwiGlu and zinc.SwiGluGrad
// against the cpu kernels in f32, f16 and bf16.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/kernels/RotaryMath.h"
#include "test/unit/cuda/ElementwiseTestHelpers.h"

using namespace zinc;
using namespace zinc::cuda;
using namespace zinc::cuda::ewtest;
using cpu::test::attrs;

namespace {

using Shape = std::vector<int64_t>;

const std::vector<std::pair<Shape, Shape>> kTableCases = {
    {{2, 3, 4, 8}, {1, 1, 4, 8}}, // Llama's [1, 1, T, D]
    {{2, 3, 4, 8}, {2, 1, 4, 8}},
    {{3, 4}, {3, 1}}, // broadcast along the last axis
    {{5, 6}, {}}};

OwnedTensor cpuRun(llvm::StringRef op, std::vector<const OwnedTensor *> ins,
                   const Shape &shape) {
  OwnedTensor out(ins[0]->ref.dtype, shape);
  std::vector<const cpu::TensorRef *> refs;
  for (const OwnedTensor *t : ins)
    refs.push_back(&t->ref);
  std::vector<cpu::TensorRef *> outs{&out.ref};
  AttributeList none = attrs({});
  cpu::KernelCall call{op, "test", 17, none, refs, outs};
  EXPECT_EQ(
      errorText(cpu::test::runWithWorkspace(cpu::lookupZincKernel(op), call)),
      "");
  return out;
}

} // namespace

TEST(RotaryMath, MatchesCpuInDouble) {
  std::mt19937 rng(7);
  for (auto &[xs, ts] : kTableCases) {
    OwnedTensor x = randomTensor(DType::F64, xs, rng, -2, 2),
                c = randomTensor(DType::F64, ts, rng),
                s = randomTensor(DType::F64, ts, rng);
    rotary::Geometry g;
    ASSERT_TRUE(rotary::makeGeometry(xs.data(), int(xs.size()), ts.data(),
                                     int(ts.size()), g));
    std::vector<double> xv = valuesOf(x), cv = valuesOf(c), sv = valuesOf(s);
    for (bool backward : {false, true}) {
      std::vector<double> want = valuesOf(
          cpuRun(backward ? "RotaryGrad" : "Rotary", {&x, &c, &s}, xs));
      for (size_t e = 0; e < want.size(); ++e) {
        int64_t row = int64_t(e) / g.d, col = int64_t(e) % g.d;
        int64_t other = rotary::partner(col, g.d);
        bool first = col < g.d / 2;
        double v = xv[e], p = xv[row * g.d + other];
        double cc = cv[rotary::tableOffset(g, row, col)];
        double got =
            backward
                ? rotary::backward(
                      v, p, cc, sv[rotary::tableOffset(g, row, other)], first)
                : rotary::forward(v, p, cc,
                                  sv[rotary::tableOffset(g, row, col)], first);
        ASSERT_EQ(got, want[e]) << (backward ? "RotaryGrad" : "Rotary")
                                << " of " << formatShape(xs) << " at " << e;
      }
    }
  }
}

TEST(RotaryMath, GeometryRefusesWhatDoesNotBroadcast) {
  rotary::Geometry g;
  Shape x = {2, 4}, odd = {2, 5}, wide = {3, 4}, ok = {4};
  EXPECT_FALSE(rotary::makeGeometry(odd.data(), 2, ok.data(), 0, g));
  EXPECT_FALSE(rotary::makeGeometry(x.data(), 2, wide.data(), 2, g));
  EXPECT_TRUE(rotary::makeGeometry(x.data(), 2, ok.data(), 1, g));
  EXPECT_EQ(g.step, 1);
  EXPECT_EQ(g.strides[0], 0);
}

TEST(CudaRotarySwiGluNoDevice, RefusalsBeforeAnyLaunch) {
  auto t = shapeOnly;
  auto run = [](llvm::StringRef op, std::vector<DeviceTensor> ins,
                std::vector<DeviceTensor> outs) {
    std::vector<const DeviceTensor *> in;
    for (const DeviceTensor &d : ins)
      in.push_back(&d);
    std::vector<DeviceTensor *> out;
    for (DeviceTensor &d : outs)
      out.push_back(&d);
    CudaKernelFn fn = lookupCudaKernel("zinc", op);
    if (!fn)
      return "no cuda kernel for " + op.str();
    return errorText(fn(makeCall(op, attrs({}), in, out, nullptr)));
  };
  EXPECT_EQ(
      run("Rotary",
          {t(DType::F32, {2, 4}), t(DType::F32, {3, 4}), t(DType::F32, {3, 4})},
          {t(DType::F32, {2, 4})}),
      "Rotary: tables of shape [3,4] do not fit [2,4] (broadcast to it, "
      "even last axis, rank <= 8)");
  EXPECT_EQ(run("RotaryGrad",
                {t(DType::F32, {2, 4}), t(DType::F32, {4}), t(DType::F16, {4})},
                {t(DType::F32, {2, 4})}),
            "RotaryGrad: cos and sin differ from each other or from input 0 in "
            "type or shape");
  EXPECT_EQ(
      run("SwiGlu", {t(DType::F32, {2, 4}), t(DType::F32, {4})},
          {t(DType::F32, {2, 4})}),
      "SwiGlu: input 1 is missing or differs from input 0 in type or shape");
  EXPECT_EQ(
      run("SwiGluGrad",
          {t(DType::F64, {4}), t(DType::F64, {4}), t(DType::F64, {4})},
          {t(DType::F64, {4}), t(DType::F64, {4})}),
      "unsupported: SwiGluGrad of f64 on the cuda backend (f32, f16, bf16)");
}

class CudaRotarySwiGlu : public ElementwiseDevice {};

TEST_F(CudaRotarySwiGlu, MatchCpu) {
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    Tolerance tol = t == DType::F32 ? Tolerance{1e-6, 1e-6}
                                    : Tolerance{1e-3, 2 * halfUlp(t)};
    for (auto &[xs, ts] : kTableCases) {
      OwnedTensor x = randomTensor(t, xs, rng, -2, 2),
                  c = randomTensor(t, ts, rng), s = randomTensor(t, ts, rng);
      compareWithCpu("Rotary", true, attrs({}), {&x, &c, &s}, t, xs, tol);
      compareWithCpu("RotaryGrad", true, attrs({}), {&x, &c, &s}, t, xs, tol);
    }
    Shape shape = {1000, 3};
    OwnedTensor g = randomTensor(t, shape, rng, -8, 8),
                u = randomTensor(t, shape, rng);
    compareWithCpu("SwiGlu", true, attrs({}), {&g, &u}, t, shape, tol);
  }
}

TEST_F(CudaRotarySwiGlu, SwiGluGradMatchesCpu) {
  Shape shape = {1000, 3};
  OwnedTensor g = randomTensor(DType::F32, shape, rng, -8, 8),
              u = randomTensor(DType::F32, shape, rng),
              dy = randomTensor(DType::F32, shape, rng);
  OwnedTensor wantG(DType::F32, shape), wantU(DType::F32, shape);
  {
    std::vector<const cpu::TensorRef *> refs{&g.ref, &u.ref, &dy.ref};
    std::vector<cpu::TensorRef *> outs{&wantG.ref, &wantU.ref};
    AttributeList none = attrs({});
    cpu::KernelCall call{"SwiGluGrad", "test", 17, none, refs, outs};
    ASSERT_NO_ERROR(
        cpu::test::runWithWorkspace(cpu::lookupZincKernel("SwiGluGrad"), call));
  }
  ASSIGN_OR_FAIL(dg, upload(g));
  ASSIGN_OR_FAIL(du, upload(u));
  ASSIGN_OR_FAIL(ddy, upload(dy));
  ASSIGN_OR_FAIL(outG, allocate(DType::F32, shape));
  ASSIGN_OR_FAIL(outU, allocate(DType::F32, shape));
  std::vector<const DeviceTensor *> ins{&dg, &du, &ddy};
  std::vector<DeviceTensor *> outs{&outG, &outU};
  ASSERT_NO_ERROR(lookupCudaKernel("zinc", "SwiGluGrad")(
      makeCall("SwiGluGrad", attrs({}), ins, outs, stream.get())));
  ASSIGN_OR_FAIL(gotG, download(outG));
  ASSIGN_OR_FAIL(gotU, download(outU));
  expectClose(gotG, wantG, {1e-6, 1e-5});
  expectClose(gotU, wantU, {1e-6, 1e-5});
}
