// `ceiling bench <child>`: benchmarks. A parent command; each child is one row of kChildren
// (`kernels` now; `latency` and others are added there).
#include <fmt/format.h>

#include <memory>

#include "ceiling/command.h"
#include "core/status.h"
#ifdef HAVE_CEILING_BENCH
#include "bench/harness.h"
#endif

namespace ceiling::cli {

// cmd_bench_latency.cpp
std::function<int()> setup_bench_latency(CLI::App& sub);
// cmd_bench_throughput.cpp
std::function<int()> setup_bench_throughput(CLI::App& sub);
// cmd_bench_serve.cpp
std::function<int()> setup_bench_serve(CLI::App& sub);
// cmd_bench_allreduce.cpp
std::function<int()> setup_bench_allreduce(CLI::App& sub);
// cmd_bench_accuracy.cpp
std::function<int()> setup_bench_accuracy(CLI::App& sub);

namespace {

struct BenchChild {
  const char* name;
  const char* help;
  std::function<std::function<int()>(CLI::App& sub)> setup;
};

std::function<int()> setup_kernels(CLI::App& sub) {
#ifdef HAVE_CEILING_BENCH
  auto opt = std::make_shared<bench::BenchOptions>();
  sub.add_option("--filter", opt->filter, "regex matched against \"op shape\" (default: all)");
  sub.add_option("--out", opt->out, "write the result JSON here (bench/results/<run>.json)");
  sub.add_option("--reps", opt->reps, "timed replays per case (>= 50 for published runs)")
      ->check(CLI::Range(1, 100000));
  sub.add_flag("--list", opt->list, "list the matching cases and exit");
  sub.add_flag("--quick-ceilings", opt->quick_ceilings, "measure read bandwidth over 1 GiB, not 4");
  return [opt] { return bench::run_kernel_bench(*opt); };
#else
  (void)sub;
  return []() -> int { fail("bench kernels: this ceiling was built without CUDA"); };
#endif
}

const BenchChild kChildren[] = {
    {"kernels",
     "check every CUDA kernel against the CPU reference, time it, and compare with the roofline "
     "prediction and the measured ceilings",
     setup_kernels},
    {"latency",
     "end-to-end decode latency of a model on the GPU (prefill + decode steps) against the "
     "roofline floor at the measured read bandwidth",
     setup_bench_latency},
    {"throughput",
     "offline throughput of the engine: every request at once, EOS ignored (as vllm bench "
     "throughput), beside the roofline's prediction of the same workload",
     setup_bench_throughput},
    {"serve",
     "online serving load on any OpenAI-compatible server (as vllm bench serve): streamed "
     "requests at a Poisson rate under a concurrency limit; TTFT, TPOT, ITL, E2EL, throughput",
     setup_bench_serve},
    {"allreduce",
     "all-reduce latency across this host's GPUs at decode sizes: NCCL beside the one-shot NVLink "
     "P2P kernel and the roofline's assumption; suggests --custom-all-reduce-max-bytes",
     setup_bench_allreduce},
    {"accuracy",
     "low precision on the CPU reference: perplexity, KL divergence from the checkpoint's "
     "next-token distributions and top-1 agreement of fp8 / int4 weights and an fp8 KV cache",
     setup_bench_accuracy},
};

std::function<int()> setup_bench(CLI::App& app) {
  app.require_subcommand(1);
  auto action = std::make_shared<std::function<int()>>();
  for (const BenchChild& c : kChildren) {
    CLI::App* sub = app.add_subcommand(c.name, c.help);
    auto run = c.setup(*sub);
    sub->callback([action, run] { *action = run; });
  }
  return [action] { return *action ? (*action)() : 0; };
}

}  // namespace

CEILING_COMMAND("bench",
                "benchmarks: kernels (vs roofline and ceilings), latency, throughput, serve",
                setup_bench, 60);

}  // namespace ceiling::cli
