#include <algorithm>
#include <vector>

#include "bench/ceilings.h"
#include "bench/device_util.h"
#include "core/check.h"
#include "kernels/cuda/gemm_lt.h"

namespace ceiling::bench {
namespace {

// Streaming read: 16-byte loads, kUnroll in flight per thread, grid-stride. The sink store is
// never taken (the data is random bf16 in [-1, 1)) but keeps the loads alive.
template <int kUnroll>
__global__ void read_kernel(const uint4* __restrict__ p, size_t n, uint32_t* sink) {
  uint32_t acc = 0;
  const size_t stride = size_t{gridDim.x} * blockDim.x;
  size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x;
  for (; i + (kUnroll - 1) * stride < n; i += kUnroll * stride) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = __ldcs(p + i + u * stride);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n; i += stride) {
    const uint4 v = __ldcs(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x7fc07fc0u) sink[0] = acc;  // two bf16 NaNs: never in the random data
}

__global__ void empty_kernel() {}
// One CTA reading 1 KB that no recent kernel touched (a DRAM round trip) and writing nothing
// unless the data holds an impossible value: the floor of a small memory-bound kernel.
__global__ void tiny_kernel(const int* p, int* sink) {
  const int v = p[threadIdx.x];
  if (v == 0x7fc07fc0) sink[threadIdx.x] = v;
}

// One CTA whose second read depends on its first (an index, then the element it names), both
// from memory no recent kernel touched: its node time minus tiny_kernel's is one dependent
// device-memory round trip as a kernel inside a graph sees it.
__global__ void chase_kernel(const int* p, const int* q, int* sink) {
  const int i = p[threadIdx.x] & 0xffff;  // random data: any offset inside q's 256 KB window
  const int v = q[i];
  if (v == 0x7fc07fc0) sink[threadIdx.x] = v;
}

template <typename F>
double median_ms(int reps, cudaStream_t s, F&& body) {
  std::vector<cudaEvent_t> ev(reps + 1);
  for (auto& e : ev) CEILING_CUDA_CHECK(cudaEventCreate(&e));
  CEILING_CUDA_CHECK(cudaEventRecord(ev[0], s));
  for (int r = 0; r < reps; ++r) {
    body();
    CEILING_CUDA_CHECK(cudaEventRecord(ev[r + 1], s));
  }
  CEILING_CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<double> t(reps);
  for (int r = 0; r < reps; ++r) {
    float ms = 0;
    CEILING_CUDA_CHECK(cudaEventElapsedTime(&ms, ev[r], ev[r + 1]));
    t[r] = ms;
  }
  for (auto& e : ev) cudaEventDestroy(e);
  std::sort(t.begin(), t.end());
  return t[reps / 2];
}

// Per-node time of a graph of `n` copies of a kernel launch; `flush` (untimed) runs before each
// timed replay.
template <typename Launch, typename Flush>
double graph_node_us(cudaStream_t s, int n, Launch&& launch, Flush&& flush) {
  cudaGraph_t g = nullptr;
  cudaGraphExec_t x = nullptr;
  CEILING_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < n; ++i) launch();
  CEILING_CUDA_CHECK(cudaStreamEndCapture(s, &g));
  CEILING_CUDA_CHECK(cudaGraphInstantiate(&x, g, 0));
  for (int i = 0; i < 3; ++i) CEILING_CUDA_CHECK(cudaGraphLaunch(x, s));
  constexpr int kReps = 20;
  std::vector<cudaEvent_t> ev(2 * kReps);
  for (auto& e : ev) CEILING_CUDA_CHECK(cudaEventCreate(&e));
  for (int r = 0; r < kReps; ++r) {
    flush();
    CEILING_CUDA_CHECK(cudaEventRecord(ev[2 * r], s));
    CEILING_CUDA_CHECK(cudaGraphLaunch(x, s));
    CEILING_CUDA_CHECK(cudaEventRecord(ev[2 * r + 1], s));
  }
  CEILING_CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<double> t(kReps);
  for (int r = 0; r < kReps; ++r) {
    float v = 0;
    CEILING_CUDA_CHECK(cudaEventElapsedTime(&v, ev[2 * r], ev[2 * r + 1]));
    t[r] = v;
  }
  for (auto& e : ev) cudaEventDestroy(e);
  std::sort(t.begin(), t.end());
  const double ms = t[kReps / 2];
  cudaGraphExecDestroy(x);
  cudaGraphDestroy(g);
  return ms * 1e3 / n;
}

}  // namespace

