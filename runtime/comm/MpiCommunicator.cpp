//===- MpiCommunicator.cpp - Collectives over MPI, with timeouts ----------===//
//
// The cpu backend's collectives: MPI_COMM_WORLD, as mpirun or srun started
// it. Each collective is issued non-blocking and polled, so a rank whose
// peer died (or hangs) gives up after the timeout with a diagnostic naming
// the collective, instead of waiting forever; zinc-run then aborts the job.
// f16 and bf16 are reduced by user-defined ops (MPI has no half types),
// rounding once per rank combined, as NCCL does. In a group (a bucket of
// collectives) each is issued at once and waited for at the group's end,
// so their latencies overlap; 16-bit sums and means, which go through the
// f32 scratch a chunk at a time, still complete one by one.
//
//===----------------------------------------------------------------------===//
#include "zinc/runtime/comm/Communicator.h"
#include "zinc/runtime/comm/DevicePlacement.h"
#include "zinc/support/Error.h"
#include "zinc/support/Float16.h"
#include "llvm/Support/FormatVariadic.h"
#include <chrono>
#include <functional>
#include <climits>
#include <cstring>
#include <cstdlib>
#include <mpi.h>
#include <thread>
#include <vector>

namespace zinc::comm {
namespace {

template <float (*Load)(uint16_t), uint16_t (*Store)(float), bool Max>
void reduceHalves(void *in, void *inout, int *len, MPI_Datatype *) {
  const uint16_t *a = static_cast<const uint16_t *>(in);
  uint16_t *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *len; ++i) {
    float x = Load(a[i]), y = Load(b[i]);
    b[i] = Store(Max ? (x > y || x != x ? x : y) : x + y);
  }
}

std::string mpiErrorText(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return std::string(text, length);
}

class MpiCommunicator : public Communicator {
public:
  explicit MpiCommunicator(double timeoutSeconds) : timeout(timeoutSeconds) {}
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized)
      return;
    for (MPI_Op *op : {&halfSum, &halfMax, &bf16Sum, &bf16Max})
      if (*op != MPI_OP_NULL)
        MPI_Op_free(op);
  }

  llvm::Error init() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      // The collective stream's thread issues collectives while the main
      // thread waits; the step loop's own calls come between steps.
      if (int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided))
        return makeError("MPI_Init_thread failed: " + mpiErrorText(rc));
      if (provided < MPI_THREAD_SERIALIZED)
        return makeError("this MPI library cannot be called from more than one thread "
                         "(MPI_THREAD_SERIALIZED); zinc-run needs it");
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int r = 0, n = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    myRank = static_cast<unsigned>(r);
    worldSize = static_cast<unsigned>(n);
    MPI_Op_create(&reduceHalves<halfToFloat, floatToHalf, false>, 1, &halfSum);
    MPI_Op_create(&reduceHalves<halfToFloat, floatToHalf, true>, 1, &halfMax);
    MPI_Op_create(&reduceHalves<bf16ToFloat, floatToBf16, false>, 1, &bf16Sum);
    MPI_Op_create(&reduceHalves<bf16ToFloat, floatToBf16, true>, 1, &bf16Max);
    return llvm::Error::success();
  }

  unsigned rank() const override { return myRank; }
  unsigned size() const override { return worldSize; }
  llvm::StringRef kind() const override { return "MPI"; }

  llvm::Error allReduce(void *data, int64_t count, DType dtype, ReduceOp op,
                        llvm::StringRef what, llvm::MutableArrayRef<float> scratch) override {
    if (isHalf(dtype) && op != ReduceOp::Max) {
      if (auto err = allReduceWidened(data, count, dtype, op, what, scratch))
        return err;
      bytes().allreduce += count * dtypeSize(dtype);
      return llvm::Error::success();
    }
    auto type = typeOf(dtype, op, what);
    if (!type)
      return type.takeError();
    if (auto err = fitsInt(count, what))
      return err;
    MPI_Request req;
    if (int rc = MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(count), type->first,
                                type->second, MPI_COMM_WORLD, &req))
      return failed(rc, what);
    return complete(req, what, [this, data, count, dtype, op] {
      if (op == ReduceOp::Mean)
        scale(data, count, dtype);
      bytes().allreduce += count * dtypeSize(dtype);
    });
  }

  llvm::Error allGather(const void *shard, void *whole, int64_t count, int64_t shardCount,
                        DType dtype, llvm::StringRef what) override {
    if (auto err = fitsInt(count, what))
      return err;
    std::vector<int> counts, displs;
    layout(count, shardCount, counts, displs);
    MPI_Datatype type = bytesOf(dtype);
    MPI_Request req;
    if (int rc = MPI_Iallgatherv(shard, counts[myRank], type, whole, counts.data(),
                                 displs.data(), type, MPI_COMM_WORLD, &req))
      return failed(rc, what);
    return complete(req, what,
                    [this, count, dtype] { bytes().allgather += count * dtypeSize(dtype); },
                    std::move(counts), std::move(displs));
  }

  llvm::Error gather(const void *shard, void *whole, int64_t count, int64_t shardCount,
                     DType dtype, unsigned root, llvm::StringRef what) override {
    if (auto err = fitsInt(count, what))
      return err;
    std::vector<int> counts, displs;
    layout(count, shardCount, counts, displs);
    MPI_Datatype type = bytesOf(dtype);
    MPI_Request req;
    if (int rc = MPI_Igatherv(shard, counts[myRank], type, whole, counts.data(), displs.data(),
                              type, static_cast<int>(root), MPI_COMM_WORLD, &req))
      return failed(rc, what);
    return wait(req, what);
  }

  llvm::Error reduceScatter(const void *whole, void *shard, int64_t count,
                            int64_t shardCount, DType dtype, ReduceOp op,
                            llvm::StringRef what, llvm::MutableArrayRef<float> scratch) override {
    size_t e = dtypeSize(dtype);
    int64_t mine = ownedElements(count, shardCount, myRank);
    auto finish = [this, shard, count, shardCount, mine, e] {
      std::memset(static_cast<uint8_t *>(shard) + mine * e, 0, (shardCount - mine) * e);
      bytes().reduceScatter += count * e;
    };
    if (isHalf(dtype) && op != ReduceOp::Max) {
      if (auto err = reduceScatterWidened(whole, shard, count, shardCount, dtype, op, what,
                                          scratch))
        return err;
      finish();
      return llvm::Error::success();
    }
    auto type = typeOf(dtype, op, what);
    if (!type)
      return type.takeError();
    if (auto err = fitsInt(count, what))
      return err;
    std::vector<int> counts, displs;
    layout(count, shardCount, counts, displs);
    MPI_Request req;
    if (int rc = MPI_Ireduce_scatter(whole, shard, counts.data(), type->first, type->second,
                                     MPI_COMM_WORLD, &req))
      return failed(rc, what);
    return complete(
        req, what,
        [this, shard, mine, dtype, op, finish] {
          if (op == ReduceOp::Mean)
            scale(shard, mine, dtype);
          finish();
        },
        std::move(counts));
  }

  llvm::Error broadcast(void *data, size_t bytes, unsigned root,
                        llvm::StringRef what) override {
    if (auto err = fitsInt(static_cast<int64_t>(bytes), what))
      return err;
    MPI_Request req;
    if (int rc = MPI_Ibcast(data, static_cast<int>(bytes), MPI_BYTE, static_cast<int>(root),
                            MPI_COMM_WORLD, &req))
      return failed(rc, what);
    return wait(req, what);
  }

  void beginGroup() override { grouped = true; }

  llvm::Error endGroup() override {
    grouped = false;
    std::vector<Pending> issued = std::move(pending);
    pending.clear();
    for (Pending &p : issued) {
      if (auto err = wait(p.req, p.what))
        return err; // zinc-run aborts the job: the requests left die with it.
      p.finish();
    }
    return llvm::Error::success();
  }

