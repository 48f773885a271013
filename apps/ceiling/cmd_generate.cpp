// `ceiling generate`: one prompt -> a streamed completion on stdout, or a JSON Lines file of
// prompts -> one JSON line per prompt (same order), through the engine core the server uses
// (Engine: scheduler, paged KV with prefix caching, model runner, sampler, stream decoder).
// Timing summary on stderr.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <random>

#include "ceiling/command.h"
#include "ceiling/engine_flags.h"
#include "core/status.h"
#include "hw/measured.h"
#include "serve/engine.h"
#include "serve/prompt.h"
#include "serve/prompts_file.h"
#include "tokenizer/template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace ceiling::cli {
namespace {

struct Args {
  std::string model;  // empty: the bundled stories260K (models/stories260K, found at run time)
  std::optional<std::string> prompt;
  std::string prompts_file, output;
  std::optional<int> max_tokens, top_k, min_tokens;
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  float presence_penalty = 0, frequency_penalty = 0;
  int64_t seed = -1;
  std::vector<std::string> stop;
  bool chat = false, ignore_eos = false;
  std::string system;
  EngineFlags engine;
};

using Clock = std::chrono::steady_clock;
double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

serve::RequestParams cli_params(const Args& a, const Model& m, uint64_t seed) {
  serve::RequestParams r = serve::default_params(m.generation);
  cpu::SamplingParams& p = r.sampling;
  if (a.temperature) p.temperature = *a.temperature;
  if (a.top_p) p.top_p = *a.top_p;
  if (a.top_k) p.top_k = *a.top_k;
  if (a.min_p) p.min_p = *a.min_p;
  if (a.repetition_penalty) p.repetition_penalty = *a.repetition_penalty;
  if (a.max_tokens) r.max_tokens = *a.max_tokens;
  if (a.min_tokens) r.min_tokens = *a.min_tokens;
  p.presence_penalty = a.presence_penalty;
  p.frequency_penalty = a.frequency_penalty;
  p.seed = seed;
  r.stop = a.stop;
  r.ignore_eos = a.ignore_eos;
  cpu::validate(p);
  return r;
}

struct Job {
  std::vector<int32_t> prompt;
  serve::RequestParams params;
};

std::vector<Job> build_jobs(const Args& a, const Model& model, const Tokenizer& tok,
                            uint64_t seed) {
  std::optional<ChatTemplate> tmpl;
  auto chat_template = [&]() -> const ChatTemplate& {
    if (!tmpl) tmpl = ChatTemplate::from_model_dir(a.model, /*has_tools=*/false);
    return *tmpl;
  };
  const serve::RequestParams base = cli_params(a, model, seed);
  std::vector<Job> jobs;
  if (a.prompt) {
    Job j{{}, base};
    if (a.chat) {
      nlohmann::ordered_json msgs = nlohmann::ordered_json::array();
      if (!a.system.empty()) msgs.push_back({{"role", "system"}, {"content", a.system}});
      msgs.push_back({{"role", "user"}, {"content", *a.prompt}});
      j.prompt = serve::encode_chat(tok, chat_template(), msgs);
    } else {
      j.prompt = serve::encode_text(tok, *a.prompt);
    }
    CEILING_ENSURE(!j.prompt.empty(),
                   "the prompt encodes to no tokens (this tokenizer adds no BOS); give some text");
    jobs.push_back(std::move(j));
    return jobs;
  }
  for (const serve::PromptLine& line : serve::read_prompts_file(a.prompts_file)) {
    const std::string where = fmt::format("{}:{}", a.prompts_file, line.line);
    Job j{{}, base};
    serve::apply_request_fields(j.params, line.fields, where);
    try {
      j.prompt = line.prompt ? serve::encode_text(tok, *line.prompt)
                             : serve::encode_chat(tok, chat_template(), line.messages);
    } catch (const Error& e) {
      fail("{}: {}", where, e.what());
    }
    CEILING_ENSURE(!j.prompt.empty(), "{}: the prompt encodes to no tokens", where);
    cpu::validate(j.params.sampling);
    jobs.push_back(std::move(j));
  }
  return jobs;
}

// The bundled model, found beside the working directory or the binary (build tree or installed
// prefix), never through a path compiled in.
std::string bundled_model() {
  const auto found = hw::find_repo_file("models/stories260K/config.json");
  CEILING_ENSURE(found.has_value(),
                 "no --model given and the bundled models/stories260K is not beside the working "
                 "directory or the binary; pass --model DIR");
  return found->parent_path().string();
}

int run(Args a) {
  if (a.model.empty()) a.model = bundled_model();
  CEILING_ENSURE(a.prompt.has_value() != !a.prompts_file.empty(),
                 "generate: give exactly one of --prompt and --prompts-file");
  CEILING_ENSURE(a.output.empty() || !a.prompts_file.empty(),
                 "generate: --output needs --prompts-file");
  const uint64_t seed = a.seed >= 0 ? static_cast<uint64_t>(a.seed) : std::random_device{}();
  const auto t0 = Clock::now();
  LoadedModel lm = load_on_device(a.model, a.engine);
  const Model& model = lm.model;
  const Tokenizer tok = Tokenizer::from_dir(a.model);
  std::vector<Job> jobs = build_jobs(a, model, tok, seed);

  serve::EngineConfig ec = engine_config(a.engine);
  ec.eos_token_ids = serve::eos_token_ids(model, tok);
  if (!a.engine.max_model_len) {  // just what these requests need, within the model's limit
    int64_t need = 1;
    for (const Job& j : jobs)
      need = std::max<int64_t>(need, static_cast<int64_t>(j.prompt.size()) + j.params.max_tokens);
    const int mpe = model.config.max_position_embeddings;
    ec.max_model_len = static_cast<int>(mpe > 0 ? std::min<int64_t>(need, mpe) : need);
  }
  if (!a.engine.max_num_seqs)
    ec.max_num_seqs = static_cast<int>(std::min<size_t>(256, jobs.size()));
  // A single prompt: clip max_tokens to the room max_model_len leaves (finish reason "length").
  if (a.prompt) {
    Job& j = jobs[0];
    const int mml = serve::resolve(ec, model.config).max_model_len;
    CEILING_ENSURE(static_cast<int>(j.prompt.size()) < mml,
                   "the prompt has {} tokens; --max-model-len is {}", j.prompt.size(), mml);
    j.params.max_tokens = std::min<int64_t>(j.params.max_tokens, mml - j.prompt.size());
  }
  const std::unique_ptr<serve::Engine> engine_ptr = lm.make_engine(ec, &tok);
  serve::Engine& engine = *engine_ptr;
  const double load_ms = ms_between(t0, Clock::now());

  std::vector<int64_t> ids;
  for (size_t i = 0; i < jobs.size(); ++i) {
    try {
      ids.push_back(engine.add_request(jobs[i].prompt, jobs[i].params));
    } catch (const Error& e) {
      if (a.prompt) throw;
      fail("{}: prompt {}: {}", a.prompts_file, i + 1, e.what());
    }
  }
  if (stderr_is_tty() || !a.prompts_file.empty()) fmt::print(stderr, "{}\n", engine.kv_summary());
  struct Result {
    std::string text;
    std::vector<int32_t> tokens;
    serve::RequestOutput last;
  };
  std::vector<Result> results(jobs.size());
  std::unordered_map<int64_t, size_t> index;
  for (size_t i = 0; i < ids.size(); ++i) index[ids[i]] = i;
  const auto g0 = Clock::now();
  while (engine.has_unfinished()) {
    for (serve::RequestOutput& o : engine.step()) {
      Result& r = results[index.at(o.id)];
      r.text += o.new_text;
      r.tokens.insert(r.tokens.end(), o.new_tokens.begin(), o.new_tokens.end());
      if (a.prompt && !o.new_text.empty()) {
        std::fwrite(o.new_text.data(), 1, o.new_text.size(), stdout);
        std::fflush(stdout);
      }
      if (o.finished) r.last = std::move(o);
    }
  }
  const double gen_ms = ms_between(g0, Clock::now());

  if (a.prompt) {
    std::fputc('\n', stdout);
    std::fflush(stdout);
    const serve::RequestOutput& o = results[0].last;
    const double prefill_ms = ms_between(o.arrival, o.first_token);
    const double decode_ms = ms_between(o.first_token, o.finished_at);
    const int n = o.completion_tokens;
    fmt::print(stderr,
               "[{} on {}] load {:.0f} ms | prompt {} tokens, prefill {:.1f} ms | generated {} "
               "tokens, {:.2f} ms/token, {:.1f} tok/s | finish: {} | seed {}\n",
               model.config.name, lm.device_name(), load_ms, o.prompt_tokens, prefill_ms, n,
               n > 1 ? decode_ms / (n - 1) : 0.0, n > 1 ? (n - 1) * 1000.0 / decode_ms : 0.0,
               serve::finish_reason_name(o.finish), seed);
    return 0;
  }
  std::ofstream file;
  if (!a.output.empty()) {
    file.open(a.output);
    CEILING_ENSURE(file.good(), "generate: cannot write '{}'", a.output);
  }
  int64_t out_tokens = 0;
  for (const Result& r : results) {
    nlohmann::json j = {{"text", r.text},
                        {"token_ids", r.tokens},
                        {"finish_reason", serve::finish_reason_name(r.last.finish)},
                        {"prompt_tokens", r.last.prompt_tokens},
                        {"completion_tokens", r.last.completion_tokens}};
    const std::string line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    out_tokens += r.last.completion_tokens;
    if (file.is_open()) {
      file << line << "\n";
    } else {
      fmt::print("{}\n", line);
    }
  }
  if (file.is_open()) {
    file.close();
    CEILING_ENSURE(file.good(), "generate: writing '{}' failed", a.output);
  }
  const serve::EngineStats& st = engine.stats();
  fmt::print(stderr,
             "[{} on {}] {} prompts | {} output tokens in {:.1f} ms ({:.1f} tok/s) | {} steps, "
             "mean batch {:.1f} | preemptions {} | prefix cache hits {}/{} tokens | seed {}\n",
             model.config.name, lm.device_name(), jobs.size(), out_tokens, gen_ms,
             out_tokens * 1000.0 / std::max(gen_ms, 1e-9), st.steps,
             st.steps ? static_cast<double>(st.batch_size_sum) / st.steps : 0.0,
             engine.scheduler().num_preemptions(), engine.kv().prefix_hits(),
             engine.kv().prefix_queries(), seed);
  return 0;
}

CEILING_COMMAND(
    "generate", "Generate completions: one prompt (streamed) or a JSON Lines file of prompts",
    [](CLI::App& sub) -> std::function<int()> {
      auto a = std::make_shared<Args>();
      sub.add_option("--model", a->model,
                     "Hugging Face model directory (default: the bundled stories260K)");
      sub.add_option("--prompt", a->prompt, "Prompt text");
      sub.add_option("--prompts-file", a->prompts_file,
                     "JSON Lines: {\"prompt\": ...} or {\"messages\": [...]} per line, with "
                     "optional request fields (max_tokens, temperature, top_p, seed, stop, ...)");
      sub.add_option("--output", a->output,
                     "with --prompts-file: write one JSON line per prompt here (default stdout)");
      sub.add_option("--max-tokens", a->max_tokens,
                     "Tokens to generate (default: generation_config or 256)")
          ->check(CLI::Range(1, 1 << 24));
      sub.add_option("--min-tokens", a->min_tokens, "No stop before this many tokens")
          ->check(CLI::Range(0, 1 << 24));
      sub.add_option("--temperature", a->temperature, "0 = greedy");
      sub.add_option("--top-p", a->top_p, "Nucleus sampling mass in (0, 1]");
      sub.add_option("--top-k", a->top_k, "Keep the k most likely tokens (0 = off)")
          ->check(CLI::Range(0, 1 << 30));
      sub.add_option("--min-p", a->min_p, "Drop tokens below min_p * p_max");
      sub.add_option("--repetition-penalty", a->repetition_penalty,
                     "HF-style penalty over prompt and output (1 = off)");
      sub.add_option("--presence-penalty", a->presence_penalty, "OpenAI-style");
      sub.add_option("--frequency-penalty", a->frequency_penalty, "OpenAI-style");
      sub.add_option("--seed", a->seed, "Sampling seed (default -1: random)")
          ->check(CLI::Range(int64_t{-1}, INT64_MAX));
      sub.add_option("--stop", a->stop, "Stop string (repeatable; not printed)");
      sub.add_flag("--ignore-eos", a->ignore_eos, "Keep generating after EOS");
      sub.add_flag("--chat", a->chat, "Wrap the prompt in the model's chat template");
      sub.add_option("--system", a->system, "System message (with --chat)");
      add_engine_flags(sub, a->engine);
      add_tensor_parallel_flags(sub, a->engine);
      return [a] { return run(*a); };
    },
    20);

}  // namespace
}  // namespace ceiling::cli
