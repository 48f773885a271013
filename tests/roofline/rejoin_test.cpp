// Re-predicting benchmark result files: the ceilings rebuilt from a run's measurements, the cost
// of each case (recorded, or derived from op + params for older files), and the counts.
#include "roofline/rejoin.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/status.h"
#include "hw/measured.h"

using namespace ceiling;
using namespace ceiling::roofline;
using nlohmann::json;

namespace {

json measured() {
  return {{"read_gbps", 4600.0},
          {"bf16_gemm_tflops", 800.0},
          {"launch_graph_us", 0.5},
          {"small_kernel_us", 0.8},
          {"round_trip_us", 0.25},
          {"stream_fixed_us", 1.4},
          {"stream_gbps", 4680.0},
          {"rw_fixed_us", 1.26},
          {"rw_gbps", 4000.0},
          {"stream_points", json::array({{{"bytes", 1e6}, {"launches", 512}, {"us", 1.75}}})},
          {"rw_points", json::array({{{"bytes", 8e6}, {"launches", 64}, {"us", 3.6}},
                                     {{"bytes", 1e6}, {"launches", 512}, {"us", 1.8}}})}};
}

json a_case(const std::string& op, const std::string& shape, json params, double bytes,
            const std::string& math, double measured_ms, double recorded_ms) {
  return {{"op", op},
          {"shape", shape},
          {"params", std::move(params)},
          {"bytes", bytes},
          {"flops", 1e6},
          {"math", math},
          {"launches", 1},
          {"round_trips", 2},
          {"dispatched", true},
          {"time_ms_median", measured_ms},
          {"predicted_ms", recorded_ms}};
}

json a_run() {
  json cases = json::array();
  // Written by a newer harness: write_bytes and tiles recorded.
  json silu =
      a_case("silu_mul", "T=64 I=14336", {{"T", 64}, {"I", 14336}}, 5505024, "f32", 0.0040, 0.0030);
  silu["write_bytes"] = 1835008.0;
  silu["tiles"] = 0;
  cases.push_back(silu);
  // Older files: derived from op + params where they fix it.
  cases.push_back(a_case("rms_norm_residual", "T=1 H=4096",
                         {{"T", 1}, {"H", 4096}, {"residual", true}}, 40960, "f32", 0.0023,
                         0.0022));
  cases.push_back(a_case("linear_cublaslt", "M=16 N=4096 K=4096",
                         {{"M", 16}, {"N", 4096}, {"K", 4096}, {"out_dtype", "bf16"}}, 3.4e7,
                         "bf16", 0.0129, 0.0085));
  json prefill =
      a_case("attention_prefill", "S=1 q=4096", {{"q_len", 4096}}, 1.34e8, "bf16", 0.41, 0.18);
  prefill["round_trips"] = 1;
  cases.push_back(prefill);
  json variant = a_case("linear_gemv_cfg", "M=1 N=4096 K=4096 cfg=x",
                        {{"M", 1}, {"N", 4096}, {"K", 4096}, {"out_dtype", "bf16"}}, 3.36e7, "f32",
                        0.02, 0.012);
  variant["dispatched"] = false;
  cases.push_back(variant);
  cases.push_back({{"op", "argmax"}, {"shape", "S=1"}, {"error", "launch failed"}});
  return {{"gpu", "NVIDIA H200"},
          {"git_sha", "abc1234"},
          {"date", "2026-11-23T00:00:00Z"},
          {"device", {{"gpu", "NVIDIA H200"}, {"sm_count", 132}, {"l2_bytes", 52428800}}},
          {"measured_ceilings", measured()},
          {"cases", cases}};
}

}  // namespace

