//===- NvmeTest.cpp - The NVMe tier through the executor ------------------===//
#include "PlanBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

using namespace zinc;
using namespace zinc::rt;
using namespace zinc::rt::test;

namespace {

class NvmeTier : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("zinc-nvme-test", dir));
  }
  void TearDown() override {
    if (!dir.empty())
      llvm::sys::fs::remove_directories(dir);
  }
  LoadOptions options() const {
    LoadOptions opts;
    opts.nvmeDir = std::string(dir);
    return opts;
  }
  llvm::SmallString<128> dir;
};

/// Runs the plan concurrently and in plan order from the same start and
/// checks the host tensors agree bit for bit; returns the concurrent run.
std::unique_ptr<Program> runBoth(const plan::Plan &plan,
                                 const LoadOptions &opts,
                                 const std::function<void(Program &)> &init,
                                 std::vector<StepResult> &results,
                                 int steps = 2) {
  std::unique_ptr<Program> out;
  std::vector<std::vector<uint8_t>> first;
  for (bool serial : {false, true}) {
    std::unique_ptr<Program> p = loadOrFail(plan, opts);
    if (!p)
      return nullptr;
    init(*p);
    auto executor = Executor::create(*p, {serial});
    EXPECT_TRUE(static_cast<bool>(executor));
    if (!executor)
      return nullptr;
    for (int s = 1; s <= steps; ++s) {
      auto r = (*executor)->run(s, false);
      EXPECT_TRUE(static_cast<bool>(r)) << llvm::toString(r.takeError());
      if (!r)
        return nullptr;
      if (!serial)
        results.push_back(*r);
    }
    executor->reset();
    if (!serial) {
      first = snapshot(*p);
      out = std::move(p);
    } else {
      EXPECT_EQ(first, snapshot(*p))
          << "the concurrent run differs from plan order";
    }
  }
  return out;
}

// CPU -> NVMe -> CPU -> GPU and back: the bytes survive the trip, whether the
// CPU tensors are sector aligned (direct O_DIRECT transfers) or not (through
// the bounce buffer), and the NVMe traffic is counted.
TEST_F(NvmeTier, RoundTrip) {
  for (uint64_t cpuAlign : {64, 4096}) {
    SCOPED_TRACE("cpu alignment " + std::to_string(cpuAlign));
    const int64_t n = 1000; // 4000 bytes: not a whole sector
    PlanBuilder b;
    b.setAlignment(plan::TIER_CPU, cpuAlign);
    int src = b.tensor("src", {n}, plan::TIER_CPU, 1, plan::ROLE_STATE);
    int guard = b.tensor("guard", {n}, plan::TIER_CPU);
    int stored = b.tensor("stored", {n}, plan::TIER_NVME, 1, plan::ROLE_STATE);
    int back = b.tensor("back", {n}, plan::TIER_CPU);
    int after = b.tensor("after", {n}, plan::TIER_CPU);
    int onGpu = b.tensor("back.gpu", {n});
    int doubled = b.tensor("doubled", {n});
    int result = b.tensor("doubled.cpu", {n}, plan::TIER_CPU);
    b.add("write", "Copy", {src}, {stored}, plan::STREAM_NVME, {}, {0});
    b.add("read", "Copy", {stored}, {back}, plan::STREAM_NVME, {0}, {1});
    b.add("fetch", "Copy", {back}, {onGpu}, plan::STREAM_H2D, {1}, {2});
    b.add("double", "Add", {onGpu, onGpu}, {doubled}, plan::STREAM_COMPUTE, {2},
          {3});
    b.add("evict", "Copy", {doubled}, {result}, plan::STREAM_D2H, {3});
    std::vector<StepResult> results;
    auto init = [&](Program &p) {
      setValues(p, src, 3, 0.75f);
      setValues(p, guard, 7, 7);
      setValues(p, after, -7, 7);
    };
    std::unique_ptr<Program> p = runBoth(b.finish(), options(), init, results);
    ASSERT_TRUE(p);
    std::vector<float> s = values(*p, src), r = values(*p, result);
    EXPECT_EQ(values(*p, back), s);
    for (int64_t i = 0; i < n; ++i)
      EXPECT_EQ(r[i], s[i] + s[i]);
    // The sector-rounded transfers clobbered no neighbour.
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_EQ(values(*p, guard)[i], 7 + 7.0f * (i % 97)) << i;
      EXPECT_EQ(values(*p, after)[i], -7 + 7.0f * (i % 97)) << i;
    }
    std::vector<float> fromTier(n);
    ASSERT_EQ(messageOf(p->readNvmeTensor(stored, fromTier.data())), "");
    EXPECT_EQ(fromTier, s);
    for (const StepResult &res : results) {
      EXPECT_EQ(res.bytes.nvmeWrite, uint64_t(n * 4));
      EXPECT_EQ(res.bytes.nvmeRead, uint64_t(n * 4));
      EXPECT_EQ(res.bytes.h2d, uint64_t(n * 4));
      EXPECT_EQ(res.bytes.d2h, uint64_t(n * 4));
    }
  }
}

