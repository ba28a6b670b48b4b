//===- Checkpoint.cpp - Training checkpoints that survive crashes ---------===//
#include "zinc/runtime/Checkpoint.h"
#include "zinc/runtime/CheckpointFolder.h"
#include "zinc/runtime/comm/Communicator.h"
#include "zinc/runtime/Safetensors.h"
#include "zinc/support/BoundedJson.h"
#include "zinc/support/Error.h"
#include "zinc/support/Float16.h"
#include "zinc/support/OutputFile.h"
#include "zinc/support/Sharding.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/xxhash.h"
#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace zinc::rt {

namespace {

constexpr const char *kManifest = "manifest.json";
constexpr const char *kModelFile = "model.safetensors";
constexpr const char *kStateFile = "state.safetensors";
constexpr int kFormat = 1;

bool isCheckpointed(const plan::Tensor &t) {
  return t.role() == plan::ROLE_PARAMETER || t.role() == plan::ROLE_STATE ||
         t.role() == plan::ROLE_MODEL_STATE;
}

std::string shapeText(const DType dtype, llvm::ArrayRef<int64_t> shape) {
  std::string text = dtypeName(dtype).str() + "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? "," : "") + std::to_string(shape[i]);
  return text + "]";
}

/// fsync of a file or directory by name: the rename that publishes a
/// checkpoint must not reach the disk before what it names.
llvm::Error syncPath(llvm::StringRef path) {
  int fd = ::open(std::string(path).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return makeError(path + ": cannot open to sync: " + std::strerror(errno));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0)
    return makeError(path + ": fsync: " + std::strerror(err));
  return llvm::Error::success();
}

/// The bytes of a checkpointed tensor, read from NVMe into `scratch` when
/// that is its home.
llvm::Expected<llvm::ArrayRef<uint8_t>>
tensorBytes(Program &program, int id, std::vector<uint8_t> &scratch) {
  const cpu::TensorRef &ref = program.tensor(id);
  uint64_t bytes = program.getPlan().tensors(id).size_bytes();
  if (program.place(id).tier != plan::TIER_NVME)
    return llvm::ArrayRef<uint8_t>(static_cast<const uint8_t *>(ref.data),
                                   bytes);
  scratch.resize(bytes);
  if (auto err = program.readNvmeTensor(id, scratch.data()))
    return std::move(err);
  return llvm::ArrayRef<uint8_t>(scratch);
}

llvm::Error removeTree(llvm::StringRef path) {
  if (std::error_code ec = llvm::sys::fs::remove_directories(path))
    return makeError(path + ": cannot remove: " + ec.message());
  return llvm::Error::success();
}

/// The shape a checkpoint keeps tensor `t` in: whole, for a ZeRO shard
/// (the tensor it is a shard of), so that any rank count can resume it.
llvm::SmallVector<int64_t, 6> checkpointShape(const Program &program,
                                              const plan::Tensor &t) {
  if (t.shard_of_size())
    return {t.shard_of().begin(), t.shard_of().end()};
  const cpu::TensorRef &ref = program.tensor(t.id());
  return {ref.shape.begin(), ref.shape.end()};
}

/// The manifest's view of the plan: each checkpointed tensor's name, type
/// and (whole) shape, in plan order. The rank count is not part of it.
llvm::json::Array planIdentity(const Program &program) {
  llvm::json::Array tensors;
  for (const plan::Tensor &t : program.getPlan().tensors())
    if (isCheckpointed(t))
      tensors.push_back(llvm::json::Object{
          {"name", t.name()},
          {"type", shapeText(program.tensor(t.id()).dtype, checkpointShape(program, t))}});
  return tensors;
}

llvm::Expected<llvm::json::Object> fileRecord(llvm::StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return makeError(path +
                     ": cannot read back: " + buffer.getError().message());
  return llvm::json::Object{
      {"bytes", static_cast<int64_t>((*buffer)->getBufferSize())},
      {"xxh64", llvm::utohexstr(llvm::xxHash64((*buffer)->getBuffer()))}};
}

} // namespace

