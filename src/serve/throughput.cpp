#include "serve/throughput.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <unordered_map>

#include "core/status.h"

namespace ceiling::serve {

Workload random_workload(int vocab, int num_prompts, int input_len, int output_len, int prefix_len,
                         uint64_t seed) {
  CEILING_ENSURE(num_prompts >= 1 && input_len >= 1 && output_len >= 1,
                 "bench throughput: --num-prompts, --input-len and --output-len must be >= 1");
  CEILING_ENSURE(prefix_len >= 0 && prefix_len < input_len,
                 "bench throughput: --prefix-len {} must be in [0, --input-len {})", prefix_len,
                 input_len);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> tok(0, vocab - 1);
  std::vector<int32_t> prefix(static_cast<size_t>(prefix_len));
  for (auto& t : prefix) t = tok(rng);
  Workload w;
  RequestParams p;
  p.sampling.temperature = 0;
  p.ignore_eos = true;
  p.max_tokens = output_len;
  for (int i = 0; i < num_prompts; ++i) {
    std::vector<int32_t> ids = prefix;
    while (static_cast<int>(ids.size()) < input_len) ids.push_back(tok(rng));
    w.prompts.push_back(std::move(ids));
    w.params.push_back(p);
  }
  return w;
}

ThroughputRun run_throughput(Engine& engine, const Workload& w, hw::KernelTracer* tracer) {
  CEILING_ENSURE(!engine.has_unfinished(), "bench throughput: the engine is busy");
  const EngineStats s0 = engine.stats();
  const int64_t pre0 = engine.scheduler().num_preemptions();
  const int64_t q0 = engine.kv().prefix_queries(), h0 = engine.kv().prefix_hits();
  ThroughputRun r;
  std::unordered_map<int64_t, size_t> index;
  r.outputs.resize(w.prompts.size());
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < w.prompts.size(); ++i) {
    index[engine.add_request(w.prompts[i], w.params[i])] = i;
    r.prompt_tokens += static_cast<int64_t>(w.prompts[i].size());
  }
  engine.reset_peak_kv_usage();
  const int half = std::max(1, engine.config().max_num_seqs / 2);
  bool finished_last = false;  // a request finished in the previous step
  int tries = 0;               // traced steps that turned out to be decode-only
  while (engine.has_unfinished()) {
    // A step admits waiting prompts once running ones finish: then it likely carries prefill.
    const bool trace = tracer && !r.prefill_step_trace && tries < 64 &&
                       engine.num_running() >= half && engine.num_waiting() > 0 && finished_last;
    if (trace) {
      tracer->resume();
      tracer->clear();
    }
    const EngineStats before = engine.stats();
    const auto t_step = std::chrono::steady_clock::now();
    const std::vector<RequestOutput> outs = engine.step();
    const double dt =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t_step).count();
    const EngineStats& after = engine.stats();
    const int64_t seqs = after.batch_size_sum - before.batch_size_sum;
    const int64_t tokens = after.scheduled_tokens - before.scheduled_tokens;
    // Decodes are the one-token sequences; a prefill chunk of one token counts as one (rare).
    StepTimes& kind = tokens > seqs ? r.prefill_steps : r.decode_steps;
    ++kind.steps;
    kind.seconds += dt;
    kind.tokens += tokens;
    if (trace) {
      std::vector<hw::KernelRecord> records = tracer->collect();
      tracer->pause();
      if (tokens > seqs && seqs >= half) {
        r.prefill_step_trace =
            hw::summarize_replays(std::move(records), 1, engine.runner().model_config().num_layers);
        r.traced_step = static_cast<int>(after.steps - s0.steps);
        r.traced_seqs = static_cast<int>(seqs);
        r.traced_tokens = static_cast<int>(tokens);
      } else {
        ++tries;
      }
    }
    finished_last = false;
    for (const RequestOutput& o : outs) {
      auto& out = r.outputs[index.at(o.id)];
      out.insert(out.end(), o.new_tokens.begin(), o.new_tokens.end());
      if (o.finished) {
        ++r.num_requests;
        finished_last = true;
      }
    }
  }
  r.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const EngineStats& s = engine.stats();
  r.steps = s.steps - s0.steps;
  r.mean_batch_size =
      r.steps > 0 ? static_cast<double>(s.batch_size_sum - s0.batch_size_sum) / r.steps : 0;
  r.preemptions = engine.scheduler().num_preemptions() - pre0;
  const int64_t q = engine.kv().prefix_queries() - q0, h = engine.kv().prefix_hits() - h0;
  r.prefix_cache_hit_rate = q > 0 ? static_cast<double>(h) / q : 0;
  r.peak_kv_usage = s.peak_kv_usage;
  r.schedule_s = s.schedule_s - s0.schedule_s;
  r.build_s = s.build_s - s0.build_s;
  r.forward_s = s.forward_s - s0.forward_s;
  r.sample_s = s.sample_s - s0.sample_s;
  r.output_s = s.output_s - s0.output_s;
  uint64_t hash = 0xcbf29ce484222325ull;
  for (const auto& out : r.outputs) {
    r.output_tokens += static_cast<int64_t>(out.size());
    for (int32_t id : out)
      for (int b = 0; b < 4; ++b)
        hash = (hash ^ ((static_cast<uint32_t>(id) >> (8 * b)) & 0xff)) * 0x100000001b3ull;
    hash = (hash ^ 0xff) * 0x100000001b3ull;  // request separator
  }
  r.outputs_hash = fmt::format("fnv1a64:{:016x}", hash);
  return r;
}

}  // namespace ceiling::serve