TEST(Rejoin, CeilingsComeFromTheRunsMeasurements) {
  const GpuCeilings g = ceilings_from_bench_run(a_run()["device"], measured());
  EXPECT_EQ(g.gpu_id, "h200");
  EXPECT_TRUE(g.measured);
  EXPECT_DOUBLE_EQ(g.mem_bw, 4600e9);
  EXPECT_DOUBLE_EQ(g.bf16_flops, 800e12);
  EXPECT_EQ(g.bw_efficiency, 1);
  EXPECT_NEAR(g.kernel_floor_s, 0.3e-6, 1e-15);
  EXPECT_NEAR(g.round_trip_s, 0.25e-6, 1e-15);
  EXPECT_NEAR(g.rw_fixed_s, 1.26e-6, 1e-15);
  EXPECT_DOUBLE_EQ(g.rw_bw, 4000e9);
  ASSERT_EQ(g.rw_points.size(), 2u);
  EXPECT_DOUBLE_EQ(g.rw_points[0].bytes, 1e6);  // sorted
  EXPECT_NEAR(g.rw_points[0].seconds, 1.8e-6, 1e-15);
  ASSERT_EQ(g.stream_points.size(), 1u);
  // The plainly launched stream probe: absent in older runs (unknown), carried when present.
  EXPECT_EQ(g.stream_serial_fixed_s, 0);
  EXPECT_EQ(g.stream_serial_bw, 0);
  EXPECT_TRUE(g.stream_serial_points.empty());
  json ms = measured();
  ms["stream_serial_fixed_us"] = 3.1;
  ms["stream_serial_gbps"] = 4500.0;
  ms["stream_serial_points"] = json::array({{{"bytes", 8e6}, {"launches", 64}, {"us", 5.2}},
                                            {{"bytes", 1e6}, {"launches", 512}, {"us", 3.4}}});
  const GpuCeilings sg = ceilings_from_bench_run(a_run()["device"], ms);
  EXPECT_NEAR(sg.stream_serial_fixed_s, 3.1e-6, 1e-15);
  EXPECT_DOUBLE_EQ(sg.stream_serial_bw, 4500e9);
  ASSERT_EQ(sg.stream_serial_points.size(), 2u);
  EXPECT_DOUBLE_EQ(sg.stream_serial_points[0].bytes, 1e6);  // sorted
  EXPECT_NEAR(sg.stream_serial_points[1].seconds, 5.2e-6, 1e-15);
  ms["stream_serial_fixed_us"] = -0.1;  // noise: unknown
  EXPECT_EQ(ceilings_from_bench_run(a_run()["device"], ms).stream_serial_fixed_s, 0);
  ms["stream_serial_points"] = json::array({{{"us", 1}}});
  EXPECT_THROW(ceilings_from_bench_run(a_run()["device"], ms), Error);
  // A non-positive intercept is noise: unknown. No points: none.
  json m = measured();
  m["stream_fixed_us"] = -0.2;
  m.erase("rw_points");
  const GpuCeilings h = ceilings_from_bench_run(a_run()["device"], m);
  EXPECT_EQ(h.stream_fixed_s, 0);
  EXPECT_TRUE(h.rw_points.empty());
  // An unknown device keeps the measured rates.
  const GpuCeilings u = ceilings_from_bench_run({{"gpu", "NVIDIA T4"}, {"sm_count", 40}}, m);
  EXPECT_EQ(u.gpu_id, "unknown");
  EXPECT_EQ(u.sm_count, 40);
  EXPECT_DOUBLE_EQ(u.mem_bw, 4600e9);
  // Malformed: no read rate, a point without a time, two points at one size.
  m = measured();
  m.erase("read_gbps");
  EXPECT_THROW(ceilings_from_bench_run(a_run()["device"], m), Error);
  m = measured();
  m["rw_points"] = json::array({{{"bytes", 1e6}}});
  EXPECT_THROW(ceilings_from_bench_run(a_run()["device"], m), Error);
  m["rw_points"] = json::array({{{"bytes", 1e6}, {"us", 1}}, {{"bytes", 1e6}, {"us", 2}}});
  EXPECT_THROW(ceilings_from_bench_run(a_run()["device"], m), Error);
}

