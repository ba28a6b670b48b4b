//===- OnnxImporterTest.cpp - ONNX models in, zinc IR or diagnostics out --===//
#include "zinc/frontend/OnnxImporter.h"
#include "compiler/frontend/OpSupport.h"
#include "onnx/defs/parser.h"
#include "onnx/onnx_pb.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include "gtest/gtest.h"
#include <cstring>
#include <string>
#include <vector>

using namespace zinc;
using namespace zinc::frontend;

/// The node at position i of the program (tests only: O(i)).
static zinc::ir::Node *nodeAt(const zinc::ir::Graph &g, size_t i) {
  return *std::next(g.nodes().begin(), i);
}
namespace {

/// A fresh directory per test, removed afterwards, holding the model files.
class OnnxImporterTest : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("zinc-fe", dir));
    opts.warn = [this](const llvm::Twine &msg) {
      warnings.push_back(msg.str());
    };
  }
  void TearDown() override { llvm::sys::fs::remove_directories(dir); }

  std::string path(llvm::StringRef name) {
    llvm::SmallString<256> p(dir);
    llvm::sys::path::append(p, name);
    return p.str().str();
  }

  void writeFile(llvm::StringRef name, llvm::StringRef bytes) {
    std::error_code ec;
    llvm::raw_fd_ostream os(path(name), ec);
    ASSERT_FALSE(ec);
    os << bytes;
  }

  /// Writes `text` (ONNX textual syntax) as NAME.onnxtxt and imports it.
  llvm::Expected<std::unique_ptr<ir::Graph>>
  importText(llvm::StringRef text, llvm::StringRef name = "model.onnxtxt") {
    writeFile(name, text);
    return importOnnxModel(path(name), opts);
  }

  /// Parses `text` into a ModelProto, for tests that write binary models.
  onnx::ModelProto parse(const char *text) {
    onnx::ModelProto model;
    auto status = onnx::OnnxParser::Parse(model, text);
    EXPECT_TRUE(status.IsOK()) << status.ErrorMessage();
    return model;
  }

  std::string writeBinary(const onnx::ModelProto &model,
                          llvm::StringRef name = "model.onnx") {
    writeFile(name, model.SerializeAsString());
    return path(name);
  }

  /// The error message of a failed import ("" and a test failure if it
  /// succeeded).
  std::string errorOf(llvm::Expected<std::unique_ptr<ir::Graph>> g) {
    if (g) {
      ADD_FAILURE() << "import succeeded";
      return "";
    }
    return llvm::toString(g.takeError());
  }

  llvm::SmallString<128> dir;
  ImportOptions opts;
  std::vector<std::string> warnings;
};

const char *mlpText = R"(
<ir_version: 8, opset_import: ["" : 17]>
mlp (float[batch, 4] x) => (float[batch, 3] y)
<float[4, 3] w = {1,2,3,4,5,6,7,8,9,10,11,12}, float[3] b = {1, 2, 3},
 int64[2] shape = {-1, 3}>
{
  m = MatMul(x, w)
  a = Add(m, b)
  y = Reshape(a, shape)
}
)";

TEST_F(OnnxImporterTest, RolesShapesAndNames) {
  opts.dims["batch"] = 2;
  auto g = importText(mlpText);
  ASSERT_TRUE(!!g) << llvm::toString(g.takeError());
  ir::Graph &graph = **g;
  EXPECT_EQ(graph.name, "mlp");
  EXPECT_EQ(graph.opsetVersion, 17);
  EXPECT_EQ(graph.modelPath, path("model.onnxtxt"));
  EXPECT_TRUE(llvm::sys::path::is_absolute(graph.modelPath));

  ASSERT_EQ(graph.inputs().size(), 1u);
  EXPECT_EQ(graph.inputs()[0]->name, "x");
  EXPECT_EQ(graph.inputs()[0]->role, ir::ValueRole::Input);
  EXPECT_EQ(graph.inputs()[0]->shape, (llvm::SmallVector<int64_t, 4>{2, 4}));

  ir::Value *w = graph.lookupValue("w");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->role, ir::ValueRole::Parameter);
  EXPECT_EQ(w->dtype, DType::F32);
  EXPECT_EQ(w->shape, (llvm::SmallVector<int64_t, 4>{4, 3}));
  ASSERT_TRUE(w->init.hasValue());
  EXPECT_EQ(w->init->name, "w");
  EXPECT_FALSE(w->init->isExternal());

  ir::Value *shape = graph.lookupValue("shape");
  ASSERT_TRUE(shape);
  EXPECT_EQ(shape->role, ir::ValueRole::Constant);
  EXPECT_EQ(shape->dtype, DType::I64);
  EXPECT_EQ(graph.initializers().size(), 3u);

  // Reshape's target is an initializer: data propagation gives [2,3].
  ir::Value *y = graph.lookupValue("y");
  ASSERT_TRUE(y);
  EXPECT_EQ(y->role, ir::ValueRole::Activation);
  EXPECT_EQ(y->shape, (llvm::SmallVector<int64_t, 4>{2, 3}));
  ASSERT_EQ(graph.outputs().size(), 1u);
  EXPECT_EQ(graph.outputs()[0], y);

  // Unnamed nodes are named "<OpType>_<index>".
  ASSERT_EQ(graph.numNodes(), 3u);
  EXPECT_EQ(nodeAt(graph, 0)->name, "MatMul_0");
  EXPECT_EQ(nodeAt(graph, 2)->name, "Reshape_2");
  EXPECT_EQ(nodeAt(graph, 2)->inputs[1], shape);
  EXPECT_EQ(y->def, nodeAt(graph, 2));
  EXPECT_TRUE(warnings.empty());
}

