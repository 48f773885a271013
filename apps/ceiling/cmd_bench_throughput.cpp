// `ceiling bench throughput`: offline throughput of the engine core (as `vllm bench
// throughput`): every request submitted at once, EOS ignored, stepped to the end; the roofline's
// prediction of the same workload (roofline/throughput.h) beside the measurement on a GPU.
// Field names of the result JSON are an interface (issue: the batch-first engine).
#include <fmt/format.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ceiling/command.h"
#include "ceiling/engine_flags.h"
#include "core/status.h"
#include "roofline/throughput.h"
#include "serve/prompt.h"
#include "serve/prompts_file.h"
#include "serve/throughput.h"
#include "tokenizer/template/chat_template.h"
#if defined(HAVE_CEILING_ENGINE_CUDA) && defined(HAVE_CEILING_BENCH)
#include "bench/ceilings.h"
#include "bench/run_info.h"
#include "engine/cuda/cuda_ops.h"
#endif

namespace ceiling::cli {
namespace {

struct ThroughputArgs {
  std::string model, out, dataset = "random";
  int num_prompts = 1000, input_len = 1024, output_len = 128;
  std::optional<int> prefix_len;
  uint64_t seed = 0;
  bool quick_ceilings = false, no_warmup = false, trace_prefill_step = false;
  EngineFlags engine;
};

serve::Workload file_workload(const ThroughputArgs& a, const Model& m) {
  const Tokenizer tok = Tokenizer::from_dir(a.model);
  std::optional<ChatTemplate> tmpl;
  serve::Workload w;
  for (const serve::PromptLine& line : serve::read_prompts_file(a.dataset)) {
    const std::string where = fmt::format("{}:{}", a.dataset, line.line);
    serve::RequestParams p = serve::default_params(m.generation);
    p.max_tokens = a.output_len;
    p.sampling.temperature = 0;
    serve::apply_request_fields(p, line.fields, where);
    p.ignore_eos = true;
    p.stop.clear();
    if (line.prompt) {
      w.prompts.push_back(serve::encode_text(tok, *line.prompt));
    } else {
      if (!tmpl) tmpl = ChatTemplate::from_model_dir(a.model, false);
      w.prompts.push_back(serve::encode_chat(tok, *tmpl, line.messages));
    }
    CEILING_ENSURE(!w.prompts.back().empty(), "{}: the prompt encodes to no tokens", where);
    w.params.push_back(p);
  }
  return w;
}

int run_throughput_bench(const ThroughputArgs& a) {
  LoadedModel lm = load_on_device(a.model, a.engine);
  const ModelConfig& mc = lm.model.config;
  const bool random = a.dataset == "random" || a.dataset == "prefix-shared";
  const int prefix = a.dataset == "prefix-shared"
                         ? a.prefix_len.value_or(std::max(a.input_len - 128, a.input_len / 2))
                         : 0;
  CEILING_ENSURE(!a.prefix_len || a.dataset == "prefix-shared",
                 "bench throughput: --prefix-len needs --dataset prefix-shared");
  serve::Workload w = random ? serve::random_workload(mc.vocab_size, a.num_prompts, a.input_len,
                                                      a.output_len, prefix, a.seed)
                             : file_workload(a, lm.model);
  int64_t max_need = 1, in_tokens = 0, out_tokens = 0;
  for (size_t i = 0; i < w.prompts.size(); ++i) {
    max_need = std::max<int64_t>(max_need, w.prompts[i].size() + w.params[i].max_tokens);
    in_tokens += static_cast<int64_t>(w.prompts[i].size());
    out_tokens += w.params[i].max_tokens;
  }
  CEILING_ENSURE(!a.trace_prefill_step || (lm.primary().name() != "cpu" && !lm.tp),
                 "bench throughput --kernel-trace-prefill-step: one GPU only (--device cuda, "
                 "--tensor-parallel-size 1)");
  // Before the engine and the warm-up: CUPTI learns kernel names as their modules load.
  std::unique_ptr<hw::KernelTracer> tracer;
  if (a.trace_prefill_step) tracer = hw::KernelTracer::start();
  serve::EngineConfig ec = engine_config(a.engine);
  if (!a.engine.max_model_len) ec.max_model_len = static_cast<int>(max_need);
  const std::unique_ptr<serve::Engine> engine_ptr = lm.make_engine(ec);
  serve::Engine& engine = *engine_ptr;
  fmt::print(stderr, "[bench throughput] {}\n", engine.kv_summary());

  nlohmann::json run_info = nlohmann::json::object();
  nlohmann::json predicted = nullptr, prediction = nullptr, ceilings = nullptr;
  nlohmann::json gemm_autotune = nullptr;
  std::string gpu = lm.primary().name() == "cpu" ? "cpu" : "unknown";
#if defined(HAVE_CEILING_ENGINE_CUDA) && defined(HAVE_CEILING_BENCH)
  if (auto* cuda = dynamic_cast<engine::CudaOps*>(&lm.primary())) {
    const bench::MeasuredCeilings ceil = bench::measure_ceilings(
        cuda->stream(), a.quick_ceilings ? size_t{1} << 30 : size_t{4} << 30);
    const nlohmann::json dev = bench::device_info();
    gpu = dev.value("gpu", "unknown");
    roofline::ThroughputWorkload tw;
    tw.num_prompts = static_cast<int64_t>(w.prompts.size());
    tw.input_len = in_tokens / tw.num_prompts;
    tw.output_len = out_tokens / tw.num_prompts;
    tw.prefix_len = engine.kv().prefix_caching() ? prefix : 0;
    tw.kv_tokens = int64_t{engine.kv().num_blocks()} * engine.kv().block_size();
    tw.max_num_seqs = engine.config().max_num_seqs;
    tw.max_num_batched_tokens = engine.config().max_num_batched_tokens;
    roofline::Scenario base;
    base.cuda_graphs = !a.engine.enforce_eager;
    base.tp = a.engine.tensor_parallel_size;
    base.kv_dtype = cuda->kv_dtype();  // an fp8 cache: half the K/V bytes a step reads
    // The projections' format: fp8 steps of this workload (≥ kFp8ActRowsMin rows) run W8A8.
    const WeightFormat wf = lm.model.weights.quant_format();
    base.weights = wf == WeightFormat::kFp8    ? roofline::WeightDtype::kFP8
                   : wf == WeightFormat::kInt4 ? roofline::WeightDtype::kINT4
                                               : roofline::WeightDtype::kBF16;
    base.w8a8 = wf == WeightFormat::kFp8;
    if (wf == WeightFormat::kInt4) {
      base.group_size = 0;
      for (const QuantLinear& q : lm.model.weights.layers.at(0).quant)
        if (q.quantized()) base.group_size = std::max(base.group_size, q.group_size);
    }
    const roofline::ThroughputPrediction p =
        roofline::predict_throughput(mc, bench::gpu_ceilings(dev, ceil), tw, base);
    predicted = p.output_tokens_per_s;
    prediction = {{"concurrency", p.concurrency},   {"concurrency_limit", p.concurrency_limit},
                  {"kv_tokens", p.kv_tokens},       {"decode_step_ms", p.decode_step_s * 1e3},
                  {"decode_steps", p.decode_steps}, {"decode_s", p.decode_s},
                  {"prefill_s", p.prefill_s},       {"total_s", p.total_s}};
    ceilings = ceil.to_json();
    gemm_autotune = cuda->gemm_autotune();
    run_info = {{"device", dev},
                {"driver", dev.value("driver", "unknown")},
                {"clocks", bench::clocks()},
                {"git_sha", bench::git_sha()}};
  }
#endif
  if (!a.no_warmup) {  // graph capture, cuBLASLt plans and clocks, on other prompts
    const int n = std::min<int>(engine.config().max_num_seqs, static_cast<int>(w.prompts.size()));
    // Never longer than the run's own requests: max_model_len may be just what they need.
    serve::Workload warm = serve::random_workload(mc.vocab_size, n, std::min<int>(a.input_len, 64),
                                                  std::min(a.output_len, 8), 0, a.seed + 0x5eed);
    serve::run_throughput(engine, warm);
  }
  if (tracer) tracer->pause();  // detached: untraced steps cost the host nothing more
  const serve::ThroughputRun r = serve::run_throughput(engine, w, tracer.get());
  const auto step_times = [](const serve::StepTimes& t) {
    return nlohmann::json{{"steps", t.steps}, {"seconds", t.seconds}, {"tokens", t.tokens}};
  };
  nlohmann::json prefill_trace = nullptr;
  if (r.prefill_step_trace)
    prefill_trace = {{"step", r.traced_step},
                     {"seqs", r.traced_seqs},
                     {"tokens", r.traced_tokens},
                     {"trace", r.prefill_step_trace->to_json()}};
  const double out_tps = r.output_tokens / r.elapsed_s;
  nlohmann::json j = {
      {"tool", "ceiling bench throughput"},
      {"model", mc.name},
      {"model_dir", a.model},
      {"gpu", gpu},
      {"dataset", a.dataset},
      {"num_prompts", r.num_requests},
      {"input_len", in_tokens / static_cast<int64_t>(w.prompts.size())},
      {"output_len", out_tokens / static_cast<int64_t>(w.prompts.size())},
      {"prefix_len", prefix},
      {"weights", bench_weights_name(lm.model.weights.quant_format())},
      {"kv_cache_dtype", lm.primary().kv_dtype() == DType::kF8E4M3 ? "fp8" : "bf16"},
      {"elapsed_s", r.elapsed_s},
      {"requests_per_s", r.num_requests / r.elapsed_s},
      {"output_tokens_per_s", out_tps},
      {"total_tokens_per_s", (r.prompt_tokens + r.output_tokens) / r.elapsed_s},
      {"mean_batch_size", r.mean_batch_size},
      {"steps", r.steps},
      {"preemptions", r.preemptions},
      {"prefix_cache_hit_rate", r.prefix_cache_hit_rate},
      {"peak_kv_usage", r.peak_kv_usage},
      {"predicted_output_tokens_per_s", predicted},
      {"prediction_gap", predicted.is_null() ? nlohmann::json(nullptr)
                                             : nlohmann::json(predicted.get<double>() / out_tps)},
      {"prediction", prediction},
      {"outputs_hash", r.outputs_hash},
      {"host_phases_s",
       {{"schedule", r.schedule_s},
        {"build_step_batch", r.build_s},
        {"forward_call", r.forward_s},
        {"sample_wait", r.sample_s},
        {"outputs", r.output_s}}},
      // Host clock of each step() by kind: every sequence decoding, or prefill chunks carried.
      {"step_times_s",
       {{"decode_only", step_times(r.decode_steps)},
        {"with_prefill", step_times(r.prefill_steps)}}},
      // --kernel-trace-prefill-step: one steady-state step carrying prefill, kernel by kernel
      // (hw/kernel_trace.h; eager, so CUPTI's launch cost may add idle gaps between kernels).
      {"prefill_step_trace", prefill_trace},
      {"prompt_tokens", r.prompt_tokens},
      {"output_tokens", r.output_tokens},
      {"engine",
       {{"device", lm.device_name()},
        {"max_model_len", engine.config().max_model_len},
        {"max_num_seqs", engine.config().max_num_seqs},
        {"max_num_batched_tokens", engine.config().max_num_batched_tokens},
        {"block_size", engine.config().block_size},
        {"num_kv_blocks", engine.kv().num_blocks()},
        {"prefix_caching", engine.kv().prefix_caching()},
        {"cuda_graphs", !a.engine.enforce_eager},
        {"gemm_autotune", gemm_autotune}}},
      {"ceilings", ceilings},
      {"timestamp", utc_now()},
      {"seed", a.seed},
      {"method",
       "all requests submitted at once, greedy, EOS ignored; elapsed: host clock from the first "
       "submission until the last request finished (a short warm-up workload on other prompts "
       "runs first); predicted: roofline/throughput.h at this run's measured ceilings and KV "
       "capacity"},
  };
  j.update(run_info);
#if defined(HAVE_CEILING_ENGINE_CUDA) && defined(HAVE_CEILING_BENCH)
  if (auto* cuda = dynamic_cast<engine::CudaOps*>(&lm.primary()))
    j["gemm_tuning"] = cuda->gemm_tune_log();  // the timed run tunes the buckets it reaches
#endif
  fmt::print("{} on {}: {} prompts x {} in / {} out ({})\n", mc.name, gpu, r.num_requests,
             j["input_len"].get<int64_t>(), j["output_len"].get<int64_t>(), a.dataset);
  fmt::print(
      "  {:.2f} s | {:.2f} req/s | {:.1f} output tok/s | {:.1f} total tok/s | mean batch {:.1f} "
      "| preemptions {} | prefix hit rate {:.3f} | peak KV {:.1f}%\n",
      r.elapsed_s, r.num_requests / r.elapsed_s, out_tps,
      (r.prompt_tokens + r.output_tokens) / r.elapsed_s, r.mean_batch_size, r.preemptions,
      r.prefix_cache_hit_rate, 100 * r.peak_kv_usage);
  fmt::print(
      "  host: schedule {:.2f} s, StepBatch {:.2f} s, forward call {:.2f} s, outputs {:.2f} s; "
      "sampling incl. device wait {:.2f} s\n",
      r.schedule_s, r.build_s, r.forward_s, r.output_s, r.sample_s);
  fmt::print(
      "  steps: {} decode-only in {:.2f} s ({:.2f} ms each); {} with prefill in {:.2f} s ({:.2f} "
      "ms each, {:.0f} tokens each)\n",
      r.decode_steps.steps, r.decode_steps.seconds,
      1e3 * r.decode_steps.seconds / std::max<int64_t>(r.decode_steps.steps, 1),
      r.prefill_steps.steps, r.prefill_steps.seconds,
      1e3 * r.prefill_steps.seconds / std::max<int64_t>(r.prefill_steps.steps, 1),
      static_cast<double>(r.prefill_steps.tokens) / std::max<int64_t>(r.prefill_steps.steps, 1));
  if (r.prefill_step_trace)
    fmt::print("  traced step {} ({} sequences, {} tokens):\n{}", r.traced_step, r.traced_seqs,
               r.traced_tokens, hw::trace_table(*r.prefill_step_trace));
  else if (tracer)
    fmt::print("  --kernel-trace-prefill-step: no steady-state step with prefill was found\n");
  if (!predicted.is_null())
    fmt::print(
        "  predicted {:.1f} output tok/s (concurrency {}, limited by {}); measured/predicted "
        "{:.3f}\n",
        predicted.get<double>(), prediction["concurrency"].get<int64_t>(),
        prediction["concurrency_limit"].get<std::string>(), out_tps / predicted.get<double>());
  if (!a.out.empty()) {
    std::ofstream f(a.out);
    CEILING_ENSURE(f.good(), "bench throughput: cannot write '{}'", a.out);
    f << j.dump(2) << "\n";
    CEILING_ENSURE(f.good(), "bench throughput: writing '{}' failed", a.out);
  }
  return 0;
}

}  // namespace

std::function<int()> setup_bench_throughput(CLI::App& sub) {
  auto a = std::make_shared<ThroughputArgs>();
  sub.add_option("--model", a->model, "Hugging Face model directory")->required();
  sub.add_option("--num-prompts", a->num_prompts, "requests (default 1000)")
      ->check(CLI::Range(1, 1 << 20));
  sub.add_option("--input-len", a->input_len, "prompt tokens per request (default 1024)")
      ->check(CLI::Range(1, 1 << 20));
  sub.add_option("--output-len", a->output_len, "output tokens per request (default 128)")
      ->check(CLI::Range(1, 1 << 20));
  sub.add_option("--dataset", a->dataset,
                 "random | prefix-shared | FILE.jsonl (prompts file, as generate --prompts-file)");
  sub.add_option("--prefix-len", a->prefix_len,
                 "prefix-shared: tokens of the shared prefix (default input-len - 128)")
      ->check(CLI::Range(0, 1 << 20));
  sub.add_option("--seed", a->seed, "seed of the random prompts");
  sub.add_option("--out", a->out, "write the result JSON here");
  sub.add_flag("--quick-ceilings", a->quick_ceilings, "measure read bandwidth over 1 GiB, not 4");
  sub.add_flag("--no-warmup", a->no_warmup, "skip the warm-up workload");
  sub.add_flag("--kernel-trace-prefill-step", a->trace_prefill_step,
               "trace the kernels of one steady-state step that carries prefill chunks (CUPTI; "
               "JSON field prefill_step_trace; one GPU)");
  add_engine_flags(sub, a->engine);
  add_tensor_parallel_flags(sub, a->engine);
  return [a] { return run_throughput_bench(*a); };
}

}  // namespace ceiling::cli
