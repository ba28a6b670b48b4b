//===- WeightLoader.cpp - Initializers from ONNX (inline or external) -----===//
#include "zinc/runtime/WeightLoader.h"
#include "zinc/plan/PlanPaths.h"
#include "zinc/runtime/comm/Communicator.h"
#include "zinc/support/Error.h"
#include "zinc/support/FileInside.h"
#include "zinc/support/Float16.h"
#include "zinc/support/ModelNesting.h"
#include "zinc/support/Sharding.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include <cstring>
#include <fcntl.h>
#include <onnx/defs/parser.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

namespace zinc::rt {

/// Parses the model `path`, the file `name` in `modelDir` (opened as
/// FileInside.h requires), for its inline initializers. libonnx throws;
/// this is the one place the runtime calls it, so the conversion to Error
/// is here.
static llvm::Error parseModel(llvm::StringRef modelDir, llvm::StringRef name,
                              llvm::StringRef path, onnx::ModelProto &model) {
  llvm::Expected<int> fd = openInside(modelDir, name);
  if (!fd)
    return makeError(path + ": cannot open the model for its weights: " +
                     llvm::toString(fd.takeError()));
  auto buf = llvm::MemoryBuffer::getOpenFile(*fd, path, /*FileSize=*/-1,
                                             /*RequiresNullTerminator=*/true);
  ::close(*fd);
  if (!buf)
    return makeError(path + ": cannot open the model for its weights: " +
                     buf.getError().message());
  llvm::StringRef bytes = (*buf)->getBuffer();
  try {
    if (path.endswith(".onnxtxt")) {
      if (auto err = checkOnnxTextNesting(bytes))
        return addContext(std::move(err), path + ": cannot parse the model");
      onnx::OnnxParser parser(bytes.data());
      auto status = parser.Parse(model);
      if (!status.IsOK())
        return makeError(path +
                         ": cannot parse the model: " + status.ErrorMessage());
      return llvm::Error::success();
    }
    if (!model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
      if (auto err =
              checkProtobufNesting(*onnx::ModelProto::descriptor(), bytes))
        return addContext(std::move(err), path + ": cannot parse the model");
      return makeError(path + ": cannot parse the model");
    }
  } catch (const std::exception &e) {
    return makeError(path + ": cannot parse the model: " + e.what());
  }
  return llvm::Error::success();
}

/// Copies a typed repeated field into `out`, narrowing each element to the
/// tensor's storage type (ONNX keeps 8/16-bit types and f16 bits in int32).
template <typename Field>
static void copyField(const Field &field, cpu::TensorRef &out) {
  size_t n = std::min<size_t>(field.size(), out.numElements());
  size_t width = dtypeSize(out.dtype);
  auto *dst = static_cast<uint8_t *>(out.data);
  for (size_t i = 0; i < n; ++i) {
    auto v = field.Get(i);
    if constexpr (std::is_floating_point_v<decltype(v)>) {
      if (out.dtype == DType::F32) {
        float f = static_cast<float>(v);
        std::memcpy(dst + 4 * i, &f, 4);
      } else {
        double d = static_cast<double>(v);
        std::memcpy(dst + 8 * i, &d, 8);
      }
    } else {
      uint64_t bits = static_cast<uint64_t>(v);
      std::memcpy(dst + width * i, &bits, width); // little-endian low bytes
    }
  }
}

static llvm::Error copyInline(const onnx::TensorProto &src, cpu::TensorRef &out,
                              llvm::StringRef modelPath) {
  size_t bytes = out.byteSize();
  if (src.has_raw_data()) {
    if (src.raw_data().size() != bytes)
      return makeError(modelPath + ": initializer '" + src.name() + "' has " +
                       llvm::Twine(src.raw_data().size()) +
                       " bytes, expected " + llvm::Twine(bytes));
    std::memcpy(out.data, src.raw_data().data(), bytes);
    return llvm::Error::success();
  }
  int64_t n = out.numElements();
  int64_t have = src.float_data_size() + src.double_data_size() +
                 src.int32_data_size() + src.int64_data_size() +
                 src.uint64_data_size();
  if (have != n)
    return makeError(modelPath + ": initializer '" + src.name() + "' has " +
                     llvm::Twine(have) + " elements, expected " +
                     llvm::Twine(n));
  if (src.float_data_size())
    copyField(src.float_data(), out);
  else if (src.double_data_size())
    copyField(src.double_data(), out);
  else if (src.int64_data_size())
    copyField(src.int64_data(), out);
  else if (src.uint64_data_size())
    copyField(src.uint64_data(), out);
  else
    copyField(src.int32_data(), out);
  return llvm::Error::success();
}

/// Reads `want` bytes at `offset` of the external-data file `fd` (named
/// `path`) into `dst`.
static llvm::Error preadAll(int fd, llvm::StringRef path,
                            const plan::InitializerSource &src, uint8_t *dst,
                            uint64_t want, uint64_t offset) {
  uint64_t done = 0;
  while (done < want) {
    ssize_t got = ::pread(fd, dst + done, want - done, offset + done);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0) {
      if (got == 0)
        return makeError(path + ": external data of initializer '" +
                         src.name() + "' is short: no bytes at offset " +
                         llvm::Twine(offset + done) + " (it needs " +
                         llvm::Twine(src.offset() + src.length()) + ")");
      return makeError(path + ": cannot read initializer '" + src.name() +
                       "': " + std::strerror(errno));
    }
    done += got;
  }
  return llvm::Error::success();
}

