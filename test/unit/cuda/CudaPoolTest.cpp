//===- CudaPoolTest.cpp - cuda MaxPool, AveragePool, GlobalAveragePool, grads //
//
// Host tests (every machine): PoolMath.h's windows against the cpu's
// makePool3 tables, its covering outputs against a naive scan, and its
// per-element functions run on the host against the cpu kernels, bit for
// bit; then the argument checks, which fail with the cpu's messages before
// anything touches a device. Device tests (skipped without one): each cuda
// kernel against the cpu kernel for f32, f16 and bf16; pools and their
// gradients must agree exactly, GlobalAveragePool to an ulp or two.
//
//===----------------------------------------------------------------------===//
#include "PoolWindows.h"
#include "runtime/cuda/kernels/CudaKernels.h"
#include "runtime/cuda/kernels/PoolMath.h"
#include "test/unit/cuda/DeviceTestSupport.h"
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

using namespace zinc;
using namespace zinc::cuda;
using namespace zinc::cuda::test;
using cpu::test::attrs;
using cpu::test::intAttr;
using cpu::test::intsAttr;
using cpu::test::stringAttr;

namespace {

const DType kFloatTypes[] = {DType::F32, DType::F16, DType::BF16};

/// A pooling problem: X's shape and the window attributes (empty: absent).
struct PoolCase {
  std::vector<int64_t> x, kernel, strides, pads, dilations;
  std::string autoPad; // "" for NOTSET
  bool ceil = false;
};

/// 1-D, 2-D and 3-D windows with pads, strides, dilations, auto_pad, ceil
/// mode (a last window past the end), overlapping windows and windows with
/// gaps between them (inputs no window reads).
const PoolCase kCases[] = {
    {{2, 3, 11}, {3}, {2}, {1, 1}, {}, "", false},
    {{2, 3, 9, 10}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, "", false},
    {{1, 4, 8, 7}, {2, 3}, {1, 2}, {0, 1, 1, 0}, {2, 1}, "", true},
    {{2, 2, 7, 9}, {3, 2}, {2, 3}, {}, {}, "SAME_UPPER", false},
    {{1, 3, 6, 5}, {4, 3}, {1, 2}, {}, {}, "SAME_LOWER", false},
    {{1, 2, 5, 6, 8}, {2, 3, 2}, {2, 1, 2}, {0, 1, 1, 1, 0, 0}, {}, "", true},
    {{3, 5, 8, 8}, {2, 2}, {2, 2}, {}, {}, "VALID", false},
    {{1, 2, 9, 9}, {2, 2}, {3, 3}, {}, {}, "", false},
    {{1, 1, 6, 6}, {3, 3}, {2, 2}, {}, {}, "", true},
    {{2, 2, 4, 5, 6}, {3, 2, 3}, {1, 2, 2}, {}, {1, 2, 1}, "", false},
};

/// Many planes and blocks: the grid-stride loops go round.
const PoolCase kLargeCase = {
    {8, 16, 33, 35}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, "", false};

std::string describe(const PoolCase &c) {
  return formatShape(c.x) + " kernel " + formatShape(c.kernel) + " strides " +
         formatShape(c.strides) + " pads " + formatShape(c.pads) +
         " dilations " + formatShape(c.dilations) + " " + c.autoPad +
         (c.ceil ? " ceil" : "");
}

AttributeList poolAttrs(const PoolCase &c,
                        std::initializer_list<Attribute> extra = {}) {
  AttributeList a = attrs(extra);
  a.set(intsAttr("kernel_shape", c.kernel));
  if (!c.strides.empty())
    a.set(intsAttr("strides", c.strides));
  if (!c.pads.empty())
    a.set(intsAttr("pads", c.pads));
  if (!c.dilations.empty())
    a.set(intsAttr("dilations", c.dilations));
  if (!c.autoPad.empty())
    a.set(stringAttr("auto_pad", c.autoPad));
  if (c.ceil)
    a.set(intAttr("ceil_mode", 1));
  return a;
}

/// Y's shape as the spec gives it (the ceil size in ceil mode).
std::vector<int64_t> outputShape(const PoolCase &c) {
  size_t rank = c.x.size() - 2;
  std::vector<int64_t> y(c.x.begin(), c.x.begin() + 2);
  for (size_t d = 0; d < rank; ++d) {
    int64_t in = c.x[2 + d], s = c.strides.empty() ? 1 : c.strides[d];
    int64_t dil = c.dilations.empty() ? 1 : c.dilations[d];
    int64_t ek = (c.kernel[d] - 1) * dil + 1;
    if (c.autoPad == "SAME_UPPER" || c.autoPad == "SAME_LOWER") {
      y.push_back((in + s - 1) / s);
      continue;
    }
    int64_t pads = c.pads.empty() ? 0 : c.pads[d] + c.pads[rank + d];
    int64_t span = in + pads - ek;
    y.push_back((c.ceil ? (span + s - 1) / s : span / s) + 1);
  }
  return y;
}

/// A cpu tensor shape with no data, for the cpu's geometry helpers.
cpu::TensorRef shapeRefOf(llvm::ArrayRef<int64_t> shape) {
  cpu::TensorRef r;
  r.shape.assign(shape.begin(), shape.end());
  return r;
}

/// The case's windows as the cpu kernels build them, and as PoolMath.h.
struct ResolvedPool {
  std::vector<uint64_t> tables = std::vector<uint64_t>(1 << 12);
  cpu::Workspace ws{tables.data(), tables.size() * sizeof(uint64_t)};
  cpu::Pool3 cpuPool;
  PoolShape shape;
};

void resolveBoth(const PoolCase &c, ResolvedPool &r) {
  AttributeList a = poolAttrs(c);
  cpu::KernelCall call{"MaxPool", "test", 17, a, {}, {}};
  call.workspace = &r.ws;
  cpu::TensorRef x = shapeRefOf(c.x), y = shapeRefOf(outputShape(c));
  auto g = cpu::poolGeometry(call, x, y, c.ceil, /*allowDilations=*/true);
  ASSERT_TRUE(static_cast<bool>(g)) << llvm::toString(g.takeError());
  auto p3 = cpu::makePool3(call, *g, c.x[0] * c.x[1]);
  ASSERT_TRUE(static_cast<bool>(p3)) << llvm::toString(p3.takeError());
  r.cpuPool = *p3;
  r.shape = poolShapeOf(*g, c.x[0] * c.x[1]);
}

/// Bit patterns equal, or both NaN.
bool sameFloat(float a, float b) {
  if (std::isnan(a) || std::isnan(b))
    return std::isnan(a) && std::isnan(b);
  uint32_t ua, ub;
  std::memcpy(&ua, &a, 4);
  std::memcpy(&ub, &b, 4);
  return ua == ub;
}

void expectSameFloats(const std::vector<float> &got, const OwnedTensor &want) {
  ASSERT_EQ(static_cast<int64_t>(got.size()), want.ref.numElements());
  const float *w = want.ref.as<const float>();
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!sameFloat(got[i], w[i]) && bad++ == 0)
      first = i;
  EXPECT_EQ(bad, 0u) << bad << " of " << got.size()
                     << " elements differ; first at " << first << ": got "
                     << got[first] << ", want " << w[first];
}