namespace {

/// `ref`'s elements (of whatever float type it holds) widened to fp32.
void widenToFloat(const cpu::TensorRef &ref, std::vector<float> &values) {
  values.resize(ref.numElements());
  for (size_t k = 0; k < values.size(); ++k) {
    switch (ref.dtype) {
    case DType::F32:
      values[k] = ref.as<float>()[k];
      break;
    case DType::F64:
      values[k] = static_cast<float>(ref.as<double>()[k]);
      break;
    case DType::F16:
      values[k] = halfToFloat(ref.as<uint16_t>()[k]);
      break;
    case DType::BF16:
      values[k] = bf16ToFloat(ref.as<uint16_t>()[k]);
      break;
    default:
      values[k] = 0;
      break;
    }
  }
}

/// One ONNX initializer of the saved weights: a tensor of the plan, or the
/// tiles the tile pass split it into (each a share along an axis).
struct SavedWeight {
  /// The key: the initializer's name, or with PyTorch keys the PyTorch
  /// parameter's where the plan records one (InitializerSource.pytorch_name).
  std::string name;
  /// The name the plan records beside the key (the PyTorch parameter's
  /// under ONNX keys, the initializer's under PyTorch keys), or empty.
  std::string otherName;
  /// Initializer and PyTorch parameter are transposes of each other.
  bool otherTransposed = false;
  /// Saved in PyTorch's layout, the transpose of the initializer's.
  bool transposed = false;
  /// The initializer's shape, whole (the saved tensor's, or its transpose).
  llvm::SmallVector<int64_t, 6> shape;
  std::vector<int> ids;
};

std::vector<SavedWeight> savedWeights(const Program &program,
                                      WeightKeysKind keys) {
  std::vector<SavedWeight> weights;
  llvm::StringMap<size_t> index;
  for (const plan::Tensor &t : program.getPlan().tensors()) {
    if (t.role() != plan::ROLE_PARAMETER && t.role() != plan::ROLE_MODEL_STATE)
      continue;
    // A constant the exporter folded and the compiler found no PyTorch
    // name for: no state_dict has it (zinc-compile warned).
    if (keys == WeightKeysKind::Pytorch && t.init().pytorch_name().empty() &&
        llvm::StringRef(t.init().name()).startswith("onnx::"))
      continue;
    auto [it, added] = index.try_emplace(t.init().name(), weights.size());
    if (added) {
      SavedWeight w;
      w.name = t.init().name();
      if (t.init().whole_shape_size())
        w.shape.assign(t.init().whole_shape().begin(),
                       t.init().whole_shape().end());
      else if (t.shard_of_size())
        w.shape.assign(t.shard_of().begin(), t.shard_of().end());
      else
        w.shape.assign(program.tensor(t.id()).shape.begin(),
                       program.tensor(t.id()).shape.end());
      if (!t.init().pytorch_name().empty()) {
        w.otherName = t.init().pytorch_name();
        w.otherTransposed =
            t.init().pytorch_transposed() && w.shape.size() == 2;
        if (keys == WeightKeysKind::Pytorch) {
          std::swap(w.name, w.otherName);
          w.transposed = w.otherTransposed;
        }
      }
      weights.push_back(std::move(w));
    }
    weights[it->second].ids.push_back(t.id());
  }
  return weights;
}

} // namespace

