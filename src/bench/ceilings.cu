#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "bench/ceilings.h"
#include "bench/device_util.h"
#include "core/check.h"
#include "hw/measured.h"
#include "kernels/cuda/gemm_lt.h"
#include "kernels/cuda/pdl.cuh"

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

// ---- Grid-wide probes (FixedCosts) -----------------------------------------------------------
// Shaped like the kernels whose fixed cost they stand for: 128 threads per CTA, 16-byte loads
// that do not allocate in L1, four in flight per thread, many CTAs each taking a contiguous piece
// and exiting. The stream probe is the M = 1 GEMV's (2 rows × 4096 bf16 = 16 KiB per CTA, two
// rounds of loads); the rw probe is RMSNorm's at H = 4096 (one 8 KiB row per CTA in registers).
//
// PDL: each calls pdl_launch_dependents() first and pdl_wait() before its first load, although no
// kernel writes what it reads. The kernels the probes stand for (norms, RoPE + KV write, SiLU,
// attention) read activations the previous kernel wrote, so they wait first too and cannot overlap
// their first loads with the predecessor's drain. A GEMV issues its first weight loads before
// waiting, so it can come out somewhat under rw_fixed.
// The stream probe is also timed launched plainly (stream_serial): without the attribute the
// next launch starts only once this one has drained, which is how cuBLASLt's kernels (launched
// without PDL) chain in a graph.
constexpr int kProbeThreads = 128;
constexpr int kProbeLoads = 4;                                            // per thread in flight
constexpr size_t kProbeRound = size_t{kProbeThreads} * 16 * kProbeLoads;  // 8 KiB per CTA round
constexpr int kStreamRounds = 2;
constexpr size_t kStreamCtaBytes = kProbeRound * kStreamRounds;  // 16 KiB
constexpr size_t kRwRowBytes = kProbeRound;                      // 8 KiB: 4096 bf16

__device__ __forceinline__ uint4 load_stream(const uint4* p) {
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
  return r;
}

// Reads its CTA's 16 KiB; the sink store is never taken (random bf16 in [-1, 1)).
__global__ void __launch_bounds__(kProbeThreads)
    stream_probe_kernel(const uint4* __restrict__ p, uint32_t* sink) {
  cuda::detail::pdl_launch_dependents();
  cuda::detail::pdl_wait();
  const uint4* q = p + blockIdx.x * (kStreamCtaBytes / 16) + threadIdx.x;
  uint32_t acc = 0;
#pragma unroll 1
  for (int r = 0; r < kStreamRounds; ++r, q += kProbeRound / 16) {
    uint4 v[kProbeLoads];
#pragma unroll
    for (int u = 0; u < kProbeLoads; ++u) v[u] = load_stream(q + u * kProbeThreads);
#pragma unroll
    for (int u = 0; u < kProbeLoads; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  if (acc == 0x7fc07fc0u) sink[0] = acc;
}

// One row of 4096 bf16 per CTA: load, Σx² across the CTA (warp shuffles, then shared memory),
// write the row times rsqrt(mean + eps): the stores depend on every load of the CTA.
__global__ void __launch_bounds__(kProbeThreads)
    rw_probe_kernel(const uint4* __restrict__ in, uint4* __restrict__ out) {
  __shared__ float warp_ss[kProbeThreads / 32];
  cuda::detail::pdl_launch_dependents();
  cuda::detail::pdl_wait();
  const size_t base = blockIdx.x * (kRwRowBytes / 16) + threadIdx.x;
  uint4 v[kProbeLoads];
#pragma unroll
  for (int u = 0; u < kProbeLoads; ++u) v[u] = load_stream(in + base + u * kProbeThreads);
  float ss = 0.0f;
#pragma unroll
  for (int u = 0; u < kProbeLoads; ++u) {
    const auto* h = reinterpret_cast<const __nv_bfloat162*>(&v[u]);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float2 f = __bfloat1622float2(h[e]);
      ss = fmaf(f.x, f.x, fmaf(f.y, f.y, ss));
    }
  }
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if (threadIdx.x % 32 == 0) warp_ss[threadIdx.x / 32] = ss;
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int w = 0; w < kProbeThreads / 32; ++w) total += warp_ss[w];
  const float inv = rsqrtf(total / (kRwRowBytes / 2) + 1e-6f);
#pragma unroll
  for (int u = 0; u < kProbeLoads; ++u) {
    uint4 o;
    const auto* h = reinterpret_cast<const __nv_bfloat162*>(&v[u]);
    auto* oh = reinterpret_cast<__nv_bfloat162*>(&o);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float2 f = __bfloat1622float2(h[e]);
      oh[e] = __floats2bfloat162_rn(f.x * inv, f.y * inv);
    }
    out[base + u * kProbeThreads] = o;
  }
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

// Instantiated graphs, destroyed with the owner (a throw while timing leaks nothing).
struct GraphExecs {
  std::vector<cudaGraphExec_t> x;
  ~GraphExecs() {
    for (auto e : x) cudaGraphExecDestroy(e);
  }
};

