// Totals over a step's ops, TTFT, the critical batch, and the memory report (model_cost.h).
#include <algorithm>
#include <array>
#include <map>

#include "core/status.h"
#include "roofline/model_cost.h"

namespace ceiling::roofline {
namespace {

bool is_linear(const OpCost& op) {
  return op.name == "qkv_proj" || op.name == "o_proj" || op.name == "gate_up_proj" ||
         op.name == "down_proj" || op.name == "lm_head";
}

// Layer-1 compute and memory time of the linear layers at this scenario.
std::pair<double, double> linear_times(const ModelConfig& m, const GpuCeilings& gpu,
                                       const Scenario& s) {
  double comp = 0, mem = 0;
  for (const auto& op : model_ops(m, gpu, s)) {
    if (!is_linear(op)) continue;
    comp += op.count * op.pred.compute_s;
    mem += op.count * op.pred.memory_s;
  }
  return {comp, mem};
}

// Smallest decode batch whose linear layers are compute-bound in layer 1 (compute time grows
// linearly with the batch, weight bytes do not: the predicate is monotone).
std::optional<int64_t> critical_batch(const ModelConfig& m, const GpuCeilings& gpu, Scenario s) {
  s.phase = Phase::kDecode;
  auto bound = [&](int64_t b) {
    s.batch = b;
    auto [comp, mem] = linear_times(m, gpu, s);
    return comp >= mem;
  };
  int64_t hi = 1;
  constexpr int64_t kMax = int64_t{1} << 24;
  while (hi < kMax && !bound(hi)) hi *= 2;
  if (!bound(hi)) return std::nullopt;
  int64_t lo = hi / 2;  // lo is not bound (or 0)
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (bound(mid) ? hi : lo) = mid;
  }
  return hi;
}

double step_time(const std::vector<OpCost>& ops) {
  double t = 0;
  for (const auto& op : ops) t += op.count * op.pred.time_predicted_s;
  return t;
}

}  // namespace

StepReport predict_step(const ModelConfig& m, const GpuCeilings& gpu, const Scenario& s) {
  StepReport r;
  r.model = m.name;
  r.gpu = gpu;
  r.scenario = s;
  r.ops = model_ops(m, gpu, s);

  std::array<double, 4> share{}, share1{};  // time per limiter (layer 2, layer 1)
  double tensor_time_at_peak = 0;           // sum of tensor FLOPs / their peak
  for (const auto& op : r.ops) {
    const double n = static_cast<double>(op.count);
    r.flops += n * op.cost.flops;
    r.bytes += n * op.cost.bytes;
    r.time_roofline_s += n * op.pred.time_roofline_s;
    r.time_predicted_s += n * op.pred.time_predicted_s;
    r.launches += op.count * op.cost.launches;
    share[static_cast<int>(op.pred.limiter)] += n * op.pred.time_predicted_s;
    share1[static_cast<int>(op.pred.roofline_limiter)] += n * op.pred.time_roofline_s;
    if (op.math != DType::kF32 && op.cost.flops > 0)
      tensor_time_at_peak += n * op.cost.flops / gpu.peak(op.math);
  }
  auto argmax = [](const std::array<double, 4>& a) {
    return static_cast<Limiter>(std::max_element(a.begin(), a.end()) - a.begin());
  };
  r.limiter = argmax(share);
  r.roofline_limiter = argmax(share1);

  const double tokens = s.phase == Phase::kPrefill ? static_cast<double>(s.batch) * s.context
                                                   : static_cast<double>(s.batch);
  r.tokens_per_s = tokens / r.time_predicted_s;
  r.tokens_per_s_roofline = tokens / r.time_roofline_s;
  r.tensor_core_utilization = tensor_time_at_peak / r.time_predicted_s;
  r.tensor_core_utilization_roofline = tensor_time_at_peak / r.time_roofline_s;
  r.hbm_utilization = r.bytes / (r.time_predicted_s * gpu.mem_bw);

  if (s.phase == Phase::kPrefill) {
    r.ttft_s = r.time_predicted_s;
  } else {
    Scenario p = s;
    p.phase = Phase::kPrefill;
    r.ttft_s = step_time(model_ops(m, gpu, p));
  }
  r.critical_batch = critical_batch(m, gpu, s);
  r.memory = memory_report(m, gpu, s);
  return r;
}

}  // namespace ceiling::roofline