/// Tensor `id` whole: its bytes (read from NVMe into `scratch` if it lives
/// there), or, for a shard, every rank's shard gathered into `gathered` on
/// rank 0, the writer (other ranks get no data back: they only send).
/// Every rank calls it for the same shards in the same order.
static llvm::Expected<cpu::TensorRef> wholeTensor(Program &program, int id,
                                                  std::vector<uint8_t> &scratch,
                                                  std::vector<uint8_t> &gathered) {
  auto bytes = tensorBytes(program, id, scratch);
  if (!bytes)
    return bytes.takeError();
  cpu::TensorRef ref = program.tensor(id);
  ref.data = const_cast<uint8_t *>(bytes->data());
  const plan::Tensor &t = program.getPlan().tensors(id);
  if (!t.shard_of_size())
    return ref;
  cpu::TensorRef whole{ref.dtype, {}, nullptr};
  whole.shape.assign(t.shard_of().begin(), t.shard_of().end());
  if (program.rank() == 0) {
    gathered.resize(whole.byteSize());
    whole.data = gathered.data();
  }
  comm::Communicator *comm = program.communicator();
  if (!comm) {
    std::memcpy(whole.data, ref.data, whole.byteSize());
    return whole;
  }
  if (auto err = comm->gather(ref.data, whole.data, whole.numElements(),
                              ref.numElements(), ref.dtype, /*root=*/0,
                              "the gather of '" + t.name() + "'"))
    return std::move(err);
  return whole;
}

/// Writes `headers`' tensors to `path` on rank 0, each as `produce(i, os)`
/// prints it; the other ranks call `produce(i, nullptr)` in the same order,
/// taking part in the gathers of shards it makes. `metadata` goes into the
/// header's `__metadata__`.
static llvm::Error writeFromRankZero(
    Program &program, llvm::StringRef path,
    llvm::ArrayRef<StreamedTensor> headers,
    llvm::function_ref<llvm::Error(size_t, llvm::raw_ostream *)> produce,
    llvm::ArrayRef<std::pair<std::string, std::string>> metadata = {}) {
  if (program.rank() != 0) {
    for (size_t i = 0; i < headers.size(); ++i)
      if (auto err = produce(i, nullptr))
        return err;
    return llvm::Error::success();
  }
  return writeSafetensorsStreamed(
      path, headers,
      [&](size_t i, llvm::raw_ostream &os) -> llvm::Error {
        return produce(i, &os);
      },
      metadata);
}

namespace {
/// wholeWeight's buffers, kept from one weight to the next.
struct WholeWeights {
  std::vector<uint8_t> scratch, gathered;
  std::vector<float> values, whole;
};
} // namespace

/// Weight `w` whole in fp32, in the initializer's layout: its tensor
/// widened, or its tiles scattered into one buffer; a shard gathered from
/// every rank. `writing` is false on the ranks that only take part in the
/// gathers (they get null back). Every rank calls it for the same weights
/// in the same order.
static llvm::Expected<const std::vector<float> *>
wholeWeight(Program &program, const SavedWeight &w, bool writing,
            WholeWeights &b) {
  const plan::Plan &plan = program.getPlan();
  bool tiled = plan.tensors(w.ids.front()).init().whole_shape_size() > 0;
  if (tiled && writing)
    b.whole.assign(numElements(w.shape), 0.0f);
  for (int id : w.ids) {
    // A rank that writes nothing takes part only in the gathers, for
    // exactly the tensors rank 0 gathers.
    if (!writing) {
      if (plan.tensors(id).shard_of_size())
        if (auto ref = wholeTensor(program, id, b.scratch, b.gathered); !ref)
          return addContext(ref.takeError(), "parameter '" + w.name + "'");
      if (!tiled)
        break;
      continue;
    }
    auto ref = wholeTensor(program, id, b.scratch, b.gathered);
    if (!ref)
      return addContext(ref.takeError(), "parameter '" + w.name + "'");
    widenToFloat(*ref, b.values);
    if (!tiled)
      break;
    // Scatter the tile's runs into the whole initializer.
    const plan::InitializerSource &src = plan.tensors(id).init();
    int64_t axis = src.slice_axis();
    int64_t inner = 1, outer = 1;
    for (size_t d = axis + 1; d < w.shape.size(); ++d)
      inner *= w.shape[d];
    for (int64_t d = 0; d < axis; ++d)
      outer *= w.shape[d];
    int64_t run = ref->shape[axis] * inner;
    for (int64_t r = 0; r < outer; ++r)
      std::copy(b.values.begin() + r * run, b.values.begin() + (r + 1) * run,
                b.whole.begin() + r * w.shape[axis] * inner +
                    src.slice_begin() * inner);
  }
  if (!writing)
    return nullptr;
  return tiled ? &b.whole : &b.values;
}

