//===- Lexer.h - Tokens of the IR text form, shared by parser and printer -===//
//
// The character classes here decide both what the lexer reads as one word
// and what the printer may leave unquoted, so the two cannot drift apart.
//
//===----------------------------------------------------------------------===//
#ifndef ZINC_COMPILER_IR_LEXER_H
#define ZINC_COMPILER_IR_LEXER_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"
#include <string>

namespace zinc::ir::text {

enum class TokenKind {
  Eof,
  Error,     ///< `text` holds the message.
  Word,      ///< Keyword, op type, dtype, attribute name: [A-Za-z_][\w.]*
  ValueName, ///< %name or %"name"; `text` holds the decoded name.
  String,    ///< "..."; `text` holds the decoded bytes.
  Number,    ///< -?digits[.digits][e[+-]digits], 0x..., -inf; raw text.
  LParen,
  RParen,
  LBracket,
  RBracket,
  LBrace,
  RBrace,
  LAngle,
  RAngle,
  Comma,
  Colon,
  Equal,
};

struct Token {
  TokenKind kind = TokenKind::Eof;
  std::string text;
  unsigned line = 1;
  unsigned col = 1;
  bool is(TokenKind k) const { return kind == k; }
  bool isWord(llvm::StringRef w) const {
    return kind == TokenKind::Word && text == w;
  }
};

/// Splits the text form into tokens; `//` starts a comment to end of line.
class Lexer {
public:
  explicit Lexer(llvm::StringRef buffer) : buffer(buffer) {}
  Token next();

private:
  Token make(TokenKind kind, std::string text, size_t start) const;
  Token lexNumber(size_t start);
  Token lexQuoted(size_t start, TokenKind kind);
  void skipSpaceAndComments();
  char peek(size_t ahead = 0) const {
    return pos + ahead < buffer.size() ? buffer[pos + ahead] : '\0';
  }
  void advance();

  llvm::StringRef buffer;
  size_t pos = 0;
  unsigned line = 1;
  unsigned col = 1;
  unsigned tokLine = 1;
  unsigned tokCol = 1;
};

/// True for a character that may continue a Word or a bare value name.
bool isNameChar(char c);
/// True when `name` can be printed as a bare value name after '%'.
bool isBareValueName(llvm::StringRef name);
/// True when `word` lexes as a single Word token.
bool isBareWord(llvm::StringRef word);
/// Prints `s` as a quoted string with the escapes the lexer reads back.
void printQuoted(llvm::StringRef s, llvm::raw_ostream &os);

} // namespace zinc::ir::text

#endif
