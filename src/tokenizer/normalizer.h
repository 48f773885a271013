// Normalizers of tokenizer.json ("normalizer"): NFC/NFD/NFKC/NFKD (utf8proc), Lowercase, Strip,
// StripAccents, Prepend, Append, Replace, Sequence. Each maps valid UTF-8 to valid UTF-8.
#pragma once

#include <memory>
#include <string>

#include "tokenizer/json_util.h"

namespace ceiling::tok {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual std::string normalize(std::string s) const = 0;
};

// Throws ceiling::Error for an unknown "type" or malformed fields. `j` must not be null.
std::unique_ptr<Normalizer> parse_normalizer(const Json& j, const JsonPath& p);

// Unicode normalization (form: "NFC", "NFD", "NFKC", "NFKD") of valid UTF-8.
std::string unicode_normalize(std::string_view s, std::string_view form);

}  // namespace ceiling::tok
