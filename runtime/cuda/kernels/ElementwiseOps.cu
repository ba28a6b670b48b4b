//===- ElementwiseOps.cu - The elementwise ops' cuda kernels --------------===//
//
// Each op's entry point reads its operands and attributes from the call,
// refuses what the cpu kernel refuses (missing operands, unknown attribute
// values) with the same words, and hands the tensors to a launcher of
// Elementwise.cu, which checks shapes and types before queueing anything.
//
//===----------------------------------------------------------------------===//
#include "CudaKernels.h"
#include "zinc/runtime/cuda/Elementwise.h"
#include "llvm/ADT/Twine.h"

namespace zinc::cuda {

/// Checks that inputs [0, nIn) and output 0 are present.
static llvm::Error checkOperands(const CudaKernelCall &call, size_t nIn) {
  for (size_t i = 0; i < nIn; ++i)
    if (!call.input(i))
      return cudaKernelError(call.opType + ": missing input " + llvm::Twine(i));
  if (!call.output(0))
    return cudaKernelError(call.opType + ": missing output 0");
  return llvm::Error::success();
}

static llvm::Error runBinary(const CudaKernelCall &call, BinaryOpKind op) {
  if (llvm::Error err = checkOperands(call, 2))
    return err;
  return launchBinary(op, *call.input(0), *call.input(1), *call.output(0),
                      call.stream);
}

static llvm::Error runUnary(const CudaKernelCall &call, UnaryOpKind op,
                            double alpha = 0.01) {
  if (llvm::Error err = checkOperands(call, 1))
    return err;
  return launchUnary(op, *call.input(0), *call.output(0), call.stream, alpha);
}

/// (v, dy) -> dx, as the cpu's runGradMap.
static llvm::Error runGrad(const CudaKernelCall &call, GradOpKind op,
                           double alpha = 0.01) {
  if (!call.input(0) || !call.input(1) || !call.output(0))
    return cudaKernelError(call.opType +
                           ": expects inputs (value, dy) and output dx");
  return launchGrad(op, *call.input(0), *call.input(1), *call.output(0),
                    call.stream, alpha);
}

/// Gelu's and GeluGrad's `approximate`: "none" (erf) or "tanh".
static llvm::Expected<bool> usesTanh(const CudaKernelCall &call) {
  llvm::StringRef approx = call.attrs.getString("approximate", "none");
  if (approx == "none" || approx == "tanh")
    return approx == "tanh";
  return cudaKernelError("unsupported: " + call.opType +
                         " with approximate=\"" + approx + "\"");
}

llvm::Error runAdd(const CudaKernelCall &call) {
  return runBinary(call, BinaryOpKind::Add);
}
llvm::Error runSub(const CudaKernelCall &call) {
  return runBinary(call, BinaryOpKind::Sub);
}
llvm::Error runMul(const CudaKernelCall &call) {
  return runBinary(call, BinaryOpKind::Mul);
}
llvm::Error runDiv(const CudaKernelCall &call) {
  return runBinary(call, BinaryOpKind::Div);
}
llvm::Error runPow(const CudaKernelCall &call) {
  return runBinary(call, BinaryOpKind::Pow);
}
llvm::Error runEqual(const CudaKernelCall &call) {
  return runBinary(call, BinaryOpKind::Equal);
}
llvm::Error runLess(const CudaKernelCall &call) {
  return runBinary(call, BinaryOpKind::Less);
}
llvm::Error runGreater(const CudaKernelCall &call) {
  return runBinary(call, BinaryOpKind::Greater);
}
llvm::Error runLessOrEqual(const CudaKernelCall &call) {
  return runBinary(call, BinaryOpKind::LessOrEqual);
}
llvm::Error runGreaterOrEqual(const CudaKernelCall &call) {
  return runBinary(call, BinaryOpKind::GreaterOrEqual);
}
llvm::Error runOr(const CudaKernelCall &call) {
  return runBinary(call, BinaryOpKind::Or);
}
llvm::Error runXor(const CudaKernelCall &call) {
  return runBinary(call, BinaryOpKind::Xor);
}
/// Max and Min of two inputs (what PyTorch exports for torch.max(a, b));
/// more are refused by name.
static llvm::Error runExtremum(const CudaKernelCall &call, BinaryOpKind op) {
  if (call.inputs.size() != 2)
    return cudaKernelError("unsupported: " + call.opType + " of " +
                           llvm::Twine(call.inputs.size()) +
                           " inputs on the cuda backend (two)");
  return runBinary(call, op);
}
llvm::Error runMax(const CudaKernelCall &call) {
  return runExtremum(call, BinaryOpKind::Max);
}
llvm::Error runMin(const CudaKernelCall &call) {
  return runExtremum(call, BinaryOpKind::Min);
}
/// Mod {fmod}: a float Mod needs fmod=1, as on the cpu.
llvm::Error runMod(const CudaKernelCall &call) {
  bool fmod = call.attrs.getInt("fmod", 0) != 0;
  if (call.input(0) && !fmod && isFloatDType(call.input(0)->dtype))
    return cudaKernelError("Mod: a float Mod needs fmod=1");
  return runBinary(call, fmod ? BinaryOpKind::Fmod : BinaryOpKind::Mod);
}
llvm::Error runAnd(const CudaKernelCall &call) {
  return runBinary(call, BinaryOpKind::And);
}

llvm::Error runSqrt(const CudaKernelCall &call) {
  return runUnary(call, UnaryOpKind::Sqrt);
}
llvm::Error runReciprocal(const CudaKernelCall &call) {
  return runUnary(call, UnaryOpKind::Reciprocal);
}
llvm::Error runNeg(const CudaKernelCall &call) {
  return runUnary(call, UnaryOpKind::Neg);
}
llvm::Error runExp(const CudaKernelCall &call) {
  return runUnary(call, UnaryOpKind::Exp);
}
llvm::Error runLog(const CudaKernelCall &call) {
  return runUnary(call, UnaryOpKind::Log);
}
llvm::Error runErf(const CudaKernelCall &call) {
  return runUnary(call, UnaryOpKind::Erf);
}
llvm::Error runTanh(const CudaKernelCall &call) {
  return runUnary(call, UnaryOpKind::Tanh);
}
llvm::Error runRelu(const CudaKernelCall &call) {
  return runUnary(call, UnaryOpKind::Relu);
}
llvm::Error runLeakyRelu(const CudaKernelCall &call) {
  return runUnary(call, UnaryOpKind::LeakyRelu,
                  call.attrs.getFloat("alpha", 0.01));
}
llvm::Error runSigmoid(const CudaKernelCall &call) {
  return runUnary(call, UnaryOpKind::Sigmoid);
}
llvm::Error runGelu(const CudaKernelCall &call) {
  llvm::Expected<bool> tanh = usesTanh(call);
  if (!tanh)
    return tanh.takeError();
  return runUnary(call, *tanh ? UnaryOpKind::GeluTanh : UnaryOpKind::Gelu);
}
llvm::Error runNot(const CudaKernelCall &call) {
  return runUnary(call, UnaryOpKind::Not);
}

llvm::Error runWhere(const CudaKernelCall &call) {
  if (llvm::Error err = checkOperands(call, 3))
    return err;
  return launchWhere(*call.input(0), *call.input(1), *call.input(2),
                     *call.output(0), call.stream);
}

llvm::Error runCast(const CudaKernelCall &call) {
  const DeviceTensor *x = call.input(0);
  DeviceTensor *y = call.output(0);
  if (!x || !y)
    return cudaKernelError("Cast: missing input or output");
  // The `to` attribute is what shape inference gave the output; a plan whose
  // output type disagrees with it is corrupt.
  if (const Attribute *to = call.attrs.find("to")) {
    llvm::Optional<DType> want = dtypeFromOnnx(static_cast<int>(to->i));
    if (!want)
      return cudaKernelError("unsupported: Cast to ONNX element type " +
                             llvm::Twine(to->i));
    if (*want != y->dtype)
      return cudaKernelError("Cast: attribute to=" + dtypeName(*want) +
                             " but the output has element type " +
                             dtypeName(y->dtype));
  }
  return launchCast(*x, *y, call.stream);
}

/// CastLike(x, like) is Cast to the element type of `like`, which shape
/// inference gave the output; like's values and shape are never read.
llvm::Error runCastLike(const CudaKernelCall &call) {
  const DeviceTensor *x = call.input(0), *like = call.input(1);
  const DeviceTensor *y = call.output(0);
  if (!x || !like || !y)
    return cudaKernelError(
        "CastLike: expects inputs (input, like) and an output");
  if (like->dtype != y->dtype)
    return cudaKernelError("CastLike: output has element type " +
                           dtypeName(y->dtype) + " but like has " +
                           dtypeName(like->dtype));
  return launchCast(*x, *y, call.stream);
}

llvm::Error runReluGrad(const CudaKernelCall &call) {
  return runGrad(call, GradOpKind::Relu);
}
llvm::Error runLeakyReluGrad(const CudaKernelCall &call) {
  return runGrad(call, GradOpKind::LeakyRelu,
                 call.attrs.getFloat("alpha", 0.01));
}
llvm::Error runGeluGrad(const CudaKernelCall &call) {
  llvm::Expected<bool> tanh = usesTanh(call);
  if (!tanh)
    return tanh.takeError();
  return runGrad(call, *tanh ? GradOpKind::GeluTanh : GradOpKind::Gelu);
}
llvm::Error runSilu(const CudaKernelCall &call) {
  return runUnary(call, UnaryOpKind::Silu);
}
llvm::Error runSiluGrad(const CudaKernelCall &call) {
  return runGrad(call, GradOpKind::Silu);
}
llvm::Error runHardSwish(const CudaKernelCall &call) {
  return runUnary(call, UnaryOpKind::HardSwish);
}
llvm::Error runHardSwishGrad(const CudaKernelCall &call) {
  return runGrad(call, GradOpKind::HardSwish);
}
llvm::Error runSigmoidGrad(const CudaKernelCall &call) {
  return runGrad(call, GradOpKind::Sigmoid);
}
llvm::Error runTanhGrad(const CudaKernelCall &call) {
  return runGrad(call, GradOpKind::Tanh);
}
llvm::Error runErfGrad(const CudaKernelCall &call) {
  return runGrad(call, GradOpKind::Erf);
}

} // namespace zinc::cuda
