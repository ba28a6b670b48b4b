//===- SafetensorsTest.cpp - Mapped and read-whole files read the same ----===//
#include "zinc/runtime/Safetensors.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"
#include "gtest/gtest.h"
#include <cstring>
#include <vector>

using namespace zinc;
using namespace zinc::rt;

namespace {

class SafetensorsTest : public ::testing::TestWithParam<bool> {
protected:
  void SetUp() override {
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("zinc-safetensors", dir));
  }
  void TearDown() override { llvm::sys::fs::remove_directories(dir); }

  std::string path(llvm::StringRef name) { return (dir + "/" + name).str(); }
  void writeRaw(llvm::StringRef name, llvm::StringRef bytes) {
    std::error_code ec;
    llvm::raw_fd_ostream os(path(name), ec);
    ASSERT_FALSE(ec);
    os << bytes;
  }
  bool readIntoMemory() const { return GetParam(); }
  std::string errorOf(llvm::StringRef name) {
    auto file = SafetensorsFile::open(path(name), readIntoMemory());
    if (file)
      return "";
    return llvm::toString(file.takeError());
  }

  llvm::SmallString<128> dir;
};

TEST_P(SafetensorsTest, WrittenTensorsReadBackByteForByte) {
  std::vector<float> x(1000);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = 0.5f * static_cast<float>(i);
  std::vector<int64_t> y = {7, -3, 1LL << 40};
  auto bytesOf = [](const auto &v) {
    return llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(v.data()),
                                   v.size() * sizeof(v[0]));
  };
  std::vector<NamedTensor> tensors(2);
  tensors[0] = {"x", DType::F32, {10, 100}, bytesOf(x)};
  tensors[1] = {"y", DType::I64, {3}, bytesOf(y)};
  ASSERT_FALSE(writeSafetensors(path("a.safetensors"), tensors));

  auto file = SafetensorsFile::open(path("a.safetensors"), readIntoMemory());
  ASSERT_TRUE(bool(file)) << llvm::toString(file.takeError());
  ASSERT_EQ(file->tensors().size(), 2u);
  const SafetensorView *vx = file->find("x");
  ASSERT_NE(vx, nullptr);
  EXPECT_EQ(vx->dtype, DType::F32);
  EXPECT_EQ(std::vector<int64_t>(vx->shape.begin(), vx->shape.end()),
            (std::vector<int64_t>{10, 100}));
  ASSERT_EQ(vx->data.size(), x.size() * sizeof(float));
  EXPECT_EQ(std::memcmp(vx->data.data(), x.data(), vx->data.size()), 0);
  const SafetensorView *vy = file->find("y");
  ASSERT_NE(vy, nullptr);
  EXPECT_EQ(vy->dtype, DType::I64);
  ASSERT_EQ(vy->data.size(), y.size() * sizeof(int64_t));
  EXPECT_EQ(std::memcmp(vy->data.data(), y.data(), vy->data.size()), 0);
  EXPECT_EQ(file->find("z"), nullptr);

  // The views stay valid when the file is moved, as a shard feeder moves it.
  SafetensorsFile moved = std::move(*file);
  EXPECT_EQ(std::memcmp(moved.find("x")->data.data(), x.data(),
                        x.size() * sizeof(float)),
            0);
}

TEST_P(SafetensorsTest, EmptyAndTruncatedFilesAreRefusedWithTheirPath) {
  writeRaw("empty.safetensors", "");
  EXPECT_EQ(errorOf("empty.safetensors"),
            path("empty.safetensors") +
                ": not a valid safetensors file: shorter than its 8-byte "
                "header size");
  // A header size of 64 in a file of 10 bytes.
  writeRaw("short.safetensors", llvm::StringRef("\x40\0\0\0\0\0\0\0{}", 10));
  EXPECT_EQ(errorOf("short.safetensors"),
            path("short.safetensors") +
                ": not a valid safetensors file: header size 64 runs past "
                "the end of the file");
  EXPECT_EQ(errorOf("absent.safetensors"),
            path("absent.safetensors") +
                ": cannot open: No such file or directory");
}

INSTANTIATE_TEST_SUITE_P(MappedOrRead, SafetensorsTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool> &info) {
                           return info.param ? "ReadIntoMemory" : "Mapped";
                         });

} // namespace
