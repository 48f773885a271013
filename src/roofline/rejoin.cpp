#include "roofline/rejoin.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "core/file_read.h"
#include "core/json_bounded.h"
#include "core/status.h"

namespace ceiling::roofline {
namespace {

using nlohmann::json;

double num(const json& j, const char* key, double fallback = 0) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : fallback;
}

std::vector<ProbePoint> points(const json& measured, const char* key) {
  std::vector<ProbePoint> pts;
  auto it = measured.find(key);
  if (it == measured.end()) return pts;
  CEILING_ENSURE(it->is_array(), "measured_ceilings.{} must be an array", key);
  for (const json& p : *it) {
    const double bytes = p.is_object() ? num(p, "bytes") : 0;
    const double us = p.is_object() ? num(p, "us") : 0;
    CEILING_ENSURE(bytes > 0 && us > 0, "measured_ceilings.{}: a point needs positive bytes and us",
                   key);
    pts.push_back({bytes, us * 1e-6});
  }
  std::sort(pts.begin(), pts.end(),
            [](const ProbePoint& a, const ProbePoint& b) { return a.bytes < b.bytes; });
  for (size_t i = 1; i < pts.size(); ++i)
    CEILING_ENSURE(pts[i].bytes > pts[i - 1].bytes, "measured_ceilings.{}: two points at {} bytes",
                   key, pts[i].bytes);
  return pts;
}

std::string base_op(const std::string& op) {
  const std::string suffix = "_cfg";
  if (op.size() > suffix.size() &&
      op.compare(op.size() - suffix.size(), suffix.size(), suffix) == 0)
    return op.substr(0, op.size() - suffix.size());
  return op;
}

double p_num(const json& p, const char* key) {
  auto it = p.find(key);
  if (it == p.end() || !it->is_number()) fail("params.{} missing", key);
  return it->get<double>();
}

bool p_flag(const json& p, const char* key) {
  auto it = p.find(key);
  return it != p.end() && it->is_boolean() && it->get<bool>();
}

// Written bytes as the cases of src/bench/cases/*.cpp count them in cost(), for result files
// written before the harness recorded write_bytes (r9 and earlier): only where op + params fix
// them. Attention's case does not split its bytes, so neither does this.
std::optional<double> legacy_write_bytes(const std::string& op, const json& p) {
  const std::string b = base_op(op);
  if (b == "embedding") return 2 * p_num(p, "T") * p_num(p, "H");
  if (b == "rms_norm" || b == "rms_norm_residual")  // out (+ the residual written back)
    return 2 * p_num(p, "T") * p_num(p, "H") * (p_flag(p, "residual") ? 2 : 1);
  if (b == "rms_norm_heads") return 2 * p_num(p, "T") * p_num(p, "heads") * p_num(p, "D");
  if (b == "silu_mul") return 2 * p_num(p, "T") * p_num(p, "I");
  if (b == "linear_gemv_fused") {
    if (p_flag(p, "rope"))  // q out, k and v into the cache
      return 2 * p_num(p, "M") * (p_num(p, "Hq") + 2 * p_num(p, "Hkv")) * p_num(p, "D");
    return 2 * p_num(p, "M") * (p_flag(p, "silu_pairs") ? p_num(p, "N") / 2 : p_num(p, "N"));
  }
  if (b == "linear" || b == "linear_gemv" || b == "linear_cublaslt") {
    auto it = p.find("out_dtype");
    const bool f32 = it != p.end() && it->is_string() && it->get<std::string>() == "f32";
    return (f32 ? 4 : 2) * p_num(p, "M") * p_num(p, "N");
  }
  if (b == "rope_kv_write" || b == "qk_norm_rope_kv_write")  // q back, k and v into the cache
    return 2 * p_num(p, "T") * (p_num(p, "Hq") + 2 * p_num(p, "Hkv")) * p_num(p, "D");
  if (b == "argmax" || b == "sample" || b == "sample_mixed") return 4 * p_num(p, "S");
  return std::nullopt;
}

// Output tiles as LinearCase::cost() counts them for its cuBLASLt path (128 x 128), for the same
// older files. Prefill attention's tiles depend on its kernel plan, which the file does not hold.
std::optional<int64_t> legacy_tiles(const std::string& op, const json& p, DType math) {
  const std::string b = base_op(op);
  if ((b == "linear" || b == "linear_cublaslt") && math == DType::kBF16) {
    const auto M = static_cast<int64_t>(p_num(p, "M")), N = static_cast<int64_t>(p_num(p, "N"));
    return ((M + 127) / 128) * ((N + 127) / 128);
  }
  if (b == "attention_prefill") return std::nullopt;
  return 0;  // GEMVs, decode attention and the streaming kernels: not wave-quantized
}

// Whether the case's kernel is launched with PDL, for files written before the harness recorded
// it (r11 and earlier): LinearCase::cost() runs cuBLASLt (no PDL) exactly when its math is bf16
// (linear_cublaslt always; linear when it dispatches to cuBLASLt); every other kernel of
// src/kernels/cuda is launched with launch_pdl.
bool legacy_pdl(const std::string& op, DType math) {
  const std::string b = base_op(op);
  return !((b == "linear" || b == "linear_cublaslt") && math == DType::kBF16);
}

// The non-MMA work of the sm90 warp-specialized prefill kernels (both producers), for files
// written before the harness recorded it: their counts are the SASS of the kernel source the
// r10+ files ran (attention_prefill_sm90_ws.cu unchanged since a36ac68, the r10 commit; those
// files are the ones that record `tiles`). params hold the first sequence's q_len and ctx, so
// only uniform batches are derived. nullopt: not this kernel, or not derivable.
std::optional<NonMmaWork> legacy_non_mma(const std::string& op, const json& c, const json& p) {
  if (base_op(op) != "attention_prefill" || !c.contains("tiles")) return std::nullopt;
  auto k = p.find("kernel");
  const std::string kernel = k != p.end() && k->is_string() ? k->get<std::string>() : "";
  if ((kernel != "wgmma_ws" && kernel != "wgmma_tma") || !p_flag(p, "uniform")) return std::nullopt;
  const int batch = static_cast<int>(p_num(p, "batch"));
  const std::pair<int, int> seq{static_cast<int>(p_num(p, "q_len")),
                                static_cast<int>(p_num(p, "ctx"))};
  return prefill_ws_work(std::vector<std::pair<int, int>>(batch, seq),
                         static_cast<int>(p_num(p, "Hq")), static_cast<int>(p_num(p, "D")));
}

// Recorded non-MMA fields (written by the harness since they entered the model).
NonMmaWork recorded_non_mma(const json& c) {
  NonMmaWork w;
  w.mma_flops = num(c, "mma_flops");
  w.sfu_ops = num(c, "sfu_ops");
  w.fp32_ops = num(c, "fp32_ops");
  w.issue_slots = num(c, "issue_slots");
  w.mma_groups = static_cast<int>(num(c, "mma_groups", 1));
  return w;
}

RejoinCase rejoin_case(const json& c, const GpuCeilings& g) {
  RejoinCase r;
  r.op = c.value("op", "");
  r.shape = c.value("shape", "");
  r.dispatched = c.value("dispatched", true);
  r.measured_s = num(c, "time_ms_median") * 1e-3;
  r.recorded_s = num(c, "predicted_ms") * 1e-3;
  const std::string math = c.value("math", "");
  const auto dt = parse_dtype(math);
  if (!dt) fail("case {} {}: unknown math dtype '{}'", r.op, r.shape, math);
  r.math = *dt;
  KernelCost& k = r.cost;
  k.flops = num(c, "flops");
  k.bytes = num(c, "bytes");
  k.launches = static_cast<int>(num(c, "launches", 1));
  k.round_trips = static_cast<int>(num(c, "round_trips", 1));
  k.l2_reuse_bytes = num(c, "l2_reuse_bytes");
  const json params = c.value("params", json::object());
  std::vector<std::string> notes;
  try {
    if (c.contains("write_bytes")) {
      k.write_bytes = num(c, "write_bytes");
    } else if (auto w = legacy_write_bytes(r.op, params); w && *w <= k.bytes) {
      k.write_bytes = *w;
      notes.push_back("write_bytes from params");
    } else {
      notes.push_back("write_bytes unknown");
    }
    if (c.contains("tiles")) {
      k.tiles = static_cast<int64_t>(num(c, "tiles"));
    } else if (auto t = legacy_tiles(r.op, params, r.math)) {
      k.tiles = *t;
      if (*t > 0) notes.push_back("tiles from params");
    } else {
      notes.push_back("tiles unknown");
    }
    if (auto it = c.find("pdl"); it != c.end() && it->is_boolean()) {
      k.pdl = it->get<bool>();
    } else {
      k.pdl = legacy_pdl(r.op, r.math);
      if (!k.pdl) notes.push_back("pdl from op");
    }
    if (c.contains("mma_groups")) {
      k.non_mma = recorded_non_mma(c);
    } else if (auto w = legacy_non_mma(r.op, c, params)) {
      k.non_mma = *w;
      notes.push_back("non-MMA work from params");
    }
  } catch (const Error& e) {
    fail("case {} {}: {}", r.op, r.shape, e.what());
  }
  for (const auto& n : notes) r.derived += (r.derived.empty() ? "" : ", ") + n;
  r.now = predict(g, k, r.math, true);
  return r;
}

double gap(double measured_s, double predicted_s) {
  return predicted_s > 0 ? measured_s / predicted_s : INFINITY;
}

struct Counts {
  int cases = 0, recorded = 0, now = 0;
};

// Dispatched cases per op (first-seen order) and in all.
std::pair<std::vector<std::pair<std::string, Counts>>, Counts> count(const RejoinRun& r,
                                                                     double band) {
  std::vector<std::pair<std::string, Counts>> ops;
  Counts all;
  for (const RejoinCase& c : r.cases) {
    if (!c.dispatched) continue;
    auto it = std::find_if(ops.begin(), ops.end(), [&](const auto& o) { return o.first == c.op; });
    if (it == ops.end()) it = ops.insert(ops.end(), {c.op, Counts{}});
    const bool rec = within(c.measured_s, c.recorded_s, band);
    const bool now = within(c.measured_s, c.now.time_predicted_s, band);
    for (Counts* n : {&it->second, &all}) {
      ++n->cases;
      n->recorded += rec;
      n->now += now;
    }
  }
  return {ops, all};
}

// Dispatched cases (op + shape) present in every run, and how many are within the band in all.
Counts on_every_file(const std::vector<RejoinRun>& runs, double band) {
  std::map<std::string, std::pair<int, std::pair<bool, bool>>> seen;  // key -> (runs, (rec, now))
  for (const RejoinRun& r : runs) {
    std::set<std::string> here;
    for (const RejoinCase& c : r.cases) {
      const std::string key = c.op + " " + c.shape;
      if (!c.dispatched || !here.insert(key).second) continue;
      auto [it, fresh] = seen.try_emplace(key, 0, std::make_pair(true, true));
      ++it->second.first;
      it->second.second.first &= within(c.measured_s, c.recorded_s, band);
      it->second.second.second &= within(c.measured_s, c.now.time_predicted_s, band);
    }
  }
  Counts n;
  for (const auto& [key, v] : seen) {
    if (v.first != static_cast<int>(runs.size())) continue;
    ++n.cases;
    n.recorded += v.second.first;
    n.now += v.second.second;
  }
  return n;
}

}  // namespace

