//===- Initializers.cpp - Initializers as references, never as bytes ------===//
#include "compiler/frontend/Initializers.h"
#include "compiler/frontend/AttributeConversion.h"
#include "compiler/frontend/OnnxUtil.h"
#include "zinc/support/Error.h"
#include "zinc/support/FileInside.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

namespace zinc::frontend {

static bool isExternal(const onnx::TensorProto &t) {
  return t.data_location() == onnx::TensorProto::EXTERNAL;
}

/// Checks that inline data holds exactly the tensor's elements, from the
/// field sizes only.
static llvm::Error checkInlineData(const onnx::TensorProto &t,
                                   const InitializerInfo &info) {
  llvm::Optional<DType> dtype = dtypeFromOnnx(info.elemType);
  if (!dtype)
    return llvm::Error::success(); // refused later, where it is used
  int64_t count = numElements(info.shape);
  if (t.has_raw_data()) {
    uint64_t expected = static_cast<uint64_t>(count) * dtypeSize(*dtype);
    if (t.raw_data().size() != expected)
      return makeError("initializer '" + t.name() + "' has " +
                       std::to_string(t.raw_data().size()) +
                       " bytes of data, expected " + std::to_string(expected) +
                       " for shape " + formatShape(info.shape) + " of " +
                       dtypeName(*dtype).str());
    return llvm::Error::success();
  }
  int64_t have = typedValueCount(t, *dtype);
  if (have != count)
    return makeError("initializer '" + t.name() + "' has " +
                     std::to_string(have) + " values, expected " +
                     std::to_string(count) + " for shape " +
                     formatShape(info.shape));
  return llvm::Error::success();
}

static llvm::Expected<uint64_t> parseField(const onnx::TensorProto &t,
                                           llvm::StringRef key,
                                           llvm::StringRef value) {
  uint64_t n;
  if (value.trim().getAsInteger(10, n))
    return makeError("initializer '" + t.name() + "': external data " + key +
                     " '" + value + "' is not a non-negative integer");
  return n;
}

namespace {
/// Checks each external file once, however many initializers live in it:
/// one resolving outside the model's directory is an error; one that is
/// missing, not a regular file or too short is a warning.
class ExternalFileChecker {
public:
  ExternalFileChecker(llvm::StringRef modelDir, const WarningHandler &warn)
      : modelDir(modelDir), warn(warn) {}

  llvm::Error check(const std::string &relative, llvm::StringRef location,
                    const onnx::TensorProto &t, uint64_t end) {
    if (!checked.insert(relative).second)
      return llvm::Error::success();
    llvm::Expected<std::string> real = resolveInside(modelDir, relative);
    if (!real) {
      if (real.errorIsA<PathOutsideError>())
        return makeError("initializer '" + t.name() +
                         "': external data location '" + location + "' " +
                         llvm::toString(real.takeError()) +
                         ", the model's directory");
      std::string why = llvm::toString(real.takeError());
      if (!llvm::sys::fs::exists(llvm::Twine(modelDir) + "/" + relative))
        emit("external data file '" + location + "' of initializer '" +
             t.name() + "' does not exist; the plan cannot run until it does");
      else
        emit("external data file '" + location + "' of initializer '" +
             t.name() + "' cannot be resolved (" + why +
             "); the plan cannot run until it can");
      return llvm::Error::success();
    }
    llvm::sys::fs::file_status st;
    if (llvm::sys::fs::status(*real, st) ||
        !llvm::sys::fs::is_regular_file(st)) {
      emit("external data file '" + location + "' of initializer '" + t.name() +
           "' is not a regular file; the plan cannot run until it is");
      return llvm::Error::success();
    }
    if (st.getSize() < end)
      emit("external data file '" + location + "' is " +
           std::to_string(st.getSize()) +
           " bytes, too short for initializer '" + t.name() +
           "' (which ends at byte " + std::to_string(end) +
           "); the plan cannot run until it is complete");
    return llvm::Error::success();
  }

private:
  void emit(const llvm::Twine &msg) {
    if (warn)
      warn(msg);
  }

