//===- GradCheck.cpp - Gradient rules against finite differences ----------===//
#include "GradCheck.h"
#include "zinc/frontend/OnnxImporter.h"
#include "zinc/passes/EmitPlan.h"
#include "zinc/passes/LossOutput.h"
#include "zinc/passes/PassManager.h"
#include "zinc/runtime/Executor.h"
#include "zinc/runtime/Program.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"
#include "gtest/gtest.h"
#include <cmath>
#include <random>

namespace zinc::test {

std::string randomInitializers(llvm::ArrayRef<ParamSpec> params, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::string out;
  llvm::raw_string_ostream os(out);
  for (size_t i = 0; i < params.size(); ++i) {
    const ParamSpec &p = params[i];
    std::uniform_real_distribution<double> dist(p.low, p.high);
    // ONNX text writes a scalar type without brackets.
    os << (i ? ", " : "") << "double";
    if (!p.shape.empty()) {
      os << "[";
      for (size_t d = 0; d < p.shape.size(); ++d)
        os << (d ? "," : "") << p.shape[d];
      os << "]";
    }
    os << " " << p.name << " = {";
    int64_t n = 1;
    for (int64_t d : p.shape)
      n *= d;
    for (int64_t k = 0; k < n; ++k)
      os << (k ? "," : "") << llvm::formatv("{0:e17}", dist(rng));
    os << "}";
  }
  return os.str();
}

std::string gradCheckModel(llvm::StringRef initializers, llvm::StringRef body, int opset) {
  return llvm::formatv("<ir_version: 8, opset_import: [\"\" : {0}]>\n"
                       "g () => (double loss)\n<{1}>\n{{\n{2}\n}\n",
                       opset, initializers, body)
      .str();
}

namespace {

/// A compiled gradient-check program and how to read it.
struct Harness {
  std::unique_ptr<rt::Program> program;
  int lossId = -1;
  llvm::StringMap<int> paramIds; // initializer name -> tensor id
  llvm::StringMap<int> gradIds;  // initializer name -> gradient tensor id

  double loss() {
    auto step = rt::executeStep(*program, 1, false);
    EXPECT_TRUE(static_cast<bool>(step)) << llvm::toString(step.takeError());
    return *program->tensor(lossId).as<double>();
  }
};

llvm::Expected<Harness> build(llvm::StringRef text, const GradCheckOptions &opts) {
  llvm::SmallString<128> path;
  if (std::error_code ec =
          llvm::sys::fs::createTemporaryFile("gradcheck", "onnxtxt", path))
    return llvm::errorCodeToError(ec);
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    os << text;
  }
  // The runtime reads the weights from the model file: keep it until then.
  llvm::FileRemover removeModel(path);
  auto graph = frontend::importOnnxModel(path, {});
  if (!graph)
    return graph.takeError();
  passes::PassContext ctx;
  ctx.training.optimizer = OptimizerKind::None;
  ctx.training.freeze = opts.freeze;
  passes::PassManager pm(ctx);
  pm.setVerifyEach(true);
  if (auto err = pm.parsePipeline(opts.pipeline))
    return err;
  if (auto err = pm.run(**graph))
    return err;
  for (const std::string &op : opts.expectOps) {
    bool found = false;
    for (const ir::Node *n : (*graph)->nodes())
      found |=
          (n->domain.empty() ? n->opType : n->domain + "." + n->opType) == op;
    if (!found)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "the pipeline made no " + op);
  }
  auto loss = findLossOutput(**graph, "loss");
  if (!loss)
    return loss.takeError();
  EmitOptions emitOpts;
  emitOpts.mode = "train";
  emitOpts.loss = *loss;
  auto plan = emitPlan(**graph, emitOpts);
  if (!plan)
    return plan.takeError();
  Harness h;
  for (const plan::Tensor &t : plan->tensors()) {
    if (t.role() == plan::ROLE_PARAMETER)
      h.paramIds[t.init().name()] = t.id();
    llvm::StringRef name = t.name();
    if (name.consume_back(".grad"))
      h.gradIds[name] = t.id();
  }
  h.lossId = plan->loss();
  auto program = rt::Program::fromPlan(std::move(*plan));
  if (!program)
    return program.takeError();
  h.program = std::move(*program);
  return h;
}

} // namespace

void expectGradientsMatch(llvm::StringRef modelText, const GradCheckOptions &opts) {
  auto harness = build(modelText, opts);
  ASSERT_TRUE(static_cast<bool>(harness)) << llvm::toString(harness.takeError())
                                          << "\n" << modelText.str();
  Harness &h = *harness;
  ASSERT_FALSE(h.gradIds.empty()) << "no parameter got a gradient";
  h.loss();
  // Analytic gradients first: the finite differences below overwrite them.
  llvm::StringMap<std::vector<double>> analytic;
  for (const auto &entry : h.gradIds) {
    const cpu::TensorRef &g = h.program->tensor(entry.second);
    ASSERT_EQ(g.dtype, DType::F64) << entry.first().str();
    analytic[entry.first()] = std::vector<double>(g.as<double>(), g.as<double>() + g.numElements());
  }
  for (const auto &entry : h.paramIds) {
    llvm::StringRef name = entry.first();
    if (!analytic.count(name))
      continue;
    cpu::TensorRef &p = h.program->tensor(entry.second);
    ASSERT_EQ(p.dtype, DType::F64) << name.str();
    double *values = p.as<double>();
    for (int64_t i = 0; i < p.numElements(); ++i) {
      double saved = values[i];
      values[i] = saved + opts.step;
      double plus = h.loss();
      values[i] = saved - opts.step;
      double minus = h.loss();
      values[i] = saved;
      double numeric = (plus - minus) / (2 * opts.step);
      double got = analytic[name][i];
      EXPECT_LE(std::fabs(got - numeric), opts.tolerance * std::max(1.0, std::fabs(numeric)))
          << "d loss / d " << name.str() << "[" << i << "]: analytic " << got
          << ", finite difference " << numeric;
    }
  }
}

} // namespace zinc::test