nlohmann::json MeasuredCeilings::to_json() const {
  return {{"read_gbps", read_gbps},
          {"bf16_gemm_tflops", bf16_gemm_tflops},
          {"launch_graph_us", launch_graph_us},
          {"small_kernel_us", small_kernel_us},
          {"round_trip_us", round_trip_us},
          {"method",
           {{"read_gbps",
             "16-byte streaming loads over a 4 GiB random buffer, best of 3 grids, "
             "median of 20"},
            {"bf16_gemm_tflops",
             "cuBLASLt 8192x8192x8192 bf16, fp32 compute, random data, "
             "median of 20"},
            {"launch_graph_us", "graph of 200 empty kernels, per node, median of 20"},
            {"small_kernel_us",
             "graph of 200 one-CTA kernels each reading 1 KB of cold memory, "
             "per node"},
            {"round_trip_us",
             "per-node time of a graph of 200 one-CTA kernels each reading a cold index and "
             "then the cold element it names, minus small_kernel_us"}}}};
}

MeasuredCeilings measure_ceilings(cudaStream_t s, size_t read_bytes) {
  MeasuredCeilings m;
  int dev = 0, sms = 0;
  CEILING_CUDA_CHECK(cudaGetDevice(&dev));
  CEILING_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  {
    DeviceBuffer buf(read_bytes), sink(64);
    fill_uniform(buf.as<__nv_bfloat16>(), read_bytes / 2, 0x5eed, -1.0f, 1.0f, s);
    const size_t n = read_bytes / 16;
    const auto* p = buf.as<const uint4>();
    for (int per_sm : {4, 8, 16}) {
      const unsigned grid = static_cast<unsigned>(sms * per_sm);
      auto body = [&] { read_kernel<4><<<grid, 256, 0, s>>>(p, n, sink.as<uint32_t>()); };
      body();
      CEILING_CUDA_CHECK(cudaGetLastError());
      const double ms = median_ms(20, s, body);
      m.read_gbps = std::max(m.read_gbps, read_bytes / (ms * 1e-3) / 1e9);
    }
  }
  {
    constexpr int kN = 8192;
    DeviceBuffer a(size_t{kN} * kN * 2), b(size_t{kN} * kN * 2), c(size_t{kN} * kN * 2);
    fill_uniform(a.as<__nv_bfloat16>(), size_t{kN} * kN, 1, -1.0f, 1.0f, s);
    fill_uniform(b.as<__nv_bfloat16>(), size_t{kN} * kN, 2, -1.0f, 1.0f, s);
    cuda::LtGemm lt;
    auto body = [&] {
      lt.run(a.as<__nv_bfloat16>(), b.as<__nv_bfloat16>(), nullptr, c.get(), DType::kBF16, kN, kN,
             kN, s)
          .throw_if_error();
    };
    for (int i = 0; i < 3; ++i) body();
    const double ms = median_ms(20, s, body);
    m.bf16_gemm_tflops = 2.0 * kN * kN * double{kN} / (ms * 1e-3) / 1e12;
  }
  {
    // 200 nodes, each reading its own 1 KB, 2 MB apart (400 MB: far past the L2 between replays).
    constexpr size_t kStride = size_t{2} << 20;
    DeviceBuffer cold(200 * kStride), flush(size_t{256} << 20), sink(4096);
    fill_uniform(cold.as<__nv_bfloat16>(), cold.bytes() / 2, 3, -1.0f, 1.0f, s);
    fill_uniform(flush.as<__nv_bfloat16>(), flush.bytes() / 2, 4, -1.0f, 1.0f, s);
    m.launch_graph_us = graph_node_us(
        s, 200, [&] { empty_kernel<<<1, 32, 0, s>>>(); }, [] {});
    int node = 0;
    const size_t n16 = flush.bytes() / 16;
    const auto evict = [&] {  // evict the 200 lines: stream 256 MB of other data through the L2
      read_kernel<4><<<sms * 8, 256, 0, s>>>(flush.as<const uint4>(), n16, sink.as<uint32_t>());
    };
    m.small_kernel_us = graph_node_us(
        s, 200,
        [&] {
          tiny_kernel<<<1, 256, 0, s>>>(cold.as<int>() + (node++ % 200) * (kStride / 4),
                                        sink.as<int>());
        },
        evict);
    // Index in the first 1 KB of a node's 2 MB region, the element it names 1 MB further on.
    const double chase_us = graph_node_us(
        s, 200,
        [&] {
          const int* region = cold.as<int>() + (node++ % 200) * (kStride / 4);
          chase_kernel<<<1, 256, 0, s>>>(region, region + kStride / 8, sink.as<int>());
        },
        evict);
    m.round_trip_us = std::max(0.0, chase_us - m.small_kernel_us);
  }
  return m;
}

}  // namespace ceiling::bench
