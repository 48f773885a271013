// Tokenizer for Jinja2 template text, with the environment transformers compiles chat templates
// in: trim_blocks and lstrip_blocks on, `-`/`+` whitespace control, newlines normalized to "\n",
// one trailing newline dropped (keep_trailing_newline=False), comments removed, raw blocks kept
// as text. Errors are ceiling::Error "line L col C: problem".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ceiling::jinja {

enum class Tok : uint8_t {
  kData,
  kVarBegin,
  kVarEnd,
  kBlockBegin,
  kBlockEnd,
  kName,
  kString,
  kInt,
  kFloat,
  kOp,
  kEof
};

struct Token {
  Tok type = Tok::kEof;
  std::string text;  // data, name, string value (unescaped), operator
  int64_t ival = 0;
  double fval = 0;
  int line = 1, col = 1;
};

std::vector<Token> tokenize(std::string_view source);

// Literal scanners used by the lexer (lexer_literals.cpp). Both start at s[i] (a digit or a
// quote) and return the index just past the literal; they throw LexError on bad input.
struct LexError {
  size_t at;
  std::string msg;
};
size_t scan_number(std::string_view s, size_t i, Token& t);        // sets type, text, ival/fval
size_t scan_string(std::string_view s, size_t i, std::string& v);  // appends the unescaped value

}  // namespace ceiling::jinja