llvm::Error forEachTrainedWeight(
    Program &program,
    llvm::function_ref<llvm::Error(llvm::StringRef, llvm::ArrayRef<int64_t>,
                                   llvm::ArrayRef<float>)>
        visit) {
  WholeWeights buffers;
  for (const SavedWeight &w : savedWeights(program, WeightKeysKind::Onnx)) {
    auto got = wholeWeight(program, w, program.rank() == 0, buffers);
    if (!got)
      return got.takeError();
    if (*got)
      if (auto err = visit(w.name, w.shape, **got))
        return err;
  }
  return llvm::Error::success();
}

llvm::Error writeTrainedWeights(Program &program, llvm::StringRef path,
                                WeightKeysKind keys) {
  std::vector<SavedWeight> weights = savedWeights(program, keys);
  std::vector<StreamedTensor> headers;
  // The way back to the plan's names, for the tensors saved under PyTorch's.
  std::vector<std::pair<std::string, std::string>> metadata;
  for (const SavedWeight &w : weights) {
    llvm::SmallVector<int64_t, 6> shape = w.shape;
    if (w.transposed)
      std::swap(shape[0], shape[1]);
    headers.push_back({w.name, DType::F32, shape,
                       static_cast<uint64_t>(numElements(shape)) * 4});
    if (w.otherName.empty())
      continue;
    llvm::StringRef other =
        keys == WeightKeysKind::Pytorch ? "onnx" : "pytorch";
    metadata.push_back(
        {("zinc." + other + "_name." + w.name).str(), w.otherName});
    if (w.otherTransposed)
      metadata.push_back(
          {("zinc." + other + "_layout." + w.name).str(), "transposed"});
  }
  WholeWeights buffers;
  std::vector<float> transposed;
  auto produce = [&](size_t i, llvm::raw_ostream *os) -> llvm::Error {
    const SavedWeight &w = weights[i];
    auto got = wholeWeight(program, w, /*writing=*/os != nullptr, buffers);
    if (!got)
      return got.takeError();
    const std::vector<float> *out = *got;
    if (os && w.transposed) {
      // The initializer is [rows, cols]; PyTorch's parameter [cols, rows].
      int64_t rows = w.shape[0], cols = w.shape[1];
      transposed.resize(out->size());
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c)
          transposed[c * rows + r] = (*out)[r * cols + c];
      out = &transposed;
    }
    if (os)
      os->write(reinterpret_cast<const char *>(out->data()),
                out->size() * sizeof(float));
    return llvm::Error::success();
  };
  return writeFromRankZero(program, path, headers, produce, metadata);
}

std::string planChecksum(const Program &program) {
  std::string bytes;
  program.getPlan().SerializeToString(&bytes);
  return llvm::utohexstr(llvm::xxHash64(bytes), /*LowerCase=*/true, /*Width=*/16);
}

