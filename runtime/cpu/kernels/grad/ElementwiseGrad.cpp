//===- ElementwiseGrad.cpp - Fused backward kernels of activations --------===//
//
// Each is dx = f(v, dy) elementwise, where v is the forward input (Relu,
// LeakyRelu, Clip, Gelu, Erf) or output (Sigmoid, Tanh) and every operand has
// the same shape: one pass instead of the chain of ONNX ops the derivative
// would otherwise be. Computed in the compute type (float for the 16-bit
// floats) and rounded once.
//
//===----------------------------------------------------------------------===//
#include "../KernelUtil.h"
#include "../Kernels.h"
#include "zinc/runtime/cpu/RowMath.h"
#include "llvm/ADT/Twine.h"
#include <cmath>

namespace zinc::cpu {

/// Checks (v, dy) -> dx: present, one float type, one shape.
static llvm::Error checkGradOperands(const KernelCall &call) {
  const TensorRef *v = call.input(0), *dy = call.input(1);
  const TensorRef *dx = call.output(0);
  if (!v || !dy || !dx)
    return kernelError(call.opType +
                       ": expects inputs (value, dy) and output dx");
  for (const TensorRef *t : {dy, dx}) {
    if (t->dtype != v->dtype)
      return kernelError(call.opType + ": element types " +
                         dtypeName(v->dtype) + " and " + dtypeName(t->dtype) +
                         " differ");
    if (t->shape != v->shape)
      return kernelError(call.opType + ": shapes " + formatShape(v->shape) +
                         " and " + formatShape(t->shape) + " differ");
  }
  if (!isFloatDType(v->dtype))
    return kernelError("unsupported: " + call.opType + " with element type " +
                       dtypeName(v->dtype));
  return llvm::Error::success();
}

/// dx[i] = fn(v[i], dy[i]) with fn on compute values.
/// RowMath's loop for an f32 gradient: dx from x (or y) and dy.
using F32GradRows = void (*)(const float *v, const float *dy, float *dx,
                             int64_t n);

template <typename Fn>
static llvm::Error runGradMap(const KernelCall &call, const Fn &fn,
                              F32GradRows rows = nullptr) {
  if (auto err = checkGradOperands(call))
    return err;
  const TensorRef &v = *call.input(0), &dy = *call.input(1);
  TensorRef &dx = *call.output(0);
  if (rows && v.dtype == DType::F32) {
    const float *pv = v.as<const float>(), *pg = dy.as<const float>();
    float *po = dx.as<float>();
    parallelRanges(v.numElements(), v.byteSize() * 3,
                   [&](int64_t b, int64_t e) {
                     rows(pv + b, pg + b, po + b, e - b);
                   });
    return llvm::Error::success();
  }
  visitDType(v.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (isFloatStorage<T>()) {
      const T *pv = v.as<T>(), *pg = dy.as<T>();
      T *po = dx.as<T>();
      parallelRanges(v.numElements(), v.byteSize() * 3,
                     [&](int64_t b, int64_t e) {
                       for (int64_t i = b; i < e; ++i)
                         po[i] = store<T>(fn(load(pv[i]), load(pg[i])));
                     });
    }
  });
  return llvm::Error::success();
}

/// PyTorch's convention: no gradient at x == 0.
llvm::Error runReluGrad(const KernelCall &call) {
  return runGradMap(call, [](auto x, auto g) {
    using C = decltype(x);
    return x > C(0) ? g : C(0);
  });
}

/// x <= 0 takes the slope, as in PyTorch's leaky_relu_backward.
llvm::Error runLeakyReluGrad(const KernelCall &call) {
  double alpha = call.attrs.getFloat("alpha", 0.01);
  return runGradMap(call, [alpha](auto x, auto g) {
    using C = decltype(x);
    return x > C(0) ? g : static_cast<C>(alpha) * g;
  });
}

/// ClipGrad(x, dy, min, max): dy where min < x < max, else 0 (min and max
/// optional scalars of x's type; absent is unbounded). The strict bounds are
/// PyTorch's hardtanh_backward, which nn.ReLU6, F.relu6 and F.hardtanh (the
/// exports of torchvision's activations) train with; torch.clamp's backward
/// differs only at x exactly equal to a bound, where it passes dy.
llvm::Error runClipGrad(const KernelCall &call) {
  if (auto err = checkGradOperands(call))
    return err;
  const TensorRef &x = *call.input(0);
  double bounds[2] = {-INFINITY, INFINITY};
  for (size_t i : {2, 3}) {
    const TensorRef *b = call.input(i);
    if (!b)
      continue;
    if (b->dtype != x.dtype || b->numElements() != 1)
      return kernelError(call.opType + ": " + (i == 2 ? "min" : "max") +
                         " must be a scalar of type " + dtypeName(x.dtype) +
                         ", has type " + dtypeName(b->dtype) + " and shape " +
                         formatShape(b->shape));
    visitDType(b->dtype, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (isFloatStorage<T>())
        bounds[i - 2] = static_cast<double>(load(b->as<T>()[0]));
    });
  }
  return runGradMap(call, [lo = bounds[0], hi = bounds[1]](auto x, auto g) {
    using C = decltype(x);
    return x > static_cast<C>(lo) && x < static_cast<C>(hi) ? g : C(0);
  });
}