TEST_F(OnnxImporterTest, DimBindingChangesShapes) {
  opts.dims["batch"] = 7;
  auto g = importText(mlpText);
  ASSERT_TRUE(!!g) << llvm::toString(g.takeError());
  EXPECT_EQ((*g)->lookupValue("x")->shape,
            (llvm::SmallVector<int64_t, 4>{7, 4}));
  EXPECT_EQ((*g)->lookupValue("y")->shape,
            (llvm::SmallVector<int64_t, 4>{7, 3}));
}

TEST_F(OnnxImporterTest, UnboundDimensionIsAnError) {
  std::string p = path("model.onnxtxt");
  EXPECT_EQ(errorOf(importText(mlpText)),
            p + ": unbound dimension 'batch' (input 'x'); bind it with "
                "--dim batch=N");
}

TEST_F(OnnxImporterTest, UnusedDimIsAWarning) {
  opts.dims["batch"] = 2;
  opts.dims["seq"] = 5;
  ASSERT_TRUE(!!importText(mlpText));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0], path("model.onnxtxt") +
                             ": --dim seq=5: the model has no dimension "
                             "named 'seq'");
}

TEST_F(OnnxImporterTest, Attributes) {
  auto g = importText(R"(
<ir_version: 8, opset_import: ["" : 17]>
attrs (float[2, 3] x, float[4, 3] w, int64[2] labels) => (float[2, 4] y, float[2, 3] t, float loss)
{
  y = Gemm<alpha = 0.5, transB = 1>(x, w)
  t = Transpose<perm = [0, 1]>(x)
  c = Constant<value = int64[3] {1, -2, 300}>()
  f = Constant<value = float[2] {1.5, -2}>()
  loss = SoftmaxCrossEntropyLoss<reduction = "mean">(y, labels)
}
)");
  ASSERT_TRUE(!!g) << llvm::toString(g.takeError());
  const ir::Node &gemm = *nodeAt(**g, 0);
  EXPECT_EQ(gemm.opType, "Gemm");
  EXPECT_DOUBLE_EQ(gemm.attrs.getFloat("alpha", 0), 0.5);
  EXPECT_EQ(gemm.attrs.getInt("transB", 0), 1);
  EXPECT_EQ((*g)->lookupValue("y")->shape,
            (llvm::SmallVector<int64_t, 4>{2, 4}));

  const ir::Node &transpose = *nodeAt(**g, 1);
  EXPECT_EQ(transpose.attrs.getInts("perm"), (llvm::ArrayRef<int64_t>{0, 1}));

  const TensorData *c = nodeAt(**g, 2)->attrs.getTensor("value");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->dtype, DType::I64);
  EXPECT_EQ(c->shape, (llvm::SmallVector<int64_t, 4>{3}));
  std::vector<int64_t> ints(3);
  ASSERT_EQ(c->bytes.size(), 24u);
  std::memcpy(ints.data(), c->bytes.data(), 24);
  EXPECT_EQ(ints, (std::vector<int64_t>{1, -2, 300}));

  const TensorData *f = nodeAt(**g, 3)->attrs.getTensor("value");
  ASSERT_TRUE(f);
  float floats[2];
  ASSERT_EQ(f->bytes.size(), 8u);
  std::memcpy(floats, f->bytes.data(), 8);
  EXPECT_EQ(floats[0], 1.5f);
  EXPECT_EQ(floats[1], -2.0f);

  EXPECT_EQ(nodeAt(**g, 4)->attrs.getString("reduction", ""), "mean");
  EXPECT_TRUE((*g)->lookupValue("loss")->shape.empty());
}

