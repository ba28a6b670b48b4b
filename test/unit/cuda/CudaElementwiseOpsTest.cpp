//===- CudaElementwiseOpsTest.cpp - Elementwise cuda kernels vs the cpu ---===//
//
// On every machine: ElementwiseMath.h's per-element functions against the
// cpu kernels on a few values, and the kernels' refusals, which must come
// before anything touches a device. With a device: every elementwise op's
// cuda kernel against its cpu kernel on random inputs (fixed seed),
// broadcast shapes, misaligned and in-place operands, each element type.
//
//===----------------------------------------------------------------------===//
#include "Convert.h"
#include "runtime/cuda/kernels/ElementwiseMath.h"
#include "test/unit/cuda/ElementwiseTestHelpers.h"
#include "zinc/support/Float16.h"
#include <cmath>
#include <cstring>
#include <limits>

using namespace zinc;
using namespace zinc::cuda;
using namespace zinc::cuda::ewtest;
using cpu::test::attrs;
using cpu::test::floatAttr;
using cpu::test::intAttr;
using cpu::test::stringAttr;
namespace ew = zinc::cuda::elementwise;

namespace {

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

/// Runs cpu op `op` on `ins` into an output of `outType` and `shape`.
OwnedTensor cpuResult(llvm::StringRef op, bool zincOp,
                      const AttributeList &attrList,
                      std::vector<const OwnedTensor *> ins, DType outType,
                      llvm::ArrayRef<int64_t> shape) {
  cpu::KernelFn fn = zincOp ? cpu::lookupZincKernel(op) : cpu::lookupKernel(op);
  OwnedTensor out(outType, shape);
  std::vector<const cpu::TensorRef *> refs;
  for (const OwnedTensor *t : ins)
    refs.push_back(&t->ref);
  std::vector<cpu::TensorRef *> outs{&out.ref};
  cpu::KernelCall call{op, "test", 17, attrList, refs, outs};
  llvm::Error err = cpu::test::runWithWorkspace(fn, call);
  EXPECT_FALSE(static_cast<bool>(err)) << errorText(std::move(err));
  return out;
}

/// |got - want| within `rel` of want, NaN meeting NaN.
void expectNear(double got, double want, double rel, const std::string &what) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << what;
    return;
  }
  if (got == want)
    return;
  EXPECT_LE(std::fabs(got - want), rel * std::fabs(want) + 1e-300) << what;
}

//===----------------------------------------------------------------------===//
// Host: ElementwiseMath.h against the cpu kernels
//===----------------------------------------------------------------------===//

const std::vector<double> kActivationInputs = {
    -30, -5, -1.5, -0.75, -0.1, -0.0, 0,     1e-3,
    0.3, 1,  2.5,  7,     40,   kInf, -kInf, kNaN};

/// Checks math(v) (or math(x, g)) in double against the cpu op on f64.
template <typename Math>
void checkUnaryF64(llvm::StringRef op, const AttributeList &attrList, Math math,
                   double rel = 1e-15) {
  OwnedTensor x = tensorOf(DType::F64, {int64_t(kActivationInputs.size())},
                           kActivationInputs);
  OwnedTensor want =
      cpuResult(op, false, attrList, {&x}, DType::F64, x.ref.shape);
  std::vector<double> w = valuesOf(want);
  for (size_t i = 0; i < w.size(); ++i)
    expectNear(math(kActivationInputs[i]), w[i], rel,
               op.str() + " of " + std::to_string(kActivationInputs[i]));
}

TEST(ElementwiseMath, ActivationsMatchCpuInDouble) {
  AttributeList none = attrs({});
  checkUnaryF64("Relu", none, [](double v) { return ew::relu(v); });
  checkUnaryF64("LeakyRelu", attrs({floatAttr("alpha", 0.2)}),
                [](double v) { return ew::leakyRelu(v, 0.2); });
  checkUnaryF64("Sigmoid", none, [](double v) { return ew::sigmoid(v); });
  checkUnaryF64("Gelu", none, [](double v) { return ew::geluErf(v); });
  checkUnaryF64("Gelu", attrs({stringAttr("approximate", "tanh")}),
                [](double v) { return ew::geluTanh(v); });
  checkUnaryF64("Exp", none, [](double v) { return ew::expOf(v); });
  checkUnaryF64("Tanh", none, [](double v) { return ew::tanhOf(v); });
  checkUnaryF64("Erf", none, [](double v) { return ew::erfOf(v); });
  checkUnaryF64("Log", none, [](double v) { return ew::logOf(v); });
  checkUnaryF64("Sqrt", none, [](double v) { return ew::sqrtOf(v); });
  checkUnaryF64("Reciprocal", none, [](double v) { return ew::reciprocal(v); });
  checkUnaryF64("Neg", none, [](double v) { return ew::negValue(v); });
}