/// Values in {-3, ..., 2}: windows with tied maxima.
OwnedTensor tiedTensor(DType dtype, llvm::ArrayRef<int64_t> shape,
                       std::mt19937 &rng) {
  return randomTensor(dtype, shape, rng, -3, 3, DrawKind::Floored);
}

llvm::Error runCpuKernel(cpu::KernelFn fn, llvm::StringRef op,
                         const AttributeList &a,
                         std::initializer_list<const OwnedTensor *> ins,
                         std::initializer_list<OwnedTensor *> outs) {
  if (!fn)
    return cudaKernelError("no cpu kernel for " + op);
  return cpu::test::runKernel(fn, op, a, ins, outs);
}

//===----------------------------------------------------------------------===//
// Host math
//===----------------------------------------------------------------------===//

TEST(CudaPoolMath, WindowsMatchTheCpuTables) {
  for (const PoolCase &c : kCases) {
    SCOPED_TRACE(describe(c));
    ResolvedPool r;
    resolveBoth(c, r);
    if (HasFatalFailure())
      return;
    const cpu::Pool3 &q = r.cpuPool;
    const PoolShape &p = r.shape;
    EXPECT_EQ(p.planes, q.planes);
    EXPECT_EQ(p.inPlane, q.inPlane);
    EXPECT_EQ(p.outPlane, q.outPlane);
    for (int a = 0; a < kPoolAxes; ++a) {
      EXPECT_EQ(p.in[a], q.in[a]);
      EXPECT_EQ(p.out[a], q.out[a]);
      EXPECT_EQ(p.dil[a], q.dil[a]);
      for (int64_t o = 0; o < p.out[a]; ++o) {
        PoolAxisWindow w = poolAxisWindow(p, a, o);
        EXPECT_EQ(w.start, q.start[a][o]) << "axis " << a << " output " << o;
        EXPECT_EQ(w.first, q.taps[a].first[o])
            << "axis " << a << " output " << o;
        EXPECT_EQ(w.last, q.taps[a].last[o]) << "axis " << a << " output " << o;
        EXPECT_EQ(w.padded, q.taps[a].padded[o])
            << "axis " << a << " output " << o;
      }
    }
  }
}