TEST_F(OnnxImporterTest, RawDataTensorAttribute) {
  onnx::ModelProto model = parse(R"(
<ir_version: 8, opset_import: ["" : 17]>
g () => (float[2] c) { c = Constant<value = float[2] {0, 0}>() }
)");
  onnx::TensorProto *t =
      model.mutable_graph()->mutable_node(0)->mutable_attribute(0)->mutable_t();
  float values[2] = {3.25f, -1.0f};
  t->clear_float_data();
  t->set_raw_data(std::string(reinterpret_cast<char *>(values), 8));
  auto g = importOnnxModel(writeBinary(model), opts);
  ASSERT_TRUE(!!g) << llvm::toString(g.takeError());
  const TensorData *c = nodeAt(**g, 0)->attrs.getTensor("value");
  ASSERT_TRUE(c);
  ASSERT_EQ(c->bytes.size(), 8u);
  EXPECT_EQ(std::memcmp(c->bytes.data(), values, 8), 0);
}

TEST_F(OnnxImporterTest, InitializerListedAsInputIsAnInitializer) {
  onnx::ModelProto model = parse(R"(
<ir_version: 3, opset_import: ["" : 9]>
old (float[2] x, float[2] w) => (float[2] y)
<float[2] w = {1, 2}>
{ y = Add(x, w) }
)");
  auto g = importOnnxModel(writeBinary(model), opts);
  ASSERT_TRUE(!!g) << llvm::toString(g.takeError());
  ASSERT_EQ((*g)->inputs().size(), 1u);
  EXPECT_EQ((*g)->inputs()[0]->name, "x");
  EXPECT_EQ((*g)->lookupValue("w")->role, ir::ValueRole::Parameter);
  EXPECT_EQ((*g)->opsetVersion, 9);
}

/// A model whose float initializer `w` lives in an external file.
static const char *externalText = R"(
<ir_version: 8, opset_import: ["" : 17]>
ext (float[2, 4] x) => (float[2, 4] y)
<float[4, 4] w = {0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0}>
{ y = MatMul(x, w) }
)";

static void makeExternal(onnx::ModelProto &model, const char *location,
                         const char *offset, const char *length) {
  onnx::TensorProto *w = model.mutable_graph()->mutable_initializer(0);
  w->clear_float_data();
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto add = [&](const char *k, const char *v) {
    if (!v)
      return;
    auto *e = w->add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  add("location", location);
  add("offset", offset);
  add("length", length);
}

TEST_F(OnnxImporterTest, ExternalDataIsAReference) {
  onnx::ModelProto model = parse(externalText);
  makeExternal(model, "weights/w.bin", "128", "64");
  ASSERT_FALSE(llvm::sys::fs::create_directory(path("weights")));
  writeFile("weights/w.bin", std::string(192, '\0'));
  auto g = importOnnxModel(writeBinary(model), opts);
  ASSERT_TRUE(!!g) << llvm::toString(g.takeError());
  ir::Value *w = (*g)->lookupValue("w");
  ASSERT_TRUE(w && w->init);
  EXPECT_EQ(w->role, ir::ValueRole::Parameter);
  EXPECT_EQ(w->shape, (llvm::SmallVector<int64_t, 4>{4, 4}));
  EXPECT_EQ(w->init->file,
            "weights/w.bin"); // relative to the model's directory
  EXPECT_EQ(w->init->offset, 128u);
  EXPECT_EQ(w->init->length, 64u);
  EXPECT_TRUE(warnings.empty());
  // Not an input, though the checker saw it as one.
  EXPECT_EQ((*g)->inputs().size(), 1u);
}

TEST_F(OnnxImporterTest, MissingExternalFileIsAWarning) {
  onnx::ModelProto model = parse(externalText);
  makeExternal(model, "w.bin", nullptr, nullptr);
  std::string p = writeBinary(model);
  auto g = importOnnxModel(p, opts);
  ASSERT_TRUE(!!g) << llvm::toString(g.takeError());
  ir::Value *w = (*g)->lookupValue("w");
  EXPECT_EQ(w->init->file, "w.bin");
  EXPECT_EQ(w->init->offset, 0u);
  EXPECT_EQ(w->init->length, 64u); // from the shape when not given
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0], p + ": external data file 'w.bin' of initializer "
                             "'w' does not exist; the plan cannot run until "
                             "it does");
}

