//===- ModelNestingTest.cpp - Nesting measured without recursion ----------===//
#include "zinc/support/ModelNesting.h"
#include "gtest/gtest.h"
#include <google/protobuf/struct.pb.h>
#include <string>

using namespace zinc;

static std::string textError(const std::string &text) {
  return llvm::toString(checkOnnxTextNesting(text));
}

// Brackets of every kind count, up to the limit and no further.
TEST(OnnxTextNesting, BracketsCountToTheLimit) {
  std::string atLimit(kMaxOnnxTextDepth / 2, '{');
  atLimit += std::string(kMaxOnnxTextDepth - atLimit.size(), '(');
  EXPECT_EQ(textError(atLimit), "");
  EXPECT_EQ(textError(atLimit + "["),
            "nested too deep (more than 100 levels of brackets)");
  // Closed brackets do not add up.
  std::string siblings;
  for (unsigned i = 0; i < 10 * kMaxOnnxTextDepth; ++i)
    siblings += "{ ( [ ] ) }";
  EXPECT_EQ(textError(siblings), "");
}

// Brackets in strings and comments are not the parser's nesting; a quote
// in a comment or a '#' in a string does not hide the brackets after it.
TEST(OnnxTextNesting, StringsAndCommentsAreSkippedAsOnnxReadsThem) {
  std::string deep(kMaxOnnxTextDepth + 1, '{');
  EXPECT_EQ(textError("\"" + deep + "\""), "");
  EXPECT_EQ(textError("# " + deep + "\n"), "");
  EXPECT_NE(textError("# a \" quote\n" + deep), "");
  EXPECT_NE(textError("\"#\"" + deep), "");
  // onnx's strings have no escapes: the backslash does not keep this one open.
  EXPECT_NE(textError("\"\\\"" + deep), "");
  // A closing bracket in a comment does not close anything.
  std::string hidden;
  for (unsigned i = 0; i <= kMaxOnnxTextDepth; ++i)
    hidden += "{ # }\n";
  EXPECT_NE(textError(hidden), "");
}

/// A google.protobuf.Value holding lists `depth` deep: each level is a
/// Value and a ListValue, two messages.
static std::string nestedValue(int depth) {
  google::protobuf::Value outer;
  google::protobuf::Value *v = &outer;
  for (int i = 0; i < depth; ++i)
    v = v->mutable_list_value()->add_values();
  v->set_string_value("{{{{ not a message");
  return outer.SerializeAsString();
}

// Past protobuf's limit the walk says so; within it, and for bytes that
// are wrong some other way, it leaves the diagnosis to the caller.
TEST(ProtobufNesting, MeasuresMessagesThroughTheirDescriptors) {
  const auto &type = *google::protobuf::Value::descriptor();
  google::protobuf::Value parsed;
  std::string deep = nestedValue(60); // 120 levels of messages
  EXPECT_FALSE(parsed.ParseFromString(deep));
  EXPECT_EQ(llvm::toString(checkProtobufNesting(type, deep)),
            "nested too deep (more than 100 levels of messages, the limit of "
            "protobuf)");
  std::string shallow = nestedValue(50); // exactly 100
  EXPECT_TRUE(parsed.ParseFromString(shallow));
  EXPECT_EQ(llvm::toString(checkProtobufNesting(type, shallow)), "");
  EXPECT_EQ(llvm::toString(checkProtobufNesting(type, deep.substr(0, 7))), "");
  EXPECT_EQ(llvm::toString(checkProtobufNesting(type, "\xff\xff\xff")), "");
}
