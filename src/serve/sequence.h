// One request as the engine core sees it: its prompt and output ids, how much of it the KV cache
// holds, its block table, its sampling parameters and (with a tokenizer) its streamed text.
// Owned by the Engine; the Scheduler and KvBlockManager read and update it on the engine thread.
//
// Token positions: tokens() = prompt ++ output; num_computed tokens (a prefix) have their K/V in
// the cache. A preempted sequence drops its blocks and computed count and is recomputed later
// (prompt and output so far as one prefill): its output is unchanged by that.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/cpu/sampling.h"

namespace ceiling::serve {

using Clock = std::chrono::steady_clock;

// What a request asks for beyond the prompt (OpenAI / vLLM semantics).
struct RequestParams {
  cpu::SamplingParams sampling;  // temperature, top-p/k, min-p, penalties, seed
  int max_tokens = 16;           // generated tokens at most (>= 1)
  int min_tokens = 0;            // no EOS / stop id (masked) / stop string before this many tokens
  bool ignore_eos = false;       // the engine's EOS ids do not end the request
  std::vector<int32_t> stop_token_ids;  // extra ids that end it (not reported)
  std::vector<std::string> stop;        // stop strings (need the engine's tokenizer; not emitted)
  int logprobs = -1;                    // -1: none; 0: the sampled token's; k: plus the top k
  // OpenAI logit_bias: (id, bias in [-100, 100]) added to the logits before sampling.
  std::vector<cpu::LogitBias> logit_bias;
};

enum class SeqStatus { kWaiting, kRunning, kFinished };
enum class FinishReason { kNone, kStop, kLength, kAbort };
std::string_view finish_reason_name(FinishReason r);  // "stop", "length", "abort", ""

struct TokenLogprob {
  int32_t id = 0;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // the top k (id, logprob), most likely first
};

struct SeqTimes {
  Clock::time_point arrival, first_scheduled, first_token, finished;
  bool scheduled = false, got_token = false;
};

class TextState;  // stream decoder + stop strings (engine.cpp)

struct Sequence {
  int64_t id = 0;
  SeqStatus status = SeqStatus::kWaiting;
  FinishReason finish = FinishReason::kNone;
  std::string stop_reason;  // the stop string or token that ended it (empty otherwise)
  RequestParams params;
  std::vector<int32_t> prompt, output;
  int num_computed = 0;  // leading tokens whose K/V is in the cache
  int num_cached = 0;    // prompt tokens served from the prefix cache (last admit)
  int num_preemptions = 0;
  std::vector<int32_t> block_table;    // physical blocks of positions [b·bs, (b+1)·bs)
  std::vector<uint64_t> block_hashes;  // chained hashes of the full blocks registered so far
  std::vector<TokenLogprob> logprobs;  // one per output token when params.logprobs >= 0
  // Ids masked (-Inf) while output.size() < params.min_tokens: EOS (unless ignore_eos) and
  // stop_token_ids, as vLLM's min_tokens.
  std::vector<int32_t> min_tokens_mask;
  SeqTimes times;
  std::unique_ptr<TextState> text;  // null without a tokenizer

  Sequence();
  ~Sequence();
  Sequence(Sequence&&) noexcept;
  Sequence& operator=(Sequence&&) noexcept;

  int num_tokens() const { return static_cast<int>(prompt.size() + output.size()); }
  int32_t token(int i) const {
    const int P = static_cast<int>(prompt.size());
    return i < P ? prompt[i] : output[i - P];
  }
  bool finished() const { return status == SeqStatus::kFinished; }
  // Tokens still to compute before the next token can be sampled.
  int num_uncomputed() const { return num_tokens() - num_computed; }
};

}  // namespace ceiling::serve
