//===- Lexer.cpp - Tokenizer for the IR text form -------------------------===//
#include "Lexer.h"
#include "llvm/ADT/StringExtras.h"

namespace zinc::ir::text {

bool isNameChar(char c) { return llvm::isAlnum(c) || c == '_' || c == '.'; }

bool isBareValueName(llvm::StringRef name) {
  return !name.empty() && llvm::all_of(name, isNameChar);
}

bool isBareWord(llvm::StringRef word) {
  if (word.empty() || !(llvm::isAlpha(word[0]) || word[0] == '_'))
    return false;
  return llvm::all_of(word, isNameChar);
}

void printQuoted(llvm::StringRef s, llvm::raw_ostream &os) {
  os << '"';
  for (unsigned char c : s) {
    if (c == '"' || c == '\\')
      os << '\\' << c;
    else if (c < 0x20 || c == 0x7f)
      os << '\\' << llvm::hexdigit(c >> 4) << llvm::hexdigit(c & 15);
    else
      os << c;
  }
  os << '"';
}

void Lexer::advance() {
  if (buffer[pos] == '\n') {
    ++line;
    col = 1;
  } else {
    ++col;
  }
  ++pos;
}

void Lexer::skipSpaceAndComments() {
  while (pos < buffer.size()) {
    char c = peek();
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      advance();
    } else if (c == '/' && peek(1) == '/') {
      while (pos < buffer.size() && peek() != '\n')
        advance();
    } else {
      return;
    }
  }
}

Token Lexer::make(TokenKind kind, std::string text, size_t start) const {
  Token t;
  t.kind = kind;
  t.text = std::move(text);
  t.line = tokLine;
  t.col = tokCol;
  return t;
}

Token Lexer::next() {
  skipSpaceAndComments();
  tokLine = line;
  tokCol = col;
  size_t start = pos;
  if (pos >= buffer.size())
    return make(TokenKind::Eof, "", start);
  char c = peek();
  auto punct = [&](TokenKind k) {
    advance();
    return make(k, std::string(1, c), start);
  };
  switch (c) {
  case '(':
    return punct(TokenKind::LParen);
  case ')':
    return punct(TokenKind::RParen);
  case '[':
    return punct(TokenKind::LBracket);
  case ']':
    return punct(TokenKind::RBracket);
  case '{':
    return punct(TokenKind::LBrace);
  case '}':
    return punct(TokenKind::RBrace);
  case '<':
    return punct(TokenKind::LAngle);
  case '>':
    return punct(TokenKind::RAngle);
  case ',':
    return punct(TokenKind::Comma);
  case ':':
    return punct(TokenKind::Colon);
  case '=':
    return punct(TokenKind::Equal);
  case '"':
    return lexQuoted(start, TokenKind::String);
  default:
    break;
  }
  if (c == '%') {
    advance();
    if (peek() == '"')
      return lexQuoted(start, TokenKind::ValueName);
    size_t nameStart = pos;
    while (pos < buffer.size() && isNameChar(peek()))
      advance();
    if (pos == nameStart)
      return make(TokenKind::Error, "expected a value name after '%'", start);
    return make(TokenKind::ValueName, buffer.slice(nameStart, pos).str(),
                start);
  }
  if (llvm::isDigit(c) || c == '-')
    return lexNumber(start);
  if (llvm::isAlpha(c) || c == '_') {
    while (pos < buffer.size() && isNameChar(peek()))
      advance();
    return make(TokenKind::Word, buffer.slice(start, pos).str(), start);
  }
  std::string msg = "unexpected character '";
  if (llvm::isPrint(c))
    msg += c;
  else
    msg += "\\" + llvm::utohexstr(static_cast<unsigned char>(c), false, 2);
  return make(TokenKind::Error, msg + "'", start);
}

Token Lexer::lexNumber(size_t start) {
  if (peek() == '-')
    advance();
  if (buffer.substr(pos).startswith("inf") && !isNameChar(peek(3))) {
    for (int i = 0; i < 3; ++i)
      advance();
    return make(TokenKind::Number, buffer.slice(start, pos).str(), start);
  }
  if (!llvm::isDigit(peek()))
    return make(TokenKind::Error, "expected a number after '-'", start);
  auto digits = [&](bool hex) {
    size_t from = pos;
    while (pos < buffer.size() &&
           (hex ? llvm::isHexDigit(peek()) : llvm::isDigit(peek())))
      advance();
    return pos > from;
  };
  bool ok = true;
  if (peek() == '0' && (peek(1) == 'x' || peek(1) == 'X')) {
    advance();
    advance();
    ok = digits(/*hex=*/true);
  } else {
    digits(false);
    if (peek() == '.') {
      advance();
      ok = digits(false);
    }
    if (ok && (peek() == 'e' || peek() == 'E')) {
      advance();
      if (peek() == '+' || peek() == '-')
        advance();
      ok = digits(false);
    }
  }
  if (!ok || isNameChar(peek())) {
    while (pos < buffer.size() && isNameChar(peek()))
      advance();
    return make(TokenKind::Error,
                "invalid number '" + buffer.slice(start, pos).str() + "'",
                start);
  }
  return make(TokenKind::Number, buffer.slice(start, pos).str(), start);
}

Token Lexer::lexQuoted(size_t start, TokenKind kind) {
  advance(); // the opening quote
  std::string out;
  while (true) {
    if (pos >= buffer.size() || peek() == '\n')
      return make(TokenKind::Error, "unterminated string", start);
    char c = peek();
    if (c == '"') {
      advance();
      return make(kind, std::move(out), start);
    }
    if (c != '\\') {
      out += c;
      advance();
      continue;
    }
    unsigned escLine = line, escCol = col;
    advance();
    char e = peek();
    if (e == '"' || e == '\\') {
      out += e;
      advance();
    } else if (e == 'n') {
      out += '\n';
      advance();
    } else if (e == 't') {
      out += '\t';
      advance();
    } else if (llvm::isHexDigit(e) && llvm::isHexDigit(peek(1))) {
      out += static_cast<char>(llvm::hexDigitValue(e) * 16 +
                               llvm::hexDigitValue(peek(1)));
      advance();
      advance();
    } else {
      Token t = make(TokenKind::Error, "invalid escape in string", start);
      t.line = escLine;
      t.col = escCol;
      return t;
    }
  }
}

} // namespace zinc::ir::text
