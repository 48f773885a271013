// Renders step reports: a readable table, the stable JSON contract, and CSV. For sweeps, a list of
// reports (JSON: an array of the single-report objects; table/CSV: one summary row per point).
//
// JSON contract (stable; fields may be added, never renamed):
//   model, gpu, phase, batch, context,
//   ops:   [{name, flops, bytes, intensity, limiter, time_s_roofline, time_s_predicted, ...}]
//   total: {flops, bytes, time_s_roofline, time_s_predicted, tokens_per_s,
//           tensor_core_utilization, hbm_utilization, limiter, ...}
//   memory: {weights_bytes, kv_bytes_per_token, max_sequences, ...}
//   fits:  false when the weights and `batch` sequences of `context` tokens do not fit in the
//          GPU's memory (max_sequences < batch); the times are then not reachable, and the
//          table and sweep table say so in a WARNING line.
// Op flops/bytes/times are totals over the step (the op's count included); utilizations are
// fractions 0..1.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "roofline/model_cost.h"

namespace ceiling::roofline {

// Whether the step's weights and KV cache fit in the GPU's usable memory.
bool fits(const StepReport& r);

nlohmann::json report_json(const StepReport& r);
std::string report_table(const StepReport& r);
std::string report_csv(const StepReport& r);

// `swept` names the swept variable ("batch" or "context").
std::string sweep_table(const std::vector<StepReport>& rs, const std::string& swept);
std::string sweep_csv(const std::vector<StepReport>& rs);

}  // namespace ceiling::roofline