  llvm::StringRef modelDir;
  const WarningHandler &warn;
  llvm::StringSet<> checked;
};
} // namespace

/// Validates the external-data fields of `t` and fills in `info.ref`.
static llvm::Error resolveExternal(const onnx::TensorProto &t,
                                   InitializerInfo &info,
                                   ExternalFileChecker &files) {
  llvm::Optional<std::string> location;
  llvm::Optional<uint64_t> offset, length;
  for (const onnx::StringStringEntryProto &e : t.external_data()) {
    if (e.key() == "location") {
      location = e.value();
    } else if (e.key() == "offset" || e.key() == "length") {
      llvm::Expected<uint64_t> n = parseField(t, e.key(), e.value());
      if (!n)
        return n.takeError();
      (e.key() == "offset" ? offset : length) = *n;
    }
    // "checksum" and unknown keys carry nothing the plan needs.
  }
  if (!location || location->empty())
    return makeError("initializer '" + t.name() +
                     "' is stored externally but has no location");
  if (llvm::sys::path::is_absolute(*location))
    return makeError("initializer '" + t.name() +
                     "': external data location '" + *location +
                     "' must be relative to the model's directory");
  llvm::Expected<std::string> relative = normalizeRelativePath(*location);
  if (!relative) {
    llvm::consumeError(relative.takeError());
    return makeError("initializer '" + t.name() +
                     "': external data location '" + *location +
                     "' points outside the model's directory");
  }

  if (llvm::Optional<DType> dtype = dtypeFromOnnx(info.elemType)) {
    uint64_t expected =
        static_cast<uint64_t>(numElements(info.shape)) * dtypeSize(*dtype);
    if (length && *length != expected)
      return makeError("initializer '" + t.name() + "': external data length " +
                       std::to_string(*length) + " does not match its shape " +
                       formatShape(info.shape) + " of " +
                       dtypeName(*dtype).str() + " (" +
                       std::to_string(expected) + " bytes)");
    length = expected;
  }

  info.ref.file = *relative;
  info.ref.offset = offset.getValueOr(0);
  info.ref.length = length.getValueOr(0);
  return files.check(info.ref.file, *location, t,
                     info.ref.offset + info.ref.length);
}

llvm::Expected<std::vector<InitializerInfo>>
collectInitializers(const onnx::GraphProto &graph, llvm::StringRef modelDir,
                    const WarningHandler &warn) {
  std::vector<InitializerInfo> out;
  out.reserve(graph.initializer_size());
  ExternalFileChecker files(modelDir, warn);
  for (const onnx::TensorProto &t : graph.initializer()) {
    InitializerInfo info;
    info.elemType = t.data_type();
    info.ref.name = t.name();
    if (t.name().empty())
      return makeError("an initializer has no name");
    for (int64_t d : t.dims()) {
      if (d < 0)
        return makeError("initializer '" + t.name() +
                         "' has a negative dimension " + std::to_string(d));
      info.shape.push_back(d);
    }
    if (llvm::Optional<DType> dtype = dtypeFromOnnx(info.elemType))
      if (!fitsTensorBytes(info.shape, dtypeSize(*dtype)))
        return makeError("initializer '" + t.name() + "' of shape " +
                         formatShape(info.shape) +
                         " is larger than zinc plans for (" +
                         std::to_string(kMaxTensorBytes) + " bytes)");
    if (isExternal(t)) {
      if (llvm::Error err = resolveExternal(t, info, files))
        return err;
    } else if (llvm::Error err = checkInlineData(t, info)) {
      return err;
    }
    out.push_back(std::move(info));
  }
  return out;
}

void detachExternalInitializers(onnx::GraphProto &graph) {
  llvm::StringSet<> inputs;
  for (const onnx::ValueInfoProto &vi : graph.input())
    inputs.insert(vi.name());
  auto *inits = graph.mutable_initializer();
  int kept = 0;
  for (int i = 0; i < inits->size(); ++i) {
    const onnx::TensorProto &t = inits->Get(i);
    if (!isExternal(t)) {
      // Swapping pointers keeps the order of the inline ones without copying
      // their data.
      inits->SwapElements(i, kept++);
      continue;
    }
    if (inputs.insert(t.name()).second) {
      onnx::ValueInfoProto *vi = graph.add_input();
      vi->set_name(t.name());
      onnx::TypeProto_Tensor *tt = vi->mutable_type()->mutable_tensor_type();
      tt->set_elem_type(t.data_type());
      onnx::TensorShapeProto *shape = tt->mutable_shape();
      for (int64_t d : t.dims())
        shape->add_dim()->set_dim_value(d);
    }
  }
  while (inits->size() > kept)
    inits->RemoveLast();
}

} // namespace zinc::frontend
