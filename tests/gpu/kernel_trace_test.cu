// The CUPTI kernel trace (hw/kernel_trace.h) on a real device: a captured graph of known kernels,
// replayed, comes back as those kernels in launch order, named, with positive times, only while
// the tracer is not paused, and the layer pattern is found.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include "core/check.h"
#include "gpu_test_util.h"
#include "hw/kernel_trace.h"

namespace ceiling::hw {
namespace {

// Spins ~`ns` nanoseconds per CTA, then writes: a kernel of known, non-trivial duration.
template <int kTag>
__global__ void spin_kernel(unsigned long long ns, int* out) {
  unsigned long long t0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  unsigned long long t = t0;
  while (t - t0 < ns) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  if (threadIdx.x == 0) out[blockIdx.x] = kTag;
}

struct Graph {
  cudaStream_t stream = nullptr;
  cudaGraphExec_t exec = nullptr;
  int* buf = nullptr;
  Graph() {
    CEILING_CUDA_CHECK(cudaStreamCreate(&stream));
    CEILING_CUDA_CHECK(cudaMalloc(&buf, 64 * sizeof(int)));
    cudaGraph_t g = nullptr;
    CEILING_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    for (int layer = 0; layer < 3; ++layer) {  // 3 "layers" of [A, B], then C
      spin_kernel<1><<<8, 64, 0, stream>>>(20000, buf);
      spin_kernel<2><<<16, 32, 0, stream>>>(10000, buf);
    }
    spin_kernel<3><<<4, 128, 0, stream>>>(5000, buf);
    CEILING_CUDA_CHECK(cudaStreamEndCapture(stream, &g));
    CEILING_CUDA_CHECK(cudaGraphInstantiate(&exec, g, 0));
    CEILING_CUDA_CHECK(cudaGraphDestroy(g));
  }
  ~Graph() {
    cudaGraphExecDestroy(exec);
    cudaFree(buf);
    cudaStreamDestroy(stream);
  }
  void replay(int n) {
    for (int i = 0; i < n; ++i) CEILING_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    CEILING_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
};

void expect_trace(const std::vector<KernelRecord>& recs, int replays) {
  ASSERT_EQ(recs.size(), 7u * replays);
  const TraceSummary s = summarize_replays(recs, replays, 3);
  ASSERT_EQ(s.kernels_per_step, 7);
  ASSERT_EQ(s.layer_kernels, 2) << trace_table(s);
  EXPECT_EQ(s.layer_first, 0);
  EXPECT_EQ(s.layer_slots[0].kernel, "spin_kernel<1>");
  EXPECT_EQ(s.layer_slots[1].kernel, "spin_kernel<2>");
  EXPECT_EQ(s.positions.back().kernel, "spin_kernel<3>");
  EXPECT_EQ(s.layer_slots[0].grid[0], 8);
  EXPECT_EQ(s.layer_slots[1].block[0], 32);
  // Each kernel spins its time (globaltimer: 1 µs resolution on some parts, hence the margin).
  EXPECT_GT(s.layer_slots[0].duration_us, 15);
  EXPECT_GT(s.layer_slots[1].duration_us, 7);
  EXPECT_GT(s.positions.back().duration_us, 3);
  // Serialized kernels: exposed ≈ duration, the step at least the sum of the spins.
  EXPECT_GT(s.step_us, 3 * (20 + 10) + 5 - 3);
  EXPECT_NEAR(s.exposed_us + s.idle_us, s.step_us, 1e-6);
}

// One test, in the order `bench latency --kernel-trace` uses the tracer: attached before the
// kernels first run (CUPTI names a kernel when its module loads, and the runtime loads lazily),
// paused through what is timed, resumed for the replays that are summarized.
TEST(KernelTraceGpu, GraphReplaysPausedAndResumed) {
  CEILING_REQUIRE_GPU();
  std::unique_ptr<KernelTracer> t = KernelTracer::start();
  EXPECT_THROW(KernelTracer::start(), Error);  // one at a time
  Graph g;                                     // first launches of the kernels: under the tracer
  g.replay(2);                                 // warm
  t->pause();
  g.replay(3);  // not collected
  t->resume();
  t->clear();  // what ran before is dropped
  g.replay(5);
  expect_trace(t->collect(), 5);
  t->pause();
  g.replay(2);
  EXPECT_TRUE(t->collect().empty());
}

}  // namespace
}  // namespace ceiling::hw