TEST(Rejoin, CasesArePredictedWithRecordedOrDerivedCosts) {
  const RejoinRun r = rejoin_run(a_run(), "run.json");
  EXPECT_EQ(r.gpu, "NVIDIA H200");
  EXPECT_EQ(r.git_sha, "abc1234");
  ASSERT_EQ(r.cases.size(), 5u);  // the errored case has no time
  const RejoinCase& silu = r.cases[0];
  EXPECT_EQ(silu.derived, "");
  EXPECT_DOUBLE_EQ(silu.cost.write_bytes, 1835008);
  EXPECT_NEAR(silu.measured_s, 4e-6, 1e-18);
  EXPECT_NEAR(silu.recorded_s, 3e-6, 1e-18);
  const RejoinCase& norm = r.cases[1];
  EXPECT_EQ(norm.derived, "write_bytes from params");
  EXPECT_DOUBLE_EQ(norm.cost.write_bytes, 2.0 * 4096 * 2);  // residual and out
  const RejoinCase& lt = r.cases[2];
  // No "pdl" in the file: cuBLASLt is launched without PDL.
  EXPECT_EQ(lt.derived, "write_bytes from params, tiles from params, pdl from op");
  EXPECT_FALSE(lt.cost.pdl);
  EXPECT_TRUE(silu.cost.pdl);  // every other kernel: PDL, nothing to say
  EXPECT_TRUE(norm.cost.pdl);
  EXPECT_EQ(lt.cost.tiles, 32);  // 1 x 32 tiles of 128 x 128
  EXPECT_DOUBLE_EQ(lt.cost.write_bytes, 2.0 * 16 * 4096);
  EXPECT_EQ(lt.math, DType::kBF16);
  const RejoinCase& prefill = r.cases[3];
  EXPECT_EQ(prefill.derived, "write_bytes unknown, tiles unknown");
  EXPECT_EQ(prefill.cost.write_bytes, 0);
  EXPECT_EQ(prefill.cost.round_trips, 1);
  EXPECT_FALSE(r.cases[4].dispatched);
  EXPECT_TRUE(r.cases[4].cost.pdl);  // a GEMV (math f32)
  // Each prediction is predict() over the run's ceilings and the case's cost.
  for (const RejoinCase& c : r.cases)
    EXPECT_DOUBLE_EQ(c.now.time_predicted_s,
                     predict(r.ceilings, c.cost, c.math, true).time_predicted_s)
        << c.op;
  // A 40 KB norm is below the smallest rw point: the point's time (1.8 us) plus the rate
  // difference of its own bytes, nearly all overhead.
  EXPECT_NEAR(norm.now.time_predicted_s, 1.8e-6, 0.01e-6);
  EXPECT_EQ(norm.now.limiter, Limiter::kOverhead);
  // Without the plainly launched probe the cuBLASLt case is priced as before (as a PDL kernel).
  KernelCost as_pdl = lt.cost;
  as_pdl.pdl = true;
  EXPECT_DOUBLE_EQ(lt.now.time_predicted_s,
                   predict(r.ceilings, as_pdl, lt.math, true).time_predicted_s);
}

