// Batch input for `generate --prompts-file` and `bench throughput --dataset FILE.jsonl`: JSON
// Lines, one object per line with "prompt" (a non-empty string) or "messages" (chat), plus
// optional per-line request fields that override the defaults: max_tokens, min_tokens,
// temperature, top_p, top_k, min_p, repetition_penalty, presence_penalty, frequency_penalty,
// seed, stop (string or list), ignore_eos. Blank lines are skipped. Every error names the file,
// the line and the field.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "serve/sequence.h"

namespace ceiling::serve {

struct PromptLine {
  int line = 0;                       // 1-based line number in the file
  std::optional<std::string> prompt;  // exactly one of prompt / messages
  nlohmann::ordered_json messages;    // null unless a chat line
  nlohmann::json fields;              // the line's object (for apply_request_fields)
};

// Reads and checks the file (a regular file of at most 1 GiB with at least one prompt line).
std::vector<PromptLine> read_prompts_file(const std::filesystem::path& path);

// Applies the request fields of `obj` to `p` (unknown keys other than prompt/messages are an
// error); `where` prefixes error messages ("prompts.jsonl:3").
void apply_request_fields(RequestParams& p, const nlohmann::json& obj, const std::string& where);

}  // namespace ceiling::serve