TEST_F(OnnxImporterTest, ShortExternalFileIsAWarning) {
  onnx::ModelProto model = parse(externalText);
  makeExternal(model, "w.bin", "16", "64");
  writeFile("w.bin", std::string(70, '\0'));
  ASSERT_TRUE(!!importOnnxModel(writeBinary(model), opts));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("too short for initializer 'w'"),
            std::string::npos)
      << warnings[0];
}

TEST_F(OnnxImporterTest, BadExternalDataFields) {
  struct Case {
    const char *location, *offset, *length, *expected;
  } cases[] = {
      {"../w.bin", nullptr, nullptr,
       "external data location '../w.bin' points outside the model's "
       "directory"},
      {"/etc/w.bin", nullptr, nullptr, "must be relative"},
      {"w.bin", "12x", nullptr,
       "external data offset '12x' is not a "
       "non-negative integer"},
      {"w.bin", nullptr, "-4",
       "external data length '-4' is not a "
       "non-negative integer"},
      {"w.bin", nullptr, "63", "external data length 63 does not match"},
      {nullptr, "0", nullptr, "is stored externally but has no location"},
  };
  for (const Case &c : cases) {
    onnx::ModelProto model = parse(externalText);
    makeExternal(model, c.location, c.offset, c.length);
    std::string err = errorOf(importOnnxModel(writeBinary(model), opts));
    EXPECT_EQ(err.rfind(path("model.onnx") + ": initializer 'w'", 0), 0u)
        << err;
    EXPECT_NE(err.find(c.expected), std::string::npos) << err;
  }
}

TEST_F(OnnxImporterTest, DeclaredOutputShapeIsUsedWhenInferenceCannot) {
  // Reshape's target is a graph input: onnx cannot infer y, but the model
  // declares its shape.
  auto g = importText(R"(
<ir_version: 8, opset_import: ["" : 17]>
r (float[2, 3] x, int64[2] s) => (float[3, 2] y) { y = Reshape(x, s) }
)");
  ASSERT_TRUE(!!g) << llvm::toString(g.takeError());
  EXPECT_EQ((*g)->lookupValue("y")->shape,
            (llvm::SmallVector<int64_t, 4>{3, 2}));
}

TEST_F(OnnxImporterTest, Opset13ReshapeUsesPropagatedShape) {
  // onnx 1.12's Reshape-13 ignores the propagated value of Shape(x); the
  // importer computes it, and the nodes after the Reshape get shapes too.
  auto g = importText(R"(
<ir_version: 8, opset_import: ["" : 13]>
r (float[2, 3, 4] x, float[24] z) => (float[A, B, C] y) {
  s = Shape(x)
  t = Reshape(z, s)
  y = Relu(t)
}
)");
  ASSERT_TRUE(!!g) << llvm::toString(g.takeError());
  EXPECT_EQ((*g)->lookupValue("t")->shape,
            (llvm::SmallVector<int64_t, 4>{2, 3, 4}));
  EXPECT_EQ((*g)->lookupValue("y")->shape,
            (llvm::SmallVector<int64_t, 4>{2, 3, 4}));
}

TEST_F(OnnxImporterTest, Opset13ReshapeThroughShapeArithmetic) {
  // PyTorch's `x.reshape(B * T, V)` at opset 13: onnx 1.12 propagates
  // Shape and Gather but stops at Mul-13.
  opts.dims["batch"] = 4;
  auto g = importText(R"(
<ir_version: 8, opset_import: ["" : 13]>
r (float[batch, 3, 5] x) => (float[N, V] y) {
  s = Shape(x)
  i0 = Constant<value = int64 {0}>()
  i1 = Constant<value = int64 {1}>()
  i2 = Constant<value = int64 {-1}>()
  b = Gather(s, i0)
  t = Gather(s, i1)
  v = Gather(s, i2)
  bt = Mul(b, t)
  axes = Constant<value = int64[1] {0}>()
  u0 = Unsqueeze(bt, axes)
  u1 = Unsqueeze(v, axes)
  target = Concat<axis = 0>(u0, u1)
  y = Reshape(x, target)
}
)");
  ASSERT_TRUE(!!g) << llvm::toString(g.takeError());
  EXPECT_EQ((*g)->lookupValue("y")->shape,
            (llvm::SmallVector<int64_t, 4>{12, 5}));
}