/// A tile's share of its initializer (Plan.proto's slice fields) as runs of
/// contiguous bytes: `runs` runs of `runBytes`, run r at `r * stride`
/// bytes of the whole initializer plus `first`.
struct SliceRuns {
  uint64_t runs = 1, runBytes = 0, stride = 0, first = 0, wholeBytes = 0;
};

static llvm::Expected<SliceRuns> sliceRuns(const plan::InitializerSource &src,
                                           const cpu::TensorRef &out) {
  SliceRuns r;
  uint64_t width = dtypeSize(out.dtype);
  if (!src.whole_shape_size()) {
    r.runBytes = r.wholeBytes = out.byteSize();
    return r;
  }
  int64_t axis = src.slice_axis();
  size_t rank = src.whole_shape_size();
  bool fits = axis >= 0 && static_cast<size_t>(axis) < rank &&
              out.shape.size() == rank && src.slice_begin() >= 0;
  for (size_t d = 0; fits && d < rank; ++d)
    fits = static_cast<int64_t>(d) == axis
               ? src.slice_begin() + out.shape[d] <= src.whole_shape(d)
               : out.shape[d] == src.whole_shape(d);
  if (!fits)
    return makeError("initializer '" + src.name() + "': the plan's tile " +
                     formatShape(out.shape) + " at " +
                     llvm::Twine(src.slice_begin()) + " on axis " +
                     llvm::Twine(axis) + " is not a share of it");
  uint64_t inner = width;
  for (size_t d = axis + 1; d < rank; ++d)
    inner *= src.whole_shape(d);
  r.wholeBytes = width;
  for (size_t d = 0; d < rank; ++d)
    r.wholeBytes *= src.whole_shape(d);
  r.runs = 1;
  for (int64_t d = 0; d < axis; ++d)
    r.runs *= src.whole_shape(d);
  r.runBytes = out.shape[axis] * inner;
  r.stride = src.whole_shape(axis) * inner;
  r.first = src.slice_begin() * inner;
  return r;
}

static llvm::Error readExternal(const plan::Plan &plan,
                                const plan::InitializerSource &src,
                                llvm::StringRef modelDir, cpu::TensorRef &out) {
  llvm::Expected<std::string> relative = plan::externalDataPath(plan, src);
  if (!relative)
    return relative.takeError();
  llvm::SmallString<256> path(modelDir);
  llvm::sys::path::append(path, *relative);
  auto runs = sliceRuns(src, out);
  if (!runs)
    return runs.takeError();
  if (src.length() && src.length() != runs->wholeBytes)
    return makeError(path + ": initializer '" + src.name() + "' is " +
                     llvm::Twine(src.length()) + " bytes, its shape needs " +
                     llvm::Twine(runs->wholeBytes));
  llvm::Expected<int> fd = openInside(modelDir, *relative);
  if (!fd)
    return makeError(path + ": cannot open external data of initializer '" +
                     src.name() + "': " + llvm::toString(fd.takeError()));
  auto *dst = static_cast<uint8_t *>(out.data);
  for (uint64_t r = 0; r < runs->runs; ++r)
    if (auto err =
            preadAll(*fd, path, src, dst + r * runs->runBytes, runs->runBytes,
                     src.offset() + runs->first + r * runs->stride)) {
      ::close(*fd);
      return err;
    }
  ::close(*fd);
  return llvm::Error::success();
}

