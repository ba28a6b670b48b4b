//===- Parser.cpp - Reads the IR text form into a Graph -------------------===//
#include "zinc/ir/Parser.h"
#include "Lexer.h"
#include "Literals.h"
#include "zinc/ir/Printer.h"
#include "zinc/support/Error.h"
#include "llvm/ADT/StringSet.h"

namespace zinc::ir {
namespace {

using text::Token;
using text::TokenKind;

/// A value name used before (or without) its definition; resolved once the
/// whole graph has been read.
struct PendingUse {
  Token name;
  Node *node = nullptr; ///< null for a graph output
  unsigned index = 0;
};

/// An attribute value before its kind is known: `: kind` comes after it.
struct Literal {
  Token tok; ///< the number or string, or the '[' of a list
  std::vector<Token> elems;
  bool isList = false;
};

class Parser {
public:
  Parser(llvm::StringRef text, llvm::StringRef bufferName)
      : lex(text), bufferName(bufferName), g(std::make_unique<Graph>()) {
    consume();
  }

  llvm::Expected<std::unique_ptr<Graph>> parse();

private:
  void consume() { tok = lex.next(); }
  llvm::Error errorAt(const Token &t, const llvm::Twine &msg) const;
  /// An error at the current token; a lexical error there wins over `msg`.
  llvm::Error error(const llvm::Twine &msg) const;
  llvm::Error expect(TokenKind kind, llvm::StringRef spelling);
  llvm::Error expectWord(llvm::StringRef word);
  llvm::Expected<std::string> parseString(llvm::StringRef what);
  llvm::Expected<int64_t> parseInt();
  llvm::Expected<uint64_t> parseUInt();

  llvm::Error parseHeader();
  llvm::Error parseStatement();
  llvm::Error parseDecl();
  llvm::Error parseNode();
  llvm::Error parseOutputs();
  llvm::Error parseType(DType &dtype, llvm::SmallVectorImpl<int64_t> &shape);
  llvm::Error parseShape(llvm::SmallVectorImpl<int64_t> &shape);
  llvm::Expected<Value *> defineValue(ValueRole role);
  llvm::Error parseInit(InitializerRef &init);
  llvm::Error parseOperand(Node *&pendingNode, unsigned index,
                           llvm::SmallVectorImpl<Value *> &operands,
                           std::vector<PendingUse> &uses);
  llvm::Error parseAttributes(AttributeList &attrs);
  llvm::Expected<Literal> parseLiteral();
  llvm::Error convertLiteral(const Literal &lit, Attribute &a);
  llvm::Error resolveUses();