llvm::Error saveCheckpoint(Program &program, llvm::StringRef dir,
                           uint64_t stepsDone, uint64_t seed, unsigned keep,
                           const RunIdentity &id,
                           const std::function<void(llvm::StringRef)> &note,
                           const std::function<bool()> &stopRequested,
                           WeightKeysKind keys) {
  // Rank 0 writes the checkpoint; the other ranks take part in gathering
  // their shards into it and touch no file.
  bool writer = program.rank() == 0;
  std::string name = "step-" + std::to_string(stepsDone);
  std::string final = (dir + "/" + name).str();
  std::string partial = final + ".partial-" + std::to_string(::getpid());
  if (writer) {
    if (std::error_code ec = llvm::sys::fs::create_directories(dir))
      return makeError(
          dir + ": cannot create the checkpoint directory: " + ec.message());
    if (llvm::sys::fs::exists(partial))
      if (auto err = removeTree(partial))
        return err;
    if (std::error_code ec = llvm::sys::fs::create_directory(partial))
      return makeError(partial + ": cannot create: " + ec.message());
  }
  auto fail = [&](llvm::Error err) {
    if (writer)
      (void)llvm::sys::fs::remove_directories(partial);
    return addContext(std::move(err),
                      "checkpoint after step " + llvm::Twine(stepsDone));
  };
  // A stop (SIGTERM, SIGINT) abandons the checkpoint between tensors: the
  // previous one stays the newest, and nothing partial is left.
  auto stopped = [&]() -> llvm::Error {
    if (stopRequested && stopRequested())
      return makeError("abandoned: the run is stopping");
    return llvm::Error::success();
  };

  if (program.ranks() == 1)
    if (auto err = stopped())
      return fail(std::move(err));
  if (auto err = writeTrainedWeights(program, partial + "/" + kModelFile, keys))
    return fail(std::move(err));
  // Every state tensor whole: a shard is gathered from the ranks and kept
  // without its padding, so a run with another rank count can take its
  // own shares of it.
  std::vector<StreamedTensor> headers;
  std::vector<int> ids;
  for (const plan::Tensor &t : program.getPlan().tensors())
    if (isCheckpointed(t)) {
      DType dtype = program.tensor(t.id()).dtype;
      auto shape = checkpointShape(program, t);
      headers.push_back({t.name(), dtype, shape,
                         static_cast<uint64_t>(numElements(shape)) * dtypeSize(dtype)});
      ids.push_back(t.id());
    }
  std::vector<uint8_t> scratch, gathered;
  if (auto err = writeFromRankZero(
          program, partial + "/" + kStateFile, headers,
          [&](size_t i, llvm::raw_ostream *os) -> llvm::Error {
            // One rank alone may stop mid-way; several finish together.
            if (program.ranks() == 1)
              if (auto err = stopped())
                return err;
            // A rank that writes nothing takes part only in the gathers.
            if (!os && !program.getPlan().tensors(ids[i]).shard_of_size())
              return llvm::Error::success();
            auto whole = wholeTensor(program, ids[i], scratch, gathered);
            if (!whole)
              return addContext(whole.takeError(),
                                "tensor '" + headers[i].name + "'");
            if (os)
              os->write(static_cast<const char *>(whole->data), whole->byteSize());
            return llvm::Error::success();
          }))
    return fail(std::move(err));
  if (!writer)
    return llvm::Error::success();

  llvm::json::Object files;
  for (const char *file : {kModelFile, kStateFile}) {
    auto record = fileRecord(partial + "/" + file);
    if (!record)
      return fail(record.takeError());
    files[file] = std::move(*record);
  }
  llvm::json::Object manifest{{"format", kFormat},
                              {"producer", "zinc-run"},
                              {"plan_checksum", id.plan},
                              {"run_id", id.run},
                              {"step", static_cast<int64_t>(stepsDone)},
                              {"seed", std::to_string(seed)},
                              {"ranks", static_cast<int64_t>(program.ranks())},
                              {"plan", planIdentity(program)},
                              {"files", std::move(files)}};
  std::string manifestPath = partial + "/" + kManifest;
  if (auto err = writeOutputFile(manifestPath, [&](llvm::raw_ostream &os) {
        os << llvm::formatv("{0:2}", llvm::json::Value(std::move(manifest)))
           << "\n";
        return llvm::Error::success();
      }))
    return fail(std::move(err));
  if (program.ranks() == 1)
    if (auto err = stopped())
      return fail(std::move(err));
  for (const char *file : {kModelFile, kStateFile, kManifest})
    if (auto err = syncPath(partial + "/" + file))
      return fail(std::move(err));
  if (auto err = syncPath(partial))
    return fail(std::move(err));
  // Publish: a checkpoint of the same step is replaced only if it is this
  // run's own (an earlier attempt of a resumed run).
  if (llvm::sys::fs::exists(final)) {
    if (auto err = checkOwnCheckpoint(final, id))
      return fail(std::move(err));
    auto gone = removeCheckpointFiles(final);
    if (!gone)
      return fail(gone.takeError());
    if (!*gone)
      return fail(makeError(final + ": holds files zinc did not write; zinc "
                                    "does not replace it"));
  }
  if (std::error_code ec = llvm::sys::fs::rename(partial, final))
    return fail(
        makeError(final + ": cannot rename into place: " + ec.message()));
  if (auto err = syncPath(dir))
    return err;
  return pruneCheckpoints(dir, keep, id, note);
}

