#include "serve/engine.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/status.h"
#include "dist/tp_group.h"
#include "engine/stop_strings.h"

namespace ceiling::serve {

std::string_view finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kAbort:
      return "abort";
    case FinishReason::kNone:
      break;
  }
  return "";
}

// A sequence's text: the stream decoder primed with the prompt (so the first token's leading
// space is decoded in context) minus the prompt's own text, then the stop-string matcher.
class TextState {
 public:
  TextState(const Tokenizer& tok, const std::vector<int32_t>& prompt,
            const std::vector<std::string>& stop)
      : decoder_(tok, /*skip_special=*/true),
        skip_(tok.decode(prompt, /*skip_special_tokens=*/true).size()),
        stops_(stop) {
    for (int32_t id : prompt) drop_prompt(decoder_.push(id));
  }
  std::string push(int32_t id) { return stops_.push(drop_prompt(decoder_.push(id))); }
  std::string flush() {
    std::string s = stops_.push(drop_prompt(decoder_.flush()));
    return s + stops_.flush();
  }
  bool stopped() const { return stops_.stopped(); }
  const std::string& matched() const { return stops_.matched(); }

 private:
  std::string drop_prompt(std::string s) {
    const size_t n = std::min(skip_, s.size());
    skip_ -= n;
    return s.substr(n);
  }
  StreamDecoder decoder_;
  size_t skip_;
  engine::StopStringMatcher stops_;
};

Sequence::Sequence() = default;
Sequence::~Sequence() = default;
Sequence::Sequence(Sequence&&) noexcept = default;
Sequence& Sequence::operator=(Sequence&&) noexcept = default;

EngineConfig resolve(EngineConfig c, const ModelConfig& m) {
  const int mpe = m.max_position_embeddings;
  if (c.max_model_len == 0) c.max_model_len = mpe;
  CEILING_ENSURE(c.max_model_len >= 1, "--max-model-len must be >= 1 (got {})", c.max_model_len);
  CEILING_ENSURE(mpe <= 0 || c.max_model_len <= mpe,
                 "--max-model-len {} exceeds the model's max_position_embeddings {}",
                 c.max_model_len, mpe);
  CEILING_ENSURE(c.max_num_seqs >= 1 && c.max_num_seqs <= 65536,
                 "--max-num-seqs must be in [1, 65536] (got {})", c.max_num_seqs);
  CEILING_ENSURE(c.block_size >= 1 && c.block_size <= 1024,
                 "--block-size must be in [1, 1024] (got {})", c.block_size);
  CEILING_ENSURE(c.num_kv_blocks >= 0, "--num-kv-blocks must be >= 0 (got {})", c.num_kv_blocks);
  CEILING_ENSURE(c.max_num_batched_tokens >= 0 && c.max_num_batched_tokens <= (1 << 20),
                 "--max-num-batched-tokens must be in [0, 1048576] (got {})",
                 c.max_num_batched_tokens);
  if (c.max_num_batched_tokens == 0) {
    const int64_t cap = int64_t{c.max_model_len} * c.max_num_seqs;
    c.max_num_batched_tokens = static_cast<int>(
        std::min<int64_t>(std::max(8192, c.max_num_seqs), std::max<int64_t>(cap, 1)));
    if (!c.chunked_prefill)
      c.max_num_batched_tokens = std::max(c.max_num_batched_tokens, c.max_model_len);
  }
  CEILING_ENSURE(c.max_num_batched_tokens >= c.max_num_seqs,
                 "--max-num-batched-tokens ({}) must be >= --max-num-seqs ({})",
                 c.max_num_batched_tokens, c.max_num_seqs);
  CEILING_ENSURE(c.chunked_prefill || c.max_num_batched_tokens >= c.max_model_len,
                 "without chunked prefill --max-num-batched-tokens ({}) must be >= "
                 "--max-model-len ({})",
                 c.max_num_batched_tokens, c.max_model_len);
  return c;
}

namespace {

RunnerConfig runner_config(const EngineConfig& c) {
  RunnerConfig r;
  r.max_model_len = c.max_model_len;
  r.max_num_seqs = c.max_num_seqs;
  r.max_num_batched_tokens = c.max_num_batched_tokens;
  r.block_size = c.block_size;
  r.num_kv_blocks = c.num_kv_blocks;
  r.gpu_memory_utilization = c.gpu_memory_utilization;
  return r;
}

}  // namespace

Engine::Engine(engine::Ops& ops, EngineConfig config, const Tokenizer* tokenizer)
    : config_(resolve(std::move(config), ops.config())),
      tokenizer_(tokenizer),
      runner_(ops, runner_config(config_)),
      kv_(runner_.num_blocks(), config_.block_size, config_.enable_prefix_caching),
      scheduler_(SchedulerConfig{config_.max_num_seqs, config_.max_num_batched_tokens,
                                 config_.chunked_prefill},
                 kv_) {}