TEST(CudaPoolMath, CoveringOutputsAreTheWindowsThatReadInOrder) {
  for (const PoolCase &c : kCases) {
    SCOPED_TRACE(describe(c));
    ResolvedPool r;
    resolveBoth(c, r);
    if (HasFatalFailure())
      return;
    const cpu::Pool3 &q = r.cpuPool;
    const PoolShape &p = r.shape;
    // Naive: walk every window's real taps (the cpu's tables), output by
    // output, noting who reads each input.
    std::vector<std::vector<int64_t>> want(p.inPlane);
    int64_t o = 0;
    for (int64_t o0 = 0; o0 < q.out[0]; ++o0)
      for (int64_t o1 = 0; o1 < q.out[1]; ++o1)
        for (int64_t o2 = 0; o2 < q.out[2]; ++o2, ++o)
          for (int64_t j0 = q.taps[0].first[o0]; j0 < q.taps[0].last[o0]; ++j0)
            for (int64_t j1 = q.taps[1].first[o1]; j1 < q.taps[1].last[o1];
                 ++j1)
              for (int64_t j2 = q.taps[2].first[o2]; j2 < q.taps[2].last[o2];
                   ++j2) {
                int64_t i0 = q.start[0][o0] + j0 * q.dil[0];
                int64_t i1 = q.start[1][o1] + j1 * q.dil[1];
                int64_t i2 = q.start[2][o2] + j2 * q.dil[2];
                want[(i0 * q.in[1] + i1) * q.in[2] + i2].push_back(o);
              }
    for (int64_t i = 0; i < p.inPlane; ++i) {
      int64_t pos[kPoolAxes];
      poolInputPosition(p, i, pos);
      std::vector<int64_t> got;
      poolForEachCoveringOutput(p, pos, [&](const int64_t *out, int64_t oo) {
        EXPECT_EQ((out[0] * p.out[1] + out[1]) * p.out[2] + out[2], oo);
        got.push_back(oo);
      });
      EXPECT_EQ(got, want[i]) << "input " << i;
    }
  }
}