// Per-launch µs of `graphs` CUDA graphs of `launches` captured launches each (launch j of graph
// g is enqueue(g · launches + j)), replayed round-robin back to back between events as
// bench/timing.cpp replays a case's graphs: median replay time / launches.
template <typename Enqueue>
double chain_us(cudaStream_t s, int graphs, int launches, Enqueue&& enqueue) {
  GraphExecs ge;
  for (int g = 0; g < graphs; ++g) {
    cudaGraph_t graph = nullptr;
    CEILING_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    try {
      for (int j = 0; j < launches; ++j) enqueue(g * launches + j);
    } catch (...) {  // leave the stream usable: end the capture before the error propagates
      if (cudaStreamEndCapture(s, &graph) == cudaSuccess && graph) cudaGraphDestroy(graph);
      throw;
    }
    CEILING_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
    cudaGraphExec_t x = nullptr;
    const cudaError_t e = cudaGraphInstantiate(&x, graph, 0);
    cudaGraphDestroy(graph);
    CEILING_CUDA_CHECK(e);
    ge.x.push_back(x);
  }
  int next = 0;
  auto replay = [&] { CEILING_CUDA_CHECK(cudaGraphLaunch(ge.x[next++ % graphs], s)); };
  for (int i = 0; i < 3 * graphs; ++i) replay();  // upload and warm up every graph
  return median_ms(20, s, replay) * 1e3 / launches;
}

// Launches per graph at a size whose pool holds `regions` copies: every copy once (the L2 never
// holds what the next launch reads), at least 32 so that the replay's own cost (graph launch,
// the first node's missing PDL overlap) is spread thin, at most 512 to keep capture short.
int chain_launches(size_t regions) {
  return static_cast<int>(std::clamp<size_t>(regions, 32, 512));
}

// The stream probe over `bytes` per launch, launch i reading copy i mod (pool / bytes).
// With `pdl` false the launches are plain (no PDL attribute: the kernel's pdl calls are no-ops),
// so each waits for its predecessor to drain, as a library kernel (cuBLASLt) does in a graph.
double stream_us(cudaStream_t s, const DeviceBuffer& pool, size_t bytes, uint32_t* sink, int graphs,
                 int launches, bool pdl = true) {
  const size_t regions = pool.bytes() / bytes;
  const auto* p = pool.as<const uint4>();
  const dim3 grid(static_cast<unsigned>(bytes / kStreamCtaBytes));
  return chain_us(s, graphs, launches, [&](int i) {
    const uint4* q = p + (i % regions) * (bytes / 16);
    if (pdl) {
      CEILING_CUDA_CHECK(
          cuda::detail::launch_pdl(stream_probe_kernel, grid, dim3(kProbeThreads), 0, s, q, sink));
    } else {
      stream_probe_kernel<<<grid, kProbeThreads, 0, s>>>(q, sink);
      CEILING_CUDA_CHECK(cudaGetLastError());
    }
  });
}

// The rw probe moving `bytes` per launch (half read, half written), launch i on the i-th pair of
// half-size copies (input, output) mod what the pool holds.
double rw_us(cudaStream_t s, const DeviceBuffer& pool, size_t bytes, int launches) {
  const size_t half = bytes / 2, pairs = pool.bytes() / bytes;
  auto* p = pool.as<uint4>();
  const dim3 grid(static_cast<unsigned>(half / kRwRowBytes));
  return chain_us(s, 1, launches, [&](int i) {
    uint4* in = p + (i % pairs) * (bytes / 16);
    CEILING_CUDA_CHECK(cuda::detail::launch_pdl(rw_probe_kernel, grid, dim3(kProbeThreads), 0, s,
                                                static_cast<const uint4*>(in), in + half / 16));
  });
}

// Least squares over the points; the method text ends with them, so a file that keeps only the
// text (data/ceilings/) still lets the fit be checked.
void fit(LaunchLine& l, std::string method) {
  std::vector<std::pair<double, double>> xy;
  for (const auto& p : l.points) xy.emplace_back(p.bytes, p.us * 1e-6);
  const hw::LineFit f = hw::fit_fixed_plus_rate(xy);
  l.fixed_us = f.fixed_s * 1e6;
  l.gbps = f.bytes_per_s / 1e9;
  method.append("; points (bytes: us per launch (launches per graph)):");
  for (const auto& p : l.points)  // appends only: GCC 12 misreads "lit" + string&& (-Wrestrict)
    method.append(" ")
        .append(std::to_string(static_cast<size_t>(p.bytes)))
        .append(": ")
        .append(std::to_string(p.us))
        .append(" (")
        .append(std::to_string(p.launches))
        .append(")");
  l.method = std::move(method);
}

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kProbeSizes[] = {1 * kMiB, 8 * kMiB, 32 * kMiB, 128 * kMiB, 256 * kMiB};
constexpr size_t kLargest = 256 * kMiB;

