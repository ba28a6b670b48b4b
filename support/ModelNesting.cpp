//===- ModelNesting.cpp - Model files nested deeper than a parser survives ===//
#include "zinc/support/ModelNesting.h"
#include "zinc/support/Error.h"
#include "llvm/ADT/Twine.h"
#include <google/protobuf/descriptor.h>
#include <vector>

namespace zinc {

llvm::Error checkOnnxTextNesting(llvm::StringRef text) {
  unsigned depth = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '"') {
      // onnx's parser knows no escapes: a string ends at the next quote.
      size_t end = text.find('"', i + 1);
      if (end == llvm::StringRef::npos)
        break;
      i = end;
    } else if (c == '#') {
      size_t end = text.find('\n', i + 1);
      if (end == llvm::StringRef::npos)
        break;
      i = end;
    } else if (c == '(' || c == '[' || c == '{') {
      if (++depth > kMaxOnnxTextDepth)
        return makeError("nested too deep (more than " +
                         llvm::Twine(kMaxOnnxTextDepth) +
                         " levels of brackets)");
    } else if ((c == ')' || c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return llvm::Error::success();
}

/// Reads a base-128 varint at `pos`; false past `end` or after 10 bytes.
static bool readVarint(llvm::StringRef bytes, size_t &pos, size_t end,
                       uint64_t &value) {
  value = 0;
  for (unsigned shift = 0; shift < 64 && pos < end; shift += 7) {
    uint8_t byte = static_cast<uint8_t>(bytes[pos++]);
    value |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if (!(byte & 0x80))
      return true;
  }
  return false;
}

llvm::Error checkProtobufNesting(const google::protobuf::Descriptor &type,
                                 llvm::StringRef bytes) {
  struct Open {
    const google::protobuf::Descriptor *type;
    size_t end;
  };
  std::vector<Open> open{{&type, bytes.size()}};
  size_t pos = 0;
  // Anything malformed ends the walk: it is not a matter of depth.
  while (!open.empty()) {
    if (pos >= open.back().end) {
      open.pop_back();
      continue;
    }
    size_t end = open.back().end;
    uint64_t tag, value;
    if (!readVarint(bytes, pos, end, tag))
      return llvm::Error::success();
    switch (tag & 7) {
    case 0: // varint
      if (!readVarint(bytes, pos, end, value))
        return llvm::Error::success();
      break;
    case 1: // fixed64
      pos += 8;
      break;
    case 5: // fixed32
      pos += 4;
      break;
    case 2: { // length-delimited: bytes, a string, packed numbers or a message
      if (!readVarint(bytes, pos, end, value) || value > end - pos)
        return llvm::Error::success();
      const google::protobuf::FieldDescriptor *field =
          open.back().type->FindFieldByNumber(static_cast<int>(tag >> 3));
      if (field &&
          field->type() == google::protobuf::FieldDescriptor::TYPE_MESSAGE) {
        open.push_back({field->message_type(), pos + value});
        if (open.size() - 1 > kProtobufDepthLimit)
          return makeError("nested too deep (more than " +
                           llvm::Twine(kProtobufDepthLimit) +
                           " levels of messages, the limit of protobuf)");
      } else {
        pos += value;
      }
      break;
    }
    default: // groups, which ONNX does not use, or not a wire type at all
      return llvm::Error::success();
    }
    if (pos > end)
      return llvm::Error::success();
  }
  return llvm::Error::success();
}

} // namespace zinc