TEST(CudaPoolMath, ElementFunctionsMatchTheCpuKernelsBitForBit) {
  std::mt19937 rng(20240917);
  int caseNo = 0;
  for (const PoolCase &c : kCases) {
    SCOPED_TRACE(describe(c));
    ResolvedPool r;
    resolveBoth(c, r);
    if (HasFatalFailure())
      return;
    const PoolShape &p = r.shape;
    std::vector<int64_t> yShape = outputShape(c);
    bool columnMajor = caseNo++ % 2;
    bool countIncludePad = caseNo % 3 == 0;

    OwnedTensor x = tiedTensor(DType::F32, c.x, rng);
    float *xs = x.ref.as<float>();
    xs[x.ref.numElements() / 3] = NAN; // a NaN wins its windows
    OwnedTensor smooth = randomTensor(DType::F32, c.x, rng, -2, 2);
    OwnedTensor dy = randomTensor(DType::F32, yShape, rng, -1, 1);
    const float *sm = smooth.ref.as<const float>();
    const float *dys = dy.ref.as<const float>();

    // MaxPool with Indices.
    AttributeList maxAttrs =
        poolAttrs(c, {intAttr("storage_order", columnMajor ? 1 : 0)});
    OwnedTensor y(DType::F32, yShape), idx(DType::I64, yShape);
    ASSERT_NO_ERROR(runCpuKernel(cpu::lookupKernel("MaxPool"), "MaxPool",
                                 maxAttrs, {&x}, {&y, &idx}));
    std::vector<float> gotY(p.planes * p.outPlane);
    std::vector<int64_t> gotIdx(gotY.size());
    for (int64_t e = 0; e < static_cast<int64_t>(gotY.size()); ++e) {
      int64_t plane = e / p.outPlane;
      const float *xp = xs + plane * p.inPlane;
      PoolArgmax m =
          poolMaxAt(p, e % p.outPlane, [&](int64_t i) { return xp[i]; });
      gotY[e] = m.value;
      gotIdx[e] = poolIndexOf(p, m.pos, plane, columnMajor);
    }
    expectSameFloats(gotY, y);
    EXPECT_EQ(gotIdx, std::vector<int64_t>(idx.ref.as<int64_t>(),
                                           idx.ref.as<int64_t>() +
                                               idx.ref.numElements()));

    // AveragePool.
    AttributeList avgAttrs =
        poolAttrs(c, {intAttr("count_include_pad", countIncludePad)});
    OwnedTensor avg(DType::F32, yShape);
    ASSERT_NO_ERROR(runCpuKernel(cpu::lookupKernel("AveragePool"),
                                 "AveragePool", avgAttrs, {&smooth}, {&avg}));
    for (int64_t e = 0; e < static_cast<int64_t>(gotY.size()); ++e) {
      const float *xp = sm + (e / p.outPlane) * p.inPlane;
      gotY[e] = poolAverageAt(p, e % p.outPlane, countIncludePad,
                              [&](int64_t i) { return xp[i]; });
    }
    expectSameFloats(gotY, avg);

    // MaxPoolGrad (the NaN's windows route to it) and AveragePoolGrad.
    OwnedTensor dxMax(DType::F32, c.x), dxAvg(DType::F32, c.x);
    ASSERT_NO_ERROR(runCpuKernel(cpu::lookupZincKernel("MaxPoolGrad"),
                                 "MaxPoolGrad", maxAttrs, {&dy, &x}, {&dxMax}));
    ASSERT_NO_ERROR(runCpuKernel(cpu::lookupZincKernel("AveragePoolGrad"),
                                 "AveragePoolGrad", avgAttrs, {&dy}, {&dxAvg}));
    std::vector<float> gotMax(p.planes * p.inPlane), gotAvg(gotMax.size());
    for (int64_t e = 0; e < static_cast<int64_t>(gotMax.size()); ++e) {
      int64_t plane = e / p.inPlane;
      const float *xp = xs + plane * p.inPlane;
      const float *dyp = dys + plane * p.outPlane;
      auto loadDy = [&](int64_t o) { return dyp[o]; };
      gotMax[e] = poolMaxGradAt(p, e % p.inPlane, loadDy,
                                [&](int64_t i) { return xp[i]; });
      gotAvg[e] = poolAverageGradAt(p, e % p.inPlane, countIncludePad, loadDy);
    }
    expectSameFloats(gotMax, dxMax);
    expectSameFloats(gotAvg, dxAvg);
  }
}

TEST(CudaPoolMath, TiesGoToTheFirstMaximumInWindowOrder) {
  // One plane [1, 4]: window [0, 3) holds 5, 7, 7; the first 7 wins, and
  // only it receives the gradient of both windows that pick it.
  PoolShape p;
  p.planes = 1;
  p.in[2] = 4;
  p.out[2] = 2;
  p.kernel[2] = 3;
  p.inPlane = 4;
  p.outPlane = 2;
  const float x[] = {5, 7, 7, 1};
  auto load = [&](int64_t i) { return x[i]; };
  EXPECT_EQ(poolMaxAt(p, 0, load).pos[2], 1);
  EXPECT_EQ(poolMaxAt(p, 1, load).pos[2], 1);
  const float dy[] = {0.5f, 0.25f};
  auto loadDy = [&](int64_t o) { return dy[o]; };
  EXPECT_EQ(poolMaxGradAt(p, 1, loadDy, load), 0.75f);
  EXPECT_EQ(poolMaxGradAt(p, 2, loadDy, load), 0.0f);
}

//===----------------------------------------------------------------------===//
// Argument checks, before any CUDA call
//===----------------------------------------------------------------------===//

/// An operand of a failing call: its type and shape (absent: nullptr).
struct Operand {
  DType dtype;
  std::vector<int64_t> shape;
};

