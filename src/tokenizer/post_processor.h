// Post-processors of tokenizer.json ("post_processor"): TemplateProcessing (single-sequence
// template, e.g. Llama's "<s> $A"), BertProcessing / RobertaProcessing (cls $A sep), ByteLevel
// (offsets only: no effect on ids) and Sequence. Applied only when add_special_tokens is set.
#pragma once

#include <cstdint>
#include <optional>
#include <variant>
#include <vector>

#include "tokenizer/json_util.h"

namespace ceiling::tok {

class PostProcessor {
 public:
  // `j` may be null (no post-processing).
  static PostProcessor parse(const Json* j, const JsonPath& p);
  // ids of one sequence -> ids with the special tokens of the template around them.
  std::vector<int32_t> process(const std::vector<int32_t>& ids) const;
  // The first id the processor puts before the sequence (a BOS), if any.
  std::optional<int32_t> leading_id() const;

 private:
  // One template item: a run of special-token ids, or the sequence itself (monostate).
  using Item = std::variant<std::monostate, std::vector<int32_t>>;
  std::vector<std::vector<Item>> templates_;  // applied in order (a Sequence may hold several)
};

}  // namespace ceiling::tok
