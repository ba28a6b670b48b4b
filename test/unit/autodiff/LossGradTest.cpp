//===- LossGradTest.cpp - SoftmaxCrossEntropyLoss and NLL loss rules vs FD ===//
#include "GradCheck.h"
#include "zinc/frontend/OnnxImporter.h"
#include "zinc/passes/PassManager.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/raw_ostream.h"
#include "gtest/gtest.h"

using namespace zinc;
using namespace zinc::test;

namespace {

/// Labels of a [2, 3, 2] target over 4 classes; position 4 holds 1 and
/// position 9 holds -100, the values the ignore_index tests skip.
const char *kLabels =
    "int64[2,3,2] c_lab = {0, 3, 2, 1, 1, 0, 2, 3, 0, -100, 1, 2}";
/// Labels valid without ignore_index (no -100).
const char *kValidLabels =
    "int64[2,3,2] c_lab = {0, 3, 2, 1, 1, 0, 2, 3, 0, 2, 1, 2}";
const char *kWeights = "double[4] c_cw = {0.5, 2.0, 1.25, 0.75}";

/// Checks a model whose parameters are `params` (plus frozen c_r for the
/// per-position weighting of reduction none), whose extra initializers are
/// `constants`, and whose body ends with the double scalar `loss`.
void check(llvm::ArrayRef<ParamSpec> params, llvm::StringRef constants,
           llvm::StringRef body) {
  std::string inits = randomInitializers(params, /*seed=*/5);
  if (!constants.empty())
    inits += ", " + constants.str();
  GradCheckOptions opts;
  opts.freeze = "^c_";
  expectGradientsMatch(gradCheckModel(inits, body), opts);
}

/// `loss` from a per-position loss `l` of shape [2, 2] (reduction none),
/// weighted by the frozen c_r so each position's gradient differs.
const char *kWeightNone = "\n  weighted = Mul(l, c_r)\n"
                          "  loss = ReduceSum<keepdims=0>(weighted)";
const char *kPositionWeights = "double[2,2] c_r = {0.3, -1.1, 0.7, 1.9}";

/// The diagnostic build-training gives for `text`, or "" when it succeeds.
std::string buildTrainingError(llvm::StringRef text) {
  llvm::SmallString<128> path;
  if (std::error_code ec =
          llvm::sys::fs::createTemporaryFile("lossgrad", "onnxtxt", path))
    return "cannot create a temporary file: " + ec.message();
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    os << text;
  }
  llvm::FileRemover remove(path);
  auto graph = frontend::importOnnxModel(path, {});
  if (!graph)
    return "import: " + llvm::toString(graph.takeError());
  passes::PassContext ctx;
  ctx.training.optimizer = OptimizerKind::None;
  passes::PassManager pm(ctx);
  if (auto err = pm.parsePipeline("build-training"))
    return "pipeline: " + llvm::toString(std::move(err));
  if (auto err = pm.run(**graph))
    return llvm::toString(std::move(err));
  return "";
}

} // namespace

//===----------------------------------------------------------------------===//
// SoftmaxCrossEntropyLoss
//===----------------------------------------------------------------------===//

TEST(SoftmaxCrossEntropyLossGrad, MeanOverRows) {
  check({{"x", {5, 4}, -2, 2}}, "int64[5] c_lab = {0, 3, 2, 1, 3}",
        "  loss = SoftmaxCrossEntropyLoss(x, c_lab)");
}

TEST(SoftmaxCrossEntropyLossGrad, SumOverRows) {
  check({{"x", {5, 4}, -2, 2}}, "int64[5] c_lab = {0, 3, 2, 1, 3}",
        "  loss = SoftmaxCrossEntropyLoss<reduction=\"sum\">(x, c_lab)");
}

TEST(SoftmaxCrossEntropyLossGrad, NoneNd) {
  // [N, C, d1, d2] = [2, 4, 3, 2] scores against [2, 3, 2] labels; the
  // per-position losses are summed with weights here.
  check({{"x", {2, 4, 3, 2}, -2, 2}},
        std::string(kValidLabels) + ", double[2,3,2] c_r = {0.3, -1.1, 0.7, "
                                    "1.9, 0.4, -0.2, 1.3, 0.8, -0.6, 1.0, "
                                    "0.1, 2.1}",
        "  l = SoftmaxCrossEntropyLoss<reduction=\"none\">(x, c_lab)"
        "\n  weighted = Mul(l, c_r)\n  loss = ReduceSum<keepdims=0>(weighted)");
}