std::string cpuErrorOf(llvm::StringRef op, bool zinc, const AttributeList &a,
                       std::vector<const Operand *> ins,
                       std::vector<const Operand *> outs) {
  std::vector<OwnedTensor> owned;
  owned.reserve(ins.size() + outs.size());
  std::vector<const cpu::TensorRef *> inRefs;
  std::vector<cpu::TensorRef *> outRefs;
  for (const Operand *o : ins) {
    if (o)
      owned.emplace_back(o->dtype, o->shape);
    inRefs.push_back(o ? &owned.back().ref : nullptr);
  }
  for (const Operand *o : outs) {
    if (o)
      owned.emplace_back(o->dtype, o->shape);
    outRefs.push_back(o ? &owned.back().ref : nullptr);
  }
  cpu::KernelFn fn = zinc ? cpu::lookupZincKernel(op) : cpu::lookupKernel(op);
  if (!fn)
    return "no cpu kernel for " + op.str();
  cpu::KernelCall call{op, "test", 17, a, inRefs, outRefs};
  return errorText(cpu::test::runWithWorkspace(fn, call));
}

std::string cudaErrorOf(CudaKernelFn fn, llvm::StringRef op,
                        const AttributeList &a,
                        std::vector<const Operand *> ins,
                        std::vector<const Operand *> outs) {
  std::vector<DeviceTensor> owned;
  owned.reserve(ins.size() + outs.size());
  std::vector<const DeviceTensor *> inRefs;
  std::vector<DeviceTensor *> outRefs;
  for (const Operand *o : ins) {
    if (o)
      owned.push_back(shapeOnly(o->dtype, o->shape));
    inRefs.push_back(o ? &owned.back() : nullptr);
  }
  for (const Operand *o : outs) {
    if (o)
      owned.push_back(shapeOnly(o->dtype, o->shape));
    outRefs.push_back(o ? &owned.back() : nullptr);
  }
  CudaKernelCall call{op, "test", 17, a, inRefs, outRefs};
  return errorText(fn(call));
}

TEST(CudaPoolNoDevice, BadCallsFailWithTheCpuMessages) {
  struct Bad {
    const char *op;
    bool zinc;
    CudaKernelFn fn;
    AttributeList attrs;
    std::vector<Operand> ins, outs;
  };
  AttributeList k33 = attrs({intsAttr("kernel_shape", {3, 3})});
  AttributeList storage2 =
      attrs({intsAttr("kernel_shape", {3, 3}), intAttr("storage_order", 2)});
  AttributeList same =
      attrs({intsAttr("kernel_shape", {3, 3}), stringAttr("auto_pad", "SAME")});
  AttributeList shortPads =
      attrs({intsAttr("kernel_shape", {3, 3}), intsAttr("pads", {1, 1})});
  AttributeList k1111 = attrs({intsAttr("kernel_shape", {1, 1, 1, 1})});
  AttributeList k33ceil =
      attrs({intsAttr("kernel_shape", {3, 3}), intAttr("ceil_mode", 1),
             intsAttr("strides", {4, 4}), intsAttr("pads", {0, 0, 3, 3})});
  Operand x = {DType::F32, {2, 3, 8, 8}}, y = {DType::F32, {2, 3, 6, 6}};
  Operand yOff = {DType::F32, {2, 3, 5, 6}}, yF16 = {DType::F16, {2, 3, 6, 6}};
  Operand idxI32 = {DType::I32, {2, 3, 6, 6}};
  Operand y3 = {DType::F32, {2, 3, 3, 3}}, flat = {DType::F32, {2, 3}};
  Operand x4 = {DType::F32, {1, 1, 2, 2, 2, 2}};
  Operand gapOff = {DType::F32, {2, 3, 2}};
  Operand xI64 = {DType::I64, {2, 3, 4}}, yI64 = {DType::I64, {2, 3, 1}};
  Operand xOther = {DType::F32, {2, 3, 8, 9}};
  Operand dy5 = {DType::F32, {2, 3, 5, 5}};
  const Bad cases[] = {
      {"MaxPool", false, runMaxPool, attrs({}), {x}, {y}},
      {"MaxPool", false, runMaxPool, k33, {x}, {yOff}},
      {"MaxPool", false, runMaxPool, k33, {x}, {yF16}},
      {"MaxPool", false, runMaxPool, k33, {x}, {y, idxI32}},
      {"MaxPool", false, runMaxPool, storage2, {x}, {y}},
      {"MaxPool", false, runMaxPool, same, {x}, {y}},
      {"MaxPool", false, runMaxPool, shortPads, {x}, {y}},
      // The last window starts in the end pad (ceil mode): nothing real.
      {"MaxPool", false, runMaxPool, k33ceil, {x}, {y3}},
      {"AveragePool", false, runAveragePool, k33ceil, {x}, {y3}},
      {"AveragePool", false, runAveragePool, k33, {flat}, {flat}},
      {"AveragePool", false, runAveragePool, k1111, {x4}, {x4}},
      {"GlobalAveragePool", false, runGlobalAveragePool, {}, {x}, {gapOff}},
      {"GlobalAveragePool", false, runGlobalAveragePool, {}, {xI64}, {yI64}},
      {"MaxPoolGrad", true, runMaxPoolGrad, k33, {y, xOther}, {x}},
      {"MaxPoolGrad", true, runMaxPoolGrad, k33, {y}, {x}},
      {"MaxPoolGrad", true, runMaxPoolGrad, k33ceil, {y3, x}, {x}},
      {"AveragePoolGrad", true, runAveragePoolGrad, k33, {dy5}, {x}},
      {"AveragePoolGrad", true, runAveragePoolGrad, k33, {yF16}, {x}},
  };
  for (const Bad &b : cases) {
    std::vector<const Operand *> ins, outs;
    for (const Operand &o : b.ins)
      ins.push_back(&o);
    for (const Operand &o : b.outs)
      outs.push_back(&o);
    std::string want = cpuErrorOf(b.op, b.zinc, b.attrs, ins, outs);
    SCOPED_TRACE(std::string(b.op) + ": " + want);
    EXPECT_NE(want, "");
    EXPECT_EQ(cudaErrorOf(b.fn, b.op, b.attrs, ins, outs), want);
  }
}