TEST_F(OnnxImporterTest, NoStaticShapeIsAnError) {
  std::string err = errorOf(importText(R"(
<ir_version: 8, opset_import: ["" : 17]>
r (float[2, 3] x, int64[2] s) => (float[3, 2] y) {
  t = Reshape(x, s)
  y = Identity(t)
}
)"));
  EXPECT_EQ(err, path("model.onnxtxt") +
                     ": node 'Reshape_0' (Reshape): cannot infer a static "
                     "shape for output 't'");
}

TEST_F(OnnxImporterTest, UnsupportedOps) {
  EXPECT_EQ(errorOf(importText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (float[2] y) { y = Cos(x) }
)")),
            path("model.onnxtxt") +
                ": node 'Cos_0' (Cos): unsupported op 'Cos'");
  // An op ONNX itself does not know is still "unsupported", not "invalid".
  EXPECT_EQ(errorOf(importText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (float[2] y) { y = Frobnicate(x) }
)")),
            path("model.onnxtxt") +
                ": node 'Frobnicate_0' (Frobnicate): unsupported op "
                "'Frobnicate'");
  EXPECT_EQ(errorOf(importText(R"(
<ir_version: 8, opset_import: ["" : 17, "com.example" : 1]>
g (float[2] x) => (float[2] y) { y = com.example.Relu(x) }
)")),
            path("model.onnxtxt") +
                ": node 'Relu_0' (com.example.Relu): unsupported op 'Relu' "
                "in domain 'com.example'");
}

TEST_F(OnnxImporterTest, UnsupportedElementTypes) {
  EXPECT_EQ(errorOf(importText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (string[2] y) { y = Cast<to = 8>(x) }
)")),
            path("model.onnxtxt") +
                ": node 'Cast_0' (Cast): unsupported element type string for "
                "output 0 'y'");
  // onnx's own type constraints come first and say so.
  EXPECT_NE(errorOf(importText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (int64[2] x) => (int64[2] y) { y = Sqrt(x) }
)"))
                .find(": shape inference failed: "),
            std::string::npos);
}

TEST(OpSupportTest, ElementTypeOutsideTheOpsSet) {
  // onnx's type constraints hide this case from whole models today; the
  // rule still has to hold when Ops.def is narrower than ONNX.
  onnx::NodeProto node;
  node.set_op_type("Sqrt");
  node.add_input("x");
  node.add_output("y");
  auto types = [](llvm::StringRef name) {
    return name == "x" ? int(onnx::TensorProto::INT64)
                       : int(onnx::TensorProto::FLOAT);
  };
  llvm::Error err = checkElementTypes(node, types);
  ASSERT_TRUE(!!err);
  EXPECT_EQ(llvm::toString(std::move(err)),
            "unsupported element type i64 for input 0 'x'");
  auto floats = [](llvm::StringRef) { return int(onnx::TensorProto::FLOAT); };
  EXPECT_FALSE(!!checkElementTypes(node, floats));
  // Unknown types are left to the static-shape check.
  auto unknown = [](llvm::StringRef) { return 0; };
  EXPECT_FALSE(!!checkElementTypes(node, unknown));
}

TEST_F(OnnxImporterTest, DropoutModeMustBeConstant) {
  const char *text = R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (float[2] y)
<bool tm = {%d}, float r = {%s}>
{ y = Dropout(x, r, tm) }
)";
  char buf[512];
  // Constant training_mode, either value, with a ratio in [0, 1).
  for (int tm : {0, 1})
    for (const char *r : {"0.0", "0.1"}) {
      std::snprintf(buf, sizeof buf, text, tm, r);
      auto ok = importText(buf);
      EXPECT_TRUE(!!ok) << buf << llvm::toString(ok.takeError());
    }
  std::snprintf(buf, sizeof buf, text, 1, "1.0");
  EXPECT_EQ(errorOf(importText(buf)),
            path("model.onnxtxt") +
                ": node 'Dropout_0' (Dropout): unsupported Dropout ratio "
                "1.000000 (input 'r'): it must be in [0, 1)");
  // Without training_mode, Dropout is an identity.
  ASSERT_TRUE(!!importText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (float[2] y) { y = Dropout(x) }
)"));
  // A runtime training_mode is refused, and so is a runtime ratio in
  // training mode.
  EXPECT_EQ(errorOf(importText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x, bool tm) => (float[2] y) { y = Dropout(x, , tm) }
)")),
            path("model.onnxtxt") +
                ": node 'Dropout_0' (Dropout): unsupported Dropout in "
                "training mode: training_mode input 'tm' must be a constant");
  EXPECT_EQ(errorOf(importText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x, float r) => (float[2] y) <bool tm = {1}> { y = Dropout(x, r, tm) }
)")),
            path("model.onnxtxt") +
                ": node 'Dropout_0' (Dropout): unsupported Dropout in "
                "training mode: ratio input 'r' must be a constant float "
                "scalar");
}

