#include "hw/measured.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

using namespace ceiling::hw;

namespace {

MeasuredCeilings sample() {
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<double> u(0.5, 1.0);
  MeasuredCeilings m;
  m.gpu_id = "h100-sxm";
  m.device_name = "NVIDIA H100 80GB HBM3";
  m.sm_count = 132;
  m.l2_bytes = 52428800;
  m.memory_bytes = 85520809984;
  m.sm_clock_mhz = 1980;
  m.mem_clock_mhz = 2619;
  m.memory_bus_bits = 5120;
  m.compute_capability = "9.0";
  m.read_bw = 3.0e12 * u(rng);
  m.copy_bw = 3.0e12 * u(rng);
  m.bf16_gemm_flops = 800e12 * u(rng);
  m.fp8_gemm_flops = 1400e12 * u(rng);
  m.launch_eager_s = 3e-6 * u(rng);
  m.launch_graph_s = 1e-6 * u(rng);
  m.small_kernel_s = 2e-6 * u(rng);
  m.stream_fixed_s = 3e-6 * u(rng);
  m.stream_bw = 3.0e12 * u(rng);
  m.rw_fixed_s = 3e-6 * u(rng);
  m.rw_bw = 3.0e12 * u(rng);
  m.stream_serial_fixed_s = 5e-6 * u(rng);
  m.stream_serial_bw = 3.0e12 * u(rng);
  m.date = "2026-11-21T00:00:00Z";
  m.driver = "580.159.04";
  m.cuda_runtime = "13.0";
  m.cublaslt = "130000";
  m.tool = "test";
  m.method["read_gbps"] = "test";
  return m;
}

}  // namespace

TEST(Measured, JsonRoundTripKeepsEveryField) {
  const MeasuredCeilings m = sample();
  const MeasuredCeilings r = parse_measured_ceilings(measured_ceilings_to_json(m), "mem");
  EXPECT_EQ(r.gpu_id, m.gpu_id);
  EXPECT_EQ(r.device_name, m.device_name);
  EXPECT_EQ(r.sm_count, m.sm_count);
  EXPECT_DOUBLE_EQ(r.l2_bytes, m.l2_bytes);
  EXPECT_NEAR(r.read_bw / m.read_bw, 1, 1e-12);
  EXPECT_NEAR(r.copy_bw / m.copy_bw, 1, 1e-12);
  EXPECT_NEAR(r.bf16_gemm_flops / m.bf16_gemm_flops, 1, 1e-12);
  EXPECT_NEAR(r.fp8_gemm_flops / m.fp8_gemm_flops, 1, 1e-12);
  EXPECT_NEAR(r.launch_eager_s / m.launch_eager_s, 1, 1e-12);
  EXPECT_NEAR(r.launch_graph_s / m.launch_graph_s, 1, 1e-12);
  EXPECT_NEAR(r.small_kernel_s / m.small_kernel_s, 1, 1e-12);
  EXPECT_NEAR(r.stream_fixed_s / m.stream_fixed_s, 1, 1e-12);
  EXPECT_NEAR(r.stream_bw / m.stream_bw, 1, 1e-12);
  EXPECT_NEAR(r.rw_fixed_s / m.rw_fixed_s, 1, 1e-12);
  EXPECT_NEAR(r.rw_bw / m.rw_bw, 1, 1e-12);
  EXPECT_NEAR(r.stream_serial_fixed_s / m.stream_serial_fixed_s, 1, 1e-12);
  EXPECT_NEAR(r.stream_serial_bw / m.stream_serial_bw, 1, 1e-12);
  EXPECT_EQ(r.date, m.date);
  EXPECT_EQ(r.driver, m.driver);
  EXPECT_EQ(r.method.at("read_gbps"), "test");
}