private:
  /// A collective issued in a group, waiting for its end, with the count
  /// and displacement arrays MPI reads until then (a vector collective's
  /// arrays must outlive its request).
  struct Pending {
    MPI_Request req;
    std::string what;
    std::function<void()> finish;
    std::vector<int> counts, displs;
  };

  /// Waits for `req` and runs `finish` (what follows the transfer: a mean's
  /// scaling, the counters), or, in a group, leaves both to endGroup,
  /// keeping the request's `counts` and `displs` alive until then.
  llvm::Error complete(MPI_Request req, llvm::StringRef what, std::function<void()> finish,
                       std::vector<int> counts = {}, std::vector<int> displs = {}) {
    if (grouped) {
      // Moving a vector keeps its buffer, which the request points into.
      pending.push_back({req, what.str(), std::move(finish), std::move(counts),
                         std::move(displs)});
      return llvm::Error::success();
    }
    if (auto err = wait(req, what))
      return err;
    finish();
    return llvm::Error::success();
  }

  static bool isHalf(DType dtype) { return dtype == DType::F16 || dtype == DType::BF16; }

  static float load(DType dtype, const void *data, int64_t i) {
    uint16_t bits = static_cast<const uint16_t *>(data)[i];
    return dtype == DType::F16 ? halfToFloat(bits) : bf16ToFloat(bits);
  }
  static void store(DType dtype, void *data, int64_t i, float v) {
    static_cast<uint16_t *>(data)[i] = dtype == DType::F16 ? floatToHalf(v) : floatToBf16(v);
  }

  static llvm::Error noScratch(llvm::StringRef what) {
    return makeError(what + ": no f32 workspace for a 16-bit reduction (the plan gives "
                            "the collective stream too little)");
  }

  /// A 16-bit sum or mean in f32, a scratch-sized chunk at a time.
  llvm::Error allReduceWidened(void *data, int64_t count, DType dtype, ReduceOp op,
                               llvm::StringRef what, llvm::MutableArrayRef<float> scratch) {
    if (scratch.empty() && count)
      return noScratch(what);
    float factor = op == ReduceOp::Mean ? 1.0f / static_cast<float>(worldSize) : 1.0f;
    for (int64_t begin = 0; begin < count; begin += scratch.size()) {
      int64_t n = std::min<int64_t>(scratch.size(), count - begin);
      for (int64_t i = 0; i < n; ++i)
        scratch[i] = load(dtype, data, begin + i);
      MPI_Request req;
      if (int rc = MPI_Iallreduce(MPI_IN_PLACE, scratch.data(), static_cast<int>(n),
                                  MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req))
        return failed(rc, what);
      if (auto err = wait(req, what))
        return err;
      for (int64_t i = 0; i < n; ++i)
        store(dtype, data, begin + i, scratch[i] * factor);
    }
    return llvm::Error::success();
  }

  /// A 16-bit reduce-scatter in f32: each rank's shard is reduced to it, a
  /// scratch-sized chunk at a time.
  llvm::Error reduceScatterWidened(const void *whole, void *shard, int64_t count,
                                   int64_t shardCount, DType dtype, ReduceOp op,
                                   llvm::StringRef what,
                                   llvm::MutableArrayRef<float> scratch) {
    if (scratch.empty() && count)
      return noScratch(what);
    float factor = op == ReduceOp::Mean ? 1.0f / static_cast<float>(worldSize) : 1.0f;
    for (unsigned root = 0; root < worldSize; ++root) {
      int64_t owned = ownedElements(count, shardCount, root);
      int64_t first = shardCount * root;
      for (int64_t begin = 0; begin < owned; begin += scratch.size()) {
        int64_t n = std::min<int64_t>(scratch.size(), owned - begin);
        for (int64_t i = 0; i < n; ++i)
          scratch[i] = load(dtype, whole, first + begin + i);
        bool mine = root == myRank;
        MPI_Request req;
        if (int rc = MPI_Ireduce(mine ? MPI_IN_PLACE : scratch.data(), scratch.data(),
                                 static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                                 static_cast<int>(root), MPI_COMM_WORLD, &req))
          return failed(rc, what);
        if (auto err = wait(req, what))
          return err;
        if (mine)
          for (int64_t i = 0; i < n; ++i)
            store(dtype, shard, begin + i, scratch[i] * factor);
      }
    }
    return llvm::Error::success();
  }

  void layout(int64_t count, int64_t shardCount, std::vector<int> &counts,
              std::vector<int> &displs) const {
    for (unsigned r = 0; r < worldSize; ++r) {
      counts.push_back(static_cast<int>(ownedElements(count, shardCount, r)));
      displs.push_back(static_cast<int>(std::min<int64_t>(count, shardCount * r)));
    }
  }

  static llvm::Error fitsInt(int64_t count, llvm::StringRef what) {
    if (count > INT_MAX)
      return makeError(what + ": " + llvm::Twine(count) +
                       " elements are more than one MPI collective carries (2^31 - 1)");
    return llvm::Error::success();
  }

  static MPI_Datatype bytesOf(DType dtype) {
    switch (dtypeSize(dtype)) {
    case 1: return MPI_UINT8_T;
    case 2: return MPI_UINT16_T;
    case 4: return MPI_UINT32_T;
    default: return MPI_UINT64_T;
    }
  }

  llvm::Expected<std::pair<MPI_Datatype, MPI_Op>> typeOf(DType dtype, ReduceOp op,
                                                         llvm::StringRef what) const {
    bool max = op == ReduceOp::Max;
    switch (dtype) {
    case DType::F32: return std::make_pair(MPI_FLOAT, max ? MPI_MAX : MPI_SUM);
    case DType::F64: return std::make_pair(MPI_DOUBLE, max ? MPI_MAX : MPI_SUM);
    case DType::F16: return std::make_pair(MPI_UINT16_T, max ? halfMax : halfSum);
    case DType::BF16: return std::make_pair(MPI_UINT16_T, max ? bf16Max : bf16Sum);
    default:
      return makeError(what + ": cannot reduce " + dtypeName(dtype) + " tensors");
    }
  }

  /// Mean = sum / ranks.
  void scale(void *data, int64_t count, DType dtype) const {
    float inv = 1.0f / static_cast<float>(worldSize);
    switch (dtype) {
    case DType::F32:
      for (int64_t i = 0; i < count; ++i)
        static_cast<float *>(data)[i] *= inv;
      break;
    case DType::F64:
      for (int64_t i = 0; i < count; ++i)
        static_cast<double *>(data)[i] /= worldSize;
      break;
    case DType::F16:
      for (int64_t i = 0; i < count; ++i) {
        uint16_t &h = static_cast<uint16_t *>(data)[i];
        h = floatToHalf(halfToFloat(h) * inv);
      }
      break;
    case DType::BF16:
      for (int64_t i = 0; i < count; ++i) {
        uint16_t &h = static_cast<uint16_t *>(data)[i];
        h = floatToBf16(bf16ToFloat(h) * inv);
      }
      break;
    default:
      break;
    }
  }

  llvm::Error failed(int rc, llvm::StringRef what) const {
    return makeError("rank " + llvm::Twine(myRank) + ": " + what + " failed: " +
                     mpiErrorText(rc));
  }

  /// Polls until `req` completes, yielding the core when it takes long (the
  /// ranks may share cores), or gives up after the timeout.
  llvm::Error wait(MPI_Request &req, llvm::StringRef what) const {
    using Clock = std::chrono::steady_clock;
    auto start = Clock::now();
    for (unsigned spins = 0;; ++spins) {
      int done = 0;
      if (int rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE))
        return failed(rc, what);
      if (done)
        return llvm::Error::success();
      if (spins < 256)
        continue;
      double waited = std::chrono::duration<double>(Clock::now() - start).count();
      if (waited > timeout)
        return makeError(llvm::formatv("rank {0}: {1} timed out after {2:f1} s waiting "
                                       "for the other ranks (did one of the {3} ranks "
                                       "die or stop?)",
                                       myRank, what, waited, worldSize)
                             .str());
      if (spins < 4096)
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  double timeout;
  unsigned myRank = 0, worldSize = 1;
  bool grouped = false;
  std::vector<Pending> pending;
  MPI_Op halfSum = MPI_OP_NULL, halfMax = MPI_OP_NULL;
  MPI_Op bf16Sum = MPI_OP_NULL, bf16Max = MPI_OP_NULL;
};

} // namespace

