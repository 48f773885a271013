// `ceiling probe`: measures the local GPU's ceilings and writes data/ceilings/<gpu>.json's content
// (src/hw/probe.h). GPU-only: a build without CUDA says so and exits non-zero.
#include <fmt/format.h>

#include <fstream>
#include <memory>

#include "ceiling/command.h"
#include "core/status.h"
#include "hw/measured.h"
#if defined(CEILING_HW_PROBE)
#include "hw/probe.h"
#endif

namespace ceiling::cli {
namespace {

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
  const hw::MeasuredCeilings m =
      hw::run_probe(opt, [](const std::string& s) { fmt::print(stderr, "probe: {}\n", s); });
  const std::string json = hw::measured_ceilings_to_json(m);
  fmt::print(stderr,
             "probe: {} ({}): read {:.0f} GB/s, copy {:.0f} GB/s, bf16 {:.0f} TFLOP/s, fp8 {:.0f} "
             "TFLOP/s, launch {:.2f} us eager / {:.2f} us graph, small kernel {:.2f} us\n",
             m.device_name, m.gpu_id, m.read_bw / 1e9, m.copy_bw / 1e9, m.bf16_gemm_flops / 1e12,
             m.fp8_gemm_flops / 1e12, m.launch_eager_s * 1e6, m.launch_graph_s * 1e6,
             m.small_kernel_s * 1e6);
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