TEST(CudaPoolNoDevice, TypesTheCpuRunsButTheCudaBackendDoesNot) {
  AttributeList k2 = attrs({intsAttr("kernel_shape", {2})});
  Operand x = {DType::I64, {1, 2, 5}}, y = {DType::I64, {1, 2, 4}};
  EXPECT_EQ(cpuErrorOf("MaxPool", false, k2, {&x}, {&y}), "");
  EXPECT_EQ(cudaErrorOf(runMaxPool, "MaxPool", k2, {&x}, {&y}),
            "unsupported: MaxPool of i64 on the cuda backend (f32, f16, bf16)");
  Operand xd = {DType::F64, {1, 2, 5}}, yd = {DType::F64, {1, 2, 4}};
  EXPECT_EQ(
      cudaErrorOf(runAveragePoolGrad, "AveragePoolGrad", k2, {&yd}, {&xd}),
      "unsupported: AveragePoolGrad of f64 on the cuda backend (f32, "
      "f16, bf16)");
}

TEST(CudaPoolNoDevice, RegisteredInTheKernelTable) {
  EXPECT_EQ(lookupCudaKernel("", "MaxPool"), &runMaxPool);
  EXPECT_EQ(lookupCudaKernel("", "AveragePool"), &runAveragePool);
  EXPECT_EQ(lookupCudaKernel("", "GlobalAveragePool"), &runGlobalAveragePool);
  EXPECT_EQ(lookupCudaKernel("zinc", "MaxPoolGrad"), &runMaxPoolGrad);
  EXPECT_EQ(lookupCudaKernel("zinc", "AveragePoolGrad"), &runAveragePoolGrad);
}

//===----------------------------------------------------------------------===//
// With a device: against the cpu kernels
//===----------------------------------------------------------------------===//

/// The shared fixture; the pool kernels take no scratch, so calls get none.
class CudaPool : public DeviceTest {
protected:
  llvm::Error runDevice(CudaKernelFn fn, llvm::StringRef op,
                        const AttributeList &a,
                        std::vector<const DeviceTensor *> ins,
                        std::vector<DeviceTensor *> outs) {
    CudaKernelCall call{op, "test", 17, a, ins, outs};
    call.stream = stream.get();
    return fn(call);
  }

  std::mt19937 rng{20240918};
};

