// Shared helpers for the gpu-labelled tests (tests/gpu/*_test.cpp):
//   CEILING_REQUIRE_GPU()   skips the test when no CUDA device is present;
//   fresh_seed()            a new random seed per run, recorded in the test's XML and trace;
//   fill_uniform / poison   device-side random fills (never zeros) and NaN poisoning
//                           (bench/device_util.h), DeviceBuffer, to_host / to_device;
//   rel_err                 ‖out − ref‖ / ‖ref‖ with non-finite outputs failing
//   (bench/check_util.h); expect_case_passes(c)   sets a benchmark case up with one input set and
//   asserts its check().
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>

#include "bench/case.h"
#include "bench/check_util.h"
#include "bench/device_util.h"

#define CEILING_REQUIRE_GPU()                                                                \
  do {                                                                                       \
    int ceiling_gpu_count_ = 0;                                                              \
    if (cudaGetDeviceCount(&ceiling_gpu_count_) != cudaSuccess || ceiling_gpu_count_ == 0) { \
      cudaGetLastError();                                                                    \
      GTEST_SKIP() << "no CUDA device";                                                      \
    }                                                                                        \
  } while (0)

namespace ceiling::gpu_test {

using bench::DeviceBuffer;
using bench::fill_uniform;
using bench::poison;
using bench::rel_err;
using bench::to_device;
using bench::to_host;

// A seed drawn fresh for every run; printed on failure and recorded as a test property.
// CEILING_TEST_SEED=<recorded seed> replays one.
inline uint64_t fresh_seed() {
  std::random_device rd;
  const char* fixed = std::getenv("CEILING_TEST_SEED");
  const uint64_t s = fixed ? std::strtoull(fixed, nullptr, 10) : (uint64_t{rd()} << 32) ^ rd();
  ::testing::Test::RecordProperty("seed", std::to_string(s));
  return s;
}

// RAII stream for a test.
struct Stream {
  cudaStream_t s = nullptr;
  Stream() { cudaStreamCreate(&s); }
  ~Stream() { cudaStreamDestroy(s); }
  operator cudaStream_t() const { return s; }
};

// Captures what `enqueue` puts on stream s into a CUDA graph, replays it once and waits: the
// same launches as running enqueue() on s, but from a graph (as the engine's decode step).
template <typename F>
void run_in_graph(cudaStream_t s, F&& enqueue) {
  cudaGraph_t g = nullptr;
  cudaGraphExec_t ge = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  enqueue();
  ASSERT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
  const cudaError_t ie = cudaGraphInstantiate(&ge, g, 0);
  cudaGraphDestroy(g);
  ASSERT_EQ(ie, cudaSuccess);
  EXPECT_EQ(cudaGraphLaunch(ge, s), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  cudaGraphExecDestroy(ge);
}

inline void expect_case_passes(bench::KernelCase& c, cudaStream_t s) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(c.op() + " " + c.shape() + " seed " + std::to_string(seed));
  c.setup(1, seed, s);
  const bench::CheckResult r = c.check(s);
  EXPECT_TRUE(r.passed()) << "rel err " << r.max_rel_err << " > tolerance " << r.tolerance << " ("
                          << r.detail << ") " << r.failure;
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

}  // namespace ceiling::gpu_test
