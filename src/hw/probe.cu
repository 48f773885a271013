// The probe's measurements. Each one: warm up, time `repeats` runs with CUDA events (host clock
// for eager launches), take the median. Bandwidths count the bytes each run must move.
#define CEILING_WITH_CUBLAS 1
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <memory>
#include <vector>

#include "core/check.h"
#include "hw/gpu_spec.h"
#include "hw/probe.h"

namespace ceiling::hw {
namespace {

struct DeviceBuffer {
  void* p = nullptr;
  explicit DeviceBuffer(size_t bytes) { CEILING_CUDA_CHECK(cudaMalloc(&p, bytes)); }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

struct Events {
  cudaEvent_t a{}, b{};
  Events() {
    CEILING_CUDA_CHECK(cudaEventCreate(&a));
    CEILING_CUDA_CHECK(cudaEventCreate(&b));
  }
  ~Events() {
    cudaEventDestroy(a);
    cudaEventDestroy(b);
  }
  double seconds() {
    CEILING_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CEILING_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    return ms * 1e-3;
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Times `fn` (enqueued on `st`) `repeats` times after two warm-ups; returns the median seconds.
template <typename F>
double time_median(cudaStream_t st, int repeats, F&& fn) {
  Events ev;
  for (int i = 0; i < 2; ++i) fn();
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    CEILING_CUDA_CHECK(cudaEventRecord(ev.a, st));
    fn();
    CEILING_CUDA_CHECK(cudaEventRecord(ev.b, st));
    t.push_back(ev.seconds());
  }
  return median(t);
}

// Streaming read: 16-byte loads, grid-stride, four in flight per thread. The xor is stored only
// when it equals a value it never takes, so the loads can't be dropped and nothing is written.
__global__ void read_kernel(const uint4* __restrict__ src, size_t n, uint32_t* sink) {
  uint32_t acc = 0;
  const size_t stride = size_t{gridDim.x} * blockDim.x;
  size_t i = size_t{blockIdx.x} * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    uint4 v0 = src[i], v1 = src[i + stride], v2 = src[i + 2 * stride], v3 = src[i + 3 * stride];
    acc ^= v0.x ^ v0.y ^ v0.z ^ v0.w ^ v1.x ^ v1.y ^ v1.z ^ v1.w;
    acc ^= v2.x ^ v2.y ^ v2.z ^ v2.w ^ v3.x ^ v3.y ^ v3.z ^ v3.w;
  }
  for (; i < n; i += stride) acc ^= src[i].x ^ src[i].y ^ src[i].z ^ src[i].w;
  if (acc == 0x9e3779b9u) *sink = acc;
}

__device__ uint32_t hash32(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}

// Uniform values in [-1, 1) from a counter hash (fresh per seed).
__device__ float uniform(uint64_t i, uint64_t seed) {
  return static_cast<float>(hash32(i * 0x9e3779b97f4a7c15ull + seed)) * (2.0f / 4294967296.0f) - 1;
}

__global__ void fill_bf16(__nv_bfloat16* p, size_t n, uint64_t seed) {
  for (size_t i = size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x)
    p[i] = __float2bfloat16(uniform(i, seed));
}

__global__ void fill_fp8(__nv_fp8_e4m3* p, size_t n, uint64_t seed) {
  for (size_t i = size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += size_t{gridDim.x} * blockDim.x)
    p[i] = __nv_fp8_e4m3(uniform(i, seed));
}

__global__ void empty_kernel() {}

// A tiny kernel that touches device memory: each thread reads 16 bytes of its slice.
__global__ void small_kernel(const uint4* __restrict__ src, uint32_t* sink) {
  const uint4 v = src[size_t{blockIdx.x} * blockDim.x + threadIdx.x];
  if ((v.x ^ v.y ^ v.z ^ v.w) == 0x9e3779b9u) *sink = v.x;
}

struct LtHandle {
  cublasLtHandle_t h{};
  LtHandle() { CEILING_CUBLAS_CHECK(cublasLtCreate(&h)); }
  ~LtHandle() { cublasLtDestroy(h); }
};

// D[M,N] = A^T B with A stored [K, M] (column-major, so "TN"), all n x n; bf16 or fp8 inputs,
// bf16 output, fp32 accumulation. Returns FLOP/s (median).
double gemm_rate(cudaStream_t st, int n, cudaDataType_t in_type, int repeats) {
  const size_t elems = size_t(n) * n;
  const size_t in_bytes = in_type == CUDA_R_16BF ? 2 : 1;
  DeviceBuffer a(elems * in_bytes), b(elems * in_bytes), d(elems * 2);
  const size_t ws_bytes = size_t{64} << 20;
  DeviceBuffer ws(ws_bytes);
  const uint64_t seed =
      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  if (in_type == CUDA_R_16BF) {
    fill_bf16<<<1024, 256, 0, st>>>(static_cast<__nv_bfloat16*>(a.p), elems, seed);
    fill_bf16<<<1024, 256, 0, st>>>(static_cast<__nv_bfloat16*>(b.p), elems, seed + 1);
  } else {
    fill_fp8<<<1024, 256, 0, st>>>(static_cast<__nv_fp8_e4m3*>(a.p), elems, seed);
    fill_fp8<<<1024, 256, 0, st>>>(static_cast<__nv_fp8_e4m3*>(b.p), elems, seed + 1);
  }
  CEILING_CUDA_CHECK(cudaGetLastError());

  LtHandle lt;
  cublasLtMatmulDesc_t desc{};
  CEILING_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  std::unique_ptr<cublasLtMatmulDescOpaque_t, cublasStatus_t (*)(cublasLtMatmulDesc_t)> desc_guard(
      desc, cublasLtMatmulDescDestroy);
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  CEILING_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  CEILING_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  cublasLtMatrixLayout_t la{}, lb{}, ld{};
  CEILING_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la, in_type, n, n, n));
  CEILING_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb, in_type, n, n, n));
  CEILING_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, n, n, n));
  cublasLtMatmulPreference_t pref{};
  CEILING_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  CEILING_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof ws_bytes));
  cublasLtMatmulHeuristicResult_t heur{};
  int found = 0;
  const cublasStatus_t hs =
      cublasLtMatmulAlgoGetHeuristic(lt.h, desc, la, lb, ld, ld, pref, 1, &heur, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (hs != CUBLAS_STATUS_SUCCESS || found == 0) {
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(ld);
    return 0;  // no algorithm for this type on this GPU (fp8 before Hopper/Ada)
  }
  const float alpha = 1, beta = 0;
  auto run = [&] {
    CEILING_CUBLAS_CHECK(cublasLtMatmul(lt.h, desc, &alpha, a.p, la, b.p, lb, &beta, d.p, ld, d.p,
                                        ld, &heur.algo, ws.p, ws_bytes, st));
  };
  const double t = time_median(st, repeats, run);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(ld);
  return 2.0 * n * double(n) * n / t;
}