Engine::Engine(dist::TpGroup& tp, EngineConfig config, const Tokenizer* tokenizer)
    : config_(resolve(std::move(config), tp.config())),
      tokenizer_(tokenizer),
      runner_(tp, runner_config(config_)),
      kv_(runner_.num_blocks(), config_.block_size, config_.enable_prefix_caching),
      scheduler_(SchedulerConfig{config_.max_num_seqs, config_.max_num_batched_tokens,
                                 config_.chunked_prefill},
                 kv_) {}

Engine::~Engine() = default;

std::string Engine::kv_summary() const {
  const int64_t tokens = int64_t{kv_.num_blocks()} * kv_.block_size();
  return fmt::format(
      "KV cache: {} blocks of {} tokens = {} tokens, {:.2f} GiB ({}); maximum concurrency for "
      "{} tokens per request: {:.2f}x; prefix caching {}",
      kv_.num_blocks(), kv_.block_size(), tokens, runner_.kv_bytes() / 1073741824.0,
      runner_.sizing_note(), config_.max_model_len,
      static_cast<double>(kv_.num_blocks()) / runner_.max_blocks_per_seq(),
      kv_.prefix_caching() ? "on" : "off");
}

int64_t Engine::add_request(std::vector<int32_t> prompt, RequestParams params) {
  const int V = runner_.model_config().vocab_size;
  const int P = static_cast<int>(prompt.size());
  CEILING_ENSURE(P > 0, "request: the prompt is empty (it needs at least one token)");
  for (int i = 0; i < P; ++i)
    CEILING_ENSURE(prompt[static_cast<size_t>(i)] >= 0 && prompt[static_cast<size_t>(i)] < V,
                   "request: prompt token {} is id {}, outside the vocabulary [0, {})", i,
                   prompt[static_cast<size_t>(i)], V);
  CEILING_ENSURE(params.max_tokens >= 1, "request: max_tokens must be >= 1 (got {})",
                 params.max_tokens);
  CEILING_ENSURE(params.min_tokens >= 0 && params.min_tokens <= params.max_tokens,
                 "request: min_tokens must be in [0, max_tokens = {}] (got {})", params.max_tokens,
                 params.min_tokens);
  CEILING_ENSURE(params.logprobs >= -1 && params.logprobs <= 20,
                 "request: logprobs must be in [0, 20] (got {})", params.logprobs);
  CEILING_ENSURE(int64_t{P} + params.max_tokens <= config_.max_model_len,
                 "request: prompt of {} tokens + max_tokens {} = {} exceeds max_model_len {}", P,
                 params.max_tokens, int64_t{P} + params.max_tokens, config_.max_model_len);
  // (Within max_model_len it also fits the cache: ModelRunner refuses a cache that cannot hold
  // one sequence of max_model_len.)
  cpu::validate(params.sampling);
  for (int32_t id : params.stop_token_ids)
    CEILING_ENSURE(id >= 0 && id < V, "request: stop token id {} outside the vocabulary [0, {})",
                   id, V);
  for (const auto& [id, b] : params.logit_bias) {
    CEILING_ENSURE(id >= 0 && id < V,
                   "request: logit_bias token id {} outside the vocabulary [0, {})", id, V);
    CEILING_ENSURE(b >= -100.0f && b <= 100.0f,
                   "request: logit_bias of token {} must be in [-100, 100] (got {})", id, b);
  }
  const bool has_stop = std::any_of(params.stop.begin(), params.stop.end(),
                                    [](const std::string& s) { return !s.empty(); });
  CEILING_ENSURE(!has_stop || tokenizer_, "request: stop strings need a tokenizer");

  auto seq = std::make_unique<Sequence>();
  seq->id = next_id_++;
  seq->prompt = std::move(prompt);
  seq->params = std::move(params);
  if (seq->params.min_tokens > 0) {
    seq->min_tokens_mask = seq->params.stop_token_ids;
    if (!seq->params.ignore_eos)
      seq->min_tokens_mask.insert(seq->min_tokens_mask.end(), config_.eos_token_ids.begin(),
                                  config_.eos_token_ids.end());
  }
  seq->times.arrival = Clock::now();
  if (tokenizer_)
    seq->text = std::make_unique<TextState>(*tokenizer_, seq->prompt, seq->params.stop);
  Sequence* s = seq.get();
  seqs_.emplace(s->id, std::move(seq));
  scheduler_.add(s);
  stats_.prompt_tokens += P;
  return s->id;
}

void Engine::describe(const Sequence& seq, RequestOutput& o) const {
  o.id = seq.id;
  o.prompt_tokens = static_cast<int>(seq.prompt.size());
  o.completion_tokens = static_cast<int>(seq.output.size());
  o.cached_tokens = seq.num_cached;
  o.arrival = seq.times.arrival;
  o.first_scheduled = seq.times.first_scheduled;
  o.first_token = seq.times.first_token;
}

