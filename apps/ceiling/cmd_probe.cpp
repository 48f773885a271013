// `ceiling probe`: measures the local GPU's ceilings and writes data/ceilings/<gpu>.json's content
// (src/hw/probe.h), plus the grid-wide fixed costs that `ceiling bench` also measures
// (src/bench/ceilings.h: one definition of those probe kernels). GPU-only: a build without CUDA
// says so and exits non-zero.
#include <fmt/format.h>

#include <fstream>
#include <memory>
#include <vector>

#include "ceiling/command.h"
#include "core/status.h"
#include "hw/measured.h"
#if defined(CEILING_HW_PROBE)
#include "hw/probe.h"
#endif
#if defined(HAVE_CEILING_BENCH)
#include "bench/ceilings.h"
#include "core/check.h"
#endif

namespace ceiling::cli {
namespace {

#if defined(HAVE_CEILING_BENCH)
// The grid-wide lines and their points into the file's optional fields. A non-positive intercept
// or rate (noise) is left out with its points, so the file reads back as "not measured" rather
// than failing validation.
void add_fixed_costs(hw::MeasuredCeilings& m) {
  cudaStream_t s = nullptr;
  CEILING_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::unique_ptr<CUstream_st, cudaError_t (*)(cudaStream_t)> guard(s, cudaStreamDestroy);
  const bench::FixedCosts f = bench::measure_fixed_costs(s);
  const auto keep = [&](const bench::LaunchLine& l, const char* name, double& fixed_s, double& bw,
                        std::vector<hw::LaunchPoint>& pts) {
    if (l.fixed_us > 0 && l.gbps > 0) {
      fixed_s = l.fixed_us * 1e-6;
      bw = l.gbps * 1e9;
      for (const auto& p : l.points) pts.push_back({p.bytes, p.us * 1e-6});
    } else {
      fmt::print(stderr, "probe: {} line not kept (fixed {:.3f} us, {:.0f} GB/s)\n", name,
                 l.fixed_us, l.gbps);
    }
    m.method[std::string(name) + "_fixed_us"] = l.method;
    m.method[std::string(name) + "_gbps"] = l.method;
  };
  keep(f.stream, "stream", m.stream_fixed_s, m.stream_bw, m.stream_points);
  keep(f.rw, "rw", m.rw_fixed_s, m.rw_bw, m.rw_points);
  keep(f.stream_serial, "stream_serial", m.stream_serial_fixed_s, m.stream_serial_bw,
       m.stream_serial_points);
}
#endif

struct ProbeArgs {
  std::string out;
  bool quick = false;
};

int run(const ProbeArgs& a) {
#if defined(CEILING_HW_PROBE)
  hw::ProbeOptions opt;
  if (a.quick) {  // a smoke run: small buffers and GEMMs, numbers not fit to commit
    opt.read_bytes = size_t{256} << 20;
    opt.copy_bytes = size_t{128} << 20;
    opt.gemm_n = 2048;
    opt.repeats = 5;
    opt.launches = 2000;
    opt.graph_nodes = 200;
  }
  hw::MeasuredCeilings m =
      hw::run_probe(opt, [](const std::string& s) { fmt::print(stderr, "probe: {}\n", s); });
#if defined(HAVE_CEILING_BENCH)
  fmt::print(stderr,
             "probe: grid-wide fixed costs (stream, read -> reduce -> write, stream without "
             "PDL)\n");
  add_fixed_costs(m);
#endif
  const std::string json = hw::measured_ceilings_to_json(m);
  fmt::print(stderr,
             "probe: {} ({}): read {:.0f} GB/s, copy {:.0f} GB/s, bf16 {:.0f} TFLOP/s, fp8 {:.0f} "
             "TFLOP/s, launch {:.2f} us eager / {:.2f} us graph, small kernel {:.2f} us, fixed "
             "{:.2f} us stream / {:.2f} us rw / {:.2f} us stream without PDL\n",
             m.device_name, m.gpu_id, m.read_bw / 1e9, m.copy_bw / 1e9, m.bf16_gemm_flops / 1e12,
             m.fp8_gemm_flops / 1e12, m.launch_eager_s * 1e6, m.launch_graph_s * 1e6,
             m.small_kernel_s * 1e6, m.stream_fixed_s * 1e6, m.rw_fixed_s * 1e6,
             m.stream_serial_fixed_s * 1e6);
  if (a.out.empty()) {
    fmt::print("{}", json);
  } else {
    std::ofstream f(a.out, std::ios::binary);
    if (!f) fail("--out: cannot write {}", a.out);
    f << json;
    if (!f) fail("--out: failed writing {}", a.out);
    fmt::print(stderr, "probe: wrote {}\n", a.out);
  }
  return 0;
#else
  (void)a;
  fail(
      "ceiling probe: built without CUDA (configure with -DCEILING_CUDA=ON on a machine with "
      "nvcc)");
#endif
}

std::function<int()> setup(CLI::App& sub) {
  auto a = std::make_shared<ProbeArgs>();
  sub.add_option("--out", a->out, "write the measured ceilings JSON here (default: stdout)");
  sub.add_flag("--quick", a->quick, "small sizes for a smoke test (not for data/ceilings/)");
  return [a] { return run(*a); };
}

CEILING_COMMAND("probe", "measure this GPU's ceilings (bandwidth, GEMM rates, launch cost)", setup,
                25);

}  // namespace
}  // namespace ceiling::cli
