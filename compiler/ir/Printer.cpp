//===- Printer.cpp - Prints a Graph in the IR text form -------------------===//
#include "zinc/ir/Printer.h"
#include "Lexer.h"
#include "zinc/support/Float16.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include <charconv>
#include <cmath>
#include <cstring>

namespace zinc::ir {

void printValueName(llvm::StringRef name, llvm::raw_ostream &os) {
  os << '%';
  if (text::isBareValueName(name))
    os << name;
  else
    text::printQuoted(name, os);
}

std::string formatValueName(llvm::StringRef name) {
  std::string s;
  llvm::raw_string_ostream os(s);
  printValueName(name, os);
  return os.str();
}

static void printHexBits(uint64_t bits, unsigned hexDigits,
                         llvm::raw_ostream &os) {
  os << "0x" << llvm::utohexstr(bits, /*LowerCase=*/false, hexDigits);
}

void printDouble(double d, llvm::raw_ostream &os) {
  if (std::isnan(d)) {
    uint64_t bits;
    std::memcpy(&bits, &d, 8);
    printHexBits(bits, 16, os);
    return;
  }
  if (std::isinf(d)) {
    os << (d < 0 ? "-inf" : "inf");
    return;
  }
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d);
  os << llvm::StringRef(buf, res.ptr - buf);
}

/// Prints a float element of a tensor; false for a NaN, whose payload a
/// decimal cannot carry (the caller then prints the whole tensor in hex).
static bool printFloatElement(float f, llvm::raw_ostream &os) {
  if (std::isnan(f))
    return false;
  if (std::isinf(f)) {
    os << (f < 0 ? "-inf" : "inf");
    return true;
  }
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), f);
  os << llvm::StringRef(buf, res.ptr - buf);
  return true;
}