void Engine::finish(Sequence& seq, FinishReason why, RequestOutput& o) {
  if (seq.text && !seq.text->stopped()) o.new_text += seq.text->flush();
  seq.status = SeqStatus::kFinished;
  seq.finish = why;
  seq.times.finished = Clock::now();
  scheduler_.remove(&seq);
  describe(seq, o);
  o.finished = true;
  o.finish = why;
  o.stop_reason = seq.stop_reason;
  o.finished_at = seq.times.finished;
  ++(why == FinishReason::kAbort ? stats_.aborted : stats_.finished);
}

bool Engine::abort(int64_t id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return false;
  RequestOutput o;
  finish(*it->second, FinishReason::kAbort, o);
  aborted_.push_back(std::move(o));
  seqs_.erase(it);
  return true;
}

// Appends `id` to the sequence and its output record; returns true when the sequence is done
// (o then holds the finish fields' reason; the caller finishes it).
bool Engine::check_stop(Sequence& seq, int32_t id, RequestOutput& o) {
  const RequestParams& p = seq.params;
  seq.output.push_back(id);
  o.new_tokens.push_back(id);
  ++stats_.generation_tokens;
  const bool may_stop = static_cast<int>(seq.output.size()) > p.min_tokens;
  const bool eos =
      !p.ignore_eos && std::find(config_.eos_token_ids.begin(), config_.eos_token_ids.end(), id) !=
                           config_.eos_token_ids.end();
  const bool stop_id =
      std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), id) != p.stop_token_ids.end();
  if (may_stop && (eos || stop_id)) {
    seq.stop_reason = std::to_string(id);
    o.finish = FinishReason::kStop;
    return true;
  }
  if (seq.text) {
    o.new_text += seq.text->push(id);
    if (seq.text->stopped()) {
      seq.stop_reason = seq.text->matched();
      o.finish = FinishReason::kStop;
      return true;
    }
  }
  if (static_cast<int>(seq.output.size()) >= p.max_tokens ||
      seq.num_tokens() >= config_.max_model_len) {
    o.finish = FinishReason::kLength;
    return true;
  }
  return false;
}

std::vector<RequestOutput> Engine::step() {
  std::vector<RequestOutput> outs = std::move(aborted_);
  aborted_.clear();
  const Clock::time_point t0 = Clock::now();
  const SchedulerOutput sched = scheduler_.schedule();
  if (sched.empty()) {
    // Nothing fits although nothing runs: only possible for a waiting request that needs more
    // blocks than are free with the cache otherwise empty. Fail it rather than spin.
    if (sched.preempted.empty() && scheduler_.num_running() == 0 && scheduler_.num_waiting() > 0) {
      const int64_t id = scheduler_.live().front()->id;
      abort(id);
      outs.insert(outs.end(), aborted_.begin(), aborted_.end());
      aborted_.clear();
    }
    return outs;
  }
  const Clock::time_point now = Clock::now();
  for (const ScheduledSeq& s : sched.seqs)
    if (!s.seq->times.scheduled) {
      s.seq->times.scheduled = true;
      s.seq->times.first_scheduled = now;
    }
  std::vector<TokenLogprob> lps;
  const Clock::time_point t1 = Clock::now();
  stats_.schedule_s += std::chrono::duration<double>(t1 - t0).count();
  const std::vector<int32_t> ids = runner_.run(sched, &lps);
  const Clock::time_point t2 = Clock::now();
  stats_.build_s += runner_.last_timing().build_s;
  stats_.forward_s += runner_.last_timing().forward_s;
  stats_.sample_s += runner_.last_timing().sample_s;
  scheduler_.on_step_done(sched);
  ++stats_.steps;
  stats_.scheduled_tokens += sched.num_tokens;
  stats_.batch_size_sum += static_cast<int64_t>(sched.seqs.size());
  stats_.peak_kv_usage = std::max(stats_.peak_kv_usage, kv_.usage());

  std::vector<int64_t> done;
  const Clock::time_point t = Clock::now();
  for (size_t i = 0; i < sched.seqs.size(); ++i) {
    if (ids[i] < 0) continue;
    Sequence& seq = *sched.seqs[i].seq;
    if (!seq.times.got_token) {
      seq.times.got_token = true;
      seq.times.first_token = t;
    }
    RequestOutput o;
    const bool stop = check_stop(seq, ids[i], o);
    if (seq.params.logprobs >= 0 && i < lps.size()) {
      seq.logprobs.push_back(lps[i]);
      o.new_logprobs.push_back(lps[i]);
    }
    if (stop) {
      finish(seq, o.finish, o);
      done.push_back(seq.id);
    } else {
      describe(seq, o);
    }
    outs.push_back(std::move(o));
  }
  for (int64_t id : done) seqs_.erase(id);
  stats_.output_s += std::chrono::duration<double>(Clock::now() - t2).count();
  return outs;
}

}  // namespace ceiling::serve