GpuCeilings ceilings_from_bench_run(const json& device, const json& measured, const json& clocks) {
  GpuCeilings g;
  try {
    g = ceilings_for(gpu_id_for_device(device.value("gpu", "")), false);
  } catch (const Error&) {
    g.gpu_id = "unknown";
    g.gpu_name = device.value("gpu", "unknown");
    g.fp32_flops = 60e12;
    auto cc = device.find("compute_capability");
    if (cc != device.end() && *cc == "9.0") set_sm_pipe_rates(g, "hopper");
  }
  if (num(clocks, "sm_mhz") > 0) g.sm_clock_hz = num(clocks, "sm_mhz") * 1e6;
  g.measured = true;
  g.source = "measured at the start of the benchmark run";
  g.sm_count = device.value("sm_count", g.sm_count);
  g.l2_bytes = device.value("l2_bytes", g.l2_bytes);
  const double read_gbps = num(measured, "read_gbps"), bf16 = num(measured, "bf16_gemm_tflops");
  CEILING_ENSURE(read_gbps > 0 && bf16 > 0,
                 "measured_ceilings: read_gbps and bf16_gemm_tflops must be positive");
  g.mem_bw = read_gbps * 1e9;
  g.bf16_flops = bf16 * 1e12;
  g.bw_efficiency = 1;
  g.compute_efficiency = 1;
  const double launch_graph_us = num(measured, "launch_graph_us");
  g.launch_graph_s = launch_graph_us * 1e-6;
  g.kernel_floor_s = std::max(0.0, (num(measured, "small_kernel_us") - launch_graph_us) * 1e-6);
  if (num(measured, "round_trip_us") > 0) g.round_trip_s = num(measured, "round_trip_us") * 1e-6;
  // A non-positive intercept or rate is noise, not a cost: left 0 (unknown).
  g.stream_fixed_s = std::max(0.0, num(measured, "stream_fixed_us") * 1e-6);
  g.rw_fixed_s = std::max(0.0, num(measured, "rw_fixed_us") * 1e-6);
  g.stream_bw = std::max(0.0, num(measured, "stream_gbps") * 1e9);
  g.rw_bw = std::max(0.0, num(measured, "rw_gbps") * 1e9);
  g.stream_points = points(measured, "stream_points");
  g.rw_points = points(measured, "rw_points");
  g.stream_serial_fixed_s = std::max(0.0, num(measured, "stream_serial_fixed_us") * 1e-6);
  g.stream_serial_bw = std::max(0.0, num(measured, "stream_serial_gbps") * 1e9);
  g.stream_serial_points = points(measured, "stream_serial_points");
  return g;
}

