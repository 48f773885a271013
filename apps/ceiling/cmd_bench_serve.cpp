// `ceiling bench serve`: load on any OpenAI-compatible server (ceiling's, vLLM's) as `vllm bench
// serve`: streaming requests on a Poisson schedule (or all at once) under a concurrency limit;
// reports vLLM's serving metrics (TTFT, TPOT, ITL, E2EL, throughputs) under vLLM's names.
// The client lives in src/loadgen/; this file builds the workload and writes the report.
#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>

#include "ceiling/command.h"
#include "core/status.h"
#ifdef HAVE_CEILING_LOADGEN
#include "ceiling/flag_check.h"
#include "ceiling/progress.h"
#include "loadgen/client.h"
#include "loadgen/request.h"
#include "loadgen/runner.h"
#include "loadgen/stats.h"
#include "serve/prompts_file.h"
#include "tokenizer/tokenizer.h"
#endif  // HAVE_CEILING_LOADGEN

namespace ceiling::cli {
#ifdef HAVE_CEILING_LOADGEN
namespace {

struct ServeArgs {
  std::string base_url = "http://127.0.0.1:8000", endpoint = "/v1/completions", model;
  std::string dataset = "random", tokenizer, api_key, out, request_rate = "inf";
  std::string random_prompt = "auto";
  int random_input_len = 1024, random_output_len = 128, random_vocab_size = 256;
  std::optional<int> num_prompts;
  int max_concurrency = 0, max_workers = 1024, num_warmups = 0;
  double timeout_s = 6 * 3600;
  uint64_t seed = 0;
  bool no_ignore_eos = false;
};

struct Workload {
  std::vector<loadgen::Prompt> prompts;
  std::string prompt_kind;  // "token ids" / "text" / "file"
};

double parse_rate(const std::string& s) {
  if (s == "inf" || s == "Inf" || s == "infinity") return std::numeric_limits<double>::infinity();
  size_t used = 0;
  double r = 0;
  try {
    r = std::stod(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  CEILING_ENSURE(used == s.size() && std::isfinite(r) && r > 0,
                 "bench serve: --request-rate must be a number > 0 or inf (got '{}')", s);
  return r;
}

// Text of about `len` tokens: random ids decoded and re-encoded until the length is exact where
// the tokenizer allows (as vLLM's random dataset); without a tokenizer, common English words
// (about one token each in the BPE vocabularies of Llama, Qwen, Mistral).
std::string random_text(const Tokenizer* tok, int len, std::mt19937_64& rng) {
  if (!tok) {
    static const char* kWords[] = {"the", "of",   "and",  "to", "in", "is", "was", "for",
                                   "on",  "that", "with", "as", "it", "at", "by",  "from"};
    std::uniform_int_distribution<int> pick(0, 15);
    std::string s;
    for (int i = 0; i < len; ++i) s += fmt::format("{}{}", i ? " " : "", kWords[pick(rng)]);
    return s;
  }
  std::uniform_int_distribution<int32_t> pick(0, tok->vocab_size() - 1);
  std::vector<int32_t> ids;
  while (static_cast<int>(ids.size()) < len) {
    const int32_t id = pick(rng);
    if (!tok->is_special(id)) ids.push_back(id);
  }
  for (int round = 0; round < 4; ++round) {  // decode/encode until it holds still
    std::vector<int32_t> again = tok->encode(tok->decode(ids, true), false);
    if (static_cast<int>(again.size()) > len) again.resize(len);
    if (again == ids) break;
    ids = std::move(again);
  }
  return tok->decode(ids, true);
}

Workload build_workload(const ServeArgs& a, loadgen::Api api, const Tokenizer* tok) {
  Workload w;
  if (a.dataset != "random") {
    const std::vector<serve::PromptLine> lines = serve::read_prompts_file(a.dataset);
    const int n = a.num_prompts.value_or(static_cast<int>(lines.size()));
    for (int i = 0; i < n; ++i) {  // in file order, cycling when --num-prompts asks for more
      const serve::PromptLine& line = lines[i % lines.size()];
      loadgen::Prompt p;
      p.max_tokens = a.random_output_len;
      p.fields = line.fields;
      p.fields.erase("prompt");
      p.fields.erase("messages");
      if (p.fields.contains("max_tokens")) p.max_tokens = p.fields["max_tokens"].get<int>();
      if (line.prompt) {
        p.text = *line.prompt;
        if (tok) p.expected_prompt_tokens = static_cast<int64_t>(tok->encode(*p.text).size());
      } else {
        p.messages = line.messages;
      }
      w.prompts.push_back(std::move(p));
    }
    w.prompt_kind = "file";
    return w;
  }
  const int n = a.num_prompts.value_or(1000);
  const bool ids = api == loadgen::Api::kCompletions && a.random_prompt != "text";
  CEILING_ENSURE(ids || a.random_prompt != "ids",
                 "bench serve: token-id prompts need /v1/completions (chat takes text)");
  if (ids) {
    const int32_t vocab = tok ? tok->vocab_size() : a.random_vocab_size;
    for (auto& p : loadgen::random_token_prompts(n, a.random_input_len, 0, vocab, a.seed)) {
      loadgen::Prompt q;
      q.ids = std::move(p);
      q.max_tokens = a.random_output_len;
      q.expected_prompt_tokens = a.random_input_len;
      w.prompts.push_back(std::move(q));
    }
    w.prompt_kind = "token ids";
    return w;
  }
  std::mt19937_64 rng(a.seed);
  for (int i = 0; i < n; ++i) {
    loadgen::Prompt q;
    q.text = random_text(tok, a.random_input_len, rng);
    q.max_tokens = a.random_output_len;
    q.expected_prompt_tokens =
        tok ? static_cast<int64_t>(tok->encode(*q.text).size()) : a.random_input_len;
    w.prompts.push_back(std::move(q));
  }
  w.prompt_kind = "text";
  return w;
}

void print_table(const loadgen::Metrics& m, const ServeArgs& a, double rate) {
  const auto row = [](std::string_view k, const std::string& v) {
    fmt::print("{:<40} {:<10}\n", k, v);
  };
  const auto f2 = [](double v) { return fmt::format("{:.2f}", v); };
  fmt::print("{:=^50}\n", " Serving Benchmark Result ");
  row("Successful requests:", std::to_string(m.completed));
  row("Failed requests:", std::to_string(m.failed));
  if (a.max_concurrency > 0) row("Maximum request concurrency:", std::to_string(a.max_concurrency));
  if (std::isfinite(rate)) row("Request rate configured (RPS):", f2(rate));
  row("Benchmark duration (s):", f2(m.duration));
  row("Total input tokens:", std::to_string(m.total_input_tokens));
  row("Total generated tokens:", std::to_string(m.total_output_tokens));
  row("Request throughput (req/s):", f2(m.request_throughput));
  row("Output token throughput (tok/s):", f2(m.output_throughput));
  row("Peak concurrent requests:", std::to_string(m.max_concurrent_requests));
  row("Total token throughput (tok/s):", f2(m.total_token_throughput));
  const std::tuple<const char*, const char*, const loadgen::Distribution*> dists[] = {
      {"TTFT", "Time to First Token", &m.ttft},
      {"TPOT", "Time per Output Token (excl. 1st token)", &m.tpot},
      {"ITL", "Inter-token Latency", &m.itl},
      {"E2EL", "End-to-end Latency", &m.e2el}};
  for (const auto& [name, header, d] : dists) {
    fmt::print("{:-^50}\n", header);
    row(fmt::format("Mean {} (ms):", name), f2(d->mean));
    row(fmt::format("Median {} (ms):", name), f2(d->median));
    row(fmt::format("P90 {} (ms):", name), f2(d->p90));
    row(fmt::format("P99 {} (ms):", name), f2(d->p99));
  }
  fmt::print("{}\n", std::string(50, '='));
}

int run_serve_bench(const ServeArgs& a) {
  const loadgen::Api api = loadgen::api_of_endpoint(a.endpoint);
  const double rate = parse_rate(a.request_rate);
  loadgen::RunConfig rc;
  rc.base = loadgen::parse_base_url(a.base_url);
  rc.endpoint = a.endpoint;
  rc.api = api;
  rc.api_key = a.api_key;
  if (rc.api_key.empty()) {
    if (const char* env = std::getenv("OPENAI_API_KEY")) rc.api_key = env;
  }
  rc.request_rate = rate;
  rc.max_concurrency = a.max_concurrency;
  rc.max_workers = a.max_workers;
  rc.seed = a.seed;
  rc.timeout_s = a.timeout_s;
  std::optional<Tokenizer> tok;
  if (!a.tokenizer.empty()) tok = Tokenizer::from_dir(a.tokenizer);
  std::string model = a.model;
  if (model.empty()) {
    loadgen::Connection probe(rc.base, rc.api_key, std::min(a.timeout_s, 30.0));
    model = loadgen::first_model(probe);
  }
  const Workload w = build_workload(a, api, tok ? &*tok : nullptr);
  std::vector<std::string> bodies;
  std::vector<int64_t> expected;
  for (const loadgen::Prompt& p : w.prompts) {
    bodies.push_back(loadgen::build_body(api, model, p, !a.no_ignore_eos));
    expected.push_back(p.expected_prompt_tokens);
  }
  fmt::print("[bench serve] {}{} model {}: {} requests ({}), rate {}, concurrency {}\n", a.base_url,
             a.endpoint, model, bodies.size(), w.prompt_kind, a.request_rate,
             a.max_concurrency > 0 ? std::to_string(a.max_concurrency) : "unlimited");
  if (a.num_warmups > 0) {  // the first prompt, at the same concurrency, before the clock
    loadgen::RunConfig warm = rc;
    warm.request_rate = std::numeric_limits<double>::infinity();
    const loadgen::RunOutput w0 =
        loadgen::run_load(warm, std::vector<std::string>(a.num_warmups, bodies[0]));
    const loadgen::Metrics wm = loadgen::compute_metrics(w0.results, {}, w0.duration_s);
    fmt::print("[bench serve] warm-up: {} requests, {} failed\n", a.num_warmups, wm.failed);
  }
  Progress progress("bench serve");
  rc.on_done = [&progress](int done, int total) {
    progress.update(static_cast<double>(done) / total, fmt::format("{}/{} requests", done, total));
  };
  const loadgen::RunOutput run = loadgen::run_load(rc, bodies);
  progress.done();
  const loadgen::Metrics m = loadgen::compute_metrics(run.results, expected, run.duration_s);
  print_table(m, a, rate);

  nlohmann::ordered_json j = {
      {"tool", "ceiling bench serve"},
      {"date", utc_now()},
      {"git_sha", git_sha()},
      {"backend", api == loadgen::Api::kChat ? "openai-chat" : "openai"},
      {"base_url", a.base_url},
      {"endpoint", a.endpoint},
      {"model_id", model},
      {"tokenizer",
       a.tokenizer.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(a.tokenizer)},
      {"dataset", a.dataset},
      {"prompt_kind", w.prompt_kind},
      {"num_prompts", bodies.size()},
      {"random_input_len", a.random_input_len},
      {"random_output_len", a.random_output_len},
      {"request_rate", std::isfinite(rate) ? nlohmann::ordered_json(rate) : "inf"},
      {"burstiness", 1.0},
      {"max_concurrency",
       a.max_concurrency > 0 ? nlohmann::ordered_json(a.max_concurrency) : nullptr},
      {"workers", run.workers},
      {"seed", a.seed},
      {"ignore_eos", !a.no_ignore_eos},
      {"num_warmups", a.num_warmups},
  };
  j.update(loadgen::metrics_json(m));
  nlohmann::ordered_json input_lens, output_lens, ttfts, itls, e2els, starts, errors;
  for (size_t i = 0; i < run.results.size(); ++i) {
    const loadgen::RequestResult& r = run.results[i];
    input_lens.push_back(r.usage_prompt_tokens >= 0 ? r.usage_prompt_tokens : expected[i]);
    output_lens.push_back(r.success ? r.output_tokens() : 0);
    ttfts.push_back(r.ttft_s);
    itls.push_back(r.itl_s);
    e2els.push_back(r.e2el_s);
    starts.push_back(r.start_s);
    errors.push_back(r.error);
  }
  j["input_lens"] = input_lens;
  j["output_lens"] = output_lens;
  j["ttfts"] = ttfts;
  j["itls"] = itls;
  j["e2els"] = e2els;
  j["start_times"] = starts;
  j["errors"] = errors;
  j["method"] =
      "as vllm bench serve: streamed requests, TTFT = send to first content chunk, ITL = gaps "
      "between content chunks, TPOT = (e2el - ttft) / (output_tokens - 1), output tokens from "
      "usage (else content chunks), tokens and latencies of successful requests only; times in "
      "seconds in the arrays, milliseconds in the *_ms fields";
  if (!a.out.empty()) {
    std::ofstream f(a.out);
    CEILING_ENSURE(f.good(), "bench serve: cannot write '{}'", a.out);
    f << j.dump(2) << "\n";
    CEILING_ENSURE(f.good(), "bench serve: writing '{}' failed", a.out);
  }
  if (m.completed == 0) {
    const std::string& first = run.results.empty() ? std::string() : run.results[0].error;
    fail("bench serve: all {} requests failed; the first: {}", run.results.size(), first);
  }
  return 0;
}

}  // namespace

std::function<int()> setup_bench_serve(CLI::App& sub) {
  auto a = std::make_shared<ServeArgs>();
  sub.add_option("--base-url", a->base_url, "server URL (default http://127.0.0.1:8000)");
  sub.add_option("--endpoint", a->endpoint, "/v1/completions (default) | /v1/chat/completions");
  sub.add_option("--model", a->model, "model name to send (default: the first of GET /v1/models)");
  sub.add_option("--dataset", a->dataset,
                 "random (default) | FILE.jsonl (a prompts file, as generate --prompts-file)");
  sub.add_option("--random-input-len", a->random_input_len, "random: prompt tokens (default 1024)")
      ->check(CLI::Range(1, 1 << 20));
  sub.add_option("--random-output-len", a->random_output_len,
                 "output tokens per request (default 128; a file line's max_tokens wins)")
      ->check(CLI::Range(1, 1 << 20));
  sub.add_option("--random-prompt", a->random_prompt,
                 "random: ids (token-id prompts, exact length; completions only) | text; default "
                 "ids for completions, text for chat")
      ->check(CLI::IsMember({"auto", "ids", "text"}));
  sub.add_option("--random-vocab-size", a->random_vocab_size,
                 "random ids without --tokenizer: drawn from [0, N) (default 256)")
      ->check(CLI::Range(1, 1 << 24));
  sub.add_option("--num-prompts", a->num_prompts, "requests (default 1000; a file: its lines)")
      ->check(CLI::Range(1, 1 << 24));
  sub.add_option("--request-rate", a->request_rate,
                 "requests/s, Poisson arrivals; inf (default): all at once");
  sub.add_option("--max-concurrency", a->max_concurrency,
                 "most requests in flight (default: no limit but --max-workers)")
      ->check(CLI::Range(1, 65536));
  sub.add_option("--max-workers", a->max_workers,
                 "client threads (one connection each) without --max-concurrency (default 1024)")
      ->check(CLI::Range(1, 65536));
  sub.add_option("--seed", a->seed, "seed of the prompts and the arrival schedule")->check(kU64);
  sub.add_option("--api-key", a->api_key, "bearer token (default: $OPENAI_API_KEY)");
  sub.add_option("--tokenizer", a->tokenizer,
                 "model directory whose tokenizer.json builds random text prompts and sizes "
                 "random ids (optional)");
  sub.add_option("--timeout", a->timeout_s, "seconds of silence before a request fails (6 h)")
      ->check(CLI::Range(0.001, 1e6));
  sub.add_option("--num-warmups", a->num_warmups,
                 "requests of the first prompt sent before the measured run (default 0)")
      ->check(CLI::Range(0, 1 << 20));
  sub.add_flag("--no-ignore-eos", a->no_ignore_eos, "do not send ignore_eos: true");
  sub.add_option("--out", a->out, "write the result JSON here");
  return [a] { return run_serve_bench(*a); };
}
#else
std::function<int()> setup_bench_serve(CLI::App& sub) {
  sub.allow_extras();
  return []() -> int { fail("bench serve: this ceiling was built without cpp-httplib"); };
}
#endif

}  // namespace ceiling::cli