// The warp-specialized prefill kernel's non-MMA work: recorded, or (files since r10, which record
// tiles) derived from params for a uniform batch; the SM clock from the run's "clocks".
TEST(Rejoin, PrefillNonMmaWorkIsRecordedOrDerivedFromParams) {
  json run = a_run();
  run["clocks"] = {{"sm_mhz", 1755}};
  const json params = {{"batch", 2},      {"q_len", 300},     {"ctx", 300},
                       {"uniform", true}, {"Hq", 4},          {"Hkv", 2},
                       {"D", 64},         {"block_size", 16}, {"kernel", "wgmma_tma"}};
  json derived = a_case("attention_prefill", "S=2 q=300 ctx=300 Hq=4 Hkv=2 D=64 BS=16", params, 1e7,
                        "bf16", 0.05, 0.02);
  derived["tiles"] = 24;
  derived["write_bytes"] = 1e6;
  json recorded = derived;
  recorded["mma_flops"] = 5e9;
  recorded["sfu_ops"] = 1e8;
  recorded["fp32_ops"] = 0.0;
  recorded["issue_slots"] = 2e7;
  recorded["mma_groups"] = 1;
  json older = derived;  // r9 and earlier: no tiles, kernel source not the counted one
  older.erase("tiles");
  json other = derived;
  other["params"]["kernel"] = "mma_sync";
  run["cases"] = json::array({derived, recorded, older, other});
  const RejoinRun r = rejoin_run(run, "run.json");
  EXPECT_DOUBLE_EQ(r.ceilings.sm_clock_hz, 1755e6);
  ASSERT_EQ(r.cases.size(), 4u);
  // 2 sequences x 4 heads x 6 tiles (q_len 300: 1 + 2 + 3).
  const NonMmaWork want = prefill_ws_work({{300, 300}, {300, 300}}, 4, 64);
  EXPECT_DOUBLE_EQ(want.issue_slots, 48.0 * 8 * prefill_ws_loop_sass(64).instructions);
  const NonMmaWork& d = r.cases[0].cost.non_mma;
  EXPECT_EQ(r.cases[0].derived, "non-MMA work from params");
  EXPECT_DOUBLE_EQ(d.mma_flops, want.mma_flops);
  EXPECT_DOUBLE_EQ(d.sfu_ops, want.sfu_ops);
  EXPECT_DOUBLE_EQ(d.fp32_ops, want.fp32_ops);
  EXPECT_DOUBLE_EQ(d.issue_slots, want.issue_slots);
  EXPECT_EQ(d.mma_groups, 2);
  const NonMmaWork& rec = r.cases[1].cost.non_mma;
  EXPECT_EQ(r.cases[1].derived, "");
  EXPECT_DOUBLE_EQ(rec.mma_flops, 5e9);
  EXPECT_DOUBLE_EQ(rec.issue_slots, 2e7);
  EXPECT_EQ(rec.mma_groups, 1);
  for (int i : {2, 3}) EXPECT_FALSE(r.cases[i].cost.non_mma.any()) << i;
  EXPECT_GT(r.cases[0].now.non_mma_s, 0);
  EXPECT_EQ(r.cases[3].now.non_mma_s, 0);
}

TEST(Rejoin, RecordedPdlWinsAndTheSerialProbePricesNonPdlCases) {
  json run = a_run();
  run["measured_ceilings"]["stream_serial_fixed_us"] = 3.1;
  run["measured_ceilings"]["stream_serial_gbps"] = 4500.0;
  run["measured_ceilings"]["stream_serial_points"] =
      json::array({{{"bytes", 1e6}, {"launches", 512}, {"us", 3.4}},
                   {{"bytes", 8e6}, {"launches", 64}, {"us", 5.2}},
                   {{"bytes", 256e6}, {"launches", 32}, {"us", 62.0}}});
  json recorded = run["cases"][2];  // linear_cublaslt written by a harness that records pdl
  recorded["pdl"] = false;
  recorded["shape"] = "recorded";
  run["cases"].push_back(recorded);
  recorded["pdl"] = true;  // what the file says wins over the op
  recorded["shape"] = "recorded pdl";
  run["cases"].push_back(recorded);
  const RejoinRun r = rejoin_run(run, "run.json");
  ASSERT_EQ(r.cases.size(), 7u);
  const RejoinCase &derived = r.cases[2], &rec = r.cases[5], &rec_pdl = r.cases[6];
  EXPECT_FALSE(rec.cost.pdl);
  EXPECT_EQ(rec.derived, "write_bytes from params, tiles from params");
  EXPECT_TRUE(rec_pdl.cost.pdl);
  // The non-PDL case pays the serial probe's fixed cost at its size (between the 8 and 256 MB
  // points) less the graph node, plus one round trip for its second phase.
  const GpuCeilings& g = r.ceilings;
  const double b = rec.now.hbm_bytes, bw = 4500e9;
  const double e8 = 5.2e-6 - 8e6 / bw, e256 = 62e-6 - 256e6 / bw;
  const double fixed = e8 + (b - 8e6) / (256e6 - 8e6) * (e256 - e8);
  EXPECT_NEAR(rec.now.latency_s, fixed - g.launch_graph_s + g.round_trip_s, 1e-15);
  EXPECT_DOUBLE_EQ(derived.now.time_predicted_s, rec.now.time_predicted_s);
  EXPECT_GT(rec.now.time_predicted_s, rec_pdl.now.time_predicted_s);
  const json j = rejoin_json({r});
  EXPECT_EQ(j["runs"][0]["cases"][2]["pdl"], false);
  EXPECT_EQ(j["runs"][0]["cases"][0]["pdl"], true);
}