llvm::Error runGeluGrad(const KernelCall &call) {
  llvm::StringRef approx = call.attrs.getString("approximate", "none");
  static const auto erfRows = [](const float *x, const float *dy, float *dx,
                                 int64_t n) {
    rowMath().geluGrad(x, dy, dx, n, GeluForm::Erf);
  };
  static const auto tanhRows = [](const float *x, const float *dy, float *dx,
                                  int64_t n) {
    rowMath().geluGrad(x, dy, dx, n, GeluForm::Tanh);
  };
  if (approx == "none")
    // d/dx x Phi(x) = Phi(x) + x phi(x).
    return runGradMap(call, [](auto x, auto g) {
      using C = decltype(x);
      const C invSqrt2Pi = C(0.3989422804014327);
      C cdf = C(0.5) * (C(1) + std::erf(x * C(M_SQRT1_2)));
      C pdf = invSqrt2Pi * std::exp(C(-0.5) * x * x);
      return g * (cdf + x * pdf);
    }, +erfRows);
  if (approx == "tanh")
    // y = x/2 (1 + tanh(u)), u = k (x + c x^3):
    // dy/dx = (1 + t)/2 + x/2 (1 - t^2) k (1 + 3 c x^2).
    return runGradMap(call, [](auto x, auto g) {
      using C = decltype(x);
      const C k = C(0.7978845608028654), c = C(0.044715);
      C t = std::tanh(k * (x + c * x * x * x));
      C d = C(0.5) * (C(1) + t) +
            C(0.5) * x * (C(1) - t * t) * k * (C(1) + C(3) * c * x * x);
      return g * d;
    }, +tanhRows);
  return kernelError("unsupported: GeluGrad with approximate=\"" + approx +
                     "\"");
}

/// From the output y = sigmoid(x): dx = dy y (1 - y).
llvm::Error runSigmoidGrad(const KernelCall &call) {
  return runGradMap(call, [](auto y, auto g) {
    using C = decltype(y);
    return g * y * (C(1) - y);
  });
}

/// From the output y = tanh(x): dx = dy (1 - y^2).
llvm::Error runTanhGrad(const KernelCall &call) {
  return runGradMap(call, [](auto y, auto g) {
    using C = decltype(y);
    return g * (C(1) - y * y);
  });
}

/// d/dx erf(x) = 2/sqrt(pi) exp(-x^2).
llvm::Error runErfGrad(const KernelCall &call) {
  return runGradMap(call, [](auto x, auto g) {
    using C = decltype(x);
    return g * C(M_2_SQRTPI) * std::exp(-x * x);
  }, rowMath().erfGrad);
}

/// SiluGrad(x, dy): dy s (1 + x (1 - s)) with s = sigmoid(x), as PyTorch's
/// silu_backward.
llvm::Error runSiluGrad(const KernelCall &call) {
  return runGradMap(call, [](auto x, auto g) {
    using C = decltype(x);
    C s = C(1) / (C(1) + std::exp(-x));
    return g * (s * (C(1) + x * (C(1) - s)));
  });
}

/// HardSigmoidGrad(x, dy) {alpha, beta}: alpha dy where the line is inside
/// (0, 1), else 0: PyTorch's hardsigmoid_backward (-3 < x < 3 for its
/// alpha 1/6, beta 1/2).
llvm::Error runHardSigmoidGrad(const KernelCall &call) {
  double alpha = call.attrs.getFloat("alpha", 0.2);
  double beta = call.attrs.getFloat("beta", 0.5);
  return runGradMap(call, [alpha, beta](auto x, auto g) {
    using C = decltype(x);
    C t = static_cast<C>(alpha) * x + static_cast<C>(beta);
    return t > C(0) && t < C(1) ? static_cast<C>(alpha) * g : C(0);
  });
}

/// HardSwishGrad(x, dy): 0 below -3, dy (x / 3 + 1/2) up to 3, dy above, as
/// PyTorch's hardswish_backward.
llvm::Error runHardSwishGrad(const KernelCall &call) {
  return runGradMap(call, [](auto x, auto g) {
    using C = decltype(x);
    if (x < C(-3))
      return C(0);
    if (x <= C(3))
      return g * (x / C(3) + C(0.5));
    return g;
  });
}

} // namespace zinc::cpu