  text::Lexer lex;
  Token tok;
  llvm::StringRef bufferName;
  std::unique_ptr<Graph> g;
  std::vector<PendingUse> pendingUses;
  std::vector<PendingUse> outputUses;
};

static std::string describe(const Token &t) {
  switch (t.kind) {
  case TokenKind::Eof:
    return "end of input";
  case TokenKind::ValueName:
    return "'" + formatValueName(t.text) + "'";
  case TokenKind::String:
    return "a string";
  default:
    return "'" + t.text + "'";
  }
}

llvm::Error Parser::errorAt(const Token &t, const llvm::Twine &msg) const {
  return makeError(bufferName + ":" + llvm::Twine(t.line) + ":" +
                   llvm::Twine(t.col) + ": " + msg);
}

llvm::Error Parser::error(const llvm::Twine &msg) const {
  if (tok.is(TokenKind::Error))
    return errorAt(tok, tok.text);
  return errorAt(tok, msg);
}

llvm::Error Parser::expect(TokenKind kind, llvm::StringRef spelling) {
  if (!tok.is(kind))
    return error("expected '" + spelling + "', found " + describe(tok));
  consume();
  return llvm::Error::success();
}

llvm::Error Parser::expectWord(llvm::StringRef word) {
  if (!tok.isWord(word))
    return error("expected '" + word + "', found " + describe(tok));
  consume();
  return llvm::Error::success();
}

llvm::Expected<std::string> Parser::parseString(llvm::StringRef what) {
  if (!tok.is(TokenKind::String))
    return error("expected " + what + " as a quoted string, found " +
                 describe(tok));
  std::string s = tok.text;
  consume();
  return s;
}

llvm::Expected<int64_t> Parser::parseInt() {
  if (!tok.is(TokenKind::Number))
    return error("expected an integer, found " + describe(tok));
  auto v = text::parseInt64(tok.text);
  if (!v)
    return errorAt(tok, llvm::toString(v.takeError()));
  consume();
  return *v;
}

llvm::Expected<uint64_t> Parser::parseUInt() {
  if (!tok.is(TokenKind::Number))
    return error("expected a non-negative integer, found " + describe(tok));
  auto v = text::parseUInt64(tok.text);
  if (!v)
    return errorAt(tok, llvm::toString(v.takeError()));
  consume();
  return *v;
}

llvm::Expected<std::unique_ptr<Graph>> Parser::parse() {
  if (auto err = parseHeader())
    return err;
  while (!tok.is(TokenKind::RBrace)) {
    if (tok.is(TokenKind::Eof))
      return error("expected '}' at the end of the graph");
    if (auto err = parseStatement())
      return err;
  }
  consume();
  if (!tok.is(TokenKind::Eof))
    return error("expected end of input after the graph, found " +
                 describe(tok));
  if (auto err = resolveUses())
    return err;
  return std::move(g);
}

llvm::Error Parser::parseHeader() {
  if (auto err = expectWord("graph"))
    return err;
  auto name = parseString("the graph name");
  if (!name)
    return name.takeError();
  g->name = *name;
  if (tok.isWord("opset")) {
    consume();
    auto v = parseInt();
    if (!v)
      return v.takeError();
    g->opsetVersion = *v;
  }
  if (tok.isWord("ranks")) {
    consume();
    Token at = tok;
    auto v = parseUInt();
    if (!v)
      return v.takeError();
    if (*v < 1 || *v > kMaxRanks)
      return errorAt(at, "ranks must be between 1 and " + llvm::Twine(kMaxRanks));
    g->ranks = static_cast<unsigned>(*v);
  }
  if (tok.isWord("model")) {
    consume();
    auto path = parseString("the model path");
    if (!path)
      return path.takeError();
    g->modelPath = *path;
  }
  return expect(TokenKind::LBrace, "{");
}

llvm::Error Parser::parseStatement() {
  if (tok.isWord("input") || tok.isWord("param") || tok.isWord("const") ||
      tok.isWord("value") || tok.isWord("state") || tok.isWord("model_state"))
    return parseDecl();
  if (tok.isWord("output"))
    return parseOutputs();
  if (tok.is(TokenKind::ValueName) || tok.is(TokenKind::Word) ||
      tok.is(TokenKind::String))
    return parseNode();
  return error("expected a declaration, a node or 'output', found " +
               describe(tok));
}

llvm::Error Parser::parseType(DType &dtype,
                              llvm::SmallVectorImpl<int64_t> &shape) {
  if (!tok.is(TokenKind::Word))
    return error("expected an element type, found " + describe(tok));
  auto t = parseDTypeName(tok.text);
  if (!t)
    return error("unknown element type '" + tok.text + "'");
  dtype = *t;
  consume();
  return parseShape(shape);
}

/// `[D0, D1, ...]` (or `[]`).
llvm::Error Parser::parseShape(llvm::SmallVectorImpl<int64_t> &shape) {
  if (auto err = expect(TokenKind::LBracket, "["))
    return err;
  shape.clear();
  if (tok.is(TokenKind::RBracket)) {
    consume();
    return llvm::Error::success();
  }
  while (true) {
    auto d = parseInt();
    if (!d)
      return d.takeError();
    shape.push_back(*d);
    if (tok.is(TokenKind::RBracket)) {
      consume();
      return llvm::Error::success();
    }
    if (auto err = expect(TokenKind::Comma, ","))
      return err;
  }
}

/// Reads `%name : type` and creates the value.
llvm::Expected<Value *> Parser::defineValue(ValueRole role) {
  if (!tok.is(TokenKind::ValueName))
    return error("expected a value name, found " + describe(tok));
  Token nameTok = tok;
  if (g->lookupValue(nameTok.text))
    return errorAt(nameTok, "redefinition of value '" +
                                formatValueName(nameTok.text) + "'");
  consume();
  if (auto err = expect(TokenKind::Colon, ":"))
    return err;
  DType dtype;
  llvm::SmallVector<int64_t, 4> shape;
  if (auto err = parseType(dtype, shape))
    return err;
  llvm::SmallVector<int64_t, 4> shardOf;
  if (tok.isWord("shard")) {
    consume();
    if (!tok.isWord("of"))
      return error("expected 'of' and the whole tensor's shape, found " + describe(tok));
    consume();
    Token shapeTok = tok;
    if (auto err = parseShape(shardOf))
      return err;
    if (shardOf.empty())
      return errorAt(shapeTok, "a shard's whole tensor needs a shape with at least one dimension");
  }
  Tier tier = Tier::Gpu;
  if (tok.isWord("in")) {
    consume();
    auto t = tok.is(TokenKind::Word) ? parseTierName(tok.text) : llvm::None;
    if (!t)
      return error("expected a tier (gpu, cpu or nvme), found " + describe(tok));
    tier = *t;
    consume();
  }
  Value *v = g->addValue(nameTok.text, dtype, shape, role);
  v->tier = tier;
  v->shardOf = shardOf;
  return v;
}

llvm::Error Parser::parseInit(InitializerRef &init) {
  auto name = parseString("the initializer name");
  if (!name)
    return name.takeError();
  init.name = *name;
  if (tok.isWord("external")) {
    consume();
    auto file = parseString("the external data file");
    if (!file)
      return file.takeError();
    if (file->empty())
      return errorAt(tok, "the external data file must not be empty");
    init.file = *file;
  }
  if (tok.isWord("offset")) {
    consume();
    auto v = parseUInt();
    if (!v)
      return v.takeError();
    init.offset = *v;
  }
  if (tok.isWord("length")) {
    consume();
    auto v = parseUInt();
    if (!v)
      return v.takeError();
    init.length = *v;
  }
  // `slice AXIS at BEGIN of [D0, D1, ...]`: a tile's share (Graph.h).
  if (tok.isWord("slice")) {
    consume();
    Token axisTok = tok;
    auto axis = parseUInt();
    if (!axis)
      return axis.takeError();
    if (!tok.isWord("at"))
      return error("expected 'at' after the slice axis, found " + describe(tok));
    consume();
    auto begin = parseUInt();
    if (!begin)
      return begin.takeError();
    if (!tok.isWord("of"))
      return error("expected 'of' and the initializer's shape, found " +
                   describe(tok));
    consume();
    if (auto err = expect(TokenKind::LBracket, "["))
      return err;
    while (true) {
      auto d = parseUInt();
      if (!d)
        return d.takeError();
      init.wholeShape.push_back(static_cast<int64_t>(*d));
      if (tok.is(TokenKind::RBracket)) {
        consume();
        break;
      }
      if (auto err = expect(TokenKind::Comma, ","))
        return err;
    }
    if (*axis >= init.wholeShape.size())
      return errorAt(axisTok, "slice axis " + llvm::Twine(*axis) + " of a rank-" +
                                  llvm::Twine(init.wholeShape.size()) + " initializer");
    init.sliceAxis = static_cast<int64_t>(*axis);
    init.sliceBegin = static_cast<int64_t>(*begin);
  }
  // `pytorch "KEY" [transposed]`: the parameter the exporter renamed (Graph.h).
  if (tok.isWord("pytorch")) {
    consume();
    auto key = parseString("the PyTorch parameter name");
    if (!key)
      return key.takeError();
    if (key->empty())
      return errorAt(tok, "the PyTorch parameter name must not be empty");
    init.pytorchName = *key;
    if (tok.isWord("transposed")) {
      consume();
      init.pytorchTransposed = true;
    }
  }
  return llvm::Error::success();
}

llvm::Error Parser::parseDecl() {
  std::string keyword = tok.text;
  consume();
  ValueRole role = keyword == "input"   ? ValueRole::Input
                   : keyword == "param" ? ValueRole::Parameter
                   : keyword == "const" ? ValueRole::Constant
                   : keyword == "state" ? ValueRole::State
                   : keyword == "model_state" ? ValueRole::ModelState
                                        : ValueRole::Activation;
  auto v = defineValue(role);
  if (!v)
    return v.takeError();
  if (keyword == "input")
    g->addInput(*v);
  if (tok.isWord("init")) {
    consume();
    InitializerRef init;
    if (auto err = parseInit(init))
      return err;
    (*v)->init = std::move(init);
  }
  return llvm::Error::success();
}

/// Reads `%name` or `none` into operands[index]; a name not yet defined is
/// left null and recorded in `uses` for resolveUses.
llvm::Error Parser::parseOperand(Node *&pendingNode, unsigned index,
                                 llvm::SmallVectorImpl<Value *> &operands,
                                 std::vector<PendingUse> &uses) {
  if (tok.isWord("none")) {
    consume();
    operands.push_back(nullptr);
    return llvm::Error::success();
  }
  if (!tok.is(TokenKind::ValueName))
    return error("expected a value name or 'none', found " + describe(tok));
  operands.push_back(g->lookupValue(tok.text));
  if (!operands.back())
    uses.push_back({tok, pendingNode, index});
  consume();
  return llvm::Error::success();
}

llvm::Error Parser::parseNode() {
  llvm::SmallVector<Value *, 2> results;
  if (tok.is(TokenKind::ValueName) || tok.isWord("none")) {
    while (true) {
      if (tok.isWord("none")) {
        consume();
        results.push_back(nullptr);
      } else {
        auto v = defineValue(ValueRole::Activation);
        if (!v)
          return v.takeError();
        results.push_back(*v);
      }
      if (!tok.is(TokenKind::Comma))
        break;
      consume();
    }
    if (auto err = expect(TokenKind::Equal, "="))
      return err;
  }

  std::string domain, opType;
  bool domainInName = false;
  if (tok.is(TokenKind::Word)) {
    llvm::StringRef word = tok.text;
    size_t dot = word.rfind('.');
    if (dot != llvm::StringRef::npos) {
      domain = word.substr(0, dot).str();
      domainInName = true;
    }
    opType = word.substr(dot == llvm::StringRef::npos ? 0 : dot + 1).str();
    if (opType.empty())
      return error("expected an op type after the domain in '" + word + "'");
  } else if (tok.is(TokenKind::String)) {
    opType = tok.text;
  } else {
    return error("expected an op type, found " + describe(tok));
  }
  consume();

  if (auto err = expect(TokenKind::LParen, "("))
    return err;
  llvm::SmallVector<Value *, 4> operands;
  std::vector<PendingUse> uses;
  Node *noNodeYet = nullptr;
  if (!tok.is(TokenKind::RParen)) {
    while (true) {
      if (auto err = parseOperand(noNodeYet, operands.size(), operands, uses))
        return err;
      if (!tok.is(TokenKind::Comma))
        break;
      consume();
    }
  }
  if (auto err = expect(TokenKind::RParen, ")"))
    return err;

  if (tok.isWord("domain")) {
    if (domainInName)
      return error("the op type already names its domain");
    consume();
    auto d = parseString("the domain");
    if (!d)
      return d.takeError();
    domain = *d;
  }
  std::string name;
  if (tok.isWord("name")) {
    consume();
    auto n = parseString("the node name");
    if (!n)
      return n.takeError();
    name = *n;
  }
  Stream stream = Stream::Compute;
  if (tok.isWord("on")) {
    consume();
    auto s = tok.is(TokenKind::Word) ? parseStreamName(tok.text) : llvm::None;
    if (!s)
      return error("expected a stream (compute, h2d, d2h, nvme, collective or "
                   "host), found " + describe(tok));
    stream = *s;
    consume();
  }
  AttributeList attrs;
  if (tok.is(TokenKind::LBrace))
    if (auto err = parseAttributes(attrs))
      return err;

  Node *n =
      g->addNode(opType, name, operands, results, std::move(attrs), domain);
  n->stream = stream;
  for (PendingUse &u : uses) {
    u.node = n;
    pendingUses.push_back(std::move(u));
  }
  return llvm::Error::success();
}

llvm::Error Parser::parseOutputs() {
  consume();
  while (true) {
    if (!tok.is(TokenKind::ValueName))
      return error("expected a value name, found " + describe(tok));
    outputUses.push_back({tok, nullptr, 0});
    consume();
    if (!tok.is(TokenKind::Comma))
      return llvm::Error::success();
    consume();
  }
}

llvm::Error Parser::parseAttributes(AttributeList &attrs) {
  consume(); // '{'
  llvm::StringSet<> seen;
  if (tok.is(TokenKind::RBrace)) {
    consume();
    return llvm::Error::success();
  }
  while (true) {
    if (!tok.is(TokenKind::Word) && !tok.is(TokenKind::String))
      return error("expected an attribute name, found " + describe(tok));
    Token nameTok = tok;
    if (!seen.insert(nameTok.text).second)
      return errorAt(nameTok, "duplicate attribute '" + nameTok.text + "'");
    consume();
    if (auto err = expect(TokenKind::Equal, "="))
      return err;
    auto lit = parseLiteral();
    if (!lit)
      return lit.takeError();
    Attribute a;
    a.name = nameTok.text;
    if (auto err = convertLiteral(*lit, a))
      return err;
    attrs.set(std::move(a));
    if (tok.is(TokenKind::RBrace)) {
      consume();
      return llvm::Error::success();
    }
    if (auto err = expect(TokenKind::Comma, ","))
      return err;
  }
}

static bool isScalarLiteral(const Token &t) {
  return t.is(TokenKind::Number) || t.is(TokenKind::String) || t.isWord("inf");
}

llvm::Expected<Literal> Parser::parseLiteral() {
  Literal lit;
  lit.tok = tok;
  if (isScalarLiteral(tok)) {
    consume();
    return lit;
  }
  if (!tok.is(TokenKind::LBracket))
    return error("expected an attribute value, found " + describe(tok));
  lit.isList = true;
  consume();
  if (tok.is(TokenKind::RBracket)) {
    consume();
    return lit;
  }
  while (true) {
    if (!isScalarLiteral(tok))
      return error("expected a number or a string, found " + describe(tok));
    lit.elems.push_back(tok);
    consume();
    if (tok.is(TokenKind::RBracket)) {
      consume();
      return lit;
    }
    if (auto err = expect(TokenKind::Comma, ","))
      return err;
  }
}

/// Reads `: kind` after a literal and stores the literal as that kind.
llvm::Error Parser::convertLiteral(const Literal &lit, Attribute &a) {
  if (auto err = expect(TokenKind::Colon, ":"))
    return err;
  if (!tok.is(TokenKind::Word))
    return error("expected an attribute kind, found " + describe(tok));
  Token kindTok = tok;
  llvm::StringRef kind = kindTok.text;
  consume();

  auto isNumber = [](const Token &t) {
    return t.is(TokenKind::Number) || t.isWord("inf");
  };
  // Checks that the literal is a scalar of the right token kind, or a list
  // of them, so the conversions below can assume it.
  auto checkShape = [&](bool wantList, bool wantString) -> llvm::Error {
    if (lit.isList != wantList)
      return errorAt(lit.tok, "an attribute of kind '" + kind + "' needs " +
                                  (wantList ? "a list" : "a single value"));
    auto ok = [&](const Token &t) {
      return wantString ? t.is(TokenKind::String) : isNumber(t);
    };
    if (!wantList && !ok(lit.tok))
      return errorAt(lit.tok, "an attribute of kind '" + kind + "' needs " +
                                  (wantString ? "a string" : "a number"));
    for (const Token &t : lit.elems)
      if (!ok(t))
        return errorAt(t, "an attribute of kind '" + kind + "' needs " +
                              (wantString ? "strings" : "numbers"));
    return llvm::Error::success();
  };
  auto withLoc = [&](const Token &t, llvm::Error err) {
    return err ? errorAt(t, llvm::toString(std::move(err))) : std::move(err);
  };

  if (kind == "int" || kind == "float" || kind == "string") {
    if (auto err = checkShape(false, kind == "string"))
      return err;
    if (kind == "int") {
      a.kind = AttrKind::Int;
      auto v = text::parseInt64(lit.tok.text);
      if (!v)
        return withLoc(lit.tok, v.takeError());
      a.i = *v;
    } else if (kind == "float") {
      a.kind = AttrKind::Float;
      auto v = text::parseDouble(lit.tok.text);
      if (!v)
        return withLoc(lit.tok, v.takeError());
      a.f = *v;
    } else {
      a.kind = AttrKind::String;
      a.s = lit.tok.text;
    }
    return llvm::Error::success();
  }
  if (kind == "ints" || kind == "floats" || kind == "strings") {
    if (auto err = checkShape(true, kind == "strings"))
      return err;
    for (const Token &t : lit.elems) {
      if (kind == "ints") {
        auto v = text::parseInt64(t.text);
        if (!v)
          return withLoc(t, v.takeError());
        a.ints.push_back(*v);
      } else if (kind == "floats") {
        auto v = text::parseDouble(t.text);
        if (!v)
          return withLoc(t, v.takeError());
        a.floats.push_back(*v);
      } else {
        a.strings.push_back(t.text);
      }
    }
    a.kind = kind == "ints"     ? AttrKind::Ints
             : kind == "floats" ? AttrKind::Floats
                                : AttrKind::Strings;
    return llvm::Error::success();
  }
  if (kind != "tensor")
    return errorAt(kindTok, "unknown attribute kind '" + kind +
                                "'; expected int, float, string, ints, "
                                "floats, strings or tensor");

  a.kind = AttrKind::Tensor;
  if (auto err = expect(TokenKind::LAngle, "<"))
    return err;
  if (auto err = parseType(a.tensor.dtype, a.tensor.shape))
    return err;
  if (auto err = expect(TokenKind::RAngle, ">"))
    return err;
  if (!lit.isList) {
    if (!lit.tok.is(TokenKind::String))
      return errorAt(lit.tok, "a tensor needs a list of numbers or a "
                              "\"0x...\" string of its bytes");
    auto bytes = text::parseHexBytes(lit.tok.text);
    if (!bytes)
      return withLoc(lit.tok, bytes.takeError());
    a.tensor.bytes = std::move(*bytes);
    return llvm::Error::success();
  }
  if (auto err = checkShape(true, false))
    return err;
  if (llvm::any_of(a.tensor.shape, [](int64_t d) { return d < 0; }))
    return errorAt(lit.tok, "a tensor given as numbers needs a static shape");
  int64_t expected = numElements(a.tensor.shape);
  if (static_cast<int64_t>(lit.elems.size()) != expected)
    return errorAt(lit.tok, "tensor has " + llvm::Twine(lit.elems.size()) +
                                " elements, its type " +
                                formatShape(a.tensor.shape) + " needs " +
                                llvm::Twine(expected));
  for (const Token &t : lit.elems)
    if (auto err = text::appendElement(a.tensor.dtype, t.text, a.tensor.bytes))
      return withLoc(t, std::move(err));
  return llvm::Error::success();
}

llvm::Error Parser::resolveUses() {
  for (const PendingUse &u : pendingUses) {
    Value *v = g->lookupValue(u.name.text);
    if (!v)
      return errorAt(u.name, "use of undefined value '" +
                                 formatValueName(u.name.text) + "'");
    u.node->setInput(u.index, v);
  }
  llvm::SmallVector<Value *, 4> outs;
  for (const PendingUse &u : outputUses) {
    Value *v = g->lookupValue(u.name.text);
    if (!v)
      return errorAt(u.name, "use of undefined value '" +
                                 formatValueName(u.name.text) + "'");
    outs.push_back(v);
  }
  g->setOutputs(outs);
  return llvm::Error::success();
}

} // namespace

llvm::Expected<std::unique_ptr<Graph>> parseGraph(llvm::StringRef text,
                                                  llvm::StringRef bufferName) {
  return Parser(text, bufferName).parse();
}

} // namespace zinc::ir