// How the probes are run, for their method strings.
std::string probe_method(const char* kernel, size_t pool_bytes, bool pdl = true) {
  std::string m = std::string(kernel) +
                  "; CTAs of 128 threads, 16-byte ld.global.nc.L1::no_allocate loads, 4 in flight "
                  "per thread; pdl_launch_dependents, then pdl_wait before the first load; sizes "
                  "1, 8, 32, 128, 256 MiB, launches rotating over a ";
  m += std::to_string(pool_bytes / kMiB);
  m += " MiB random buffer (no launch reads what the L2 holds); a CUDA graph of max(32, copies) "
       "back-to-back ";
  m += pdl ? "launch_pdl launches"
           : "plain launches (no PDL attribute: the pdl calls are no-ops and each launch waits "
             "for its predecessor to drain, as cuBLASLt's kernels do)";
  m += " (at most 512), per launch = median of 20 replays / launches; least-squares line "
       "per-launch time = fixed + bytes / rate";
  return m;
}

LaunchLine stream_line(cudaStream_t s, const DeviceBuffer& pool, uint32_t* sink, bool pdl) {
  LaunchLine l;
  for (size_t b : kProbeSizes) {
    const int n = chain_launches(pool.bytes() / b);
    l.points.push_back({double(b), n, stream_us(s, pool, b, sink, 1, n, pdl)});
  }
  fit(l, probe_method("streaming read, grid = bytes / 16 KiB (each CTA its own contiguous 16 KiB, "
                      "then exits)",
                      pool.bytes(), pdl));
  return l;
}

LaunchLine rw_line(cudaStream_t s, const DeviceBuffer& pool) {
  LaunchLine l;
  for (size_t b : kProbeSizes) {
    const int n = chain_launches(pool.bytes() / b);
    l.points.push_back({double(b), n, rw_us(s, pool, b, n)});
  }
  fit(l, probe_method("read -> block reduce -> write (RMSNorm-like), bytes = read + written, grid "
                      "= bytes / 2 / 8 KiB (each CTA one 8 KiB row: sum of x^2 across the CTA "
                      "through shared memory, then the row times rsqrt(mean) to another buffer)",
                      pool.bytes()));
  return l;
}

}  // namespace

nlohmann::json LaunchLine::points_json() const {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& p : points)
    a.push_back({{"bytes", p.bytes}, {"launches", p.launches}, {"us", p.us}});
  return a;
}

FixedCosts measure_fixed_costs(cudaStream_t s) {
  int dev = 0, l2 = 0;
  CEILING_CUDA_CHECK(cudaGetDevice(&dev));
  CEILING_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  // ≥ 4× the L2 and ≥ two copies of the largest size, a multiple of it (every size divides it).
  const size_t want = std::max<size_t>(4 * size_t(l2), 2 * kLargest);
  DeviceBuffer pool((want + kLargest - 1) / kLargest * kLargest), sink(64);
  fill_uniform(pool.as<__nv_bfloat16>(), pool.bytes() / 2, 0xf1ed, -1.0f, 1.0f, s);
  FixedCosts f;
  f.stream = stream_line(s, pool, sink.as<uint32_t>(), true);
  f.rw = rw_line(s, pool);
  f.stream_serial = stream_line(s, pool, sink.as<uint32_t>(), false);
  // Two one-launch graphs alternating between two copies, as a case with runs_per_replay = 1.
  const double single = stream_us(s, pool, kLargest, sink.as<uint32_t>(), 2, 1);
  f.single_launch_extra_us = single - f.stream.points.back().us;
  f.single_launch_method =
      "diagnostic: the 256 MiB stream probe as the only launch of its graph (two graphs "
      "alternating two copies, median of 20 replays) minus its per-launch time in the chain";
  return f;
}

nlohmann::json MeasuredCeilings::to_json() const {
  return {{"read_gbps", read_gbps},
          {"bf16_gemm_tflops", bf16_gemm_tflops},
          {"launch_graph_us", launch_graph_us},
          {"small_kernel_us", small_kernel_us},
          {"round_trip_us", round_trip_us},
          {"stream_fixed_us", fixed.stream.fixed_us},
          {"stream_gbps", fixed.stream.gbps},
          {"rw_fixed_us", fixed.rw.fixed_us},
          {"rw_gbps", fixed.rw.gbps},
          {"stream_serial_fixed_us", fixed.stream_serial.fixed_us},
          {"stream_serial_gbps", fixed.stream_serial.gbps},
          {"stream_points", fixed.stream.points_json()},
          {"rw_points", fixed.rw.points_json()},
          {"stream_serial_points", fixed.stream_serial.points_json()},
          {"single_launch_extra_us", fixed.single_launch_extra_us},
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
             "then the cold element it names, minus small_kernel_us"},
            {"stream_fixed_us", fixed.stream.method},
            {"stream_gbps", fixed.stream.method},
            {"rw_fixed_us", fixed.rw.method},
            {"rw_gbps", fixed.rw.method},
            {"stream_serial_fixed_us", fixed.stream_serial.method},
            {"stream_serial_gbps", fixed.stream_serial.method},
            {"single_launch_extra_us", fixed.single_launch_method}}}};
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
  m.fixed = measure_fixed_costs(s);
  return m;
}

}  // namespace ceiling::bench
