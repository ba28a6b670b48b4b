//===- NoHeapStepTest.cpp - A training step takes nothing from the heap ---===//
//
// The runtime allocates nothing after start-up: kernels take their scratch
// from the plan's workspaces, never from the heap. This binary interposes
// glibc's allocator (malloc and every other entry point, which operator new
// reaches too) and counts the calls made while steps run, on every thread:
// the executor's workers, OpenMP's and BLAS's. Plans come from zinc-compile
// itself, so every kernel a real training step runs is covered: a GPT
// (MatMul, Softmax, LayerNorm, Gather, the loss, AdamW and their gradients)
// in bf16 (the 16-bit MatMul that used to widen its operands into heap
// vectors) and with its states offloaded (host-stream kernels, copies), and
// a small CNN (Conv's im2col, BatchNorm, pools, Gemm) in fp32 and bf16.
//
// One allocation is not ours and is told apart by its caller: OpenBLAS's
// threaded GEMM mallocs its job array (MAX_CPU_NUMBER entries, the same size
// whatever the operands) on every call it spreads over threads. That is the
// library's own bookkeeping, neither kernel scratch nor GPU-tier memory; it
// is counted separately and reported, not failed on.
//
//===----------------------------------------------------------------------===//
#include "zinc/runtime/Executor.h"
#include "zinc/runtime/Program.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <gtest/gtest.h>
#include <link.h>

extern "C" {
void *__libc_malloc(size_t);
void *__libc_calloc(size_t, size_t);
void *__libc_realloc(void *, size_t);
void *__libc_memalign(size_t, size_t);
void __libc_free(void *);
}

namespace {
std::atomic<bool> counting{false};
std::atomic<uint64_t> allocations{0};
/// Allocations whose caller is in OpenBLAS (see the file comment).
std::atomic<uint64_t> blasAllocations{0};
/// The sizes of the first few counted allocations, for the diagnostic.
constexpr int kRemembered = 8;
std::atomic<uint64_t> sizes[kRemembered];

/// The address ranges of OpenBLAS's loaded segments.
struct Range {
  uintptr_t begin = 0, end = 0;
};
Range blasSegments[16];
int numBlasSegments = 0;

int findBlas(struct dl_phdr_info *info, size_t, void *) {
  if (!info->dlpi_name || !std::strstr(info->dlpi_name, "libopenblas"))
    return 0;
  for (int i = 0; i < info->dlpi_phnum && numBlasSegments < 16; ++i)
    if (info->dlpi_phdr[i].p_type == PT_LOAD) {
      uintptr_t begin = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
      blasSegments[numBlasSegments++] = {begin,
                                         begin + info->dlpi_phdr[i].p_memsz};
    }
  return 1;
}

bool inBlas(const void *caller) {
  auto a = reinterpret_cast<uintptr_t>(caller);
  for (int i = 0; i < numBlasSegments; ++i)
    if (a >= blasSegments[i].begin && a < blasSegments[i].end)
      return true;
  return false;
}

void note(size_t bytes, const void *caller) {
  if (!counting.load(std::memory_order_relaxed))
    return;
  if (inBlas(caller)) {
    ++blasAllocations;
    return;
  }
  uint64_t k = allocations.fetch_add(1);
  if (k < kRemembered)
    sizes[k] = bytes;
}
} // namespace

#define CALLER __builtin_return_address(0)

extern "C" {
void *malloc(size_t n) {
  note(n, CALLER);
  return __libc_malloc(n);
}
void *calloc(size_t n, size_t size) {
  note(n * size, CALLER);
  return __libc_calloc(n, size);
}
void *realloc(void *p, size_t n) {
  note(n, CALLER);
  return __libc_realloc(p, n);
}
void free(void *p) { __libc_free(p); }
void *memalign(size_t alignment, size_t n) {
  note(n, CALLER);
  return __libc_memalign(alignment, n);
}
void *aligned_alloc(size_t alignment, size_t n) {
  note(n, CALLER);
  return __libc_memalign(alignment, n);
}
int posix_memalign(void **p, size_t alignment, size_t n) {
  note(n, CALLER);
  *p = __libc_memalign(alignment, n);
  return *p ? 0 : ENOMEM;
}
void *valloc(size_t n) {
  note(n, CALLER);
  return __libc_memalign(4096, n);
}
void *pvalloc(size_t n) {
  note(n, CALLER);
  return __libc_memalign(4096, (n + 4095) & ~size_t(4095));
}
}

using namespace zinc;

