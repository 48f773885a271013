// `ceiling roofline`: predicts a model's step time on a GPU from its config and the GPU's ceilings,
// op by op, before anything runs (src/roofline, docs/roofline.md). With --rejoin, re-predicts the
// cases of `ceiling bench kernels` result files with the current per-kernel model instead.
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "ceiling/command.h"
#include "core/status.h"
#include "hw/gpu_spec.h"
#include "hw/measured.h"
#include "model/config.h"
#include "roofline/kernel_cost.h"
#include "roofline/model_cost.h"
#include "roofline/rejoin.h"
#include "roofline/report.h"
#include "roofline/throughput.h"

namespace ceiling::cli {
namespace {

struct RooflineArgs {
  std::string model;
  std::string gpu;
  std::string phase = "decode";
  int64_t batch = 1;
  int64_t context = 1024;
  std::string weight_dtype = "bf16";
  int group_size = 128;
  bool w8a8 = false;
  std::string kv_dtype = "bf16";
  int tp = 1;
  std::string ceilings = "datasheet";
  std::string ceilings_file;
  std::string graphs = "on";
  std::string format = "table";
  std::string sweep;
  std::string plot;
  bool list_gpus = false;
  bool list_models = false;
  std::vector<std::string> rejoin;
  // --throughput: the offline workload of `bench throughput` (roofline/throughput.h).
  bool throughput = false;
  roofline::ThroughputWorkload workload;
};

// The price of a throughput workload: concurrency from the KV capacity, decode and prefill steps.
int print_throughput(const ModelConfig& model, const roofline::GpuCeilings& gpu,
                     const roofline::Scenario& s, const RooflineArgs& a) {
  const roofline::ThroughputPrediction p = roofline::predict_throughput(model, gpu, a.workload, s);
  const roofline::ThroughputWorkload& w = a.workload;
  const nlohmann::json j = {{"model", model.name},
                            {"gpu", gpu.gpu_id},
                            {"num_prompts", w.num_prompts},
                            {"input_len", w.input_len},
                            {"output_len", w.output_len},
                            {"prefix_len", w.prefix_len},
                            {"kv_tokens", p.kv_tokens},
                            {"concurrency", p.concurrency},
                            {"concurrency_limit", p.concurrency_limit},
                            {"decode_step_ms", p.decode_step_s * 1e3},
                            {"decode_steps", p.decode_steps},
                            {"decode_s", p.decode_s},
                            {"prefill_s", p.prefill_s},
                            {"total_s", p.total_s},
                            {"output_tokens_per_s", p.output_tokens_per_s},
                            {"requests_per_s", p.requests_per_s},
                            {"total_tokens_per_s", p.total_tokens_per_s}};
  if (a.format == "json") {
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print(
      "{} on {}: {} requests x {} in ({} shared) / {} out\n"
      "  KV cache {} tokens -> concurrency {} (limited by {})\n"
      "  decode: {} steps of batch {} at context {} x {:.3f} ms = {:.2f} s\n"
      "  prefill: {:.2f} s\n"
      "  predicted: {:.2f} s, {:.1f} output tok/s, {:.2f} req/s, {:.1f} total tok/s\n",
      model.name, gpu.gpu_id, w.num_prompts, w.input_len, w.prefix_len, w.output_len, p.kv_tokens,
      p.concurrency, p.concurrency_limit, p.decode_steps, p.concurrency,
      w.input_len + w.output_len / 2, p.decode_step_s * 1e3, p.decode_s, p.prefill_s, p.total_s,
      p.output_tokens_per_s, p.requests_per_s, p.total_tokens_per_s);
  return 0;
}

int64_t parse_count(const std::string& s, const std::string& what) {
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != s.size()) fail("--sweep: '{}' is not an integer {}", s, what);
  return v;
}

// "batch=1,2,4" -> ("batch", {1, 2, 4}).
std::pair<std::string, std::vector<int64_t>> parse_sweep(const std::string& spec) {
  const auto eq = spec.find('=');
  if (eq == std::string::npos) fail("--sweep '{}': expected batch=LIST or context=LIST", spec);
  std::string var = spec.substr(0, eq);
  if (var != "batch" && var != "context")
    fail("--sweep '{}': can sweep batch or context, not '{}'", spec, var);
  std::vector<int64_t> values;
  std::string list = spec.substr(eq + 1);
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    values.push_back(parse_count(list.substr(start, comma - start), var));
    start = comma + 1;
  }
  if (values.size() > 4096) fail("--sweep '{}': at most 4096 points", var);
  return {var, values};
}

std::string shell_quote(const std::string& s) {
  std::string r = "'";
  for (char c : s) r += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return r + "'";
}

// Fails (one line) before any work when `out_png` cannot be written: a missing directory or a
// directory given as the file.
void check_plot_path(const std::string& out_png) {
  namespace fs = std::filesystem;
  const fs::path p(out_png);
  const fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    fail("--plot {}: directory '{}' does not exist (create it first)", out_png, dir.string());
  if (fs::is_directory(p, ec)) fail("--plot {}: is a directory, give a .png file name", out_png);
  if (access(dir.c_str(), W_OK) != 0)
    fail("--plot {}: directory '{}' is not writable", out_png, dir.string());
}

void run_plot(const nlohmann::json& data, const std::string& out_png) {
  auto script = hw::find_repo_file("scripts/plot_roofline.py");
  if (!script) fail("--plot: scripts/plot_roofline.py not found (run from the repository)");
  if (std::system("python3 -c 'import matplotlib' >/dev/null 2>&1") != 0)
    fail("--plot needs python3 with matplotlib (pip install matplotlib)");
  const auto tmp = std::filesystem::temp_directory_path() /
                   fmt::format("ceiling-roofline-{}.json", static_cast<long>(getpid()));
  {
    std::ofstream f(tmp);
    if (!f) fail("--plot: cannot write {}", tmp.string());
    f << data.dump();
  }
  const std::string cmd =
      fmt::format("python3 {} --input {} --output {}", shell_quote(script->string()),
                  shell_quote(tmp.string()), shell_quote(out_png));
  const int status = std::system(cmd.c_str());
  std::error_code ec;
  std::filesystem::remove(tmp, ec);
  // std::system returns a wait status: report the script's exit code (or its signal).
  if (status == -1) fail("--plot: could not start python3");
  if (WIFSIGNALED(status))
    fail("--plot: {} killed by signal {}", script->string(), WTERMSIG(status));
  if (WEXITSTATUS(status) != 0)
    fail("--plot: {} failed with exit code {}", script->string(), WEXITSTATUS(status));
  fmt::print(stderr, "wrote {}\n", out_png);
}

std::string pick_gpu(const std::string& requested) {
  if (!requested.empty()) return hw::gpu_by_id(requested).id;
  if (auto name = hw::local_device_name()) {
    if (auto id = hw::gpu_id_for_device_name(*name)) {
      fmt::print(stderr, "note: --gpu not given; using the local GPU '{}' ({})\n", *name, *id);
      return *id;
    }
    fmt::print(stderr, "note: local GPU '{}' is not in the table; using h100-sxm\n", *name);
    return "h100-sxm";
  }
  fmt::print(stderr, "note: --gpu not given and no local GPU detected; using h100-sxm\n");
  return "h100-sxm";
}

void list_gpus() {
  fmt::print("{:<15} {:<36} {:>5} {:>9} {:>10} {:>11} {:>10} {:>10}\n", "id", "name", "SMs",
             "memory", "HBM TB/s", "bf16 TFLOPS", "fp8", "NVLink GB/s");
  for (const auto& g : hw::gpu_specs())
    fmt::print("{:<15} {:<36} {:>5.0f} {:>6.0f} GiB {:>10.2f} {:>11.1f} {:>10.1f} {:>10.0f}\n",
               g.id, g.name, g.sm_count.value, g.memory_bytes.value / (1024.0 * 1024 * 1024),
               g.memory_bw.value / 1e12, g.bf16_flops.value / 1e12, g.fp8_flops.value / 1e12,
               g.nvlink_bw.value / 1e9);
  fmt::print(
      "\nDense tensor rates (no sparsity), FP32 accumulate; sources: src/hw/gpu_table.cpp, "
      "docs/roofline.md.\n");
}

void list_models() {
  fmt::print("{:<15} {:>6} {:>7} {:>6} {:>6} {:>5} {:>5} {:>8} {:>9}\n", "preset", "layers",
             "hidden", "heads", "kv", "D", "I/H", "vocab", "params");
  for (const auto& n : preset_names()) {
    const ModelConfig m = *find_preset(n);
    fmt::print("{:<15} {:>6} {:>7} {:>6} {:>6} {:>5} {:>5.2f} {:>8} {:>8.2f}B\n", n, m.num_layers,
               m.hidden_size, m.num_heads, m.num_kv_heads, m.head_dim,
               static_cast<double>(m.intermediate_size) / m.hidden_size, m.vocab_size,
               m.num_params() / 1e9);
  }
  fmt::print("\nOr pass a path to a config.json or a Hugging Face model directory.\n");
}

int run(const RooflineArgs& a) {
  if (a.list_gpus) {
    list_gpus();
    return 0;
  }
  if (a.list_models) {
    list_models();
    return 0;
  }
  if (!a.rejoin.empty()) {
    if (a.format != "table" && a.format != "json")
      fail("--rejoin prints a table or json (got --format '{}')", a.format);
    std::vector<roofline::RejoinRun> runs;
    for (const auto& f : a.rejoin) runs.push_back(roofline::load_rejoin_run(f));
    if (a.format == "json")
      fmt::print("{}\n", roofline::rejoin_json(runs).dump(2));
    else
      fmt::print("{}", roofline::rejoin_table(runs));
    return 0;
  }
  if (a.model.empty()) fail("--model is required (a preset name, see --list-models, or a path)");
  if (a.format != "table" && a.format != "json" && a.format != "csv")
    fail("--format must be table, json or csv (got '{}')", a.format);
  if (a.graphs != "on" && a.graphs != "off")
    fail("--graphs must be on or off (got '{}')", a.graphs);
  if (a.ceilings != "datasheet" && a.ceilings != "measured")
    fail("--ceilings must be datasheet or measured (got '{}')", a.ceilings);

  if (!a.plot.empty()) check_plot_path(a.plot);
  const ModelConfig model = resolve_model(a.model);
  roofline::Scenario s;
  s.phase = roofline::parse_phase(a.phase);
  s.batch = a.batch;
  s.context = a.context;
  s.weights = roofline::parse_weight_dtype(a.weight_dtype);
  s.group_size = a.group_size;
  s.w8a8 = a.w8a8;
  if (s.w8a8 && s.weights != roofline::WeightDtype::kFP8 &&
      s.weights != roofline::WeightDtype::kINT8)
    fail("--w8a8 applies to fp8 or int8 weights (got {})", a.weight_dtype);
  s.kv_dtype = roofline::parse_kv_dtype(a.kv_dtype);
  s.tp = a.tp;
  s.cuda_graphs = a.graphs == "on";

  const std::string gpu_id = pick_gpu(a.gpu);
  const roofline::GpuCeilings gpu = !a.ceilings_file.empty()
                                        ? roofline::ceilings_from_file(gpu_id, a.ceilings_file)
                                        : roofline::ceilings_for(gpu_id, a.ceilings == "measured");

  if (a.throughput) return print_throughput(model, gpu, s, a);
  if (a.sweep.empty()) {
    const roofline::StepReport r = roofline::predict_step(model, gpu, s);
    const nlohmann::json j = roofline::report_json(r);
    if (a.format == "json")
      fmt::print("{}\n", j.dump(2));
    else if (a.format == "csv")
      fmt::print("{}", roofline::report_csv(r));
    else
      fmt::print("{}", roofline::report_table(r));
    if (!a.plot.empty()) run_plot(j, a.plot);
    return 0;
  }
  const auto [var, values] = parse_sweep(a.sweep);
  std::vector<roofline::StepReport> reports;
  nlohmann::json arr = nlohmann::json::array();
  for (int64_t v : values) {
    roofline::Scenario p = s;
    (var == "batch" ? p.batch : p.context) = v;
    reports.push_back(roofline::predict_step(model, gpu, p));
    arr.push_back(roofline::report_json(reports.back()));
  }
  if (a.format == "json")
    fmt::print("{}\n", arr.dump(2));
  else if (a.format == "csv")
    fmt::print("{}", roofline::sweep_csv(reports));
  else
    fmt::print("{}", roofline::sweep_table(reports, var));
  if (!a.plot.empty()) run_plot({{"sweep", var}, {"points", arr}}, a.plot);
  return 0;
}

std::function<int()> setup(CLI::App& sub) {
  auto a = std::make_shared<RooflineArgs>();
  sub.add_option("--model", a->model,
                 "preset name (--list-models) or path to config.json / model dir");
  sub.add_option("--gpu", a->gpu, "GPU id (--list-gpus); default: the local GPU, else h100-sxm");
  sub.add_option("--phase", a->phase, "prefill | decode (default decode)");
  sub.add_option("--batch", a->batch, "sequences in the step (default 1)");
  sub.add_option("--context", a->context,
                 "prefill: tokens per sequence; decode: tokens already cached (default 1024)");
  sub.add_option("--weight-dtype", a->weight_dtype, "bf16 | fp8 | int8 | int4 (default bf16)");
  sub.add_option("--group-size", a->group_size, "int4 quantization group size (default 128)");
  sub.add_flag("--w8a8", a->w8a8, "fp8/int8 weights compute in fp8/int8 (default: bf16 math)");
  sub.add_option("--kv-cache-dtype", a->kv_dtype, "bf16 | fp8 (default bf16)");
  sub.add_option("--tensor-parallel-size,--tp", a->tp, "tensor-parallel degree (default 1)");
  sub.add_option("--ceilings", a->ceilings, "datasheet | measured (data/ceilings/<gpu>.json)");
  sub.add_option("--ceilings-file", a->ceilings_file, "measured ceilings from this file");
  sub.add_option("--graphs", a->graphs, "on | off: CUDA graphs or eager launches (default on)");
  sub.add_option("--format", a->format, "table | json | csv (default table)");
  sub.add_option("--sweep", a->sweep, "batch=1,2,4,... or context=512,1024,...");
  sub.add_option("--plot", a->plot, "write a roofline chart (PNG) via scripts/plot_roofline.py");
  sub.add_flag("--list-gpus", a->list_gpus, "list the GPUs with their datasheet ceilings");
  sub.add_flag("--list-models", a->list_models, "list the model presets");
  sub.add_option("--rejoin", a->rejoin,
                 "re-predict the cases of `ceiling bench kernels` result files (FILE.json ...) "
                 "with the current kernel model; table or json")
      ->expected(1, -1);
  sub.add_flag("--throughput", a->throughput,
               "price the offline workload of `bench throughput` (--num-prompts, --input-len, "
               "--output-len, --prefix-len, --max-num-seqs, --max-num-batched-tokens, --kv-tokens)");
  sub.add_option("--num-prompts", a->workload.num_prompts, "--throughput: requests (1000)")
      ->check(CLI::Range(1, 1 << 24));
  sub.add_option("--input-len", a->workload.input_len, "--throughput: prompt tokens (1024)")
      ->check(CLI::Range(1, 1 << 24));
  sub.add_option("--output-len", a->workload.output_len, "--throughput: output tokens (128)")
      ->check(CLI::Range(1, 1 << 24));
  sub.add_option("--prefix-len", a->workload.prefix_len,
                 "--throughput: prompt tokens shared by every request (0)")
      ->check(CLI::Range(0, 1 << 24));
  sub.add_option("--max-num-seqs", a->workload.max_num_seqs, "--throughput: sequence cap (256)")
      ->check(CLI::Range(1, 65536));
  sub.add_option("--max-num-batched-tokens", a->workload.max_num_batched_tokens,
                 "--throughput: tokens per step (8192)")
      ->check(CLI::Range(1, 1 << 20));
  sub.add_option("--kv-tokens", a->workload.kv_tokens,
                 "--throughput: KV cache capacity in tokens (default: the memory model's)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  return [a] { return run(*a); };
}

CEILING_COMMAND("roofline", "predict a model's step time on a GPU, op by op (roofline)", setup, 20);

}  // namespace
}  // namespace ceiling::cli