RejoinRun rejoin_run(const json& run, const std::string& origin) {
  try {
    CEILING_ENSURE(run.is_object() && run.contains("cases") && run["cases"].is_array(),
                   "not a `ceiling bench kernels` result (no cases array)");
    CEILING_ENSURE(run.contains("measured_ceilings") && run["measured_ceilings"].is_object(),
                   "no measured_ceilings (written before the benchmark measured its ceilings)");
    RejoinRun r;
    r.origin = origin;
    r.gpu = run.value("gpu", "unknown");
    r.git_sha = run.value("git_sha", "unknown");
    r.date = run.value("date", "");
    r.ceilings =
        ceilings_from_bench_run(run.value("device", json::object()), run["measured_ceilings"],
                                run.value("clocks", json::object()));
    for (const json& c : run["cases"])
      if (c.is_object() && c.contains("time_ms_median") && c.contains("bytes"))
        r.cases.push_back(rejoin_case(c, r.ceilings));
    return r;
  } catch (const Error& e) {
    fail("{}: {}", origin, e.what());
  }
}

RejoinRun load_rejoin_run(const std::string& path) {
  constexpr uint64_t kMaxBytes = 256ull << 20;  // a run's kernels file is a few MB
  const json j = parse_json_or_fail(read_regular_file(path, kMaxBytes), path);
  return rejoin_run(j, path);
}