TEST(SoftmaxCrossEntropyLossGrad, MeanNdWithWeights) {
  // The mean divides by the total weight of the targets, not their count.
  check({{"x", {2, 4, 3, 2}, -2, 2}},
        std::string(kValidLabels) + ", " + kWeights,
        "  loss = SoftmaxCrossEntropyLoss(x, c_lab, c_cw)");
}

TEST(SoftmaxCrossEntropyLossGrad, SumNdWithWeights) {
  check({{"x", {2, 4, 3, 2}, -2, 2}},
        std::string(kValidLabels) + ", " + kWeights,
        "  loss = SoftmaxCrossEntropyLoss<reduction=\"sum\">(x, c_lab, c_cw)");
}

TEST(SoftmaxCrossEntropyLossGrad, MeanIgnoreIndexWithWeights) {
  // Class 1 is ignored: its positions add nothing to sum or denominator.
  check({{"x", {2, 4, 3, 2}, -2, 2}},
        std::string(kValidLabels) + ", " + kWeights,
        "  loss = SoftmaxCrossEntropyLoss<ignore_index=1>(x, c_lab, c_cw)");
}

TEST(SoftmaxCrossEntropyLossGrad, MeanNegativeIgnoreIndex) {
  check({{"x", {2, 4, 3, 2}, -2, 2}}, kLabels,
        "  loss = SoftmaxCrossEntropyLoss<ignore_index=-100>(x, c_lab)");
}

TEST(SoftmaxCrossEntropyLossGrad, NoneIgnoreIndex) {
  check({{"x", {2, 4, 2}, -2, 2}},
        std::string("int64[2,2] c_lab = {3, -1, 1, -1}, ") + kPositionWeights,
        std::string("  l = SoftmaxCrossEntropyLoss<reduction=\"none\", "
                    "ignore_index=-1>(x, c_lab)") +
            kWeightNone);
}

TEST(SoftmaxCrossEntropyLossGrad, Int32Labels) {
  check({{"x", {3, 4}, -2, 2}}, "int32[3] c_lab = {2, 0, 3}",
        "  loss = SoftmaxCrossEntropyLoss(x, c_lab)");
}

TEST(SoftmaxCrossEntropyLossGrad, LogProbRequestedButUnused) {
  // The kernel starts from the forward log_prob instead of the scores.
  check({{"x", {2, 4, 3, 2}, -2, 2}}, std::string(kLabels) + ", " + kWeights,
        "  loss, lp = SoftmaxCrossEntropyLoss<ignore_index=-100>(x, c_lab, "
        "c_cw)");
}

TEST(SoftmaxCrossEntropyLossGrad, LogProbAlsoCarriesGradient) {
  // log_prob feeds the loss too: both gradients add up in one kernel.
  check({{"x", {2, 4, 2}, -2, 2}, {"c_q", {2, 4, 2}}},
        "int64[2,2] c_lab = {3, 0, 1, 2}",
        "  ce, lp = SoftmaxCrossEntropyLoss<reduction=\"sum\">(x, c_lab)\n"
        "  lq = Mul(lp, c_q)\n"
        "  extra = ReduceSum<keepdims=0>(lq)\n"
        "  loss = Add(ce, extra)");
}

TEST(SoftmaxCrossEntropyLossGrad, OnlyLogProbCarriesGradient) {
  // The loss output itself is unused.
  check({{"x", {3, 4}, -2, 2}, {"c_q", {3, 4}}}, "int64[3] c_lab = {3, 0, 1}",
        "  ce, lp = SoftmaxCrossEntropyLoss(x, c_lab)\n"
        "  lq = Mul(lp, c_q)\n"
        "  loss = ReduceSum<keepdims=0>(lq)");
}

TEST(SoftmaxCrossEntropyLossGrad, PyTorchLanguageModelExport) {
  // torch.nn.functional.cross_entropy(logits.transpose(1, 2), labels) on
  // [B, T, C] logits from a linear head, labels [B, T] with -100 padding.
  check({{"h", {2, 3, 4}, -1, 1}, {"w", {4, 5}, -1, 1}},
        "int64[2,3] c_lab = {4, 0, -100, 2, 1, 3}",
        "  logits = MatMul(h, w)\n"
        "  t = Transpose<perm=[0, 2, 1]>(logits)\n"
        "  loss = SoftmaxCrossEntropyLoss<ignore_index=-100>(t, c_lab)");
}