/// The checkpoint --resume=DIR continues from: the newest of this plan's
/// (by step), or, when DIR holds none, the newest of another plan's, said
/// in a note (a plan that differs only in its rank count resumes it; any
/// other is refused by the manifest check that follows).
static llvm::Expected<std::string>
chooseCheckpoint(llvm::StringRef dir, llvm::StringRef plan,
                 const std::function<void(llvm::StringRef)> &note) {
  struct Candidate {
    uint64_t step;
    std::string path;
    RunIdentity id;
  };
  llvm::Optional<Candidate> ofThisPlan, ofOtherPlans;
  llvm::SmallVector<std::string, 4> runsOfThisPlan;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec)) {
    auto step = stepOfCheckpointName(llvm::sys::path::filename(it->path()));
    if (!step)
      continue;
    auto id = readRunIdentity(it->path());
    if (!id)
      continue; // not zinc's
    bool mine = id->plan == plan;
    llvm::Optional<Candidate> &best = mine ? ofThisPlan : ofOtherPlans;
    if (!best || *step > best->step)
      best = Candidate{*step, it->path(), *id};
    if (mine && !llvm::is_contained(runsOfThisPlan, id->run))
      runsOfThisPlan.push_back(id->run);
  }
  if (ec)
    return makeError(dir + ": --resume: cannot list: " + ec.message());
  if (ofThisPlan) {
    if (runsOfThisPlan.size() > 1 && note)
      note((dir + " holds checkpoints of " + llvm::Twine(runsOfThisPlan.size()) +
            " runs of this plan; resuming the newest, " + ofThisPlan->path +
            " (run " + ofThisPlan->id.run + ")")
               .str());
    return ofThisPlan->path;
  }
  if (!ofOtherPlans)
    return makeError(dir + ": --resume: no complete checkpoint here (a "
                           "step-<S> directory with a manifest.json)");
  if (note) {
    std::string whose = ofOtherPlans->id.plan.empty()
                            ? std::string("written without a plan checksum")
                            : "plan " + ofOtherPlans->id.plan;
    note((dir + " holds no checkpoint of this plan (" + plan +
          "); trying the newest of another plan, " + ofOtherPlans->path + " (" +
          whose + "), which resumes only if its state tensors are this plan's")
             .str());
  }
  return ofOtherPlans->path;
}