llvm::Expected<std::unique_ptr<Communicator>> createMpiCommunicator(double timeoutSeconds) {
  auto comm = std::make_unique<MpiCommunicator>(timeoutSeconds);
  if (auto err = comm->init())
    return std::move(err);
  return std::unique_ptr<Communicator>(std::move(comm));
}

llvm::Expected<NodeRanks> mpiNodeRanks() {
  MPI_Comm node = MPI_COMM_NULL;
  int worldRank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &worldRank);
  if (int rc = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, worldRank,
                                   MPI_INFO_NULL, &node))
    return makeError("MPI_Comm_split_type (the ranks on this node) failed: " +
                     mpiErrorText(rc));
  int r = 0, n = 1;
  MPI_Comm_rank(node, &r);
  MPI_Comm_size(node, &n);
  MPI_Comm_free(&node);
  auto launcher = localRankFromEnvironment(std::getenv);
  if (!launcher)
    return launcher.takeError();
  NodeRanks ranks;
  ranks.localRank = launcher->value_or(static_cast<unsigned>(r));
  ranks.localRanks = static_cast<unsigned>(n);
  return ranks;
}

void finishMpi(bool failed) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized)
    return;
  if (failed)
    MPI_Abort(MPI_COMM_WORLD, 1);
  else
    MPI_Finalize();
}

} // namespace zinc::comm
