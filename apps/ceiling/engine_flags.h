// The engine flags every engine command shares (generate, bench throughput, serve later), named
// like vLLM's, and the model/device loading they all do. Header-only: each command includes it.
#pragma once

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "ceiling/command.h"
#include "ceiling/progress.h"
#include "core/status.h"
#include "dist/tp_group.h"
#include "engine/ops_factory.h"
#include "model/weights.h"
#include "serve/engine.h"

namespace ceiling::cli {

struct EngineFlags {
  std::string device = "cpu";
  int threads = 0;
  std::optional<int> max_model_len;
  std::optional<int> max_num_seqs;
  int max_num_batched_tokens = 0;
  double gpu_memory_utilization = 0.90;
  int num_kv_blocks = 0;
  int block_size = 16;
  bool prefix_caching = true;
  bool enforce_eager = false;
  bool no_gemm_autotune = false;
  int tensor_parallel_size = 1;
  int64_t custom_all_reduce_max_bytes = int64_t{1} << 20;  // measured: bench/serve_notes.md
  std::string quantization;             // "" (the checkpoint's own), fp8, int4, or a method name
  std::string kv_cache_dtype = "auto";  // auto (the backend's) or fp8 (E4M3)
};

inline void add_engine_flags(CLI::App& sub, EngineFlags& f) {
  sub.add_option("--device", f.device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  sub.add_option("--threads", f.threads, "CPU threads (default 0: all cores)")
      ->check(CLI::Range(0, 1024));
  sub.add_option("--max-model-len", f.max_model_len,
                 "prompt + output tokens per request (default: the model's "
                 "max_position_embeddings; generate: what its requests need)")
      ->check(CLI::Range(1, 1 << 24));
  sub.add_option("--max-num-seqs", f.max_num_seqs, "sequences per step at most (default 256)")
      ->check(CLI::Range(1, 65536));
  sub.add_option("--max-num-batched-tokens", f.max_num_batched_tokens,
                 "tokens per step at most (default: max(8192, max-num-seqs))")
      ->check(CLI::Range(1, 1 << 20));
  sub.add_option("--gpu-memory-utilization", f.gpu_memory_utilization,
                 "fraction of GPU memory for weights, workspace and KV cache (default 0.90)")
      ->check(CLI::Range(0.01, 1.0));
  sub.add_option("--num-kv-blocks", f.num_kv_blocks,
                 "KV cache blocks (overrides --gpu-memory-utilization)")
      ->check(CLI::Range(1, 1 << 30));
  sub.add_option("--block-size", f.block_size, "KV cache block size in tokens (default 16)")
      ->check(CLI::Range(1, 1024));
  sub.add_flag("--enable-prefix-caching,!--no-enable-prefix-caching", f.prefix_caching,
               "reuse the KV blocks of shared prompt prefixes (default on)");
  sub.add_flag("--enforce-eager,--no-graphs", f.enforce_eager, "cuda: no CUDA graphs");
  sub.add_flag("--no-gemm-autotune", f.no_gemm_autotune,
               "cuda: keep cuBLASLt's first heuristic algorithm for the decode graphs' GEMMs "
               "(default: time its candidates at each bucket's warm-up, keep the fastest)");
  sub.add_option("--quantization,-q", f.quantization,
                 "fp8 | int4: quantize the projections on load (fp8: E4M3, a scale per output "
                 "row; int4: asymmetric, groups of 128); or the checkpoint's method "
                 "(compressed-tensors, fbgemm_fp8, awq, gptq). Default: as the checkpoint is")
      ->check(CLI::IsMember({"fp8", "int4", "compressed-tensors", "fbgemm_fp8", "awq", "gptq"}));
  sub.add_option("--kv-cache-dtype", f.kv_cache_dtype,
                 "auto | fp8 (E4M3 with the checkpoint's k_scale / v_scale, else 1)")
      ->check(CLI::IsMember({"auto", "fp8", "fp8_e4m3"}));
}

// --tensor-parallel-size and --custom-all-reduce-max-bytes, for the commands that build their
// Engine through LoadedModel::make_engine (a command that takes *LoadedModel::ops itself must not
// offer them: under tensor parallelism `ops` is null).
inline void add_tensor_parallel_flags(CLI::App& sub, EngineFlags& f) {
  sub.add_option("--tensor-parallel-size,--tp", f.tensor_parallel_size,
                 "ranks the model is split over (one thread each; cuda: GPUs 0..N-1, NCCL; "
                 "default 1)")
      ->check(CLI::Range(1, 64));
  sub.add_option("--custom-all-reduce-max-bytes", f.custom_all_reduce_max_bytes,
                 "cuda, tensor parallel: all-reduces up to this size take the one-shot NVLink "
                 "P2P kernel instead of NCCL when every pair of GPUs has P2P and all ranks are in "
                 "this process (default 1048576; 0: NCCL only; see bench allreduce)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
}

inline serve::EngineConfig engine_config(const EngineFlags& f) {
  serve::EngineConfig c;
  c.max_model_len = f.max_model_len.value_or(0);
  c.max_num_seqs = f.max_num_seqs.value_or(256);
  c.max_num_batched_tokens = f.max_num_batched_tokens;
  c.gpu_memory_utilization = f.gpu_memory_utilization;
  c.num_kv_blocks = f.num_kv_blocks;
  c.block_size = f.block_size;
  c.enable_prefix_caching = f.prefix_caching;
  return c;
}

// --tensor-parallel-size N > 1: the group of ranks, in this process or (under a launcher's RANK /
// WORLD_SIZE / MASTER_ADDR / MASTER_PORT, dist/launch.h) spread over several. A worker process
// (RANK > 0) runs the driver's steps here until the driver stops, then ends the command
// (WorkerFinished, exit 0); only process 0 returns.
inline std::unique_ptr<dist::TpGroup> make_tp_group(const Model& model, dist::TpOptions to) {
  const dist::ProcessGroup pg = dist::process_group_from_env();
  to.process = pg;
  auto tp = std::make_unique<dist::TpGroup>(model.config, model.weights, std::move(to));
  if (!tp->is_driver()) {
    const int g = tp->local_ranks();
    fmt::print(stderr,
               "[tp worker] process {} of {}: ranks {}..{} of {} on this host's GPUs 0..{}; "
               "serving process 0 at {}:{}\n",
               pg.rank, pg.size, pg.rank * g, pg.rank * g + g - 1, tp->world(), g - 1,
               pg.master_addr, pg.master_port);
    tp->serve_worker();
    fmt::print(stderr, "[tp worker] process {}: stopped by process 0\n", pg.rank);
    throw WorkerFinished{};
  }
  return tp;
}

// WORLD_SIZE > 1 without tensor parallelism has nothing to spread: refuse it by name.
inline void check_no_process_group(int tensor_parallel_size) {
  const dist::ProcessGroup pg = dist::process_group_from_env();
  CEILING_ENSURE(!pg.multi() || tensor_parallel_size > 1,
                 "{} processes in the environment (WORLD_SIZE or the launcher's) but "
                 "--tensor-parallel-size {}: give the total number of GPUs",
                 pg.size, tensor_parallel_size);
}

// The backend, with the model's weights uploaded (a progress line on a terminal): one Ops, or
// with --tensor-parallel-size N > 1 a TpGroup of N ranks (`ops` then stays null).
struct LoadedModel {
  std::unique_ptr<engine::Ops> ops;
  Model model;
  std::unique_ptr<dist::TpGroup> tp;  // after `model`: its shards view the model's weights

  // The Ops of rank 0 (the only one without tensor parallelism).
  engine::Ops& primary() { return tp ? tp->ops(0) : *ops; }
  std::string device_name() {
    return tp ? fmt::format("{} x{} ({})", tp->device(), tp->world(), tp->communicator_name())
              : ops->name();
  }
  std::unique_ptr<serve::Engine> make_engine(const serve::EngineConfig& c,
                                             const Tokenizer* tok = nullptr) {
    return tp ? std::make_unique<serve::Engine>(*tp, c, tok)
              : std::make_unique<serve::Engine>(*ops, c, tok);
  }
};

inline LoadedModel load_on_device(const std::string& dir, const EngineFlags& f) {
  const bool tty = stderr_is_tty();
  engine::OpsOptions oo;
  oo.n_threads = f.threads;
  oo.cuda_graphs = !f.enforce_eager;
  oo.fp8_kv_cache = f.kv_cache_dtype != "auto";
  oo.gemm_autotune = !f.no_gemm_autotune;
  if (tty)
    oo.upload_progress = [](uint64_t done, uint64_t total) {
      if (total > (256u << 20))
        fmt::print(stderr, "\r\033[Kuploading weights: {:.2f} / {:.2f} GB", done / 1e9,
                   total / 1e9);
    };
  LoadedModel m;
  check_no_process_group(f.tensor_parallel_size);
  if (f.tensor_parallel_size == 1)
    m.ops = engine::make_ops(f.device, oo);  // fails fast for an unusable device
  {
    Progress progress("loading " + dir);
    LoadOptions lo;
    lo.quantization = f.quantization;
    m.model = load_model(dir, load_progress(progress), lo);
  }
  if (f.tensor_parallel_size > 1) {
    dist::TpOptions to;
    to.world = f.tensor_parallel_size;
    to.device = f.device;
    to.ops = oo;
    to.custom_all_reduce_max_bytes = static_cast<size_t>(f.custom_all_reduce_max_bytes);
    to.ops.upload_progress = nullptr;  // N ranks upload at once
    if (f.device == "cpu")             // the cores are shared out between the ranks
      to.ops.n_threads = std::max(
          1, (f.threads > 0 ? f.threads : static_cast<int>(std::thread::hardware_concurrency())) /
                 f.tensor_parallel_size);
    m.tp = make_tp_group(m.model, std::move(to));
  } else {
    m.ops->upload(m.model.config, m.model.weights);
  }
  if (tty) fmt::print(stderr, "\r\033[K");
  return m;
}

}  // namespace ceiling::cli