llvm::Expected<ResumePoint>
resumeFromCheckpoint(Program &program, llvm::StringRef path,
                     const std::function<void(llvm::StringRef)> &note) {
  std::string chosen = path.str();
  std::string plan = planChecksum(program);
  if (!llvm::sys::fs::exists(path + "/" + kManifest)) {
    auto found = chooseCheckpoint(path, plan, note);
    if (!found)
      return found.takeError();
    chosen = *found;
  }
  std::string manifestPath = chosen + "/" + kManifest;
  auto text = llvm::MemoryBuffer::getFile(manifestPath);
  if (!text)
    return makeError(manifestPath +
                     ": cannot read: " + text.getError().message());
  auto parsed = parseJson((*text)->getBuffer());
  if (!parsed)
    return makeError(manifestPath + ": not a checkpoint manifest: " +
                     llvm::toString(parsed.takeError()));
  const llvm::json::Object *manifest = parsed->getAsObject();
  auto bad = [&](const llvm::Twine &why) {
    return makeError(manifestPath + ": not a checkpoint manifest: " + why);
  };
  if (!manifest)
    return bad("not a JSON object");
  auto format = manifest->getInteger("format");
  if (!format || *format != kFormat)
    return bad("format " + llvm::Twine(format ? *format : -1) +
               ", this zinc-run reads " + llvm::Twine(kFormat));
  auto step = manifest->getInteger("step");
  auto seedText = manifest->getString("seed");
  const llvm::json::Array *tensors = manifest->getArray("plan");
  const llvm::json::Object *files = manifest->getObject("files");
  uint64_t seed;
  if (!step || *step < 0 || !seedText || seedText->getAsInteger(10, seed) ||
      !tensors || !files)
    return bad("step, seed, plan or files missing");

  // The plan: the same state tensors, in the same types and shapes.
  llvm::json::Array mine = planIdentity(program);
  for (size_t i = 0; i < std::max(mine.size(), tensors->size()); ++i) {
    auto entry = [](const llvm::json::Array &a, size_t i) -> std::string {
      if (i >= a.size() || !a[i].getAsObject())
        return "nothing";
      const llvm::json::Object &o = *a[i].getAsObject();
      return "'" + o.getString("name").getValueOr("?").str() + "' " +
             o.getString("type").getValueOr("?").str();
    };
    std::string theirs = entry(*tensors, i), ours = entry(mine, i);
    if (theirs != ours)
      return makeError(chosen +
                       ": --resume: the checkpoint is of another "
                       "plan: its state tensor " +
                       llvm::Twine(i) + " is " + theirs + ", this plan's is " +
                       ours);
  }
  // The files: whole, as written.
  for (const char *file : {kModelFile, kStateFile}) {
    const llvm::json::Object *record = files->getObject(file);
    std::string filePath = chosen + "/" + file;
    if (!record)
      return bad(llvm::Twine("no record of ") + file);
    auto actual = fileRecord(filePath);
    if (!actual)
      return actual.takeError();
    if (actual->getInteger("bytes") != record->getInteger("bytes") ||
        actual->getString("xxh64") != record->getString("xxh64"))
      return makeError(filePath +
                       ": --resume: the file differs from the checkpoint's "
                       "manifest (size or xxHash64): truncated or corrupted");
  }
  auto state = SafetensorsFile::open(chosen + "/" + kStateFile);
  if (!state)
    return state.takeError();
  std::vector<uint8_t> share;
  for (const plan::Tensor &t : program.getPlan().tensors()) {
    if (!isCheckpointed(t))
      continue;
    const SafetensorView *view = state->find(t.name());
    const cpu::TensorRef &ref = program.tensor(t.id());
    uint64_t wholeBytes =
        static_cast<uint64_t>(numElements(checkpointShape(program, t))) * dtypeSize(ref.dtype);
    if (!view || view->data.size() != wholeBytes)
      return makeError(chosen + "/" + kStateFile + ": --resume: tensor '" +
                       t.name() + "' is missing or of another size");
    const uint8_t *bytes = view->data.data();
    if (t.shard_of_size()) {
      // This rank's share of the whole tensor, whatever rank count wrote it.
      share.resize(t.size_bytes());
      copyShardOfWhole(bytes, static_cast<int64_t>(wholeBytes / dtypeSize(ref.dtype)),
                       share.data(), ref.numElements(), program.rank(), dtypeSize(ref.dtype));
      bytes = share.data();
    }
    if (program.place(t.id()).tier == plan::TIER_NVME) {
      if (auto err = program.writeNvmeTensor(t.id(), bytes))
        return addContext(std::move(err),
                          "--resume: tensor '" + t.name() + "'");
    } else {
      std::memcpy(ref.data, bytes, t.size_bytes());
    }
  }
  // The run continues under its own identity (a checkpoint written before
  // identities starts a new one), now with this plan's checksum.
  RunIdentity id{plan, manifest->getString("run_id").getValueOr("").str()};
  if (id.run.empty())
    id.run = newRunId();
  return ResumePoint{chosen, static_cast<uint64_t>(*step), seed, id};
}

} // namespace zinc::rt