TEST(SoftmaxCrossEntropyLossGrad, RefusesTrainableClassWeights) {
  std::string text = gradCheckModel(
      randomInitializers({{"x", {3, 4}}, {"cw", {4}, 0.5, 1.5}}) +
          ", int64[3] c_lab = {2, 0, 3}",
      "  loss = SoftmaxCrossEntropyLoss(x, c_lab, cw)");
  EXPECT_NE(buildTrainingError(text).find(
                "unsupported: gradient with respect to the class weights of "
                "SoftmaxCrossEntropyLoss"),
            std::string::npos)
      << buildTrainingError(text);
}

//===----------------------------------------------------------------------===//
// NegativeLogLikelihoodLoss
//===----------------------------------------------------------------------===//

TEST(NegativeLogLikelihoodLossGrad, MeanOnRawInput) {
  // NLL alone: its input need not be log-probabilities.
  check({{"x", {5, 4}}}, "int64[5] c_lab = {0, 3, 2, 1, 3}",
        "  loss = NegativeLogLikelihoodLoss(x, c_lab)");
}

TEST(NegativeLogLikelihoodLossGrad, SumWithWeights) {
  check(
      {{"x", {5, 4}}},
      std::string("int64[5] c_lab = {0, 3, 2, 1, 3}, ") + kWeights,
      "  loss = NegativeLogLikelihoodLoss<reduction=\"sum\">(x, c_lab, c_cw)");
}

TEST(NegativeLogLikelihoodLossGrad, MeanNdWeightsIgnoreIndex) {
  check(
      {{"x", {2, 4, 3, 2}}}, std::string(kLabels) + ", " + kWeights,
      "  loss = NegativeLogLikelihoodLoss<ignore_index=-100>(x, c_lab, c_cw)");
}

TEST(NegativeLogLikelihoodLossGrad, MeanIgnoresAValidClass) {
  check({{"x", {2, 4, 3, 2}}}, std::string(kValidLabels) + ", " + kWeights,
        "  loss = NegativeLogLikelihoodLoss<ignore_index=2>(x, c_lab, c_cw)");
}

TEST(NegativeLogLikelihoodLossGrad, NoneNd) {
  check({{"x", {2, 4, 2}}},
        std::string("int64[2,2] c_lab = {3, 0, 1, 2}, ") + kPositionWeights,
        std::string("  l = NegativeLogLikelihoodLoss<reduction=\"none\">(x, "
                    "c_lab)") +
            kWeightNone);
}

TEST(NegativeLogLikelihoodLossGrad, NoneIgnoreIndexWithWeights) {
  check({{"x", {2, 4, 2}}},
        std::string("int64[2,2] c_lab = {3, -1, 1, 2}, ") + kPositionWeights +
            ", " + kWeights,
        std::string("  l = NegativeLogLikelihoodLoss<reduction=\"none\", "
                    "ignore_index=-1>(x, c_lab, c_cw)") +
            kWeightNone);
}

TEST(NegativeLogLikelihoodLossGrad, ClassifierLogSoftmaxThenNll) {
  // torch.nn.functional.nll_loss(log_softmax(linear(x), dim=1), y) as
  // exported: the gradient runs through both rules to the weights.
  check({{"a", {4, 3}}, {"w", {3, 5}}, {"bias", {5}}},
        std::string("int64[4] c_lab = {4, 0, 2, 2}, ") +
            "double[5] c_cw = {0.5, 2.0, 1.25, 0.75, 1.5}",
        "  z = MatMul(a, w)\n"
        "  zb = Add(z, bias)\n"
        "  lp = LogSoftmax<axis=1>(zb)\n"
        "  loss = NegativeLogLikelihoodLoss(lp, c_lab, c_cw)");
}

TEST(NegativeLogLikelihoodLossGrad, RefusesTrainableClassWeights) {
  std::string text = gradCheckModel(
      randomInitializers({{"x", {3, 4}}, {"cw", {4}, 0.5, 1.5}}) +
          ", int64[3] c_lab = {2, 0, 3}",
      "  loss = NegativeLogLikelihoodLoss(x, c_lab, cw)");
  EXPECT_NE(buildTrainingError(text).find(
                "unsupported: gradient with respect to the class weights of "
                "NegativeLogLikelihoodLoss"),
            std::string::npos)
      << buildTrainingError(text);
}
