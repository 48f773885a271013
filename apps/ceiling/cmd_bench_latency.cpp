// `ceiling bench latency`: end-to-end decode latency of a model directory on the GPU — a prefill
// of B random prompts of N tokens, then M decode steps (greedy), timed with CUDA events — against
// the roofline floor: the bytes a decode step must move over the read bandwidth measured in the
// same process. Prints a summary and writes the result JSON (field names are an interface:
// bench/run_latency_on_gpu.sh and bench/hf_baseline.py fill baseline_tokens_per_s).
// The child's setup function is called from the kChildren table of cmd_bench.cpp.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "ceiling/command.h"
#include "core/status.h"
#if defined(HAVE_CEILING_ENGINE_CUDA) && defined(HAVE_CEILING_BENCH) && defined(HAVE_CEILING_SERVE)
#include "bench/ceilings.h"
#include "bench/run_info.h"
#include "ceiling/engine_flags.h"
#include "dist/tp_group.h"
#include "engine/cuda/cuda_ops.h"
#include "model/weights.h"
#include "roofline/model_cost.h"
#include "serve/latency_bench.h"
#endif

namespace ceiling::cli {

#if defined(HAVE_CEILING_ENGINE_CUDA) && defined(HAVE_CEILING_BENCH) && defined(HAVE_CEILING_SERVE)
namespace {

struct LatencyArgs {
  std::string model, out;
  std::string quantization;             // --quantization (as generate's): "" = the checkpoint's own
  std::string kv_cache_dtype = "auto";  // --kv-cache-dtype: auto (bf16) or fp8
  engine::LatencyOptions lat;
  bool no_graphs = false, quick_ceilings = false, no_gemm_autotune = false;
  int tp = 1;  // --tensor-parallel-size: GPUs 0..tp-1, one thread each
  int64_t custom_ar_bytes = int64_t{1} << 20;  // --custom-all-reduce-max-bytes
};

int run_latency_bench(LatencyArgs a) {
  const bool tty = stderr_is_tty();
  engine::CudaOpsOptions oo;
  oo.cuda_graphs = !a.no_graphs;
  oo.fp8_kv_cache = a.kv_cache_dtype != "auto";
  oo.gemm_autotune = !a.no_gemm_autotune;
  a.lat.kv_dtype = oo.fp8_kv_cache ? DType::kF8E4M3 : DType::kBF16;
  if (tty)
    oo.upload_progress = [](uint64_t done, uint64_t total) {
      fmt::print(stderr, "\ruploading weights: {:.2f} / {:.2f} GB", done / 1e9, total / 1e9);
    };
  check_no_process_group(a.tp);
  CEILING_ENSURE(a.lat.kernel_trace_replays == 0 ||
                     (a.tp == 1 && !a.no_graphs && a.lat.batch <= oo.max_graph_batch),
                 "bench latency: --kernel-trace needs one GPU (--tensor-parallel-size 1) and a "
                 "decode step that runs as a CUDA graph (not --no-graphs; --batch <= {}, the "
                 "largest graph bucket)",
                 oo.max_graph_batch);
  LoadOptions lo;
  lo.quantization = a.quantization;
  Model model = load_model(a.model, {}, lo);
  // The projections' format sets the bytes a step must move (and the roofline's scenario).
  a.lat.weights = model.weights.quant_format();
  if (a.lat.weights != WeightFormat::kDense)
    for (const QuantLinear& q : model.weights.layers.at(0).quant)
      if (q.quantized()) a.lat.group_size = std::max(a.lat.group_size, q.group_size);
  std::unique_ptr<engine::CudaOps> single;
  std::unique_ptr<dist::TpGroup> tp;
  if (a.tp == 1) {
    single = std::make_unique<engine::CudaOps>(oo);
    single->upload(model.config, model.weights);
  } else {
    dist::TpOptions to;
    to.world = a.tp;
    to.device = "cuda";
    to.ops.cuda_graphs = !a.no_graphs;
    to.ops.fp8_kv_cache = oo.fp8_kv_cache;
    to.ops.gemm_autotune = oo.gemm_autotune;
    to.custom_all_reduce_max_bytes = static_cast<size_t>(a.custom_ar_bytes);
    tp = make_tp_group(model, std::move(to));
  }
  // Rank 0's (GPU 0, this thread's current device) for the ceilings and the upload figures.
  engine::CudaOps& ops = single ? *single : dynamic_cast<engine::CudaOps&>(tp->ops(0));
  if (tty) fmt::print(stderr, "\r\033[K");
  fmt::print(stderr,
             "[bench latency] {}: {:.2f} GB uploaded in {:.0f} ms (rank 0 of {}); measuring "
             "ceilings\n",
             model.config.name, ops.stats().upload_bytes / 1e9, ops.stats().upload_ms, a.tp);
  const bench::MeasuredCeilings ceil =
      bench::measure_ceilings(ops.stream(), a.quick_ceilings ? size_t{1} << 30 : size_t{4} << 30);
  const engine::LatencyResult r =
      tp ? engine::run_latency(*tp, a.lat) : engine::run_latency(ops, a.lat);

  // Under tensor parallelism each GPU moves about 1/tp of the bytes (KV heads replicated past
  // the KV head count are not counted again).
  const double gpu_bytes = r.bytes_per_step / a.tp;
  const double gbps = gpu_bytes / (r.ms_per_token * 1e-3) / 1e9;
  const double floor_ms = gpu_bytes / (ceil.read_gbps * 1e9) * 1e3;
  const nlohmann::json dev = bench::device_info();
  // The roofline's prediction of the same decode step (layer 2, this run's measured ceilings),
  // at the mean context of the timed steps, joined with the measurement.
  roofline::Scenario sc;
  sc.phase = roofline::Phase::kDecode;
  sc.batch = a.lat.batch;
  sc.context = static_cast<int64_t>(r.mean_context + 0.5);
  sc.cuda_graphs = !a.no_graphs;
  sc.tp = a.tp;
  sc.weights = a.lat.weights == WeightFormat::kFp8    ? roofline::WeightDtype::kFP8
               : a.lat.weights == WeightFormat::kInt4 ? roofline::WeightDtype::kINT4
                                                      : roofline::WeightDtype::kBF16;
  if (a.lat.weights == WeightFormat::kInt4) sc.group_size = a.lat.group_size;
  // fp8 decode steps of kFp8ActRowsMin rows or more run W8A8 (model/weights.h).
  sc.w8a8 = a.lat.weights == WeightFormat::kFp8 && a.lat.batch >= kFp8ActRowsMin;
  sc.kv_dtype = a.lat.kv_dtype;
  const roofline::StepReport pred =
      roofline::predict_step(model.config, bench::gpu_ceilings(dev, ceil), sc);
  // The all-reduces the roofline charges this step (tensor parallel only): count and time.
  int64_t allreduces = 0;
  double allreduce_s = 0;
  for (const roofline::OpCost& op : pred.ops)
    if (op.name.find("allreduce") != std::string::npos) {
      allreduces += op.count;
      allreduce_s += op.count * op.pred.time_predicted_s;
    }
  const engine::CudaOpsStats& st = ops.stats();
  nlohmann::json j = {
      {"tool", "ceiling bench latency"},
      {"model", model.config.name},
      {"model_dir", a.model},
      {"gpu", dev.value("gpu", "unknown")},
      {"batch", a.lat.batch},
      {"weights", bench_weights_name(a.lat.weights)},
      {"group_size", a.lat.group_size},
      {"kv_cache_dtype", a.lat.kv_dtype == DType::kF8E4M3 ? "fp8" : "bf16"},
      {"tensor_parallel_size", a.tp},
      {"communicator", tp ? tp->communicator_name() : "none"},
      {"processes", tp ? tp->world() / tp->local_ranks() : 1},
      {"input_len", a.lat.input_len},
      {"output_len", a.lat.output_len},
      {"ttft_ms", r.ttft_ms},
      {"ms_per_token", r.ms_per_token},
      {"tokens_per_s", r.tokens_per_s},
      {"bytes_per_step", r.bytes_per_step},
      {"weight_bytes_per_step", r.weight_bytes_per_step},
      {"kv_bytes_per_step", r.kv_bytes_per_step},
      {"gbps", gbps},
      {"floor_ms_per_token", floor_ms},
      {"pct_of_floor", 100.0 * floor_ms / r.ms_per_token},
      // Tensor parallel: the floor plus the all-reduces the roofline predicts (issue #17's
      // yardstick for a model split over GPUs).
      {"floor_with_allreduce_ms_per_token", floor_ms + allreduce_s * 1e3},
      {"pct_of_floor_with_allreduce", 100.0 * (floor_ms + allreduce_s * 1e3) / r.ms_per_token},
      {"predicted_ms_per_token", pred.time_predicted_s * 1e3},
      {"prediction_gap", r.ms_per_token / (pred.time_predicted_s * 1e3)},
      {"predicted_kernels_per_step", pred.launches},
      {"predicted_allreduces_per_step", allreduces},
      {"predicted_allreduce_ms_per_step", allreduce_s * 1e3},
      {"roofline_allreduce_latency_us", pred.gpu.allreduce_latency_s * 1e6},
      {"logits_hash", r.logits_hash},
      {"baseline_tokens_per_s", nullptr},
      {"cuda_graphs", !a.no_graphs},
      {"gemm_autotune", !a.no_gemm_autotune},
      {"gemm_tuning", ops.gemm_tune_log()},
      {"timed_steps", r.timed_steps},
      {"graph_replay_ms", r.graph_replay_ms},
      {"host_ms_per_token", r.host_ms},
      {"host_phases_ms",
       {{"schedule", r.schedule_ms},
        {"build_step_batch", r.build_ms},
        {"forward_call", r.forward_call_ms},
        {"sample_wait", r.sample_wait_ms},
        {"outputs", r.output_ms}}},
      {"decode_ms", r.decode_ms},
      {"first_tokens",
       std::vector<int32_t>(r.tokens.begin(),
                            r.tokens.begin() + std::min<size_t>(16, r.tokens.size()))},
      {"mean_context", r.mean_context},
      {"method",
       "through the engine core (Engine: scheduler, paged KV, model runner): all B requests "
       "submitted at once, greedy, EOS ignored; ttft: host clock from submission until every "
       "sequence has its first token; ms_per_token: mean host-clock time of the steps in which all "
       "B sequences decode (each ends when its sampled ids are on the host), after the first such "
       "step; a full untimed pass with the same prompts runs first. "
       "bytes_per_step: weights once (embedding rows only; projections in their format, the "
       "rest bf16) + K/V read and written, bf16; floor: "
       "bytes_per_step at the streaming read bandwidth measured in this process"},
      {"engine",
       {{"graph_captures", st.graph_captures},
        {"graph_replays", st.graph_replays},
        {"eager_steps", st.eager_steps},
        {"upload_ms", st.upload_ms},
        {"upload_bytes", st.upload_bytes},
        {"weight_bytes", st.weight_bytes},
        {"arena_bytes", st.arena_bytes}}},
      {"ceilings", ceil.to_json()},
      {"device", dev},
      {"driver", dev.value("driver", "unknown")},
      {"clocks", bench::clocks()},
      {"git_sha", bench::git_sha()},
      {"timestamp", utc_now()},
      {"seed", a.lat.seed},
      // --kernel-trace: where the replayed step's time goes, kernel by kernel (hw/kernel_trace.h).
      {"kernel_trace", r.kernel_trace ? r.kernel_trace->to_json() : nlohmann::json(nullptr)},
      // CUPTI detached while the steps were timed (hw/kernel_trace.h): the host figures are an
      // untraced run's. Traced files without it (before 2026-11-29 r133) carry CUPTI's host cost.
      {"tracer_detached_while_timed", r.kernel_trace.has_value()},
  };
  fmt::print("{} on {}: {} weights, {} KV cache, batch {}, input {}, output {}, graphs {}\n",
             model.config.name, j["gpu"].get<std::string>(), j["weights"].get<std::string>(),
             j["kv_cache_dtype"].get<std::string>(), a.lat.batch, a.lat.input_len, a.lat.output_len,
             a.no_graphs ? "off" : "on");
  fmt::print(
      "  ttft {:.2f} ms | {:.3f} ms/token | {:.1f} tok/s | {:.0f} GB/s | floor {:.3f} ms "
      "({:.1f}% of floor) | predicted {:.3f} ms (layer 2) | read ceiling {:.0f} GB/s | {}\n",
      r.ttft_ms, r.ms_per_token, r.tokens_per_s, gbps, floor_ms, 100.0 * floor_ms / r.ms_per_token,
      pred.time_predicted_s * 1e3, ceil.read_gbps, r.logits_hash);
  fmt::print(
      "  host per step: {:.3f} ms (schedule {:.3f}, StepBatch {:.3f}, forward call {:.3f}, outputs "
      "{:.3f}); sampling incl. GPU wait {:.3f} ms\n",
      r.host_ms, r.schedule_ms, r.build_ms, r.forward_call_ms, r.output_ms, r.sample_wait_ms);
  if (a.tp > 1)
    fmt::print(
        "  tensor parallel {} ({}): the roofline charges {} all-reduces, {:.3f} ms per step "
        "({:.1f} us fixed each)\n",
        a.tp, tp->communicator_name(), allreduces, allreduce_s * 1e3,
        pred.gpu.allreduce_latency_s * 1e6);
  if (r.graph_replay_ms > 0)
    fmt::print(
        "  middle decode step's graph replayed back to back: {:.3f} ms/step ({:.1f}% of floor)\n",
        r.graph_replay_ms, 100.0 * floor_ms / r.graph_replay_ms);
  if (r.kernel_trace) fmt::print("{}", hw::trace_table(*r.kernel_trace));
  if (!a.out.empty()) {
    std::ofstream f(a.out);
    CEILING_ENSURE(f.good(), "bench latency: cannot write '{}'", a.out);
    f << j.dump(2) << "\n";
    CEILING_ENSURE(f.good(), "bench latency: writing '{}' failed", a.out);
  }
  return 0;
}

}  // namespace

std::function<int()> setup_bench_latency(CLI::App& sub) {
  auto a = std::make_shared<LatencyArgs>();
  sub.add_option("--model", a->model, "Hugging Face model directory")->required();
  sub.add_option("--batch", a->lat.batch, "sequences decoded together")->check(CLI::Range(1, 1024));
  sub.add_option("--input-len", a->lat.input_len, "prompt tokens per sequence")
      ->check(CLI::Range(1, 1 << 20));
  sub.add_option("--output-len", a->lat.output_len, "tokens generated per sequence")
      ->check(CLI::Range(3, 1 << 20));
  sub.add_option("--block-size", a->lat.block_size, "KV cache block size")
      ->check(CLI::Range(1, 1024));
  sub.add_option("--seed", a->lat.seed, "seed of the random prompts");
  sub.add_option("--tensor-parallel-size,--tp", a->tp,
                 "GPUs the model is split over (one thread each, NCCL; default 1)")
      ->check(CLI::Range(1, 64));
  sub.add_option("--custom-all-reduce-max-bytes", a->custom_ar_bytes,
                 "all-reduces up to this size take the one-shot NVLink P2P kernel (default "
                 "1048576; 0: NCCL only; see bench allreduce)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  sub.add_option("--quantization,-q", a->quantization,
                 "weights: fp8 or int4 quantized on load, or the checkpoint's method (as "
                 "generate's flag)");
  sub.add_option("--kv-cache-dtype", a->kv_cache_dtype,
                 "auto (bf16) | fp8 (E4M3 with the checkpoint's k_scale / v_scale, else 1)")
      ->check(CLI::IsMember({"auto", "fp8", "fp8_e4m3"}));
  sub.add_option("--out", a->out, "write the result JSON here");
  sub.add_flag("--no-graphs,--enforce-eager", a->no_graphs, "run every step eagerly");
  sub.add_flag("--no-gemm-autotune", a->no_gemm_autotune,
               "keep cuBLASLt's first heuristic algorithm for the graphs' GEMMs");
  sub.add_flag("--quick-ceilings", a->quick_ceilings, "measure read bandwidth over 1 GiB, not 4");
  sub.add_option("--profile-step", a->lat.profile_step,
                 "bracket this timed decode step with cudaProfilerStart/Stop (for ncu "
                 "--profile-from-start off)");
  sub.add_option("--kernel-trace", a->lat.kernel_trace_replays,
                 "trace the run with CUPTI and break this many back-to-back replays of the "
                 "decode graph down by kernel: time each kernel adds to the step, per layer slot "
                 "(JSON field kernel_trace; one GPU; CUPTI is detached while the steps are "
                 "timed)")
      ->check(CLI::Range(1, 1000));
  return [a] { return run_latency_bench(*a); };
}
#else
std::function<int()> setup_bench_latency(CLI::App& sub) {
  (void)sub;
  return []() -> int { fail("bench latency: this ceiling was built without the CUDA engine"); };
}
#endif

}  // namespace ceiling::cli