template <typename T> static T loadElement(const uint8_t *p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

/// Prints one element as a number; false when a number cannot reproduce
/// its bytes exactly.
static bool printElement(DType t, const uint8_t *p, llvm::raw_ostream &os) {
  switch (t) {
  case DType::Bool:
  case DType::U8:
    os << unsigned(*p);
    return true;
  case DType::I8:
    os << int(loadElement<int8_t>(p));
    return true;
  case DType::U16:
    os << loadElement<uint16_t>(p);
    return true;
  case DType::I16:
    os << loadElement<int16_t>(p);
    return true;
  case DType::U32:
    os << loadElement<uint32_t>(p);
    return true;
  case DType::I32:
    os << loadElement<int32_t>(p);
    return true;
  case DType::U64:
    os << loadElement<uint64_t>(p);
    return true;
  case DType::I64:
    os << loadElement<int64_t>(p);
    return true;
  case DType::F32:
    return printFloatElement(loadElement<float>(p), os);
  case DType::F16:
    return printFloatElement(halfToFloat(loadElement<uint16_t>(p)), os);
  case DType::BF16:
    return printFloatElement(bf16ToFloat(loadElement<uint16_t>(p)), os);
  case DType::F64: {
    double d = loadElement<double>(p);
    if (std::isnan(d))
      return false;
    printDouble(d, os);
    return true;
  }
  }
  return false;
}

static void printType(DType t, llvm::ArrayRef<int64_t> shape,
                      llvm::raw_ostream &os) {
  os << dtypeName(t) << formatShape(shape);
}

/// A list of numbers when the bytes are exactly one element per shape entry
/// and each prints exactly; otherwise "0x..." of the raw bytes.
static void printTensorData(const TensorData &t, llvm::raw_ostream &os) {
  bool staticShape = llvm::all_of(t.shape, [](int64_t d) { return d >= 0; });
  size_t elemSize = dtypeSize(t.dtype);
  if (staticShape && t.bytes.size() == numElements(t.shape) * elemSize) {
    std::string list;
    llvm::raw_string_ostream ls(list);
    ls << '[';
    bool exact = true;
    for (size_t off = 0; off < t.bytes.size() && exact; off += elemSize) {
      if (off)
        ls << ", ";
      exact = printElement(t.dtype, t.bytes.data() + off, ls);
    }
    ls << ']';
    if (exact) {
      os << ls.str();
      return;
    }
  }
  os << "\"0x" << llvm::toHex(llvm::makeArrayRef(t.bytes)) << '"';
}

template <typename T, typename Fn>
static void printList(llvm::ArrayRef<T> items, llvm::raw_ostream &os,
                      Fn printOne) {
  os << '[';
  llvm::interleave(items, os, printOne, ", ");
  os << ']';
}

void printAttributeValue(const Attribute &a, llvm::raw_ostream &os) {
  switch (a.kind) {
  case AttrKind::Int:
    os << a.i << " : int";
    return;
  case AttrKind::Float:
    printDouble(a.f, os);
    os << " : float";
    return;
  case AttrKind::String:
    text::printQuoted(a.s, os);
    os << " : string";
    return;
  case AttrKind::Ints:
    printList(llvm::makeArrayRef(a.ints), os, [&](int64_t v) { os << v; });
    os << " : ints";
    return;
  case AttrKind::Floats:
    printList(llvm::makeArrayRef(a.floats), os,
              [&](double v) { printDouble(v, os); });
    os << " : floats";
    return;
  case AttrKind::Strings:
    printList(llvm::makeArrayRef(a.strings), os,
              [&](const std::string &v) { text::printQuoted(v, os); });
    os << " : strings";
    return;
  case AttrKind::Tensor:
    printTensorData(a.tensor, os);
    os << " : tensor<";
    printType(a.tensor.dtype, a.tensor.shape, os);
    os << '>';
    return;
  }
}

/// Words that start a statement; an op with one of these names is quoted.
static bool isStatementKeyword(llvm::StringRef w) {
  return llvm::StringSwitch<bool>(w)
      .Cases("input", "param", "const", "value", "output", "none", true)
      .Case("model_state", true)
      .Default(false);
}

/// True when `domain.opType` lexes as one word that splits back, at its
/// last dot, into exactly this domain and op type.
static bool isPlainOpRef(const Node &n) {
  if (!text::isBareWord(n.opType) || llvm::StringRef(n.opType).contains('.'))
    return false;
  if (n.domain.empty())
    return !isStatementKeyword(n.opType);
  llvm::SmallVector<llvm::StringRef, 4> parts;
  llvm::StringRef(n.domain).split(parts, '.');
  return llvm::all_of(parts, [](llvm::StringRef p) {
    return text::isBareWord(p) && !p.contains('.');
  });
}

static void printInit(const InitializerRef &init, llvm::raw_ostream &os) {
  os << " init ";
  text::printQuoted(init.name, os);
  if (init.isExternal()) {
    os << " external ";
    text::printQuoted(init.file, os);
  }
  if (init.isExternal() || init.offset)
    os << " offset " << init.offset;
  if (init.isExternal() || init.length)
    os << " length " << init.length;
  if (init.isSlice()) {
    os << " slice " << init.sliceAxis << " at " << init.sliceBegin << " of [";
    llvm::interleave(init.wholeShape, os, ", ");
    os << ']';
  }
  if (!init.pytorchName.empty()) {
    os << " pytorch ";
    text::printQuoted(init.pytorchName, os);
    if (init.pytorchTransposed)
      os << " transposed";
  }
}

/// " shard of [D0, D1]" for one rank's shard (Value::shardOf), then
/// " in cpu" / " in nvme"; GPU, the default, prints nothing.
static void printTier(const Value &v, llvm::raw_ostream &os) {
  if (v.isShard()) {
    os << " shard of [";
    llvm::interleave(v.shardOf, os, ", ");
    os << ']';
  }
  if (v.tier != Tier::Gpu)
    os << " in " << tierName(v.tier);
}

static void printDecl(llvm::StringRef keyword, const Value &v,
                      llvm::raw_ostream &os) {
  os << "  " << keyword << ' ';
  printValueName(v.name, os);
  os << " : ";
  printType(v.dtype, v.shape, os);
  printTier(v, os);
  if (v.init)
    printInit(*v.init, os);
  os << '\n';
}

static void printOperand(const Value *v, llvm::raw_ostream &os) {
  if (v)
    printValueName(v->name, os);
  else
    os << "none";
}

static void printNode(const Node &n, llvm::raw_ostream &os) {
  os << "  ";
  if (!n.outputs.empty()) {
    llvm::interleaveComma(n.outputs, os, [&](const Value *v) {
      printOperand(v, os);
      if (v) {
        os << " : ";
        printType(v->dtype, v->shape, os);
        printTier(*v, os);
      }
    });
    os << " = ";
  }
  bool plain = isPlainOpRef(n);
  if (plain) {
    if (!n.domain.empty())
      os << n.domain << '.';
    os << n.opType;
  } else {
    text::printQuoted(n.opType, os);
  }
  os << '(';
  llvm::interleaveComma(n.inputs, os,
                        [&](const Value *v) { printOperand(v, os); });
  os << ')';
  if (!plain && !n.domain.empty()) {
    os << " domain ";
    text::printQuoted(n.domain, os);
  }
  if (!n.name.empty()) {
    os << " name ";
    text::printQuoted(n.name, os);
  }
  if (n.stream != Stream::Compute)
    os << " on " << streamName(n.stream);
  if (!n.attrs.empty()) {
    os << " {";
    llvm::interleaveComma(n.attrs.all(), os, [&](const Attribute &a) {
      if (text::isBareWord(a.name))
        os << a.name;
      else
        text::printQuoted(a.name, os);
      os << " = ";
      printAttributeValue(a, os);
    });
    os << '}';
  }
  os << '\n';
}

static llvm::StringRef declKeyword(ValueRole role) {
  switch (role) {
  case ValueRole::Input:
    return "input";
  case ValueRole::Parameter:
    return "param";
  case ValueRole::Constant:
    return "const";
  case ValueRole::Activation:
    return "value";
  case ValueRole::State:
    return "state";
  case ValueRole::ModelState:
    return "model_state";
  }
  return "value";
}

void printGraph(const Graph &g, llvm::raw_ostream &os) {
  os << "graph ";
  text::printQuoted(g.name, os);
  os << " opset " << g.opsetVersion;
  if (g.ranks != 1)
    os << " ranks " << g.ranks;
  if (!g.modelPath.empty()) {
    os << " model ";
    text::printQuoted(g.modelPath, os);
  }
  os << " {\n";

  // Values that no node defines are declared up front: the graph inputs in
  // their order, then the rest in creation order.
  llvm::DenseSet<const Value *> declared;
  for (const auto &n : g.nodes())
    for (const Value *v : n->outputs)
      declared.insert(v);
  for (const Value *v : g.inputs())
    if (declared.insert(v).second)
      printDecl("input", *v, os);
  for (const auto &v : g.values())
    if (declared.insert(v.get()).second)
      printDecl(declKeyword(v->role), *v, os);

  for (const auto &n : g.nodes())
    printNode(*n, os);

  if (!g.outputs().empty()) {
    os << "  output ";
    llvm::interleaveComma(g.outputs(), os,
                          [&](const Value *v) { printOperand(v, os); });
    os << '\n';
  }
  os << "}\n";
}

} // namespace zinc::ir