TEST(Measured, BadFilesFailNamingTheField) {
  auto expect_fail = [](const std::string& text, const std::string& needle) {
    try {
      parse_measured_ceilings(text, "f.json");
      ADD_FAILURE() << "expected an error for: " << text;
    } catch (const ceiling::Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("f.json"), std::string::npos) << e.what();
    }
  };
  expect_fail("not json", "not valid JSON");
  expect_fail("[]", "object");
  expect_fail("{}", "'gpu'");
  nlohmann::json j = nlohmann::json::parse(measured_ceilings_to_json(sample()));
  j["ceilings"]["read_gbps"] = 0;
  expect_fail(j.dump(), "ceilings.read_gbps");
  j["ceilings"]["read_gbps"] = -5;
  expect_fail(j.dump(), "ceilings.read_gbps");
  j["ceilings"]["read_gbps"] = "fast";
  expect_fail(j.dump(), "ceilings.read_gbps");
  j["ceilings"].erase("read_gbps");
  expect_fail(j.dump(), "ceilings.read_gbps");
  j = nlohmann::json::parse(measured_ceilings_to_json(sample()));
  j["ceilings"]["fp8_gemm_tflops"] = 0;  // allowed: no fp8 path
  EXPECT_NO_THROW(parse_measured_ceilings(j.dump(), "f.json"));
  j.erase("provenance");
  expect_fail(j.dump(), "provenance");
}

// Files written before the grid-wide probes lack their six fields: they read as 0 (unknown),
// and a file is written without them when they were not measured.
TEST(Measured, GridWideFieldsAreOptional) {
  nlohmann::json j = nlohmann::json::parse(measured_ceilings_to_json(sample()));
  for (const char* k : {"stream_fixed_us", "stream_gbps", "rw_fixed_us", "rw_gbps",
                        "stream_serial_fixed_us", "stream_serial_gbps"}) {
    ASSERT_TRUE(j["ceilings"].contains(k)) << k;
    j["ceilings"].erase(k);
  }
  const MeasuredCeilings old = parse_measured_ceilings(j.dump(), "old.json");
  EXPECT_EQ(old.stream_fixed_s, 0);
  EXPECT_EQ(old.stream_bw, 0);
  EXPECT_EQ(old.rw_fixed_s, 0);
  EXPECT_EQ(old.rw_bw, 0);
  EXPECT_EQ(old.stream_serial_fixed_s, 0);
  EXPECT_EQ(old.stream_serial_bw, 0);
  const nlohmann::json again = nlohmann::json::parse(measured_ceilings_to_json(old));
  for (const char* k : {"stream_fixed_us", "stream_gbps", "rw_fixed_us", "rw_gbps",
                        "stream_serial_fixed_us", "stream_serial_gbps"})
    EXPECT_FALSE(again["ceilings"].contains(k)) << k;
}

TEST(Measured, BadGridWideFieldsFailNamingTheField) {
  for (const char* k : {"stream_fixed_us", "stream_gbps", "rw_fixed_us", "rw_gbps",
                        "stream_serial_fixed_us", "stream_serial_gbps"}) {
    for (const nlohmann::json& bad : {nlohmann::json(-2.5), nlohmann::json(0),
                                      nlohmann::json("2.5"), nlohmann::json(nullptr)}) {
      nlohmann::json j = nlohmann::json::parse(measured_ceilings_to_json(sample()));
      j["ceilings"][k] = bad;
      try {
        parse_measured_ceilings(j.dump(), "f.json");
        ADD_FAILURE() << "expected an error for " << k << " = " << bad.dump();
      } catch (const ceiling::Error& e) {
        EXPECT_NE(std::string(e.what()).find(std::string("ceilings.") + k), std::string::npos)
            << e.what();
        EXPECT_NE(std::string(e.what()).find("f.json"), std::string::npos) << e.what();
      }
    }
  }
}