/// An inline initializer, or a tile's share of one: the whole tensor is
/// decoded into `whole` first (inline initializers are small: protobuf
/// caps a model at 2 GB).
static llvm::Error copyInlineShare(const onnx::TensorProto &src,
                                   const plan::InitializerSource &ref,
                                   cpu::TensorRef &out,
                                   llvm::StringRef modelPath,
                                   std::vector<uint8_t> &whole) {
  if (!ref.whole_shape_size())
    return copyInline(src, out, modelPath);
  auto runs = sliceRuns(ref, out);
  if (!runs)
    return runs.takeError();
  whole.assign(runs->wholeBytes, 0);
  cpu::TensorRef all{out.dtype, {}, whole.data()};
  all.shape.assign(ref.whole_shape().begin(), ref.whole_shape().end());
  if (auto err = copyInline(src, all, modelPath))
    return err;
  auto *dst = static_cast<uint8_t *>(out.data);
  for (uint64_t r = 0; r < runs->runs; ++r)
    std::memcpy(dst + r * runs->runBytes,
                whole.data() + runs->first + r * runs->stride, runs->runBytes);
  return llvm::Error::success();
}

llvm::Error
loadInitializers(const plan::Plan &plan, llvm::StringRef modelDir,
                 llvm::function_ref<cpu::TensorRef &(int)> tensorOf,
                 llvm::function_ref<llvm::Error(int)> loaded, unsigned rank,
                 llvm::function_ref<bool(const plan::Tensor &)> wanted) {
  onnx::ModelProto model;
  llvm::StringMap<const onnx::TensorProto *> inlineByName;
  bool parsed = false;
  llvm::SmallString<256> modelFile(modelDir);
  llvm::sys::path::append(modelFile, plan::modelFileName(plan));
  std::vector<uint8_t> wholeInline;
  for (const plan::Tensor &t : plan.tensors()) {
    if (!t.has_init() || (wanted && !wanted(t)))
      continue;
    cpu::TensorRef &dest = tensorOf(t.id());
    // A 16-bit State with an initializer is the compute-precision copy of an
    // fp32 parameter: read the fp32 bytes, then round them into it.
    std::vector<float> staging;
    cpu::TensorRef fp32{DType::F32, dest.shape, nullptr};
    bool converting = t.role() == plan::ROLE_STATE &&
                      (dest.dtype == DType::F16 || dest.dtype == DType::BF16);
    if (converting) {
      staging.resize(dest.numElements());
      fp32.data = staging.data();
    }
    cpu::TensorRef &out = converting ? fp32 : dest;
    auto finish = [&]() -> llvm::Error {
      if (converting) {
        auto *bits = static_cast<uint16_t *>(dest.data);
        for (size_t i = 0; i < staging.size(); ++i)
          bits[i] = dest.dtype == DType::F16 ? floatToHalf(staging[i])
                                             : floatToBf16(staging[i]);
      }
      return loaded ? loaded(t.id()) : llvm::Error::success();
    };
    const plan::InitializerSource &src = t.init();
    // Reads the initializer (or the tile's share of it) into `into`.
    auto readInto = [&](cpu::TensorRef &into) -> llvm::Error {
      if (!src.file().empty())
        return readExternal(plan, src, modelDir, into);
      if (!parsed) {
        if (auto err = parseModel(modelDir, plan::modelFileName(plan),
                                  modelFile, model))
          return err;
        for (const onnx::TensorProto &init : model.graph().initializer())
          inlineByName[init.name()] = &init;
        parsed = true;
      }
      auto it = inlineByName.find(src.name());
      if (it == inlineByName.end())
        return makeError(
            modelFile + ": initializer '" + src.name() +
            "' named by the plan is not in the model (was the model "
            "changed after compiling?)");
      return copyInlineShare(*it->second, src, into, modelFile, wholeInline);
    };
    if (t.shard_of_size()) {
      // One rank's shard (ZeRO): the whole tensor, then this rank's share
      // of it, zero past its end.
      cpu::TensorRef whole{out.dtype, {}, nullptr};
      whole.shape.assign(t.shard_of().begin(), t.shard_of().end());
      std::vector<uint8_t> wholeBytes(whole.byteSize());
      whole.data = wholeBytes.data();
      if (auto err = readInto(whole))
        return err;
      copyShardOfWhole(wholeBytes.data(), whole.numElements(), out.data,
                       out.numElements(), rank, dtypeSize(out.dtype));
    } else if (auto err = readInto(out)) {
      return err;
    }
    if (auto err = finish())
      return err;
  }
  return llvm::Error::success();
}

} // namespace zinc::rt
