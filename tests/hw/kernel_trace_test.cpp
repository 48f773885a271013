// The kernel trace's summary (hw/kernel_trace.h) on synthetic records whose exposed and idle
// times are known by construction; the CUPTI collector itself is tested on a GPU
// (tests/gpu/kernel_trace_test.cu).
#include "hw/kernel_trace.h"

#include <gtest/gtest.h>

#include "core/status.h"

namespace ceiling::hw {
namespace {

TEST(KernelTrace, ShortNames) {
  EXPECT_EQ(short_kernel_name("_ZN7ceiling4cuda6detail11gemv_kernelILi1ELi8EEEvPKfi"),
            "gemv_kernel<1, 8>");
  // Template arguments keep their values, lose their namespaces; parentheses inside them stay.
  EXPECT_EQ(
      short_kernel_name("_ZN7ceiling4cuda6detail11gemv_kernelILi1ELi8ELNS0_10GemvFormatE1EEEvPKfi"),
      "gemv_kernel<1, 8, (GemvFormat)1>");
  EXPECT_EQ(short_kernel_name("_ZN7ceiling4cuda12_GLOBAL__N_113decode_kernelILi128EEEvNS0_"
                              "12DecodeParamsE"),
            "decode_kernel<128>");
  EXPECT_EQ(short_kernel_name("nvjet_tst_128x64_64x6_1x2_h_bz_TNT"),
            "nvjet_tst_128x64_64x6_1x2_h_bz_TNT");
}

// A replay (correlation id `corr`, starting at t0 ns): a prologue kernel P, `layers` layers of
// [A, B], an epilogue E. A starts 1 µs before the previous kernel ends (PDL overlap) and runs 5 µs
// (4 exposed); B starts 2 µs after A ends (2 idle) and runs 3 µs (all exposed). P runs 10 µs;
// E starts when the last B ends and runs 7 µs.
std::vector<KernelRecord> replay(uint64_t t0, uint32_t corr, int layers) {
  std::vector<KernelRecord> v;
  const auto add = [&](const char* name, uint64_t s, uint64_t e, int grid) {
    KernelRecord r;
    r.name = name;
    r.start_ns = s;
    r.end_ns = e;
    r.correlation = corr;
    r.grid = {grid, 1, 1};
    r.block = {128, 1, 1};
    v.push_back(r);
  };
  add("P", t0, t0 + 10000, 1);
  uint64_t end = t0 + 10000;
  for (int l = 0; l < layers; ++l) {
    add("A", end - 1000, end + 4000, 64);
    add("B", end + 6000, end + 9000, 32);
    end += 9000;
  }
  add("E", end, end + 7000, 8);
  return v;
}

TEST(KernelTrace, ExposedIdleAndLayerPattern) {
  const int layers = 4, replays = 3;
  std::vector<KernelRecord> all;
  // Replays appended out of order: the summary sorts by time.
  for (int r : {2, 0, 1}) {
    auto v = replay(1000000ull * r, 100 + r, layers);
    all.insert(all.end(), v.begin(), v.end());
  }
  const TraceSummary s = summarize_replays(all, replays, layers);
  EXPECT_EQ(s.replays, replays);
  EXPECT_EQ(s.kernels_per_step, 2 + 2 * layers);
  EXPECT_NEAR(s.step_us, 10 + 9 * layers + 7, 1e-9);
  EXPECT_NEAR(s.idle_us, 2.0 * layers, 1e-9);
  EXPECT_NEAR(s.exposed_us + s.idle_us, s.step_us, 1e-9);
  ASSERT_EQ(s.layer_kernels, 2);
  EXPECT_EQ(s.layer_first, 1);
  EXPECT_EQ(s.layers, layers);
  EXPECT_EQ(s.layer_slots[0].kernel, "A");
  EXPECT_NEAR(s.layer_slots[0].duration_us, 5, 1e-9);
  EXPECT_NEAR(s.layer_slots[0].exposed_us, 4, 1e-9);
  EXPECT_NEAR(s.layer_slots[0].idle_us, 0, 1e-9);
  EXPECT_EQ(s.layer_slots[1].kernel, "B");
  EXPECT_NEAR(s.layer_slots[1].exposed_us, 3, 1e-9);
  EXPECT_NEAR(s.layer_slots[1].idle_us, 2, 1e-9);
  EXPECT_NEAR(s.per_layer_us, 9, 1e-9);
  EXPECT_EQ(s.positions.back().kernel, "E");
  EXPECT_NEAR(s.positions.back().exposed_us, 7, 1e-9);
  const nlohmann::json j = s.to_json();
  EXPECT_EQ(j["layers"]["kernels_per_layer"], 2);
  EXPECT_EQ(j["positions"].size(), s.positions.size());
  const std::string t = trace_table(s);
  EXPECT_NE(t.find("4 x 2 kernels from #1"), std::string::npos) << t;
}

TEST(KernelTrace, SplitsByCountWhenCorrelationDoesNotSplit) {
  std::vector<KernelRecord> all;
  for (int r = 0; r < 2; ++r) {
    auto v = replay(1000000ull * r, 7, 3);  // one id for both replays
    all.insert(all.end(), v.begin(), v.end());
  }
  const TraceSummary s = summarize_replays(all, 2, 3);
  EXPECT_EQ(s.kernels_per_step, 8);
  EXPECT_NEAR(s.step_us, 10 + 27 + 7, 1e-9);
}

TEST(KernelTrace, RejectsRecordsThatDoNotSplit) {
  auto v = replay(0, 1, 2);
  v.pop_back();
  auto w = replay(1000000, 2, 2);
  v.insert(v.end(), w.begin(), w.end());
  EXPECT_THROW(summarize_replays(v, 2, 2), Error);  // 11 records, 2 replays
  EXPECT_THROW(summarize_replays({}, 1, 2), Error);
  // Equal counts, different kernels: the replays are not the same step.
  auto a = replay(0, 1, 2), b = replay(1000000, 2, 2);
  b[1].name = "Z";
  a.insert(a.end(), b.begin(), b.end());
  EXPECT_THROW(summarize_replays(a, 2, 2), Error);
}

TEST(KernelTrace, NoLayerPatternWhenLayersDoNotRepeat) {
  auto v = replay(0, 1, 3);
  v[3].grid[0] = 65;  // the second layer's A differs
  const TraceSummary s = summarize_replays(v, 1, 3);
  EXPECT_EQ(s.layer_kernels, 0);
  EXPECT_TRUE(s.layer_slots.empty());
  EXPECT_NE(trace_table(s).find("outside the layers"), std::string::npos);
}

}  // namespace
}  // namespace ceiling::hw