// Training mode: the running statistics (float initializers) become model
// state; the running-stat outputs stay ordinary values.
TEST_F(OnnxImporterTest, BatchNormalizationTrainingRunningStatsAreModelState) {
  auto g = importText(R"(
<ir_version: 8, opset_import: ["" : 15]>
g (float[2, 3] x) => (float[2, 3] y)
<float[3] s = {1, 1, 1}, float[3] b = {0, 0, 0}, float[3] m = {0, 0, 0},
 float[3] v = {1, 1, 1}>
{
  y, rm, rv = BatchNormalization<training_mode = 1>(x, s, b, m, v)
}
)");
  if (!g)
    FAIL() << errorOf(std::move(g));
  EXPECT_EQ((*g)->lookupValue("s")->role, ir::ValueRole::Parameter);
  EXPECT_EQ((*g)->lookupValue("m")->role, ir::ValueRole::ModelState);
  EXPECT_EQ((*g)->lookupValue("v")->role, ir::ValueRole::ModelState);
  EXPECT_EQ((*g)->lookupValue("rm")->role, ir::ValueRole::Activation);
}

// Running statistics fed as graph inputs stay inputs (inference can read
// them; build-training refuses them, test/lit/passes).
TEST_F(OnnxImporterTest, BatchNormalizationTrainingStatsAsInputsStayInputs) {
  auto g = importText(R"(
<ir_version: 8, opset_import: ["" : 15]>
g (float[2, 3] x, float[3] s, float[3] b, float[3] m, float[3] v)
  => (float[2, 3] y, float[3] rm, float[3] rv) {
  y, rm, rv = BatchNormalization<training_mode = 1>(x, s, b, m, v)
}
)");
  if (!g)
    FAIL() << errorOf(std::move(g));
  EXPECT_EQ((*g)->lookupValue("m")->role, ir::ValueRole::Input);
}

TEST_F(OnnxImporterTest, ShapeInferenceFailure) {
  std::string err = errorOf(importText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3] a, float[4, 5] b) => (float[2, 5] y) { y = MatMul(a, b) }
)"));
  EXPECT_EQ(err.rfind(path("model.onnxtxt") + ": shape inference failed: ", 0),
            0u)
      << err;
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;
}

TEST_F(OnnxImporterTest, ReadErrors) {
  EXPECT_EQ(errorOf(importOnnxModel(path("absent.onnx"), opts)),
            path("absent.onnx") + ": cannot open: No such file or directory");
  writeFile("garbage.onnx", "this is not a model");
  EXPECT_EQ(errorOf(importOnnxModel(path("garbage.onnx"), opts)),
            path("garbage.onnx") +
                ": cannot parse the model: not a valid ONNX protobuf (the "
                "file is malformed or truncated)");
  std::string err = errorOf(importText("<ir_version: 8> g (float x => ()"));
  EXPECT_EQ(
      err.rfind(path("model.onnxtxt") + ": cannot parse the model: line 1", 0),
      0u)
      << err;
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;
}

TEST_F(OnnxImporterTest, TruncatedBinary) {
  onnx::ModelProto model = parse(mlpText);
  std::string bytes = model.SerializeAsString();
  writeFile("cut.onnx", llvm::StringRef(bytes).drop_back(7));
  std::string err = errorOf(importOnnxModel(path("cut.onnx"), opts));
  EXPECT_EQ(err.rfind(path("cut.onnx") + ": cannot parse the model", 0), 0u)
      << err;
}

TEST_F(OnnxImporterTest, CheckerFailureIsInvalidModel) {
  // Node inputs out of order: not in topological order.
  std::string err = errorOf(importText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (float[2] y) {
  y = Relu(t)
  t = Relu(x)
}
)"));
  EXPECT_EQ(err.rfind(path("model.onnxtxt") + ": invalid model: ", 0), 0u)
      << err;
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;
}

} // namespace