// Gradient accumulation on the NVMe lane: a skipped update_only copy's
// signal still means everything before it on the stream has landed, so the
// host kernel waiting for it reads the whole of an earlier pipelined read in
// every micro-batch, and the skipped copy itself moves nothing until the
// last micro-batch.
TEST_F(NvmeTier, SkippedCopySignalsOnlyOnceEarlierCopiesLanded) {
  const int64_t n = 1 << 20, small = 1024; // 4 MiB in flight
  PlanBuilder b;
  b.setAlignment(plan::TIER_CPU, 4096);
  int storedA = b.tensor("a.nvme", {n}, plan::TIER_NVME, 1, plan::ROLE_STATE);
  int storedB =
      b.tensor("b.nvme", {small}, plan::TIER_NVME, 1, plan::ROLE_STATE);
  int a = b.tensor("a", {n}, plan::TIER_CPU);
  int bCpu = b.tensor("b", {small}, plan::TIER_CPU);
  int out = b.tensor("out", {n}, plan::TIER_CPU);
  b.add("readA", "Copy", {storedA}, {a}, plan::STREAM_NVME);
  b.add("readB", "Copy", {storedB}, {bCpu}, plan::STREAM_NVME, {}, {0})
      .set_update_only(true);
  b.add("double", "Add", {a, a}, {out}, plan::STREAM_HOST, {0});
  plan::Plan plan = b.finish();
  std::vector<float> av(n), bv(small);
  for (int64_t i = 0; i < n; ++i)
    av[i] = 0.5f + float(i % 1013);
  for (int64_t i = 0; i < small; ++i)
    bv[i] = -1.0f - float(i);
  std::vector<float> twice(n);
  for (int64_t i = 0; i < n; ++i)
    twice[i] = av[i] + av[i];
  for (bool serial : {false, true}) {
    SCOPED_TRACE(serial ? "serial" : "concurrent");
    std::unique_ptr<Program> p = loadOrFail(plan, options());
    ASSERT_TRUE(p);
    ASSERT_EQ(messageOf(p->writeNvmeTensor(storedA, av.data())), "");
    ASSERT_EQ(messageOf(p->writeNvmeTensor(storedB, bv.data())), "");
    auto executor = Executor::create(*p, {serial});
    ASSERT_TRUE(static_cast<bool>(executor));
    const int micros = 3;
    for (int step = 1; step <= 2; ++step)
      for (int micro = 0; micro < micros; ++micro) {
        SCOPED_TRACE("step " + std::to_string(step) + " micro-batch " +
                     std::to_string(micro));
        std::memset(p->tensor(a).data, 0, n * 4);
        std::memset(p->tensor(out).data, 0, n * 4);
        std::memset(p->tensor(bCpu).data, 0, small * 4);
        auto r = (*executor)->run(step, false, micro, micros);
        ASSERT_TRUE(static_cast<bool>(r)) << llvm::toString(r.takeError());
        bool last = micro == micros - 1;
        EXPECT_EQ(r->bytes.nvmeRead, uint64_t((n + (last ? small : 0)) * 4));
        EXPECT_TRUE(values(*p, out) == twice);
        EXPECT_EQ(values(*p, bCpu), last ? bv : std::vector<float>(small, 0));
      }
  }
}