TEST(Rejoin, CountsTheDispatchedCasesWithinTheBand) {
  EXPECT_TRUE(within(1.15, 1.0, 0.15));
  EXPECT_TRUE(within(1.0, 1.15, 0.15));  // gap 1 / 1.15
  EXPECT_FALSE(within(1.0, 1.17, 0.15));
  EXPECT_FALSE(within(1.16, 1.0, 0.15));
  EXPECT_FALSE(within(1.0, 0.0, 0.15));
  const RejoinRun r = rejoin_run(a_run(), "run.json");
  const json j = rejoin_json({r});
  const json& run = j["runs"][0];
  EXPECT_EQ(run["dispatched"], 4);
  // Recorded gaps: 1.33, 1.05, 1.52, 2.28 -> one within.
  EXPECT_EQ(run["within_recorded"], 1);
  int now = 0;
  for (const RejoinCase& c : r.cases)
    now += c.dispatched && within(c.measured_s, c.now.time_predicted_s, 0.15);
  EXPECT_EQ(run["within_now"], now);
  EXPECT_EQ(run["ops"]["rms_norm_residual"]["within_recorded"], 1);
  EXPECT_FALSE(run["ops"].contains("linear_gemv_cfg"));  // not dispatched
  EXPECT_EQ(run["cases"].size(), 5u);
  EXPECT_EQ(j["on_every_file"]["cases"], 4);
  const std::string table = rejoin_table({r, r});
  EXPECT_NE(table.find("recorded prediction 1/4"), std::string::npos) << table;
  EXPECT_NE(table.find("in every file (4)"), std::string::npos) << table;
  EXPECT_EQ(table.find("linear_gemv_cfg"), std::string::npos);
  // Not a result file.
  EXPECT_THROW(rejoin_run(json::object(), "x.json"), Error);
  json no_ceilings = a_run();
  no_ceilings.erase("measured_ceilings");
  try {
    rejoin_run(no_ceilings, "x.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("x.json"), std::string::npos) << e.what();
  }
}

// The committed r9 result files, with the model features added since (written bytes at the rw
// rate, the fixed cost from the probe points) taken out, give back every prediction the run
// recorded: the rebuilt ceilings and costs are the ones the harness used. Prefill attention is
// left out (its tiles are not in the file).
TEST(Rejoin, CommittedRunsReproduceTheirRecordedPredictions) {
  for (const char* name : {"bench/results/2026-11-23r9_h100_kernels.json",
                           "bench/results/2026-11-23r9_h200_kernels.json"}) {
    const auto path = hw::find_repo_file(name);
    if (!path) GTEST_SKIP() << name << " not found from the working directory";
    std::ifstream in(*path);
    std::stringstream ss;
    ss << in.rdbuf();
    json run = json::parse(ss.str());
    for (const char* k : {"rw_gbps", "rw_points", "stream_points"})
      run["measured_ceilings"].erase(k);
    const RejoinRun r = rejoin_run(run, name);
    int compared = 0;
    for (const RejoinCase& c : r.cases) {
      if (c.op == "attention_prefill" || c.op == "attention_prefill_cfg") continue;
      EXPECT_NEAR(c.now.time_predicted_s / c.recorded_s, 1, 1e-9)
          << name << " " << c.op << " " << c.shape;
      ++compared;
    }
    EXPECT_GT(compared, 100) << name;
  }
}