/// Every case once, plus the large one.
std::vector<PoolCase> deviceCases() {
  std::vector<PoolCase> all(std::begin(kCases), std::end(kCases));
  all.push_back(kLargeCase);
  return all;
}

const Tolerance kExact = {0, 0};

TEST_F(CudaPool, MaxPoolAndIndicesMatchCpu) {
  int caseNo = 0;
  for (DType dtype : kFloatTypes)
    for (const PoolCase &c : deviceCases()) {
      bool columnMajor = caseNo++ % 2;
      bool withIndices = caseNo % 3 != 0;
      SCOPED_TRACE(dtypeName(dtype).str() + " " + describe(c) +
                   (columnMajor ? " column major" : ""));
      AttributeList a =
          poolAttrs(c, {intAttr("storage_order", columnMajor ? 1 : 0)});
      std::vector<int64_t> yShape = outputShape(c);
      OwnedTensor x = tiedTensor(dtype, c.x, rng);
      if (dtype == DType::F32)
        x.ref.as<float>()[x.ref.numElements() / 2] = NAN;
      OwnedTensor y(dtype, yShape), idx(DType::I64, yShape);
      ASSERT_NO_ERROR(runCpuKernel(cpu::lookupKernel("MaxPool"), "MaxPool", a,
                                   {&x}, {&y, withIndices ? &idx : nullptr}));
      ASSIGN_OR_FAIL(gx, upload(x));
      ASSIGN_OR_FAIL(gy, allocate(dtype, yShape));
      ASSIGN_OR_FAIL(gi, allocate(DType::I64, yShape));
      ASSERT_NO_ERROR(runDevice(runMaxPool, "MaxPool", a, {&gx},
                                {&gy, withIndices ? &gi : nullptr}));
      ASSIGN_OR_FAIL(hy, download(gy));
      expectValuesClose(hy, y, kExact);
      if (withIndices) {
        ASSIGN_OR_FAIL(hi, download(gi));
        expectValuesClose(hi, idx, kExact);
      }
    }
}

TEST_F(CudaPool, AveragePoolMatchesCpu) {
  int caseNo = 0;
  for (DType dtype : kFloatTypes)
    for (const PoolCase &c : deviceCases())
      for (int countIncludePad : {0, 1}) {
        SCOPED_TRACE(dtypeName(dtype).str() + " " + describe(c) +
                     " count_include_pad " + std::to_string(countIncludePad));
        ++caseNo;
        AttributeList a =
            poolAttrs(c, {intAttr("count_include_pad", countIncludePad)});
        std::vector<int64_t> yShape = outputShape(c);
        OwnedTensor x = randomTensor(dtype, c.x, rng, -2, 2);
        OwnedTensor y(dtype, yShape);
        ASSERT_NO_ERROR(runCpuKernel(cpu::lookupKernel("AveragePool"),
                                     "AveragePool", a, {&x}, {&y}));
        ASSIGN_OR_FAIL(gx, upload(x));
        ASSIGN_OR_FAIL(gy, allocate(dtype, yShape));
        ASSERT_NO_ERROR(
            runDevice(runAveragePool, "AveragePool", a, {&gx}, {&gy}));
        ASSIGN_OR_FAIL(hy, download(gy));
        expectValuesClose(hy, y, kExact);
      }
}

TEST_F(CudaPool, GlobalAveragePoolMatchesCpu) {
  const std::vector<int64_t> shapes[] = {
      {2, 3, 7, 7}, {4, 5, 1000}, {2, 3}, {1, 2, 3, 4, 5}, {64, 40, 3, 3}};
  for (DType dtype : kFloatTypes)
    for (const std::vector<int64_t> &shape : shapes) {
      SCOPED_TRACE(dtypeName(dtype).str() + " " + formatShape(shape));
      std::vector<int64_t> yShape(shape.size(), 1);
      yShape[0] = shape[0];
      yShape[1] = shape[1];
      OwnedTensor x = randomTensor(dtype, shape, rng, -2, 3);
      OwnedTensor y(dtype, yShape);
      AttributeList a = attrs({});
      ASSERT_NO_ERROR(runCpuKernel(cpu::lookupKernel("GlobalAveragePool"),
                                   "GlobalAveragePool", a, {&x}, {&y}));
      ASSIGN_OR_FAIL(gx, upload(x));
      ASSIGN_OR_FAIL(gy, allocate(dtype, yShape));
      ASSERT_NO_ERROR(runDevice(runGlobalAveragePool, "GlobalAveragePool", a,
                                {&gx}, {&gy}));
      ASSIGN_OR_FAIL(hy, download(gy));
      // Both sum in double, in different orders, then round to float.
      double ulp = halfUlp(dtype);
      expectValuesClose(hy, y,
                        ulp ? Tolerance{0, ulp} : Tolerance{1e-12, 2.5e-7});
    }
}

