// The JSON contract (stable field names) and the other renderings.
#include "roofline/report.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "model/config.h"

using namespace ceiling;
using namespace ceiling::roofline;

namespace {
StepReport sample(int64_t batch) {
  Scenario s;
  s.batch = batch;
  s.context = 2048;
  return predict_step(*find_preset("llama-3.2-1b"), ceilings_for("h200", false), s);
}
}  // namespace

TEST(Report, JsonContractFields) {
  const StepReport r = sample(8);
  const nlohmann::json j = report_json(r);
  for (const char* k : {"model", "gpu", "phase", "batch", "context", "ops", "total", "memory"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_EQ(j["model"], "llama-3.2-1b");
  EXPECT_EQ(j["gpu"], "h200");
  EXPECT_EQ(j["phase"], "decode");
  EXPECT_EQ(j["batch"], 8);
  EXPECT_EQ(j["context"], 2048);
  ASSERT_TRUE(j["ops"].is_array());
  double flops = 0, bytes = 0, t1 = 0, t2 = 0;
  for (const auto& o : j["ops"]) {
    for (const char* k :
         {"name", "flops", "bytes", "intensity", "limiter", "time_s_roofline", "time_s_predicted"})
      EXPECT_TRUE(o.contains(k)) << k;
    const std::string lim = o["limiter"];
    EXPECT_TRUE(lim == "compute" || lim == "memory" || lim == "overhead" || lim == "communication");
    flops += o["flops"].get<double>();
    bytes += o["bytes"].get<double>();
    t1 += o["time_s_roofline"].get<double>();
    t2 += o["time_s_predicted"].get<double>();
  }
  const auto& t = j["total"];
  for (const char* k : {"flops", "bytes", "time_s_roofline", "time_s_predicted", "tokens_per_s",
                        "tensor_core_utilization", "hbm_utilization", "limiter"})
    EXPECT_TRUE(t.contains(k)) << k;
  // Ops' numbers are step totals: they add up to the total.
  EXPECT_NEAR(flops / t["flops"].get<double>(), 1, 1e-12);
  EXPECT_NEAR(bytes / t["bytes"].get<double>(), 1, 1e-12);
  EXPECT_NEAR(t1 / t["time_s_roofline"].get<double>(), 1, 1e-12);
  EXPECT_NEAR(t2 / t["time_s_predicted"].get<double>(), 1, 1e-12);
  for (const char* k : {"tensor_core_utilization", "hbm_utilization"}) {
    EXPECT_GE(t[k].get<double>(), 0);
    EXPECT_LE(t[k].get<double>(), 1);
  }
  for (const char* k : {"weights_bytes", "kv_bytes_per_token", "max_sequences"})
    EXPECT_TRUE(j["memory"].contains(k)) << k;
  // llama-3.2-1b: 2 x 16 layers x 8 KV heads x 64 x 2 B = 32768 B per token.
  EXPECT_EQ(j["memory"]["kv_bytes_per_token"], 32768.0);
  EXPECT_TRUE(j["parameters"].is_array());
  EXPECT_FALSE(j["parameters"].empty());
}

TEST(Report, TableAndCsvMentionEveryOp) {
  const StepReport r = sample(1);
  const std::string table = report_table(r);
  const std::string csv = report_csv(r);
  for (const auto& op : r.ops) {
    EXPECT_NE(table.find(op.name), std::string::npos) << op.name;
    EXPECT_NE(csv.find(op.name + ","), std::string::npos) << op.name;
  }
  EXPECT_EQ(csv.rfind("op,count,flops,bytes,intensity,limiter", 0), 0u);
  const std::string sweep = sweep_csv({sample(1), sample(2)});
  EXPECT_EQ(std::count(sweep.begin(), sweep.end(), '\n'), 3);
  EXPECT_NE(sweep_table({sample(1), sample(2)}, "batch").find("batch"), std::string::npos);
}