TEST(ElementwiseMath, FloatActivationsMatchCpuRowMath) {
  // The cpu's f32 Exp, Tanh, Erf and Gelu are vectorised approximations;
  // the formulas must still agree to a few ulps.
  std::vector<double> in(kActivationInputs.begin(),
                         kActivationInputs.end() - 3);
  OwnedTensor x = tensorOf(DType::F32, {int64_t(in.size())}, in);
  struct Case {
    const char *op;
    float (*math)(float);
  };
  const Case cases[] = {
      {"Exp", [](float v) { return ew::expOf(v); }},
      {"Tanh", [](float v) { return ew::tanhOf(v); }},
      {"Erf", [](float v) { return ew::erfOf(v); }},
      {"Gelu", [](float v) { return ew::geluErf(v); }},
      {"Sigmoid", [](float v) { return ew::sigmoid(v); }},
  };
  for (const Case &c : cases) {
    std::vector<double> w = valuesOf(
        cpuResult(c.op, false, attrs({}), {&x}, DType::F32, x.ref.shape));
    for (size_t i = 0; i < w.size(); ++i)
      expectNear(c.math(static_cast<float>(in[i])), w[i], 1e-5,
                 std::string(c.op) + " of " + std::to_string(in[i]));
  }
}

TEST(ElementwiseMath, SiluAndHardSwishMatchCpuInDouble) {
  // Forward and gradient, in double so that only the formulas can differ;
  // HardSwish's inputs cover its three pieces.
  std::vector<double> xs = cpu::test::randomValues(64, -6, 6, 11);
  std::vector<double> gs = cpu::test::randomValues(64, -2, 2, 12);
  int64_t n = static_cast<int64_t>(xs.size());
  OwnedTensor x = tensorOf(DType::F64, {n}, xs);
  OwnedTensor g = tensorOf(DType::F64, {n}, gs);
  std::vector<double> silu = valuesOf(cpuResult("Silu", true, attrs({}), {&x}, DType::F64, {n}));
  std::vector<double> hswish =
      valuesOf(cpuResult("HardSwish", false, attrs({}), {&x}, DType::F64, {n}));
  std::vector<double> siluGrad =
      valuesOf(cpuResult("SiluGrad", true, attrs({}), {&x, &g}, DType::F64, {n}));
  std::vector<double> hswishGrad =
      valuesOf(cpuResult("HardSwishGrad", true, attrs({}), {&x, &g}, DType::F64, {n}));
  for (int64_t i = 0; i < n; ++i) {
    std::string at = " at " + std::to_string(xs[i]);
    expectNear(ew::silu(xs[i]), silu[i], 1e-14, "Silu" + at);
    expectNear(ew::hardSwish(xs[i]), hswish[i], 1e-14, "HardSwish" + at);
    expectNear(ew::siluGrad(xs[i], gs[i]), siluGrad[i], 1e-14, "SiluGrad" + at);
    expectNear(ew::hardSwishGrad(xs[i], gs[i]), hswishGrad[i], 1e-14,
               "HardSwishGrad" + at);
  }
}

TEST(ElementwiseMath, MaxAndMinMatchCpuWithNaNAndTies) {
  std::vector<double> as = {1, -2, 3, NAN, 5, 0.5};
  std::vector<double> bs = {2, -2, NAN, 1, -5, 0.25};
  int64_t n = static_cast<int64_t>(as.size());
  OwnedTensor a = tensorOf(DType::F64, {n}, as);
  OwnedTensor b = tensorOf(DType::F64, {n}, bs);
  std::vector<double> mx = valuesOf(cpuResult("Max", false, attrs({}), {&a, &b}, DType::F64, {n}));
  std::vector<double> mn = valuesOf(cpuResult("Min", false, attrs({}), {&a, &b}, DType::F64, {n}));
  for (int64_t i = 0; i < n; ++i) {
    double wantMax = ew::maxValues(as[i], bs[i]), wantMin = ew::minValues(as[i], bs[i]);
    EXPECT_TRUE(std::isnan(wantMax) ? std::isnan(mx[i]) : wantMax == mx[i]) << "Max at " << i;
    EXPECT_TRUE(std::isnan(wantMin) ? std::isnan(mn[i]) : wantMin == mn[i]) << "Min at " << i;
  }
}

TEST(ElementwiseMath, ModMatchesCpu) {
  // Integers, every sign pair, both forms; floats through fmod.
  std::vector<double> as = {7, -7, 7, -7, 0, 9, -9, 5}, bs = {3, 3, -3, -3, 4, 9, 2, -7};
  int64_t n = static_cast<int64_t>(as.size());
  OwnedTensor a = tensorOf(DType::I64, {n}, as), b = tensorOf(DType::I64, {n}, bs);
  for (int fmod : {0, 1}) {
    std::vector<double> got =
        valuesOf(cpuResult("Mod", false, attrs({intAttr("fmod", fmod)}), {&a, &b}, DType::I64, {n}));
    for (int64_t i = 0; i < n; ++i) {
      int64_t x = int64_t(as[i]), z = int64_t(bs[i]);
      int64_t want = fmod ? ew::fmodValues(x, z) : ew::modValues(x, z);
      EXPECT_EQ(double(want), got[i]) << "fmod " << fmod << " at " << i;
    }
  }
  OwnedTensor fa = tensorOf(DType::F64, {n}, {7.5, -7.5, 7.5, -7.5, 0, 9, -9.25, 5});
  OwnedTensor fb = tensorOf(DType::F64, {n}, {2, 2, -2, -2, 4, 9, 2.5, -7});
  std::vector<double> fgot =
      valuesOf(cpuResult("Mod", false, attrs({intAttr("fmod", 1)}), {&fa, &fb}, DType::F64, {n}));
  std::vector<double> fas = valuesOf(fa), fbs = valuesOf(fb);
  for (int64_t i = 0; i < n; ++i)
    EXPECT_EQ(ew::fmodValues(fas[i], fbs[i]), fgot[i]) << i;
}