// A parameter whose home is NVMe is loaded there from its external-data
// file, through the staging buffer.
TEST_F(NvmeTier, InitializerLoadsStraightIntoTheTier) {
  const int64_t n = 3000;
  std::vector<float> weights(n);
  for (int64_t i = 0; i < n; ++i)
    weights[i] = 0.5f * i - 17;
  llvm::SmallString<128> dataPath(dir);
  llvm::sys::path::append(dataPath, "weights.bin");
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(dataPath, ec);
    ASSERT_FALSE(ec);
    os.write("skip", 4); // the initializer starts at offset 4
    os.write(reinterpret_cast<const char *>(weights.data()), n * 4);
  }
  PlanBuilder b;
  int w = b.tensor("w", {n}, plan::TIER_NVME, 1, plan::ROLE_PARAMETER);
  plan::InitializerSource *init = b.plan.mutable_tensors(w)->mutable_init();
  init->set_name("w");
  // External data is named relative to the model's directory.
  llvm::SmallString<128> modelPath(dir);
  llvm::sys::path::append(modelPath, "model.onnx");
  b.plan.set_model_path(std::string(modelPath));
  init->set_file("weights.bin");
  init->set_offset(4);
  init->set_length(n * 4);
  int c = b.tensor("w.cpu", {n}, plan::TIER_CPU);
  b.add("read", "Copy", {w}, {c}, plan::STREAM_NVME);
  std::vector<StepResult> results;
  std::unique_ptr<Program> p = runBoth(
      b.finish(), options(), [](Program &) {}, results, 1);
  ASSERT_TRUE(p);
  EXPECT_EQ(values(*p, c), weights);
  std::vector<float> fromTier(n);
  ASSERT_EQ(messageOf(p->readNvmeTensor(w, fromTier.data())), "");
  EXPECT_EQ(fromTier, weights);
}

} // namespace

namespace {

// Which write-backs the NVMe lane may hold back and batch: one that another
// stream later overwrites without waiting for a later copy of the lane that
// depends on it must stay in order; one whose bytes are only read later, or
// overwritten only after such a copy signalled, may be held back. The plans
// that order their accesses (all but the first, which races on purpose) run
// concurrently and in plan order with the same results.
struct WriteBehindCase {
  const char *name;
  bool hostWrites;    // the host kernel writes the staging buffer (else reads)
  bool afterLaneRead; // ... after waiting for a lane read into that buffer
  bool expected;
};

class WriteBehind : public NvmeTier,
                    public ::testing::WithParamInterface<WriteBehindCase> {};

TEST_P(WriteBehind, HeldBackOnlyWhereNothingElseCanTell) {
  const WriteBehindCase &c = GetParam();
  const int64_t n = 1024; // one sector
  PlanBuilder b;
  b.setAlignment(plan::TIER_CPU, 4096);
  int staging = b.tensor("staging", {n}, plan::TIER_CPU, 1, plan::ROLE_STATE);
  int other = b.tensor("other", {n}, plan::TIER_CPU, 1, plan::ROLE_STATE);
  int home = b.tensor("home", {n}, plan::TIER_NVME, 1, plan::ROLE_STATE);
  int next = b.tensor("next", {n}, plan::TIER_NVME, 1, plan::ROLE_STATE);
  int sum = b.tensor("sum", {n}, plan::TIER_CPU);
  b.add("writeback", "CopyInto", {staging, home}, {}, plan::STREAM_NVME);
  if (c.afterLaneRead)
    b.add("read.next", "Copy", {next}, {staging}, plan::STREAM_NVME, {}, {0});
  plan::Instruction &host =
      c.hostWrites
          ? b.add("overwrite", "Add", {other, other}, {staging},
                  plan::STREAM_HOST)
          : b.add("reader", "Add", {staging, other}, {sum}, plan::STREAM_HOST);
  if (c.afterLaneRead)
    host.add_wait_events(0);
  std::vector<StepResult> results;
  auto init = [&](Program &p) {
    setValues(p, staging, 1, 0.5f);
    setValues(p, other, 2, 0.25f);
  };
  plan::Plan built = b.finish();
  if (c.expected) {
    std::unique_ptr<Program> p = runBoth(built, options(), init, results);
    ASSERT_TRUE(p);
  }
  std::unique_ptr<Program> fresh = loadOrFail(built, options());
  ASSERT_TRUE(fresh);
  auto executor = Executor::create(*fresh, {/*serial=*/false});
  ASSERT_TRUE(static_cast<bool>(executor));
  EXPECT_EQ(fresh->instructions()[0].nvmeWriteBehind, c.expected);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, WriteBehind,
    ::testing::Values(
        WriteBehindCase{"OverwrittenUnordered", true, false, false},
        WriteBehindCase{"OverwrittenAfterADependentRead", true, true, true},
        WriteBehindCase{"OnlyReadLater", false, false, true}),
    [](const ::testing::TestParamInfo<WriteBehindCase> &info) {
      return std::string(info.param.name);
    });

} // namespace
