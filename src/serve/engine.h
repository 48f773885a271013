// The engine core: requests in, tokens (and text) out, one step at a time.
//
//   add_request ──> Scheduler (waiting → running, preemption) ──> ModelRunner (StepBatch,
//   forward, sampler) ──> stop checks, text ──> RequestOutput per sequence that moved
//
// `Engine` is single-threaded: every call comes from the thread that owns the device (the engine
// thread). `AsyncEngine` (async_engine.h) puts a thread-safe queue in front of it for servers.
//
// Semantics (as vLLM's): a request's output ids include a final EOS / stop token (its text does
// not); stop strings are matched on the streamed text, which never contains them; finish reason
// "stop" (EOS, stop token, stop string) or "length" (max_tokens or max_model_len).
// Results do not depend on how requests were batched on a backend that computes each row the
// same whatever the batch (CpuOps): batching, chunking, preemption and prefix hits only change
// when tokens are computed.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/ops.h"
#include "serve/kv_block_manager.h"
#include "serve/model_runner.h"
#include "serve/scheduler.h"
#include "serve/sequence.h"
#include "tokenizer/tokenizer.h"

namespace ceiling::serve {

struct EngineConfig {
  int max_model_len = 0;  // 0: the model's max_position_embeddings
  int max_num_seqs = 256;
  int max_num_batched_tokens = 0;  // 0: max(8192, max_num_seqs), capped at max_model_len·seqs
  int block_size = 16;
  int num_kv_blocks = 0;  // 0: from memory (ModelRunner)
  double gpu_memory_utilization = 0.90;
  bool enable_prefix_caching = true;
  bool chunked_prefill = true;
  std::vector<int32_t> eos_token_ids;  // end a request unless it sets ignore_eos
};

struct RequestOutput {
  int64_t id = 0;
  std::vector<int32_t> new_tokens;  // sampled this step (a final EOS included)
  std::vector<TokenLogprob> new_logprobs;
  std::string new_text;  // with a tokenizer: text that became final
  bool finished = false;
  FinishReason finish = FinishReason::kNone;
  std::string stop_reason;
  std::string error;  // AsyncEngine: why the request failed (finish kAbort)
  int prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
  Clock::time_point arrival, first_scheduled, first_token, finished_at;
};

struct EngineStats {
  int64_t steps = 0, prompt_tokens = 0, generation_tokens = 0, scheduled_tokens = 0;
  int64_t batch_size_sum = 0;  // sequences per step, summed (mean = / steps)
  double peak_kv_usage = 0;    // fraction of blocks in use
  int64_t finished = 0, aborted = 0;
  // Host clock per phase of step(), summed (seconds): scheduling; building the StepBatch; the
  // forward call (on a GPU: launches, or the graph's replay launch); sampling, which waits for
  // the device; appending tokens, stop checks and outputs. GPU time shows up in sample_s.
  double schedule_s = 0, build_s = 0, forward_s = 0, sample_s = 0, output_s = 0;
};

class Engine {
 public:
  // `ops` holds the model's weights; `tokenizer` (may be null) enables text output and stop
  // strings. Both must outlive the engine. Sizes the KV cache (ModelRunner).
  Engine(engine::Ops& ops, EngineConfig config, const Tokenizer* tokenizer = nullptr);
  // Tensor parallel: the model runs on `tp`'s ranks (dist/tp_group.h), which must outlive the
  // engine; the scheduler stays here, on the engine thread.
  Engine(dist::TpGroup& tp, EngineConfig config, const Tokenizer* tokenizer = nullptr);
  ~Engine();

  const EngineConfig& config() const { return config_; }
  // Validates and queues a request; returns its id. Throws ceiling::Error (nothing changes) for an
  // empty prompt, token ids outside the vocabulary, prompt + max_tokens over max_model_len, bad
  // sampling parameters, or stop strings
  // without a tokenizer.
  int64_t add_request(std::vector<int32_t> prompt, RequestParams params);
  // Finishes a request now (reason abort) and returns its blocks; false for an unknown id.
  // Its final RequestOutput comes with the next step().
  bool abort(int64_t id);
  // One scheduler step + one forward; the outputs of every sequence that produced a token or
  // finished. With nothing to run, returns the aborted ones only.
  std::vector<RequestOutput> step();
  bool has_unfinished() const { return !scheduler_.empty(); }
  int num_running() const { return scheduler_.num_running(); }
  int num_waiting() const { return scheduler_.num_waiting(); }

  const KvBlockManager& kv() const { return kv_; }
  const Scheduler& scheduler() const { return scheduler_; }
  ModelRunner& runner() { return runner_; }
  const EngineStats& stats() const { return stats_; }
  void reset_peak_kv_usage() { stats_.peak_kv_usage = kv_.usage(); }
  // One line: KV blocks, tokens, bytes and the maximum concurrency at max_model_len.
  std::string kv_summary() const;

 private:
  // Fills o's counts and times from the sequence as of now.
  void describe(const Sequence& seq, RequestOutput& o) const;
  // Ends the sequence (text flushed into o.new_text, blocks returned) and fills o's finish fields.
  void finish(Sequence& seq, FinishReason why, RequestOutput& o);
  bool check_stop(Sequence& seq, int32_t id, RequestOutput& o);

  EngineConfig config_;
  const Tokenizer* tokenizer_;
  ModelRunner runner_;
  KvBlockManager kv_;
  Scheduler scheduler_;
  std::unordered_map<int64_t, std::unique_ptr<Sequence>> seqs_;
  std::vector<RequestOutput> aborted_;  // reported by the next step()
  int64_t next_id_ = 0;
  EngineStats stats_;
};

// The resolved config (max_model_len and batched-token defaults filled in, every flag checked
// against the model); throws naming the flag.
EngineConfig resolve(EngineConfig c, const ModelConfig& model);

}  // namespace ceiling::serve