TEST(ElementwiseMath, GradientsMatchCpuInDouble) {
  std::vector<double> xs(kActivationInputs.begin(),
                         kActivationInputs.end() - 3);
  int64_t n = static_cast<int64_t>(xs.size());
  std::vector<double> gs = cpu::test::randomValues(n, -2, 2, 7);
  OwnedTensor x = tensorOf(DType::F64, {n}, xs);
  OwnedTensor g = tensorOf(DType::F64, {n}, gs);
  struct Case {
    const char *op;
    AttributeList attrList;
    double (*math)(double, double);
  };
  const Case cases[] = {
      {"ReluGrad", attrs({}),
       [](double v, double d) { return ew::reluGrad(v, d); }},
      {"LeakyReluGrad", attrs({floatAttr("alpha", 0.3)}),
       [](double v, double d) { return ew::leakyReluGrad(v, d, 0.3); }},
      {"GeluGrad", attrs({}),
       [](double v, double d) { return ew::geluErfGrad(v, d); }},
      {"GeluGrad", attrs({stringAttr("approximate", "tanh")}),
       [](double v, double d) { return ew::geluTanhGrad(v, d); }},
      {"SigmoidGrad", attrs({}),
       [](double v, double d) { return ew::sigmoidGrad(v, d); }},
      {"TanhGrad", attrs({}),
       [](double v, double d) { return ew::tanhGrad(v, d); }},
      {"ErfGrad", attrs({}),
       [](double v, double d) { return ew::erfGrad(v, d); }},
  };
  for (const Case &c : cases) {
    std::vector<double> w =
        valuesOf(cpuResult(c.op, true, c.attrList, {&x, &g}, DType::F64, {n}));
    for (size_t i = 0; i < w.size(); ++i)
      expectNear(c.math(xs[i], gs[i]), w[i], 1e-14,
                 std::string(c.op) + " at " + std::to_string(xs[i]));
  }
}

TEST(ElementwiseMath, IntegerArithmeticWrapsAsOnCpu) {
  const int32_t lo = std::numeric_limits<int32_t>::min();
  const int32_t hi = std::numeric_limits<int32_t>::max();
  std::vector<int32_t> as = {7, -7, lo, hi, lo, 123456, -1, 0};
  std::vector<int32_t> bs = {2, 2, -1, 1, 3, 65536, -1, 5};
  int64_t n = static_cast<int64_t>(as.size());
  OwnedTensor a(DType::I32, {n}), b(DType::I32, {n});
  std::copy(as.begin(), as.end(), a.ref.as<int32_t>());
  std::copy(bs.begin(), bs.end(), b.ref.as<int32_t>());
  auto check = [&](const char *op, int32_t (*math)(int32_t, int32_t)) {
    OwnedTensor want =
        cpuResult(op, false, attrs({}), {&a, &b}, DType::I32, {n});
    for (int64_t i = 0; i < n; ++i)
      EXPECT_EQ(math(as[i], bs[i]), want.ref.as<int32_t>()[i])
          << op << " " << as[i] << ", " << bs[i];
  };
  check("Add", [](int32_t x, int32_t y) { return ew::addValues(x, y); });
  check("Sub", [](int32_t x, int32_t y) { return ew::subValues(x, y); });
  check("Mul", [](int32_t x, int32_t y) { return ew::mulValues(x, y); });
  check("Div", [](int32_t x, int32_t y) { return ew::divValues(x, y); });
  check("Pow", [](int32_t x, int32_t y) { return ew::intPow(x, y); });
  // The one deliberate difference: the cpu refuses x / 0.
  EXPECT_EQ(ew::divValues(int64_t(5), int64_t(0)), 0);
  EXPECT_EQ(ew::negValue(lo), lo);
  EXPECT_EQ(ew::intPow(int64_t(-1), int64_t(-3)), -1);
  EXPECT_EQ(ew::intPow(int64_t(2), int64_t(-1)), 0);
}

