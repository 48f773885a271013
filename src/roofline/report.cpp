#include "roofline/report.h"

#include <fmt/format.h>

#include <cmath>

#include "roofline/parameters.h"

namespace ceiling::roofline {
namespace {

using nlohmann::json;

std::string human_bytes(double b) {
  if (b >= 1e9) return fmt::format("{:.2f} GB", b / 1e9);
  if (b >= 1e6) return fmt::format("{:.2f} MB", b / 1e6);
  if (b >= 1e3) return fmt::format("{:.1f} kB", b / 1e3);
  return fmt::format("{:.0f} B", b);
}

std::string human_time(double s) {
  if (s >= 1) return fmt::format("{:.3f} s", s);
  if (s >= 1e-3) return fmt::format("{:.3f} ms", s * 1e3);
  return fmt::format("{:.2f} us", s * 1e6);
}

std::string human_rate(double x, const char* unit) {
  if (x >= 1e12) return fmt::format("{:.1f} T{}", x / 1e12, unit);
  if (x >= 1e9) return fmt::format("{:.1f} G{}", x / 1e9, unit);
  return fmt::format("{:.1f} {}", x, unit);
}

json number_or_null(double v) {
  return std::isfinite(v) ? json(v) : json(nullptr);
}

double intensity(double flops, double bytes) {
  return bytes > 0 ? flops / bytes : NAN;
}

std::string limiter_str(Limiter l) {
  return std::string(limiter_name(l));
}

}  // namespace

json report_json(const StepReport& r) {
  const Scenario& s = r.scenario;
  json j;
  j["model"] = r.model;
  j["gpu"] = r.gpu.gpu_id;
  j["gpu_name"] = r.gpu.gpu_name;
  j["phase"] = std::string(phase_name(s.phase));
  j["batch"] = s.batch;
  j["context"] = s.context;
  j["weight_dtype"] = std::string(weight_dtype_name(s.weights));
  j["group_size"] = s.group_size;
  j["w8a8"] = s.w8a8;
  j["kv_cache_dtype"] = s.kv_dtype == DType::kBF16 ? "bf16" : "fp8";
  j["tensor_parallel_size"] = s.tp;
  j["cuda_graphs"] = s.cuda_graphs;
  j["ceilings"] = r.gpu.measured ? "measured" : "datasheet";
  j["ceilings_source"] = r.gpu.source;

  json ops = json::array();
  for (const auto& op : r.ops) {
    const double n = static_cast<double>(op.count);
    json o;
    o["name"] = op.name;
    o["note"] = op.note;
    o["count"] = op.count;
    o["per_layer"] = op.per_layer;
    o["math"] = std::string(dtype_name(op.math));
    o["flops"] = n * op.cost.flops;
    o["bytes"] = n * op.cost.bytes;
    o["write_bytes"] = n * op.cost.write_bytes;
    o["weight_bytes"] = n * op.weight_bytes;
    o["activation_bytes"] = n * op.activation_bytes;
    o["kv_bytes"] = n * op.kv_bytes;
    o["nvlink_bytes"] = n * op.cost.nvlink_bytes;
    o["intensity"] = number_or_null(intensity(op.cost.flops, op.cost.bytes));
    o["limiter"] = limiter_str(op.pred.limiter);
    o["limiter_roofline"] = limiter_str(op.pred.roofline_limiter);
    o["time_s_roofline"] = n * op.pred.time_roofline_s;
    o["time_s_predicted"] = n * op.pred.time_predicted_s;
    o["time_s_predicted_each"] = op.pred.time_predicted_s;
    o["tiles"] = op.cost.tiles;
    o["wave_efficiency"] = op.pred.wave_efficiency;
    o["hbm_bytes_predicted"] = n * op.pred.hbm_bytes;
    ops.push_back(std::move(o));
  }
  j["ops"] = std::move(ops);

  json t;
  t["flops"] = r.flops;
  t["bytes"] = r.bytes;
  t["intensity"] = number_or_null(intensity(r.flops, r.bytes));
  t["time_s_roofline"] = r.time_roofline_s;
  t["time_s_predicted"] = r.time_predicted_s;
  t["tokens_per_s"] = r.tokens_per_s;
  t["tokens_per_s_roofline"] = r.tokens_per_s_roofline;
  t["tensor_core_utilization"] = r.tensor_core_utilization;
  t["tensor_core_utilization_roofline"] = r.tensor_core_utilization_roofline;
  t["hbm_utilization"] = r.hbm_utilization;
  t["limiter"] = limiter_str(r.limiter);
  t["limiter_roofline"] = limiter_str(r.roofline_limiter);
  t["launches"] = r.launches;
  t["ttft_s"] = r.ttft_s;
  t["critical_batch"] = r.critical_batch ? json(*r.critical_batch) : json(nullptr);
  j["total"] = std::move(t);

  j["fits"] = fits(r);
  j["memory"] = {{"weights_bytes", r.memory.weights_bytes},
                 {"kv_bytes_per_token", r.memory.kv_bytes_per_token},
                 {"max_sequences", r.memory.max_sequences},
                 {"usable_bytes", r.memory.usable_bytes},
                 {"device_bytes", r.gpu.memory_bytes}};

  const GpuCeilings& g = r.gpu;
  j["ceilings_used"] = {{"mem_bw", g.mem_bw},
                        {"bf16_flops", g.bf16_flops},
                        {"fp8_flops", g.fp8_flops},
                        {"int8_ops", g.int8_ops},
                        {"fp32_flops", g.fp32_flops},
                        {"nvlink_bw_per_direction", g.nvlink_bw},
                        {"sm_count", g.sm_count},
                        {"l2_bytes", g.l2_bytes},
                        {"ridge_point_bf16", g.bf16_flops / g.mem_bw}};
  json params = json::array();
  for (const auto& p : describe_parameters(g))
    params.push_back({{"name", p.name}, {"value", p.value}, {"source", p.source}});
  j["parameters"] = std::move(params);
  return j;
}

namespace {

std::string not_fit_warning(const StepReport& r) {
  const Scenario& s = r.scenario;
  return fmt::format(
      "WARNING: does not fit: batch {} of {} tokens needs weights {} + KV {}, {} usable on {} "
      "({} sequences fit): the predicted times and tok/s cannot be reached.\n",
      s.batch, s.context, human_bytes(r.memory.weights_bytes),
      human_bytes(r.memory.kv_bytes_per_token * static_cast<double>(s.batch) *
                  static_cast<double>(s.context)),
      human_bytes(r.memory.usable_bytes), r.gpu.gpu_id, r.memory.max_sequences);
}

}  // namespace

bool fits(const StepReport& r) {
  return r.memory.max_sequences >= r.scenario.batch;
}

std::string report_table(const StepReport& r) {
  const Scenario& s = r.scenario;
  const GpuCeilings& g = r.gpu;
  std::string out;
  out += fmt::format("{} on {} ({} ceilings: {}, {}), {} x{} TP\n", r.model, g.gpu_id,
                     g.measured ? "measured" : "datasheet", human_rate(g.mem_bw, "B/s"),
                     human_rate(g.bf16_flops, "FLOP/s bf16"),
                     s.cuda_graphs ? "CUDA graphs" : "eager", s.tp);
  out +=
      fmt::format("{}: batch {}, context {}, weights {}{}{}, KV cache {}\n\n", phase_name(s.phase),
                  s.batch, s.context, weight_dtype_name(s.weights),
                  s.weights == WeightDtype::kINT4 ? fmt::format(" (group {})", s.group_size) : "",
                  s.w8a8 ? " w8a8" : "", s.kv_dtype == DType::kBF16 ? "bf16" : "fp8");
  if (!fits(r)) out.insert(out.size() - 1, not_fit_warning(r));
  out += fmt::format("{:<22} {:>4} {:>11} {:>11} {:>9} {:>13} {:>12} {:>12} {:>6}\n", "op", "x",
                     "GFLOP", "MB", "FLOP/B", "limiter", "roofline", "predicted", "share");
  for (const auto& op : r.ops) {
    const double n = static_cast<double>(op.count);
    const double in = intensity(op.cost.flops, op.cost.bytes);
    out += fmt::format("{:<22} {:>4} {:>11.3f} {:>11.3f} {:>9} {:>13} {:>12} {:>12} {:>5.1f}%\n",
                       op.name, op.count, n * op.cost.flops / 1e9, n * op.cost.bytes / 1e6,
                       std::isfinite(in) ? fmt::format("{:.1f}", in) : "-",
                       limiter_name(op.pred.limiter), human_time(n * op.pred.time_roofline_s),
                       human_time(n * op.pred.time_predicted_s),
                       100 * n * op.pred.time_predicted_s / r.time_predicted_s);
  }
  out += fmt::format("{:<22} {:>4} {:>11.3f} {:>11.3f} {:>9.1f} {:>13} {:>12} {:>12}\n\n", "total",
                     "", r.flops / 1e9, r.bytes / 1e6, r.flops / r.bytes, limiter_name(r.limiter),
                     human_time(r.time_roofline_s), human_time(r.time_predicted_s));
  const char* unit = s.phase == Phase::kPrefill ? "prefill tok/s" : "tok/s";
  out += fmt::format("step time      {} predicted, {} roofline ({} limiter: {})\n",
                     human_time(r.time_predicted_s), human_time(r.time_roofline_s), "roofline",
                     limiter_name(r.roofline_limiter));
  out += fmt::format("throughput     {:.1f} {} predicted, {:.1f} roofline\n", r.tokens_per_s, unit,
                     r.tokens_per_s_roofline);
  out += fmt::format("TTFT           {} (prefill of {} x {} tokens)\n", human_time(r.ttft_s),
                     s.batch, s.context);
  out += fmt::format(
      "utilization    tensor cores {:.2f}% ({:.2f}% at the roofline time), HBM {:.1f}% "
      "(of the predicted time)\n",
      100 * r.tensor_core_utilization, 100 * r.tensor_core_utilization_roofline,
      100 * r.hbm_utilization);
  out += fmt::format("kernels        {} launches per step\n", r.launches);
  out += fmt::format(
      "critical batch {} (decode batch where the linear layers turn compute-bound; "
      "ridge {:.0f} FLOP/B bf16)\n",
      r.critical_batch ? fmt::format("{}", *r.critical_batch) : "none <= 2^24",
      g.bf16_flops / g.mem_bw);
  out += fmt::format(
      "memory         weights {} per GPU, KV {} per token, {} sequences of {} "
      "tokens fit in {} (after the reserve)\n",
      human_bytes(r.memory.weights_bytes), human_bytes(r.memory.kv_bytes_per_token),
      r.memory.max_sequences, s.context, human_bytes(r.memory.usable_bytes));
  if (!fits(r)) out += not_fit_warning(r);
  return out;
}

std::string report_csv(const StepReport& r) {
  std::string out =
      "op,count,flops,bytes,intensity,limiter,limiter_roofline,time_s_roofline,time_s_predicted\n";
  for (const auto& op : r.ops) {
    const double n = static_cast<double>(op.count);
    const double in = intensity(op.cost.flops, op.cost.bytes);
    out += fmt::format("{},{},{:.6g},{:.6g},{},{},{},{:.6g},{:.6g}\n", op.name, op.count,
                       n * op.cost.flops, n * op.cost.bytes,
                       std::isfinite(in) ? fmt::format("{:.6g}", in) : "",
                       limiter_name(op.pred.limiter), limiter_name(op.pred.roofline_limiter),
                       n * op.pred.time_roofline_s, n * op.pred.time_predicted_s);
  }
  out += fmt::format("total,,{:.6g},{:.6g},{:.6g},{},{},{:.6g},{:.6g}\n", r.flops, r.bytes,
                     r.flops / r.bytes, limiter_name(r.limiter), limiter_name(r.roofline_limiter),
                     r.time_roofline_s, r.time_predicted_s);
  return out;
}

std::string sweep_table(const std::vector<StepReport>& rs, const std::string& swept) {
  if (rs.empty()) return "";
  const StepReport& f = rs.front();
  std::string out =
      fmt::format("{} on {} ({}), {}, sweeping {}\n\n", f.model, f.gpu.gpu_id,
                  f.gpu.measured ? "measured" : "datasheet", phase_name(f.scenario.phase), swept);
  out +=
      fmt::format("{:>8} {:>8} {:>12} {:>12} {:>14} {:>9} {:>8} {:>13} {:>9}\n", "batch", "context",
                  "roofline", "predicted", "tok/s", "TC util", "HBM util", "limiter", "max seqs");
  int over = 0;
  for (const auto& r : rs) {
    out +=
        fmt::format("{:>8} {:>8} {:>12} {:>12} {:>14.1f} {:>8.2f}% {:>7.1f}% {:>13} {:>9}{}\n",
                    r.scenario.batch, r.scenario.context, human_time(r.time_roofline_s),
                    human_time(r.time_predicted_s), r.tokens_per_s, 100 * r.tensor_core_utilization,
                    100 * r.hbm_utilization, limiter_name(r.limiter), r.memory.max_sequences,
                    fits(r) ? "" : "  DOES NOT FIT");
    over += fits(r) ? 0 : 1;
  }
  if (over > 0)
    out += fmt::format(
        "\nWARNING: {} of {} points do not fit in {} (max seqs < batch): their times and tok/s "
        "cannot be reached.\n",
        over, rs.size(), f.gpu.gpu_id);
  return out;
}

std::string sweep_csv(const std::vector<StepReport>& rs) {
  std::string out =
      "model,gpu,phase,batch,context,flops,bytes,time_s_roofline,time_s_predicted,tokens_per_s,"
      "tensor_core_utilization,hbm_utilization,limiter,max_sequences\n";
  for (const auto& r : rs)
    out += fmt::format("{},{},{},{},{},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{:.6g},{},{}\n",
                       r.model, r.gpu.gpu_id, phase_name(r.scenario.phase), r.scenario.batch,
                       r.scenario.context, r.flops, r.bytes, r.time_roofline_s, r.time_predicted_s,
                       r.tokens_per_s, r.tensor_core_utilization, r.hbm_utilization,
                       limiter_name(r.limiter), r.memory.max_sequences);
  return out;
}

}  // namespace ceiling::roofline