std::string today() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string driver_version() {
  std::unique_ptr<FILE, int (*)(FILE*)> p(
      popen("nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null", "r"),
      pclose);
  char buf[64] = {0};
  if (p && fgets(buf, sizeof buf, p.get())) {
    std::string s(buf);
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    if (!s.empty()) return s;
  }
  int v = 0;
  cudaDriverGetVersion(&v);
  return fmt::format("CUDA driver API {}.{}", v / 1000, (v % 1000) / 10);
}

}  // namespace

MeasuredCeilings run_probe(const ProbeOptions& opt,
                           const std::function<void(const std::string&)>& progress) {
  auto say = [&](const std::string& s) {
    if (progress) progress(s);
  };
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    fail("ceiling probe: no CUDA device found");
  }
  CEILING_CUDA_CHECK(cudaSetDevice(0));
  cudaDeviceProp prop{};
  CEILING_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  MeasuredCeilings m;
  m.device_name = prop.name;
  m.gpu_id = gpu_id_for_device_name(prop.name).value_or("");
  if (m.gpu_id.empty()) fail("ceiling probe: device '{}' is not in the GPU table", prop.name);
  m.sm_count = prop.multiProcessorCount;
  m.l2_bytes = prop.l2CacheSize;
  size_t free_b = 0, total_b = 0;
  CEILING_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  m.memory_bytes = static_cast<double>(total_b);
  int clk = 0, mclk = 0, bus = 0;
  cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, 0);
  cudaDeviceGetAttribute(&mclk, cudaDevAttrMemoryClockRate, 0);
  cudaDeviceGetAttribute(&bus, cudaDevAttrGlobalMemoryBusWidth, 0);
  m.sm_clock_mhz = clk / 1000;
  m.mem_clock_mhz = mclk / 1000;
  m.memory_bus_bits = bus;
  m.compute_capability = fmt::format("{}.{}", prop.major, prop.minor);
  int rt = 0;
  cudaRuntimeGetVersion(&rt);
  m.cuda_runtime = fmt::format("{}.{}", rt / 1000, (rt % 1000) / 10);
  m.cublaslt = fmt::format("{}", cublasLtGetVersion());
  m.driver = driver_version();
  m.date = today();
  m.tool = "ceiling probe 0.1.0";

  cudaStream_t st{};
  CEILING_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  std::unique_ptr<CUstream_st, cudaError_t (*)(cudaStream_t)> st_guard(st, cudaStreamDestroy);
  DeviceBuffer sink(64);

  {
    say(fmt::format("streaming read over {:.2f} GiB", opt.read_bytes / double(1 << 30)));
    const size_t n = opt.read_bytes / 16;
    DeviceBuffer buf(n * 16);
    CEILING_CUDA_CHECK(cudaMemsetAsync(buf.p, 0x5a, n * 16, st));
    const int blocks = prop.multiProcessorCount * 4;
    const double t = time_median(st, opt.repeats, [&] {
      read_kernel<<<blocks, 512, 0, st>>>(static_cast<const uint4*>(buf.p), n,
                                          static_cast<uint32_t*>(sink.p));
    });
    CEILING_CUDA_CHECK(cudaGetLastError());
    m.read_bw = n * 16.0 / t;
    m.method["read_gbps"] = fmt::format(
        "read_kernel (16-byte loads, {} CTAs x 512 threads) over {} bytes; median of {} runs "
        "timed with CUDA events",
        blocks, n * 16, opt.repeats);
  }
  {
    say(fmt::format("device-to-device copy of {:.2f} GiB", opt.copy_bytes / double(1 << 30)));
    DeviceBuffer a(opt.copy_bytes), b(opt.copy_bytes);
    CEILING_CUDA_CHECK(cudaMemsetAsync(a.p, 1, opt.copy_bytes, st));
    const double t = time_median(st, opt.repeats, [&] {
      CEILING_CUDA_CHECK(cudaMemcpyAsync(b.p, a.p, opt.copy_bytes, cudaMemcpyDeviceToDevice, st));
    });
    m.copy_bw = 2.0 * opt.copy_bytes / t;
    m.method["copy_gbps"] = fmt::format(
        "cudaMemcpyAsync device-to-device of {} bytes, counting bytes read + written; median of {}",
        opt.copy_bytes, opt.repeats);
  }
  {
    say(fmt::format("cuBLASLt bf16 GEMM {}^3", opt.gemm_n));
    m.bf16_gemm_flops = gemm_rate(st, opt.gemm_n, CUDA_R_16BF, opt.repeats);
    if (m.bf16_gemm_flops <= 0) fail("ceiling probe: cuBLASLt found no bf16 GEMM algorithm");
    m.method["bf16_gemm_tflops"] = fmt::format(
        "cublasLtMatmul TN {0}x{0}x{0}, bf16 in/out, fp32 accumulate, uniform random [-1,1) "
        "inputs; median of {1}",
        opt.gemm_n, opt.repeats);
    if (prop.major * 10 + prop.minor >= 89) {
      say(fmt::format("cuBLASLt fp8 e4m3 GEMM {}^3", opt.gemm_n));
      m.fp8_gemm_flops = gemm_rate(st, opt.gemm_n, CUDA_R_8F_E4M3, opt.repeats);
    }
    m.method["fp8_gemm_tflops"] = fmt::format(
        "cublasLtMatmul TN {0}x{0}x{0}, e4m3 inputs, bf16 output, fp32 accumulate, unit scales, "
        "uniform random [-1,1) inputs; median of {1} (0: no fp8 path)",
        opt.gemm_n, opt.repeats);
  }
  {
    say("kernel launch cost, eager and CUDA graph");
    empty_kernel<<<1, 32, 0, st>>>();
    CEILING_CUDA_CHECK(cudaStreamSynchronize(st));
    std::vector<double> eager;
    for (int r = 0; r < 5; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < opt.launches; ++i) empty_kernel<<<1, 32, 0, st>>>();
      CEILING_CUDA_CHECK(cudaStreamSynchronize(st));
      const auto t1 = std::chrono::steady_clock::now();
      eager.push_back(std::chrono::duration<double>(t1 - t0).count() / opt.launches);
    }
    CEILING_CUDA_CHECK(cudaGetLastError());
    m.launch_eager_s = median(eager);
    m.method["launch_eager_us"] = fmt::format(
        "{} empty kernels <<<1,32>>> launched back to back on one stream, host clock to stream "
        "sync, per launch; median of 5",
        opt.launches);

    auto graph_per_node = [&](auto&& enqueue_one) {
      cudaGraph_t g{};
      CEILING_CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
      for (int i = 0; i < opt.graph_nodes; ++i) enqueue_one(i);
      CEILING_CUDA_CHECK(cudaStreamEndCapture(st, &g));
      cudaGraphExec_t ge{};
      CEILING_CUDA_CHECK(cudaGraphInstantiate(&ge, g, 0));
      const double t = time_median(st, std::max(5, opt.repeats / 2),
                                   [&] { CEILING_CUDA_CHECK(cudaGraphLaunch(ge, st)); });
      cudaGraphExecDestroy(ge);
      cudaGraphDestroy(g);
      return t / opt.graph_nodes;
    };
    m.launch_graph_s = graph_per_node([&](int) { empty_kernel<<<1, 32, 0, st>>>(); });
    m.method["launch_graph_us"] = fmt::format(
        "graph of {} empty kernels <<<1,32>>>, replay time per node (CUDA events); median",
        opt.graph_nodes);

    const int threads = 128;
    const size_t slice = size_t(prop.multiProcessorCount) * threads;  // uint4 per kernel
    DeviceBuffer small(slice * 16 * opt.graph_nodes);
    CEILING_CUDA_CHECK(cudaMemsetAsync(small.p, 3, slice * 16 * opt.graph_nodes, st));
    m.small_kernel_s = graph_per_node([&](int i) {
      small_kernel<<<prop.multiProcessorCount, threads, 0, st>>>(
          static_cast<const uint4*>(small.p) + slice * i, static_cast<uint32_t*>(sink.p));
    });
    m.method["small_kernel_us"] = fmt::format(
        "graph of {} kernels <<<{},{}>>>, each reading its own {} bytes (16 per thread), replay "
        "time per node (CUDA events); median",
        opt.graph_nodes, prop.multiProcessorCount, threads, slice * 16);
  }
  CEILING_CUDA_CHECK(cudaStreamSynchronize(st));
  return m;
}

}  // namespace ceiling::hw