TEST(ElementwiseMath, IntRangeIsNumericLimits) {
  EXPECT_EQ(ew::IntRange<int8_t>::max, std::numeric_limits<int8_t>::max());
  EXPECT_EQ(ew::IntRange<int8_t>::lowest,
            std::numeric_limits<int8_t>::lowest());
  EXPECT_EQ(ew::IntRange<int64_t>::max, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(ew::IntRange<int64_t>::lowest,
            std::numeric_limits<int64_t>::lowest());
  EXPECT_EQ(ew::IntRange<uint16_t>::max, std::numeric_limits<uint16_t>::max());
  EXPECT_EQ(ew::IntRange<uint64_t>::lowest, 0u);
}

TEST(ElementwiseMath, RoundToOddIsTheCpus) {
  std::mt19937_64 rng(11);
  std::vector<double> ds = {0.0,    -0.0,    1.0,    1e-40,  -1e-40,
                            1e-310, 3.4e38,  3.5e38, -1e300, kInf,
                            -kInf,  65504.5, 1.0 / 3};
  for (int i = 0; i < 2000; ++i) {
    uint64_t bits = rng();
    double d;
    std::memcpy(&d, &bits, sizeof d);
    if (!std::isnan(d))
      ds.push_back(d);
    ds.push_back(static_cast<double>(static_cast<int64_t>(rng())));
  }
  for (double d : ds) {
    float got = ew::roundToOddFloat(d), want = cpu::roundToOddFloat(d);
    EXPECT_EQ(ew::bitsOf(got), ew::bitsOf(want)) << d;
  }
}

TEST(ElementwiseMath, ConversionsMatchCpuCast) {
  std::vector<double> vs = {0,     -0.0,  0.5,   -0.5,   1.5,  -1.5,  127.9,
                            128.5, -129,  255.7, 65535,  1e10, -1e10, 3e38,
                            kInf,  -kInf, kNaN,  -1e-45, 7e-46};
  int64_t n = static_cast<int64_t>(vs.size());
  OwnedTensor x = tensorOf(DType::F64, {n}, vs);
  auto check = [&](DType to, auto tag) {
    using To = decltype(tag);
    OwnedTensor want = cpuResult("Cast", false, attrs({}), {&x}, to, {n});
    for (int64_t i = 0; i < n; ++i) {
      double got = static_cast<double>(ew::convertScalar<To>(vs[i]));
      double w = static_cast<double>(want.ref.as<To>()[i]);
      EXPECT_TRUE(got == w || (std::isnan(got) && std::isnan(w)))
          << "f64 " << vs[i] << " to " << dtypeName(to).str() << ": got " << got
          << ", want " << w;
    }
  };
  check(DType::I8, int8_t{});
  check(DType::U8, uint8_t{});
  check(DType::I32, int32_t{});
  check(DType::I64, int64_t{});
  check(DType::U64, uint64_t{});
  check(DType::Bool, bool{});
  check(DType::F32, float{});
  // A 16-bit float from f64 or an integer: round to odd, then to nearest.
  OwnedTensor halves =
      cpuResult("Cast", false, attrs({}), {&x}, DType::F16, {n});
  for (int64_t i = 0; i < n; ++i)
    EXPECT_EQ(floatToHalf(ew::halfSource(vs[i])), halves.ref.as<Half>()[i].bits)
        << vs[i];
  OwnedTensor big = OwnedTensor::ints({2}, {(int64_t(1) << 40) + 1, -77777});
  OwnedTensor bf =
      cpuResult("Cast", false, attrs({}), {&big}, DType::BF16, {2});
  EXPECT_EQ(floatToBf16(ew::halfSource((int64_t(1) << 40) + 1)),
            bf.ref.as<BFloat16>()[0].bits);
  EXPECT_EQ(floatToBf16(ew::halfSource(int64_t(-77777))),
            bf.ref.as<BFloat16>()[1].bits);
}

//===----------------------------------------------------------------------===//
// Without a device: refusals come before any CUDA call
//===----------------------------------------------------------------------===//

/// Runs cuda op `op` on tensors with no memory (null pointers): only a
/// refusal, or an empty output, can return without touching the device.
std::string refusal(llvm::StringRef op, const AttributeList &attrList,
                    std::vector<DeviceTensor> ins, DeviceTensor out,
                    bool zincOp = false) {
  CudaKernelFn fn = lookupCudaKernel(zincOp ? "zinc" : "", op);
  if (!fn)
    return "no cuda kernel for " + op.str();
  std::vector<const DeviceTensor *> in;
  for (const DeviceTensor &t : ins)
    in.push_back(&t);
  std::vector<DeviceTensor *> outs{&out};
  return errorText(fn(makeCall(op, attrList, in, outs, nullptr)));
}

TEST(CudaElementwiseNoDevice, EveryOpHasAKernel) {
  for (const char *op :
       {"Add",        "Sub",       "Mul",     "Div",  "Pow",   "Sqrt",
        "Reciprocal", "Neg",       "Exp",     "Log",  "Erf",   "Tanh",
        "Relu",       "LeakyRelu", "Sigmoid", "Gelu", "Where", "Equal",
        "Less",       "Greater",   "Not",     "And",  "Cast",  "CastLike",
        "LessOrEqual", "GreaterOrEqual", "Or", "Xor", "Max", "Min", "HardSwish"})
    EXPECT_NE(lookupCudaKernel("", op), nullptr) << op;
  for (const char *op : {"ReluGrad", "LeakyReluGrad", "GeluGrad", "SigmoidGrad",
                         "TanhGrad", "ErfGrad", "Silu", "SiluGrad",
                         "HardSwishGrad", "RmsNorm", "RmsNormGrad"})
    EXPECT_NE(lookupCudaKernel("zinc", op), nullptr) << op;
}

TEST(CudaElementwiseNoDevice, MaxOfThreeInputsIsRefusedByName) {
  auto t = shapeOnly;
  EXPECT_EQ(refusal("Max", attrs({}),
                    {t(DType::F32, {2}), t(DType::F32, {2}), t(DType::F32, {2})},
                    t(DType::F32, {2})),
            "unsupported: Max of 3 inputs on the cuda backend (two)");
}

TEST(CudaElementwiseNoDevice, ShapeAndTypeErrorsBeforeAnyLaunch) {
  AttributeList none = attrs({});
  auto t = shapeOnly;
  EXPECT_EQ(refusal("Add", none, {t(DType::F32, {2, 3}), t(DType::F32, {4})},
                    t(DType::F32, {2, 3})),
            "Add: shapes [2,3] and [4] do not broadcast");
  EXPECT_EQ(refusal("Mul", none, {t(DType::I64, {2, 3}), t(DType::I64, {3})},
                    t(DType::I64, {3, 2})),
            "Mul: output shape [3,2], expected [2,3]");
  EXPECT_EQ(refusal("Sub", none, {t(DType::F32, {3})}, t(DType::F32, {3})),
            "Sub: missing input 1");
  EXPECT_EQ(refusal("Div", none, {t(DType::U16, {3}), t(DType::U16, {3})},
                    t(DType::U16, {3})),
            "unsupported: Div on the cuda backend with element type u16");
  EXPECT_EQ(refusal("Pow", none, {t(DType::F32, {3}), t(DType::Bool, {3})},
                    t(DType::F32, {3})),
            "unsupported: Pow on the cuda backend with element types f32 and "
            "bool");
  EXPECT_EQ(refusal("Equal", none, {t(DType::F32, {3}), t(DType::F32, {3})},
                    t(DType::F32, {3})),
            "Equal: output has element type f32, expected bool");
  EXPECT_EQ(refusal("Less", none, {t(DType::F32, {3}), t(DType::F16, {3})},
                    t(DType::Bool, {3})),
            "Less: element types f32, f16 -> bool differ");
  EXPECT_EQ(refusal("Not", none, {t(DType::F32, {3})}, t(DType::F32, {3})),
            "unsupported: Not on the cuda backend with element type f32");
  EXPECT_EQ(refusal("Exp", none, {t(DType::I64, {3})}, t(DType::I64, {3})),
            "unsupported: Exp on the cuda backend with element type i64");
  EXPECT_EQ(refusal("Gelu", attrs({stringAttr("approximate", "fast")}),
                    {t(DType::F32, {3})}, t(DType::F32, {3})),
            "unsupported: Gelu with approximate=\"fast\"");
  EXPECT_EQ(
      refusal("Where", none,
              {t(DType::F32, {3}), t(DType::F32, {3}), t(DType::F32, {3})},
              t(DType::F32, {3})),
      "Where: condition has element type f32, expected bool");
  EXPECT_EQ(
      refusal("Where", none,
              {t(DType::Bool, {2, 1}), t(DType::F32, {3}), t(DType::F32, {4})},
              t(DType::F32, {2, 3})),
      "Where: shapes [2,1], [3] and [4] do not broadcast");
  EXPECT_EQ(refusal("Cast", attrs({intAttr("to", 10)}), {t(DType::F32, {3})},
                    t(DType::F32, {3})),
            "Cast: attribute to=f16 but the output has element type f32");
  EXPECT_EQ(refusal("Cast", none, {t(DType::F32, {3})}, t(DType::F16, {4})),
            "Cast: output shape [4], expected [3]");
  EXPECT_EQ(refusal("CastLike", none, {t(DType::F32, {3}), t(DType::I64, {})},
                    t(DType::F16, {3})),
            "CastLike: output has element type f16 but like has i64");
  EXPECT_EQ(refusal("GeluGrad", none, {t(DType::F32, {4}), t(DType::F32, {5})},
                    t(DType::F32, {4}), true),
            "GeluGrad: shapes [4] and [5] differ");
  EXPECT_EQ(refusal("ReluGrad", none, {t(DType::I32, {4}), t(DType::I32, {4})},
                    t(DType::I32, {4}), true),
            "unsupported: ReluGrad on the cuda backend with element type i32");
  EXPECT_EQ(
      refusal("TanhGrad", none, {t(DType::F32, {4})}, t(DType::F32, {4}), true),
      "TanhGrad: expects inputs (value, dy) and output dx");
  std::string text = refusal("Add", none,
                             {t(DType::F32, {2, 3, 2, 3, 2, 3, 2}),
                              t(DType::F32, {2, 1, 2, 1, 2, 1, 2})},
                             t(DType::F32, {2, 3, 2, 3, 2, 3, 2}));
  EXPECT_NE(text.find("needs 7 broadcast dimensions, more than 6"),
            std::string::npos)
      << text;
  // Empty outputs queue nothing, so null pointers are fine.
  EXPECT_EQ(
      refusal("Where", none,
              {t(DType::Bool, {0, 1}), t(DType::I64, {3}), t(DType::I64, {1})},
              t(DType::I64, {0, 3})),
      "");
  EXPECT_EQ(refusal("Cast", none, {t(DType::F32, {0})}, t(DType::I8, {0})), "");
}

//===----------------------------------------------------------------------===//
// With a device
//===----------------------------------------------------------------------===//

const DType kArithmeticTypes[] = {DType::F32, DType::F16, DType::BF16,
                                  DType::F64, DType::I32, DType::I64};
const DType kFloatTypes[] = {DType::F32, DType::F16, DType::BF16, DType::F64};

struct BroadcastCase {
  std::vector<int64_t> a, b;
  /// Bytes to misalign a by, to take the unpacked path.
  uint64_t shiftA = 0;
  bool inPlace = false;
};
const BroadcastCase kBroadcastCases[] = {
    {{1024}, {1024}},          // flat, whole packs
    {{1003}, {1003}, 0, true}, // flat with a tail, in place
    {{1003}, {1003}, 2},       // flat, misaligned
    {{4, 37, 64}, {64}},       // bias over rows, packed
    {{4, 37, 63}, {63}},       // rows not a whole pack
    {{64}, {4, 3, 64}},        // broadcast on the left
    {{5, 1, 7}, {1, 6, 1}},    // both broadcast
    {{}, {3, 5}},              // scalar operand
};

TEST_F(ElementwiseDevice, ArithmeticMatchesCpu) {
  for (DType dtype : kArithmeticTypes)
    for (const char *op : {"Add", "Sub", "Mul", "Div"})
      for (const BroadcastCase &c : kBroadcastCases) {
        SCOPED_TRACE(std::string(op) + " " + dtypeName(dtype).str() + " " +
                     formatShape(c.a) + " " + formatShape(c.b));
        OwnedTensor a = randomTensor(dtype, c.a, rng, -100, 100);
        // Integer divisors stay away from 0, which the cpu refuses.
        OwnedTensor b = std::string(op) == "Div"
                            ? randomTensor(dtype, c.b, rng, 1, 9)
                            : randomTensor(dtype, c.b, rng, -100, 100);
        ASSIGN_OR_FAIL(shape, cpu::broadcastShapes(c.a, c.b));
        // One correctly rounded operation, then one rounding: identical.
        compareWithCpu(op, false, attrs({}), {&a, &b}, dtype, shape, {0, 0},
                       {c.inPlace ? 0 : -1, c.shiftA});
      }
}

TEST_F(ElementwiseDevice, PowMatchesCpu) {
  struct Case {
    DType base, exp;
    double lo, hi, elo, ehi;
  };
  const Case cases[] = {
      {DType::F32, DType::F32, 0.1, 3, -2, 2},
      {DType::F16, DType::F32, 0.1, 3, -2, 2},
      {DType::BF16, DType::BF16, 0.1, 3, -2, 2},
      {DType::F64, DType::F64, 0.1, 3, -2, 2},
      {DType::F32, DType::I64, -3, 3, -3, 4},
      {DType::I64, DType::I64, -6, 6, -2, 6},
      {DType::I32, DType::I32, -6, 6, 0, 9},
      {DType::I64, DType::F32, 0, 9, 0, 3},
  };
  for (const Case &c : cases)
    for (const BroadcastCase &bc :
         {BroadcastCase{{3, 40}, {40}}, BroadcastCase{{257}, {}},
          BroadcastCase{{2, 9}, {2, 9}}}) {
      SCOPED_TRACE(dtypeName(c.base).str() + "^" + dtypeName(c.exp).str() +
                   " " + formatShape(bc.a) + " " + formatShape(bc.b));
      OwnedTensor a = randomTensor(c.base, bc.a, rng, c.lo, c.hi);
      OwnedTensor b = randomTensor(c.exp, bc.b, rng, c.elo, c.ehi);
      ASSIGN_OR_FAIL(shape, cpu::broadcastShapes(bc.a, bc.b));
      // CUDA's powf is within a few ulps; integers are exact, except that
      // a float exponent's power a few ulps off may truncate one lower.
      Tolerance tol = !isFloatDType(c.base)
                          ? Tolerance{isFloatDType(c.exp) ? 1.0 : 0.0, 0}
                      : c.base == DType::F32 ? Tolerance{1e-6, 1e-6}
                      : c.base == DType::F64 ? Tolerance{1e-14, 1e-15}
                                             : Tolerance{1e-6, halfUlp(c.base)};
      compareWithCpu("Pow", false, attrs({}), {&a, &b}, c.base, shape, tol);
    }
}

TEST_F(ElementwiseDevice, ComparisonsAndLogicMatchCpu) {
  const DType types[] = {DType::F32, DType::F16, DType::BF16, DType::F64,
                         DType::I32, DType::I64, DType::Bool};
  for (DType dtype : types)
    for (const char *op : {"Equal", "Less", "Greater"})
      for (const BroadcastCase &c : kBroadcastCases) {
        if (dtype == DType::Bool && std::string(op) != "Equal")
          continue;
        SCOPED_TRACE(std::string(op) + " " + dtypeName(dtype).str() + " " +
                     formatShape(c.a) + " " + formatShape(c.b));
        // Few distinct values, so that Equal is often true.
        OwnedTensor a = randomTensor(dtype, c.a, rng, -3, 3, DrawKind::Floored);
        OwnedTensor b = randomTensor(dtype, c.b, rng, -3, 3, DrawKind::Floored);
        ASSIGN_OR_FAIL(shape, cpu::broadcastShapes(c.a, c.b));
        compareWithCpu(op, false, attrs({}), {&a, &b}, DType::Bool, shape,
                       {0, 0});
      }
  for (const BroadcastCase &c : kBroadcastCases) {
    OwnedTensor a = randomTensor(DType::Bool, c.a, rng, 0, 1);
    OwnedTensor b = randomTensor(DType::Bool, c.b, rng, 0, 1);
    ASSIGN_OR_FAIL(shape, cpu::broadcastShapes(c.a, c.b));
    compareWithCpu("And", false, attrs({}), {&a, &b}, DType::Bool, shape,
                   {0, 0}, {c.inPlace ? 0 : -1, c.shiftA});
    compareWithCpu("Not", false, attrs({}), {&a}, DType::Bool, c.a, {0, 0},
                   {c.inPlace ? 0 : -1, c.shiftA});
  }
}

TEST_F(ElementwiseDevice, WhereMatchesCpu) {
  struct Case {
    std::vector<int64_t> c, x, z;
    int inPlace = -1;
  };
  const Case cases[] = {
      {{1000}, {1000}, {1000}, 1},
      {{4, 1, 16}, {1, 5, 16}, {}}, // a mask against a scalar fill
      {{2, 3, 4}, {4}, {2, 1, 4}, -1},
      {{}, {7, 3}, {7, 3}, 2},
  };
  const DType types[] = {DType::F32, DType::F16, DType::I64, DType::Bool,
                         DType::U8};
  for (DType dtype : types)
    for (const Case &c : cases) {
      SCOPED_TRACE(dtypeName(dtype).str() + " " + formatShape(c.c) + " " +
                   formatShape(c.x) + " " + formatShape(c.z));
      OwnedTensor cond = randomTensor(DType::Bool, c.c, rng, 0, 1);
      OwnedTensor x = randomTensor(dtype, c.x, rng, 0, 100);
      OwnedTensor z = randomTensor(dtype, c.z, rng, 0, 100);
      ASSIGN_OR_FAIL(cx, cpu::broadcastShapes(c.c, c.x));
      ASSIGN_OR_FAIL(shape, cpu::broadcastShapes(cx, c.z));
      compareWithCpu("Where", false, attrs({}), {&cond, &x, &z}, dtype, shape,
                     {0, 0}, {c.inPlace, 0});
    }
}

/// CUDA's libm is within 2 ulps in f32 and f64, and the cpu's f32 loops a
/// few; a 16-bit result may round the other way once.
Tolerance mathTolerance(DType dtype) {
  if (dtype == DType::F32)
    return {1e-6, 1e-5};
  if (dtype == DType::F64)
    return {1e-14, 1e-13};
  return {1e-6, halfUlp(dtype)};
}

TEST_F(ElementwiseDevice, UnaryOpsMatchCpu) {
  struct Op {
    const char *name;
    AttributeList attrList;
    double lo, hi;
  };
  const Op ops[] = {
      {"Relu", attrs({}), -4, 4},
      {"LeakyRelu", attrs({floatAttr("alpha", 0.2)}), -4, 4},
      {"Sigmoid", attrs({}), -10, 10},
      {"Gelu", attrs({}), -5, 5},
      {"Gelu", attrs({stringAttr("approximate", "tanh")}), -5, 5},
      {"Exp", attrs({}), -8, 8},
      {"Tanh", attrs({}), -4, 4},
      {"Erf", attrs({}), -3, 3},
      {"Log", attrs({}), 0.01, 100},
      {"Sqrt", attrs({}), 0, 100},
      {"Reciprocal", attrs({}), 0.5, 4},
      {"Neg", attrs({}), -4, 4},
  };
  const double specials[] = {kNaN, kInf, -kInf, 0.0};
  for (DType dtype : kFloatTypes)
    for (const Op &op : ops)
      for (const BroadcastCase &c :
           {BroadcastCase{{4, 256}, {}}, BroadcastCase{{1003}, {}, 2},
            BroadcastCase{{7, 9}, {}, 0, true}, BroadcastCase{{}, {}}}) {
        SCOPED_TRACE(std::string(op.name) + " " + dtypeName(dtype).str() + " " +
                     formatShape(c.a));
        OwnedTensor x = randomTensor(dtype, c.a, rng, op.lo, op.hi);
        std::vector<double> v = valuesOf(x);
        for (size_t i = 0; i < v.size() && i < 4; ++i)
          v[i] = specials[i];
        OwnedTensor in = tensorOf(dtype, c.a, v);
        bool exact = std::string(op.name) == "Relu" ||
                     std::string(op.name) == "Neg" ||
                     std::string(op.name) == "LeakyRelu";
        compareWithCpu(op.name, false, op.attrList, {&in}, dtype, c.a,
                       exact ? Tolerance{0, 0} : mathTolerance(dtype),
                       {c.inPlace ? 0 : -1, c.shiftA});
      }
  for (DType dtype : {DType::I32, DType::I64})
    for (const char *op : {"Relu", "Neg"}) {
      SCOPED_TRACE(std::string(op) + " " + dtypeName(dtype).str());
      OwnedTensor x = randomTensor(dtype, {333}, rng, -1000, 1000);
      compareWithCpu(op, false, attrs({}), {&x}, dtype, {333}, {0, 0});
    }
}

TEST_F(ElementwiseDevice, GradientsMatchCpu) {
  struct Op {
    const char *name;
    AttributeList attrList;
  };
  const Op ops[] = {
      {"ReluGrad", attrs({})},
      {"LeakyReluGrad", attrs({floatAttr("alpha", 0.05)})},
      {"GeluGrad", attrs({})},
      {"GeluGrad", attrs({stringAttr("approximate", "tanh")})},
      {"SigmoidGrad", attrs({})},
      {"TanhGrad", attrs({})},
      {"ErfGrad", attrs({})},
  };
  for (DType dtype : kFloatTypes)
    for (const Op &op : ops)
      for (const BroadcastCase &c :
           {BroadcastCase{{8, 128}, {}}, BroadcastCase{{1001}, {}, 2},
            BroadcastCase{{5, 7}, {}, 0, true}}) {
        SCOPED_TRACE(std::string(op.name) + " " + dtypeName(dtype).str() + " " +
                     formatShape(c.a) + (c.inPlace ? " in place" : ""));
        // Sigmoid's and Tanh's gradients take the forward output.
        bool fromOutput = std::string(op.name) == "SigmoidGrad" ||
                          std::string(op.name) == "TanhGrad";
        OwnedTensor v = fromOutput ? randomTensor(dtype, c.a, rng, -1, 1)
                                   : randomTensor(dtype, c.a, rng, -4, 4);
        OwnedTensor dy = randomTensor(dtype, c.a, rng, -2, 2);
        bool exact = std::string(op.name) == "ReluGrad" ||
                     std::string(op.name) == "LeakyReluGrad";
        // dx overwrites dy when in place, as the planner may place it.
        compareWithCpu(op.name, true, op.attrList, {&v, &dy}, dtype, c.a,
                       exact ? Tolerance{0, 0} : mathTolerance(dtype),
                       {c.inPlace ? 1 : -1, c.shiftA});
      }
}

TEST_F(ElementwiseDevice, CastMatchesCpuForEveryPair) {
  const DType types[] = {DType::F32, DType::F16, DType::BF16, DType::F64,
                         DType::I8,  DType::U8,  DType::I16,  DType::U16,
                         DType::I32, DType::U32, DType::I64,  DType::U64,
                         DType::Bool};
  // Fractions, negatives, values past every narrow range, and (for float
  // sources) NaN and infinities.
  std::vector<double> values = {0,     -0.0, 0.5,  -0.5,   1.5,   -1.5,
                                127.6, 200,  -129, 300.25, 65536, -70000,
                                1e10,  -3e9, kNaN, kInf,   -kInf, 1e-9};
  for (int i = 0; i < 300; ++i)
    values.push_back(std::uniform_real_distribution<double>(-1e5, 1e5)(rng));
  int64_t n = static_cast<int64_t>(values.size());
  OwnedTensor wide = tensorOf(DType::F64, {n}, values);
  for (DType from : types) {
    // The source through the cpu's own Cast: NaN into an integer type is
    // the cpu's 0, not undefined behaviour.
    OwnedTensor x = cpuResult("Cast", false, attrs({}), {&wide}, from, {n});
    for (DType to : types) {
      SCOPED_TRACE(dtypeName(from).str() + " -> " + dtypeName(to).str());
      compareWithCpu("Cast", false,
                     attrs({intAttr("to", static_cast<int64_t>(to))}), {&x}, to,
                     {n}, {0, 0});
    }
  }
  // Misaligned, and in place between types of one size.
  OwnedTensor f = randomTensor(DType::F32, {999}, rng, -1e4, 1e4);
  compareWithCpu("Cast", false, attrs({}), {&f}, DType::I32, {999}, {0, 0},
                 {0, 4});
  compareWithCpu("Cast", false, attrs({}), {&f}, DType::BF16, {999}, {0, 0},
                 {-1, 2});
  OwnedTensor like(DType::F16, {});
  compareWithCpu("CastLike", false, attrs({}), {&f, &like}, DType::F16, {999},
                 {0, 0});
}

} // namespace