// The probes' raw points: optional, written only when measured, read back sorted by size; a
// malformed list fails naming it.
TEST(Measured, ProbePointsRoundTripSortedAndValidated) {
  MeasuredCeilings m = sample();
  m.rw_points = {{8388608, 4.1e-6}, {1048576, 1.86e-6}, {268435456, 91e-6}};  // unsorted
  const MeasuredCeilings r = parse_measured_ceilings(measured_ceilings_to_json(m), "mem");
  EXPECT_TRUE(r.stream_points.empty());
  ASSERT_EQ(r.rw_points.size(), 3u);
  EXPECT_DOUBLE_EQ(r.rw_points[0].bytes, 1048576);
  EXPECT_NEAR(r.rw_points[0].seconds, 1.86e-6, 1e-18);
  EXPECT_DOUBLE_EQ(r.rw_points[2].bytes, 268435456);
  EXPECT_TRUE(r.stream_serial_points.empty());
  EXPECT_FALSE(
      nlohmann::json::parse(measured_ceilings_to_json(sample()))["ceilings"].contains("rw_points"));
  EXPECT_FALSE(nlohmann::json::parse(measured_ceilings_to_json(sample()))["ceilings"].contains(
      "stream_serial_points"));
  // The plainly launched stream probe's points: the same round trip.
  m.stream_serial_points = {{268435456, 88e-6}, {1048576, 3.4e-6}};
  const MeasuredCeilings s2 = parse_measured_ceilings(measured_ceilings_to_json(m), "mem");
  ASSERT_EQ(s2.stream_serial_points.size(), 2u);
  EXPECT_DOUBLE_EQ(s2.stream_serial_points[0].bytes, 1048576);
  EXPECT_NEAR(s2.stream_serial_points[0].seconds, 3.4e-6, 1e-18);
  EXPECT_NEAR(s2.stream_serial_points[1].seconds, 88e-6, 1e-18);
  EXPECT_EQ(s2.rw_points.size(), 3u);
  const nlohmann::json good = nlohmann::json::parse(measured_ceilings_to_json(m));
  for (const char* key : {"rw_points", "stream_serial_points"})
    for (const nlohmann::json& bad : {nlohmann::json(3), nlohmann::json::array({1}),
                                      nlohmann::json::array({{{"bytes", 1048576}, {"us", -1}}}),
                                      nlohmann::json::array({{{"bytes", 1048576}}}),
                                      nlohmann::json::array({{{"bytes", 1048576}, {"us", 1}},
                                                             {{"bytes", 1048576}, {"us", 2}}})}) {
      nlohmann::json j = good;
      j["ceilings"][key] = bad;
      try {
        parse_measured_ceilings(j.dump(), "f.json");
        ADD_FAILURE() << "expected an error for " << key << " = " << bad.dump();
      } catch (const ceiling::Error& e) {
        EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("f.json"), std::string::npos) << e.what();
      }
    }
}

TEST(Measured, FitsFixedCostPlusRate) {
  // Exact points on t = 2.5 us + bytes / 4.5e12.
  std::vector<std::pair<double, double>> pts;
  for (double mib : {1, 8, 32, 128, 256}) {
    const double b = mib * 1048576;
    pts.emplace_back(b, 2.5e-6 + b / 4.5e12);
  }
  LineFit f = fit_fixed_plus_rate(pts);
  EXPECT_NEAR(f.fixed_s, 2.5e-6, 1e-15);
  EXPECT_NEAR(f.bytes_per_s / 4.5e12, 1, 1e-9);
  // Noise of ±0.1 us around the line moves the intercept by about that much, not more.
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<double> noise(-0.1e-6, 0.1e-6);
  for (auto& [b, t] : pts) t += noise(rng);
  f = fit_fixed_plus_rate(pts);
  EXPECT_NEAR(f.fixed_s, 2.5e-6, 0.2e-6);
  EXPECT_NEAR(f.bytes_per_s / 4.5e12, 1, 0.01);
  // A falling line has no rate; too few or identical sizes have no line.
  f = fit_fixed_plus_rate({{1e6, 3e-6}, {2e6, 2e-6}});
  EXPECT_EQ(f.bytes_per_s, 0);
  EXPECT_THROW(fit_fixed_plus_rate({{1e6, 3e-6}}), ceiling::Error);
  EXPECT_THROW(fit_fixed_plus_rate({{1e6, 3e-6}, {1e6, 4e-6}}), ceiling::Error);
}

TEST(Measured, FindsFilesUnderCeilingDataDir) {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("ceiling-measured-" + std::to_string(std::random_device{}()));
  fs::create_directories(dir / "ceilings");
  MeasuredCeilings m = sample();
  m.gpu_id = "rtx4090";
  { std::ofstream(dir / "ceilings" / "rtx4090.json") << measured_ceilings_to_json(m); }
  setenv("CEILING_DATA_DIR", dir.c_str(), 1);
  auto found = find_measured_ceilings_file("rtx4090");
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(load_measured_ceilings(*found).gpu_id, "rtx4090");
  EXPECT_FALSE(find_measured_ceilings_file("no-such-gpu").has_value());
  unsetenv("CEILING_DATA_DIR");
  EXPECT_THROW(load_measured_ceilings(dir / "missing.json"), ceiling::Error);
  fs::remove_all(dir);
}
