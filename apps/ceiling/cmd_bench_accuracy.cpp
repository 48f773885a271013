// `ceiling bench accuracy`: what low precision costs in accuracy, on the CPU reference: the
// checkpoint as it is (the reference), fp8 and int4 weights quantized on load, an fp8 KV cache,
// and fp8 weights with an fp8 KV cache, all reading the same windows of a text; perplexity, mean
// KL divergence of each next-token distribution from the reference's, top-1 agreement
// (engine/accuracy.h). The result JSON is rendered into docs/results.md by bench/render_results.py.
#include <fmt/format.h>

#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "ceiling/command.h"
#include "ceiling/progress.h"
#include "core/file_read.h"
#include "core/status.h"
#include "engine/accuracy.h"
#include "engine/cpu_ops.h"
#include "model/weights.h"
#include "tokenizer/tokenizer.h"

namespace ceiling::cli {

namespace {

constexpr uint64_t kMaxTextBytes = 64u << 20;

struct AccuracyArgs {
  std::string model, text, out;
  std::string variants = "ref,fp8,int4,kv-fp8,fp8+kv-fp8";
  int window = 1024, chunk = 256, threads = 0, int4_group_size = 128;
  int64_t max_tokens = 20480;
};

// "fp8+kv-fp8" -> weights "fp8", fp8 KV; "ref" is the checkpoint as it is.
struct VariantSpec {
  std::string name, weights;  // weights: "" (as the checkpoint), "fp8", "int4"
  bool fp8_kv = false;
};

VariantSpec parse_variant(const std::string& s) {
  VariantSpec v{s, "", false};
  std::string w = s;
  if (const size_t plus = s.find('+'); plus != std::string::npos) {
    CEILING_ENSURE(s.substr(plus + 1) == "kv-fp8", "variant '{}': only +kv-fp8 may follow", s);
    w = s.substr(0, plus);
    v.fp8_kv = true;
  }
  if (w == "kv-fp8") {
    v.fp8_kv = true;
  } else if (w == "fp8" || w == "int4") {
    v.weights = w;
  } else {
    CEILING_ENSURE(w == "ref", "variant '{}': unknown (ref, fp8, int4, kv-fp8, X+kv-fp8)", s);
  }
  return v;
}

// Projections per int4 group size ("128": n, ...), for the record.
nlohmann::json group_sizes(const ModelWeights& w) {
  std::map<std::string, int> n;
  for (const LayerWeights& l : w.layers)
    for (const QuantLinear& q : l.quant)
      if (q.format == WeightFormat::kInt4) ++n[std::to_string(q.group_size)];
  return n;
}

int run(const AccuracyArgs& a) {
  std::vector<VariantSpec> specs;
  std::stringstream ss(a.variants);
  for (std::string item; std::getline(ss, item, ',');) specs.push_back(parse_variant(item));
  CEILING_ENSURE(!specs.empty() && specs[0].weights.empty() && !specs[0].fp8_kv,
                 "--variants must start with ref (the reference the others are compared with)");

  const Tokenizer tok = Tokenizer::from_dir(a.model);
  const std::string text = read_regular_file(a.text, kMaxTextBytes);
  const std::vector<int32_t> ids = tok.encode(text, false);

  std::map<std::string, std::unique_ptr<Model>> models;  // by weights format
  std::vector<std::unique_ptr<engine::CpuOps>> ops;
  std::vector<engine::AccuracyVariant> variants;
  for (const VariantSpec& v : specs) {
    auto& m = models[v.weights];
    if (!m) {
      const auto t0 = std::chrono::steady_clock::now();
      LoadOptions lo;
      lo.quantization = v.weights;
      lo.int4_group_size = a.int4_group_size;
      m = std::make_unique<Model>(load_model(a.model, {}, lo));
      fmt::print(stderr, "loaded {} ({}) in {:.1f} s\n", a.model,
                 v.weights.empty() ? "as stored" : v.weights,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    engine::CpuOpsOptions o;
    o.n_threads = a.threads;
    o.fp8_kv_cache = v.fp8_kv;
    ops.push_back(std::make_unique<engine::CpuOps>(o));
    ops.back()->upload(m->config, m->weights);
    variants.push_back({v.name, ops.back().get()});
  }
  const std::string ref_name = std::string(dtype_name(models[""]->config.dtype));

  engine::AccuracyOptions ao;
  ao.window = a.window;
  ao.chunk = a.chunk;
  ao.max_tokens = a.max_tokens;
  const Model& ref = *models[""];
  const auto t0 = std::chrono::steady_clock::now();
  // The result so far: written after every window, so a long run always leaves a valid file.
  auto result = [&](std::span<const engine::AccuracyStats> stats, int done, int total) {
    nlohmann::json rows = nlohmann::json::array();
    for (size_t i = 0; i < specs.size(); ++i) {
      const VariantSpec& v = specs[i];
      const engine::AccuracyStats& s = stats[i];
      nlohmann::json r = {{"variant", i == 0 ? ref_name : v.name},
                          {"weights", v.weights.empty() ? ref_name : v.weights},
                          {"kv_cache_dtype", v.fp8_kv ? "fp8" : "f32"},
                          {"positions", s.positions},
                          {"perplexity", s.perplexity()},
                          {"mean_nll", s.positions ? s.sum_nll / s.positions : 0.0},
                          {"mean_kl", s.mean_kl()},
                          {"max_kl", s.max_kl},
                          {"top1_agreement", s.top1()},
                          {"seconds", s.seconds}};
      if (v.weights == "int4") r["int4_group_sizes"] = group_sizes(models["int4"]->weights);
      rows.push_back(r);
    }
    return nlohmann::json{
        {"tool", "ceiling bench accuracy"},
        {"device", "cpu"},
        {"model", ref.config.name},
        {"model_dtype", ref_name},
        {"text", a.text},
        {"text_bytes", text.size()},
        {"text_tokens", ids.size()},
        {"tokens_used", int64_t{done} * a.window},
        {"windows_done", done},
        {"windows", total},
        {"complete", done == total},
        {"window", a.window},
        {"chunk", a.chunk},
        {"threads", a.threads},
        {"hardware_threads", std::thread::hardware_concurrency()},
        {"int4_group_size", a.int4_group_size},
        {"wall_seconds",
         std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()},
        {"git_sha", git_sha()},
        {"date", utc_now()},
        {"variants", rows}};
  };
  auto write = [&](const nlohmann::json& j) {
    if (a.out.empty()) return;
    std::ofstream f(a.out);
    CEILING_ENSURE(f.good(), "cannot write {}", a.out);
    f << j.dump(2) << "\n";
  };
  std::vector<engine::AccuracyStats> stats;
  {
    Progress progress("accuracy");
    stats = engine::measure_accuracy(
        variants, ids, ao, [&](int done, int total, std::span<const engine::AccuracyStats> st) {
          progress.update(static_cast<double>(done) / total,
                          fmt::format("window {}/{}", done, total));
          write(result(st, done, total));
        });
  }
  fmt::print("{:<14} {:>8} {:>12} {:>10} {:>10} {:>8}\n", "variant", "ppl", "mean KL", "max KL",
             "top-1", "s");
  for (size_t i = 0; i < specs.size(); ++i) {
    const engine::AccuracyStats& s = stats[i];
    fmt::print("{:<14} {:>8.4f} {:>12.6f} {:>10.4f} {:>10.4f} {:>8.1f}\n",
               i == 0 ? ref_name : specs[i].name, s.perplexity(), s.mean_kl(), s.max_kl, s.top1(),
               s.seconds);
  }
  if (!a.out.empty()) fmt::print("wrote {}\n", a.out);
  return 0;
}

}  // namespace

std::function<int()> setup_bench_accuracy(CLI::App& sub) {
  auto a = std::make_shared<AccuracyArgs>();
  sub.add_option("--model", a->model, "model directory (Hugging Face layout)")->required();
  sub.add_option("--text", a->text, "UTF-8 text file to score (e.g. data/eval/kjv-luke.txt)")
      ->required();
  sub.add_option("--variants", a->variants,
                 "comma-separated; the first must be ref (the checkpoint as stored): ref, fp8, "
                 "int4, kv-fp8, fp8+kv-fp8, int4+kv-fp8 (default: ref,fp8,int4,kv-fp8,fp8+kv-fp8)");
  sub.add_option("--max-tokens", a->max_tokens,
                 "tokens of the text to score, in whole windows (default 20480; 0: all)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  sub.add_option("--window", a->window, "tokens per window (default 1024)")
      ->check(CLI::Range(2, 1 << 16));
  sub.add_option("--chunk", a->chunk, "tokens per forward step (default 256)")
      ->check(CLI::Range(1, 1 << 16));
  sub.add_option("--int4-group-size", a->int4_group_size,
                 "int4 group (default 128; 64, then a whole row, where it does not divide K)")
      ->check(CLI::Range(1, 1 << 20));
  sub.add_option("--threads", a->threads, "CPU threads (default 0: all cores)")
      ->check(CLI::Range(0, 1024));
  sub.add_option("--out", a->out, "write the result JSON here (bench/results/accuracy-cpu-...)");
  return [a] { return run(*a); };
}

}  // namespace ceiling::cli
