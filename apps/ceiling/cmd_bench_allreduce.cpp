// `ceiling bench allreduce`: latency of one in-place all-reduce (sum) across the GPUs of this
// host at decode message sizes, NCCL beside the one-shot NVLink P2P kernel
// (kernels/cuda/all_reduce.h), and beside the roofline's assumption (layer 2's fixed
// allreduce_latency_s plus the bytes at NVLink bandwidth). One thread per GPU, as the engine's
// TpGroup; each size is timed with CUDA events over --iters back-to-back calls after a warm-up,
// the slowest rank's mean reported: once launched eagerly (host enqueue included, as a prefill
// step runs) and once as a CUDA graph of the --iters calls (as a decode step runs them). The
// per-size choice is the faster path in the graph; the largest size at which the custom kernel
// still wins is what --custom-all-reduce-max-bytes should get.
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "ceiling/command.h"
#include "core/status.h"
#if defined(HAVE_CEILING_NCCL)
#include <cuda_runtime.h>

#include "core/check.h"
#include "dist/nccl_communicator.h"
#include "hw/measured.h"
#include "roofline/parameters.h"
#endif

namespace ceiling::cli {

namespace {

struct AllReduceArgs {
  int tp = 2;
  std::string sizes = "8K,16K,32K,64K,128K,256K,512K";
  std::string dtype = "bf16";
  int iters = 200;
  std::string out;
  std::string update_ceilings;  // data/ceilings/<gpu>.json: gets allreduce_us
};

int64_t parse_size(const std::string& s) {
  CEILING_ENSURE(!s.empty(), "bench allreduce: empty size in --sizes");
  size_t pos = 0;
  int64_t v = 0;
  try {
    v = std::stoll(s, &pos);
  } catch (const std::exception&) {
    fail("bench allreduce: '{}' is not a size (e.g. 8K, 1M, 4096)", s);
  }
  const std::string unit = s.substr(pos);
  if (unit == "K" || unit == "k")
    v <<= 10;
  else if (unit == "M" || unit == "m")
    v <<= 20;
  else
    CEILING_ENSURE(unit.empty(), "bench allreduce: unknown unit in '{}' (K, M)", s);
  CEILING_ENSURE(v > 0 && v <= (int64_t{1} << 30), "bench allreduce: size {} out of range", s);
  return v;
}

#if defined(HAVE_CEILING_NCCL)
int run_allreduce_bench(const AllReduceArgs& a) {
  std::vector<int64_t> sizes;
  for (size_t b = 0; b <= a.sizes.size();) {
    const size_t e = std::min(a.sizes.find(',', b), a.sizes.size());
    sizes.push_back(parse_size(a.sizes.substr(b, e - b)));
    b = e + 1;
  }
  const DType dt = a.dtype == "f32" ? DType::kF32 : DType::kBF16;
  const int64_t max_bytes = *std::max_element(sizes.begin(), sizes.end());
  auto comms = dist::make_nccl_communicators(a.tp, std::chrono::seconds(120),
                                             static_cast<size_t>(max_bytes));
  auto* c0 = dynamic_cast<dist::NcclCommunicator*>(comms[0].get());
  const bool custom = c0 && c0->custom_max_bytes() > 0;
  // us[path][size][rank]; paths: 0 NCCL eager, 1 custom eager, 2 NCCL graph, 3 custom graph
  std::vector<std::vector<std::vector<double>>> us(
      4, std::vector<std::vector<double>>(sizes.size(), std::vector<double>(a.tp, 0)));
  std::vector<std::string> errors(static_cast<size_t>(a.tp));
  std::vector<std::thread> threads;
  for (int r = 0; r < a.tp; ++r)
    threads.emplace_back([&, r] {
      try {
        CEILING_CUDA_CHECK(cudaSetDevice(r));
        auto& comm = dynamic_cast<dist::NcclCommunicator&>(*comms[static_cast<size_t>(r)]);
        cudaStream_t s = nullptr;
        cudaEvent_t e0 = nullptr, e1 = nullptr;
        void* buf = nullptr;
        CEILING_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        CEILING_CUDA_CHECK(cudaEventCreate(&e0));
        CEILING_CUDA_CHECK(cudaEventCreate(&e1));
        CEILING_CUDA_CHECK(cudaMalloc(&buf, static_cast<size_t>(max_bytes)));
        CEILING_CUDA_CHECK(cudaMemset(buf, 0, static_cast<size_t>(max_bytes)));
        for (size_t i = 0; i < sizes.size(); ++i)
          for (int path = 0; path < (custom ? 2 : 1); ++path) {
            const TensorView x(buf, dt, {sizes[i] / static_cast<int64_t>(dtype_bytes(dt, 1))},
                               Device::kCuda);
            auto call = [&] {
              if (path == 0)
                comm.all_reduce_nccl(x, s);
              else
                comm.all_reduce_custom(x, s);
            };
            for (int w = 0; w < 20; ++w) call();
            CEILING_CUDA_CHECK(cudaStreamSynchronize(s));
            CEILING_CUDA_CHECK(cudaEventRecord(e0, s));
            for (int k = 0; k < a.iters; ++k) call();
            CEILING_CUDA_CHECK(cudaEventRecord(e1, s));
            CEILING_CUDA_CHECK(cudaEventSynchronize(e1));
            float ms = 0;
            CEILING_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
            us[static_cast<size_t>(path)][i][static_cast<size_t>(r)] = ms * 1e3 / a.iters;
            comm.barrier();
            // The same calls recorded in one graph: what a decode step's replay pays.
            cudaGraph_t graph = nullptr;
            cudaGraphExec_t exec = nullptr;
            CEILING_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
            for (int k = 0; k < a.iters; ++k) call();
            CEILING_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
            CEILING_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
            CEILING_CUDA_CHECK(cudaGraphLaunch(exec, s));  // warm-up
            CEILING_CUDA_CHECK(cudaStreamSynchronize(s));
            comm.barrier();
            CEILING_CUDA_CHECK(cudaEventRecord(e0, s));
            CEILING_CUDA_CHECK(cudaGraphLaunch(exec, s));
            CEILING_CUDA_CHECK(cudaEventRecord(e1, s));
            CEILING_CUDA_CHECK(cudaEventSynchronize(e1));
            CEILING_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
            us[static_cast<size_t>(path + 2)][i][static_cast<size_t>(r)] = ms * 1e3 / a.iters;
            CEILING_CUDA_CHECK(cudaGraphExecDestroy(exec));
            CEILING_CUDA_CHECK(cudaGraphDestroy(graph));
            comm.barrier();
          }
        cudaFree(buf);
        cudaEventDestroy(e0);
        cudaEventDestroy(e1);
        cudaStreamDestroy(s);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
        comms[static_cast<size_t>(r)]->abort(e.what());
      }
    });
  for (auto& t : threads) t.join();
  for (const auto& e : errors) CEILING_ENSURE(e.empty(), "bench allreduce: {}", e);

  const roofline::Layer2Defaults& l2 = roofline::layer2_defaults();
  // NVLink 4 (H100 SXM): 900 GB/s both directions, 450 GB/s each way; a ring all-reduce moves
  // 2 (N-1)/N of the message each way.
  const double link = 450e9 * l2.nvlink_efficiency;
  nlohmann::json rows = nlohmann::json::array();
  int64_t crossover = 0;
  fmt::print("all-reduce (sum, {}) over {} GPUs, mean of {} calls, slowest rank\n", a.dtype, a.tp,
             a.iters);
  fmt::print("{:>10} {:>10} {:>10} {:>12} {:>12} {:>12} {:>8}\n", "bytes", "nccl us", "custom us",
             "nccl graph", "custom graph", "roofline us", "choice");
  auto slowest = [&](size_t path, size_t i) {
    return *std::max_element(us[path][i].begin(), us[path][i].end());
  };
  auto opt = [&](double v) { return custom ? nlohmann::json(v) : nlohmann::json(nullptr); };
  for (size_t i = 0; i < sizes.size(); ++i) {
    const double nccl = slowest(0, i), nccl_g = slowest(2, i);
    const double cust = custom ? slowest(1, i) : 0, cust_g = custom ? slowest(3, i) : 0;
    const double pred = (l2.allreduce_latency_s + 2.0 * (a.tp - 1) / a.tp * sizes[i] / link) * 1e6;
    const bool pick_custom = custom && cust_g < nccl_g;
    if (pick_custom) crossover = sizes[i];
    fmt::print("{:>10} {:>10.2f} {:>10.2f} {:>12.2f} {:>12.2f} {:>12.2f} {:>8}\n", sizes[i], nccl,
               cust, nccl_g, cust_g, pred, pick_custom ? "custom" : "nccl");
    rows.push_back({{"bytes", sizes[i]},
                    {"nccl_us", nccl},
                    {"custom_us", opt(cust)},
                    {"nccl_graph_us", nccl_g},
                    {"custom_graph_us", opt(cust_g)},
                    {"roofline_us", pred},
                    {"choice", pick_custom ? "custom" : "nccl"}});
  }
  fmt::print("--custom-all-reduce-max-bytes {} (largest size where the custom kernel won)\n",
             crossover);
  // The fixed cost the roofline's layer 2 charges per all-reduce: the faster path at the
  // smallest size timed.
  const size_t smallest =
      static_cast<size_t>(std::min_element(sizes.begin(), sizes.end()) - sizes.begin());
  double latency_us = slowest(2, smallest);
  if (custom) latency_us = std::min(latency_us, slowest(3, smallest));
  if (!a.update_ceilings.empty()) {
    hw::MeasuredCeilings m = hw::load_measured_ceilings(a.update_ceilings);
    m.allreduce_latency_s = latency_us * 1e-6;
    m.method["allreduce_us"] = fmt::format(
        "ceiling bench allreduce: {} bytes {} over {} GPUs, faster of NCCL and the one-shot P2P "
        "kernel, in a CUDA graph, slowest rank, mean of {} calls",
        sizes[smallest], a.dtype, a.tp, a.iters);
    std::ofstream f(a.update_ceilings);
    f << hw::measured_ceilings_to_json(m) << "\n";
    CEILING_ENSURE(f.good(), "bench allreduce: writing '{}' failed", a.update_ceilings);
    fmt::print("{}: allreduce_us = {:.2f}\n", a.update_ceilings, latency_us);
  }
  if (!a.out.empty()) {
    const nlohmann::json j = {
        {"tool", "ceiling bench allreduce"},
        {"tensor_parallel_size", a.tp},
        {"dtype", a.dtype},
        {"iters", a.iters},
        {"custom_available", custom},
        {"roofline_allreduce_latency_us", l2.allreduce_latency_s * 1e6},
        {"measured_allreduce_latency_us", latency_us},
        {"suggested_custom_all_reduce_max_bytes", crossover},
        {"method",
         "one thread per GPU; in place; 20 warm-up calls, then --iters back to back between CUDA "
         "events on each rank's stream (nccl_us, custom_us: launched eagerly; *_graph_us: the "
         "--iters calls captured in one CUDA graph, replayed once to warm up, then timed); the "
         "slowest rank's mean per call. choice and measured_allreduce_latency_us (smallest size) "
         "come from the graph times. roofline_us: layer 2's allreduce_latency_s + 2(N-1)/N of "
         "the bytes at 450 GB/s per direction x nvlink efficiency"},
        {"sizes", rows}};
    std::ofstream f(a.out);
    CEILING_ENSURE(f.good(), "bench allreduce: cannot write '{}'", a.out);
    f << j.dump(2) << "\n";
  }
  return 0;
}
#endif

}  // namespace

std::function<int()> setup_bench_allreduce(CLI::App& sub) {
  auto a = std::make_shared<AllReduceArgs>();
  sub.add_option("--tensor-parallel-size,--tp", a->tp, "GPUs (default 2)")->check(CLI::Range(2, 8));
  sub.add_option("--sizes", a->sizes, "message sizes in bytes, K/M suffixes (default 8K..512K)");
  sub.add_option("--dtype", a->dtype, "bf16 or f32")->check(CLI::IsMember({"bf16", "f32"}));
  sub.add_option("--iters", a->iters, "timed calls per size")->check(CLI::Range(1, 100000));
  sub.add_option("--out", a->out, "write the result JSON here");
  sub.add_option("--update-ceilings", a->update_ceilings,
                 "measured ceilings file (data/ceilings/<gpu>.json) whose allreduce_us the "
                 "roofline then uses for --tensor-parallel-size");
#if defined(HAVE_CEILING_NCCL)
  return [a] { return run_allreduce_bench(*a); };
#else
  (void)parse_size;
  return []() -> int { fail("bench allreduce: this ceiling was built without CUDA and NCCL"); };
#endif
}

}  // namespace ceiling::cli