bool within(double measured_s, double predicted_s, double band) {
  if (!(predicted_s > 0)) return false;
  const double g = measured_s / predicted_s;
  return g >= 1 / (1 + band) && g <= 1 + band;  // as bench/render_results.py counts
}

std::string rejoin_table(const std::vector<RejoinRun>& runs, double band) {
  std::string out;
  const int pct = static_cast<int>(std::lround(band * 100));
  for (const RejoinRun& r : runs) {
    const auto [ops, all] = count(r, band);
    out += fmt::format("{}: {}, git {}, {}\n", r.origin, r.gpu, r.git_sha, r.date);
    out += fmt::format(
        "dispatched cases within ±{}%: recorded prediction {}/{}, current model {}/{}\n\n", pct,
        all.recorded, all.cases, all.now, all.cases);
    out += fmt::format("  {:<24} {:>5} {:>9} {:>6}\n", "op", "cases", "recorded", "now");
    for (const auto& [op, n] : ops)
      out += fmt::format("  {:<24} {:>5} {:>9} {:>6}\n", op, n.cases, n.recorded, n.now);
    out += fmt::format("\n  {:<24} {:<44} {:>9} {:>9} {:>6} {:>9} {:>6} {:<9} {}\n", "op", "shape",
                       "meas_us", "rec_us", "gap", "now_us", "gap", "limiter", "derived");
    for (const RejoinCase& c : r.cases) {
      if (!c.dispatched) continue;
      const double g_rec = gap(c.measured_s, c.recorded_s);
      const double g_now = gap(c.measured_s, c.now.time_predicted_s);
      out += fmt::format(
          "  {:<24} {:<44} {:>9.2f} {:>9.2f} {:>5.2f}{} {:>9.2f} {:>5.2f}{} {:<9} {}\n", c.op,
          c.shape.substr(0, 44), c.measured_s * 1e6, c.recorded_s * 1e6, g_rec,
          within(c.measured_s, c.recorded_s, band) ? ' ' : '*', c.now.time_predicted_s * 1e6, g_now,
          within(c.measured_s, c.now.time_predicted_s, band) ? ' ' : '*',
          limiter_name(c.now.limiter), c.derived);
    }
    out += "\n";
  }
  if (runs.size() > 1) {
    const Counts n = on_every_file(runs, band);
    out += fmt::format(
        "dispatched cases in every file ({}), within ±{}% in all of them: recorded {}, current "
        "model {}\n",
        n.cases, pct, n.recorded, n.now);
  }
  out += "gap = measured / predicted; * = outside the band\n";
  return out;
}