namespace {

/// `n` deterministic values in [-0.4, 0.4], as an ONNX text list.
std::string values(int n, int salt) {
  std::string out = "{";
  for (int i = 0; i < n; ++i)
    out +=
        (i ? "," : "") + std::to_string(((i * 37 + salt * 11) % 17 - 8) * 0.05);
  return out + "}";
}

/// A small CNN for training: Conv (3x3, im2col) -> BatchNorm (training
/// mode) -> Relu -> MaxPool -> Conv -> Relu -> AveragePool ->
/// GlobalAveragePool -> Flatten -> Gemm -> SoftmaxCrossEntropyLoss.
std::string convNet() {
  std::string inits =
      "float[8,3,3,3] w1 = " + values(216, 1) +
      ", float[8] b1 = " + values(8, 2) + ", float[8] s1 = " + values(8, 3) +
      ", float[8] c1 = " + values(8, 4) + ", float[8] m1 = " + values(8, 5) +
      ", float[8] v1 = {1,1,1,1,1,1,1,1}, float[16,8,3,3] w2 = " +
      values(1152, 6) + ", float[10,16] wf = " + values(160, 7) +
      ", float[10] bf = " + values(10, 8);
  return "<ir_version: 8, opset_import: [\"\" : 17]>\n"
         "cnn (float[2,3,8,8] x, int64[2] labels) => (float loss)\n<" +
         inits +
         ">\n{\n"
         "  h1 = Conv<pads=[1,1,1,1]>(x, w1, b1)\n"
         "  n1, rm, rv = BatchNormalization<training_mode=1>(h1, s1, c1, m1, "
         "v1)\n"
         "  r1 = Relu(n1)\n"
         "  p1 = MaxPool<kernel_shape=[2,2], strides=[2,2]>(r1)\n"
         "  h2 = Conv<pads=[1,1,1,1]>(p1, w2)\n"
         "  r2 = Relu(h2)\n"
         "  a2 = AveragePool<kernel_shape=[2,2], strides=[2,2]>(r2)\n"
         "  g = GlobalAveragePool(a2)\n"
         "  f = Flatten(g)\n"
         "  logits = Gemm<transB=1>(f, wf, bf)\n"
         "  loss = SoftmaxCrossEntropyLoss(logits, labels)\n"
         "}\n";
}

class NoHeapStep : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("zinc-noheap", dir));
  }
  void TearDown() override { llvm::sys::fs::remove_directories(dir); }

  std::string path(llvm::StringRef name) {
    llvm::SmallString<128> p(dir);
    llvm::sys::path::append(p, name);
    return std::string(p);
  }

  /// Compiles `model` with zinc-compile and `flags` into a plan file.
  std::string compile(const std::string &model,
                      std::vector<std::string> flags) {
    std::string plan = path("plan-" + std::to_string(plans++) + ".zplan");
    std::vector<llvm::StringRef> argv{ZINC_COMPILE, model, "-o", plan};
    for (const std::string &f : flags)
      argv.push_back(f);
    std::string error;
    int rc = llvm::sys::ExecuteAndWait(ZINC_COMPILE, argv, llvm::None, {}, 0, 0,
                                       &error);
    EXPECT_EQ(rc, 0) << "zinc-compile " << model << ": " << error;
    return plan;
  }

  /// Loads `plan`, runs a first step (thread pools and BLAS buffers are
  /// made on first use), then counts the allocations of `steps` more.
  void expectNoHeap(const std::string &plan, bool serial, int steps = 2) {
    rt::LoadOptions opts;
    auto program = rt::Program::load(plan, opts);
    ASSERT_TRUE(static_cast<bool>(program))
        << llvm::toString(program.takeError());
    rt::ExecutorOptions execOpts;
    execOpts.serial = serial;
    auto executor = rt::Executor::create(**program, execOpts);
    ASSERT_TRUE(static_cast<bool>(executor))
        << llvm::toString(executor.takeError());
    auto first = (*executor)->run(1, /*recordTimings=*/false);
    ASSERT_TRUE(static_cast<bool>(first)) << llvm::toString(first.takeError());
    if (!numBlasSegments)
      dl_iterate_phdr(findBlas, nullptr);
    allocations = 0;
    blasAllocations = 0;
    counting = true;
    bool ok = true;
    for (int s = 2; s < 2 + steps && ok; ++s) {
      auto result = (*executor)->run(s, /*recordTimings=*/false);
      ok = static_cast<bool>(result);
      if (!ok) {
        counting = false;
        ADD_FAILURE() << llvm::toString(result.takeError());
      }
    }
    counting = false;
    uint64_t n = allocations;
    std::string seen;
    for (uint64_t k = 0; k < std::min<uint64_t>(n, kRemembered); ++k)
      seen += " " + std::to_string(sizes[k].load());
    std::string run = plan + (serial ? " (serial)" : " (streams)");
    EXPECT_EQ(n, 0u) << run << ": " << n << " heap allocations during " << steps
                     << " steps; the first of" << seen << " bytes";
    if (blasAllocations)
      llvm::errs() << run << ": OpenBLAS's threaded GEMM allocated its job "
                   << "array " << blasAllocations.load() << " times in "
                   << steps << " steps (not counted)\n";
  }

  llvm::SmallString<128> dir;
  int plans = 0;
};

std::string gptModel() {
  return std::string(ZINC_SOURCE_DIR) + "/examples/gpt/gpt.onnx";
}

TEST_F(NoHeapStep, GptBf16) {
  std::string plan = compile(gptModel(), {"--precision=bf16"});
  expectNoHeap(plan, /*serial=*/false);
  expectNoHeap(plan, /*serial=*/true);
}

TEST_F(NoHeapStep, GptFp32Offloaded) {
  std::string plan =
      compile(gptModel(), {"--offload-optimizer=cpu", "--offload-params=cpu"});
  expectNoHeap(plan, /*serial=*/false);
}

TEST_F(NoHeapStep, ConvNetFp32AndBf16) {
  std::string model = path("cnn.onnxtxt");
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(model, ec);
    ASSERT_FALSE(ec) << ec.message();
    os << convNet();
  }
  expectNoHeap(compile(model, {}), /*serial=*/false);
  expectNoHeap(compile(model, {"--precision=bf16"}), /*serial=*/false);
}

/// Where the counter's own test leaves its pointers, so that the compiler
/// cannot drop the allocations.
void *volatile sink;

// The counter itself: a heap allocation while counting is seen, so the
// tests above cannot pass for want of seeing one.
TEST(NoHeapCounter, SeesAllocations) {
  allocations = 0;
  counting = true;
  void *p = std::malloc(100);
  sink = p;
  auto *q = new std::vector<int>(1000);
  sink = q;
  counting = false;
  delete q;
  std::free(p);
  EXPECT_GE(allocations.load(), 2u);
}

} // namespace