TEST_F(CudaPool, MaxPoolGradMatchesCpu) {
  for (DType dtype : kFloatTypes)
    for (const PoolCase &c : deviceCases()) {
      SCOPED_TRACE(dtypeName(dtype).str() + " " + describe(c));
      AttributeList a = poolAttrs(c);
      std::vector<int64_t> yShape = outputShape(c);
      OwnedTensor x = tiedTensor(dtype, c.x, rng);
      if (dtype == DType::F32)
        x.ref.as<float>()[x.ref.numElements() / 3] = NAN;
      OwnedTensor dy = randomTensor(dtype, yShape, rng, -1, 1);
      OwnedTensor dx(dtype, c.x);
      ASSERT_NO_ERROR(runCpuKernel(cpu::lookupZincKernel("MaxPoolGrad"),
                                   "MaxPoolGrad", a, {&dy, &x}, {&dx}));
      ASSIGN_OR_FAIL(gx, upload(x));
      ASSIGN_OR_FAIL(gdy, upload(dy));
      ASSIGN_OR_FAIL(gdx, allocate(dtype, c.x));
      ASSERT_NO_ERROR(
          runDevice(runMaxPoolGrad, "MaxPoolGrad", a, {&gdy, &gx}, {&gdx}));
      ASSIGN_OR_FAIL(hdx, download(gdx));
      expectValuesClose(hdx, dx, kExact);
    }
}

TEST_F(CudaPool, AveragePoolGradMatchesCpu) {
  for (DType dtype : kFloatTypes)
    for (const PoolCase &c : deviceCases())
      for (int countIncludePad : {0, 1}) {
        SCOPED_TRACE(dtypeName(dtype).str() + " " + describe(c) +
                     " count_include_pad " + std::to_string(countIncludePad));
        AttributeList a =
            poolAttrs(c, {intAttr("count_include_pad", countIncludePad)});
        std::vector<int64_t> yShape = outputShape(c);
        OwnedTensor dy = randomTensor(dtype, yShape, rng, -1, 1);
        OwnedTensor dx(dtype, c.x);
        ASSERT_NO_ERROR(runCpuKernel(cpu::lookupZincKernel("AveragePoolGrad"),
                                     "AveragePoolGrad", a, {&dy}, {&dx}));
        ASSIGN_OR_FAIL(gdy, upload(dy));
        ASSIGN_OR_FAIL(gdx, allocate(dtype, c.x));
        ASSERT_NO_ERROR(runDevice(runAveragePoolGrad, "AveragePoolGrad", a,
                                  {&gdy}, {&gdx}));
        ASSIGN_OR_FAIL(hdx, download(gdx));
        expectValuesClose(hdx, dx, kExact);
      }
}

TEST_F(CudaPool, GradientsAreTheSameEveryRun) {
  AttributeList a = poolAttrs(kLargeCase);
  std::vector<int64_t> yShape = outputShape(kLargeCase);
  OwnedTensor x = tiedTensor(DType::F32, kLargeCase.x, rng);
  OwnedTensor dy = randomTensor(DType::F32, yShape, rng, -1, 1);
  ASSIGN_OR_FAIL(gx, upload(x));
  ASSIGN_OR_FAIL(gdy, upload(dy));
  std::vector<OwnedTensor> runs;
  for (int run = 0; run < 2; ++run) {
    ASSIGN_OR_FAIL(gdx, allocate(DType::F32, kLargeCase.x));
    ASSERT_NO_ERROR(
        runDevice(runMaxPoolGrad, "MaxPoolGrad", a, {&gdy, &gx}, {&gdx}));
    ASSIGN_OR_FAIL(hdx, download(gdx));
    runs.push_back(hdx);
  }
  EXPECT_EQ(
      std::memcmp(runs[0].ref.data, runs[1].ref.data, runs[0].ref.byteSize()),
      0);
}

} // namespace