json rejoin_json(const std::vector<RejoinRun>& runs, double band) {
  json out;
  out["band"] = band;
  json arr = json::array();
  for (const RejoinRun& r : runs) {
    const auto [ops, all] = count(r, band);
    json j;
    j["file"] = r.origin;
    j["gpu"] = r.gpu;
    j["git_sha"] = r.git_sha;
    j["date"] = r.date;
    j["dispatched"] = all.cases;
    j["within_recorded"] = all.recorded;
    j["within_now"] = all.now;
    json o = json::object();
    for (const auto& [op, n] : ops)
      o[op] = {{"cases", n.cases}, {"within_recorded", n.recorded}, {"within_now", n.now}};
    j["ops"] = std::move(o);
    json cs = json::array();
    for (const RejoinCase& c : r.cases)
      cs.push_back({{"op", c.op},
                    {"shape", c.shape},
                    {"dispatched", c.dispatched},
                    {"measured_ms", c.measured_s * 1e3},
                    {"recorded_ms", c.recorded_s * 1e3},
                    {"predicted_ms", c.now.time_predicted_s * 1e3},
                    {"gap", gap(c.measured_s, c.now.time_predicted_s)},
                    {"limiter", std::string(limiter_name(c.now.limiter))},
                    {"latency_us", c.now.latency_s * 1e6},
                    {"non_mma_us", c.now.non_mma_s * 1e6},
                    {"write_bytes", c.cost.write_bytes},
                    {"tiles", c.cost.tiles},
                    {"pdl", c.cost.pdl},
                    {"derived", c.derived}});
    j["cases"] = std::move(cs);
    arr.push_back(std::move(j));
  }
  out["runs"] = std::move(arr);
  const Counts n = on_every_file(runs, band);
  out["on_every_file"] = {
      {"cases", n.cases}, {"within_recorded", n.recorded}, {"within_now", n.now}};
  return out;
}

}  // namespace ceiling::roofline
