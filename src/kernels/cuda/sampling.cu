// The full sampler (semantics: src/kernels/cpu/sampling.h), one CTA per sequence.
//
// Passes over the row (the row and its weights stay in L2; the workspace holds w [S, V]):
//   1. penalize + validate + argmax, store the penalized logits;
//   2. weights w = exp((l - l_max) / T) (exactly 1 at the maximum), count the candidates;
//   3. top-k: radix select (4 × 8-bit digits of w's bits, w > 0 so the bits order like the
//      values) of the k-th candidate in rank order (w desc, id asc), ties at the threshold
//      resolved by id with a block scan;
//   4. top-p: the same select with mass instead of counts, relative to the top-k set's mass;
//   5. min-p is a plain predicate (w ≥ min_p);
//   6. pick: total = Σ kept w, then the first id (ascending) whose running sum exceeds u·total.
#include "core/check.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/sampling.h"

namespace ceiling::cuda {
namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
// Loads a thread issues before using any of them. A pass over the row is a loop of V / kThreads
// (125 for V = 128256) steps per thread; with one load per step each step waits a full L2 or
// DRAM round trip, which made the single-row sampler latency-bound. Per-thread order (ascending
// ids) and so every sum is unchanged by the batching.
constexpr int kBatch = 8;

// body(i, w[i]) for i = threadIdx.x + j·kThreads, ascending, kBatch loads in flight. The trip
// count is uniform across the block: body is also called for i ≥ V (with 0), so it may use warp
// collectives, and must ignore those i.
template <typename Body>
__device__ __forceinline__ void for_each_w(const float* w, int V, Body body) {
  for (int base = threadIdx.x; base - static_cast<int>(threadIdx.x) < V;
       base += kBatch * kThreads) {
    float v[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int i = base + u * kThreads;
      v[u] = i < V ? w[i] : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) body(base + u * kThreads, v[u]);
  }
}

// Radix histograms: one copy per pair of warps (the top digits of the weights fall into a few
// bins, so a single shared histogram serializes on them), summed into copy 0 before the scan.
constexpr int kHistCopies = kWarps / 2;
struct SelectShared {
  float mass[kHistCopies][256];
  unsigned count[kHistCopies][256];
};

struct Shared {
  SelectShared hist;
  float scratch[32];
  int scratch_i[32];
  float bf[4];
  int bi[4];
};

// A rank threshold: the element (val, id) is the last kept; keep w > val, or w == val and
// id <= id_last.
struct Threshold {
  bool on = false;
  float val = 0.0f;
  int id = 0;
  __device__ bool keeps(float w, int i) const { return !on || w > val || (w == val && i <= id); }
};

__device__ __forceinline__ float penalize(float l, int32_t c, const GpuSamplingParams& p) {
  const int gen = c & kGeneratedMask;
  if (p.repetition_penalty != 1.0f && (gen > 0 || (c & kPromptBit)))
    l = l > 0.0f ? l / p.repetition_penalty : l * p.repetition_penalty;
  if ((p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f) && gen > 0)
    l -= p.presence_penalty + p.frequency_penalty * static_cast<float>(gen);
  return l;
}

__device__ __forceinline__ float warp_incl_scan(float v, int lane) {
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const float n = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o) v += n;
  }
  return v;
}

__device__ int block_max_int(int v, Shared& sh) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();
  if ((threadIdx.x & 31) == 0) sh.scratch_i[threadIdx.x >> 5] = v;
  __syncthreads();
  v = sh.scratch_i[threadIdx.x & 31];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// The first id i in [0, V) at which the inclusive running sum of value(i) exceeds `thr`, or -1.
// value(i) ≥ 0. Warp w sums ids [w·seg, (w+1)·seg); the crossing warp's lanes then sum
// contiguous sub-segments, and the crossing lane walks its sub-segment. When rounding (sums in
// another order) leaves no crossing inside the chosen lane, the lane's last positive id is taken.
// value(w[i], i) ≥ 0.
template <typename F>
__device__ int first_crossing(const float* w, int V, float thr, F value, Shared& sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int seg = (V + kWarps - 1) / kWarps;
  const int s0 = min(V, warp * seg), s1 = min(V, s0 + seg);
  float sum = 0.0f;
  for (int b = s0 + lane; b < s1; b += 32 * kBatch) {
    float v[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) v[u] = b + 32 * u < s1 ? w[b + 32 * u] : 0.0f;
#pragma unroll
    for (int u = 0; u < kBatch; ++u)
      if (b + 32 * u < s1) sum += value(v[u], b + 32 * u);
  }
  sum = detail::warp_sum(sum);
  __syncthreads();
  if (lane == 0) sh.scratch[warp] = sum;
  if (threadIdx.x == 0) sh.bi[1] = -1;
  __syncthreads();
  if (warp == 0) {
    const float own = sh.scratch[lane];
    const float incl = warp_incl_scan(own, lane);
    const unsigned hit = __ballot_sync(0xffffffffu, incl > thr);
    const unsigned nonzero = __ballot_sync(0xffffffffu, own > 0.0f);
    int w = hit ? __ffs(hit) - 1 : (nonzero ? 31 - __clz(nonzero) : -1);
    const float excl = __shfl_sync(0xffffffffu, incl - own, w < 0 ? 0 : w);
    if (lane == 0) {
      sh.bi[0] = w;
      sh.bf[0] = excl;
    }
  }
  __syncthreads();
  const int W = sh.bi[0];
  if (W >= 0 && warp == W) {
    const float base = sh.bf[0];
    const int sub = (seg + 31) / 32;
    const int a0 = min(s1, s0 + lane * sub), a1 = min(s1, a0 + sub);
    float own = 0.0f;
    for (int b = a0; b < a1; b += kBatch) {
      float v[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) v[u] = b + u < a1 ? w[b + u] : 0.0f;
#pragma unroll
      for (int u = 0; u < kBatch; ++u)
        if (b + u < a1) own += value(v[u], b + u);
    }
    const float incl = base + warp_incl_scan(own, lane);
    const unsigned hit = __ballot_sync(0xffffffffu, incl > thr);
    const unsigned nonzero = __ballot_sync(0xffffffffu, own > 0.0f);
    const int L = hit ? __ffs(hit) - 1 : (nonzero ? 31 - __clz(nonzero) : -1);
    if (lane == L) {
      float run = incl - own;
      int found = -1, last = -1;
      for (int b = a0; b < a1 && found < 0; b += kBatch) {
        float v[kBatch];
#pragma unroll
        for (int u = 0; u < kBatch; ++u) v[u] = b + u < a1 ? w[b + u] : 0.0f;
#pragma unroll
        for (int u = 0; u < kBatch; ++u) {
          const int i = b + u;
          if (i < a1 && found < 0) {
            const float x = value(v[u], i);
            if (x > 0.0f) last = i;
            run += x;
            if (run > thr) found = i;
          }
        }
      }
      sh.bi[1] = found >= 0 ? found : last;
    }
  }
  __syncthreads();
  const int r = W >= 0 ? sh.bi[1] : -1;
  __syncthreads();
  return r;
}

// The element at which the running metric (count or mass, in rank order: w desc, id asc) over
// the candidates (pred) first reaches `target`: radix select on w's bits, then the tie by id.
template <bool kMass, typename Pred>
__device__ Threshold select_rank(const float* w, int V, float target, Pred pred, Shared& sh) {
  unsigned prefix = 0, mask = 0;
  float before = 0.0f;  // metric of candidates ranked above the current prefix
  bool exhausted = false;
  const int lane = threadIdx.x & 31;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < kHistCopies * 256; b += kThreads) {
      sh.hist.mass[b / 256][b % 256] = 0.0f;
      sh.hist.count[b / 256][b % 256] = 0;
    }
    __syncthreads();
    const int copy = (threadIdx.x >> 5) / 2;
    // Uniform trip count per warp, so the whole warp reaches __match_any_sync.
    for_each_w(w, V, [&](int i, float wi) {
      const unsigned bits = __float_as_uint(wi);
      const bool in = i < V && (bits & mask) == prefix && pred(wi, i);
      const int bin = in ? static_cast<int>((bits >> shift) & 255) : 256;
      const unsigned same = __match_any_sync(0xffffffffu, bin);
      if (in) {
        if (lane == __ffs(same) - 1) atomicAdd(&sh.hist.count[copy][bin], __popc(same));
        if (kMass) atomicAdd(&sh.hist.mass[copy][bin], wi);
      }
    });
    __syncthreads();
    for (int b = threadIdx.x; b < 256; b += kThreads) {
      float m = 0.0f;
      unsigned c = 0;
      for (int k = 0; k < kHistCopies; ++k) {
        m += sh.hist.mass[k][b];
        c += sh.hist.count[k][b];
      }
      sh.hist.mass[0][b] = m;
      sh.hist.count[0][b] = c;
    }
    __syncthreads();
    if (threadIdx.x < 32) {
      // Lane l holds bins 255 - 8l ... 248 - 8l (descending).
      float m[8];
      unsigned c[8];
      float own = 0.0f;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int bin = 255 - 8 * lane - j;
        c[j] = sh.hist.count[0][bin];
        m[j] = kMass ? sh.hist.mass[0][bin] : static_cast<float>(c[j]);
        own += m[j];
      }
      unsigned any = 0;
#pragma unroll
      for (int j = 0; j < 8; ++j) any |= c[j];
      const float incl = before + warp_incl_scan(own, lane);
      const unsigned hit = __ballot_sync(0xffffffffu, incl >= target && any != 0);
      const unsigned nonempty = __ballot_sync(0xffffffffu, any != 0);
      const int L = hit ? __ffs(hit) - 1 : 31 - __clz(nonempty);
      if (lane == L) {
        float run = incl - own;
        int pick = -1;
        float run_at_pick = run;
        for (int j = 0; j < 8; ++j) {
          if (c[j] == 0) continue;
          pick = 255 - 8 * lane - j;
          run_at_pick = run;
          if (hit && run + m[j] >= target) break;
          run += m[j];
        }
        sh.bi[2] = pick;
        sh.bi[3] = hit ? 0 : 1;
        sh.bf[2] = run_at_pick;
      }
    }
    __syncthreads();
    prefix |= static_cast<unsigned>(sh.bi[2]) << shift;
    mask |= 255u << shift;
    before = sh.bf[2];
    exhausted = exhausted || sh.bi[3] != 0;
    __syncthreads();
  }
  Threshold t;
  t.on = true;
  t.val = __uint_as_float(prefix);
  // Ties at val: the count is exact in the last histogram's bin.
  const unsigned n_eq = sh.hist.count[0][prefix & 255];
  int j;
  if (exhausted) {
    j = static_cast<int>(n_eq);
  } else if (kMass) {
    j = static_cast<int>(ceilf((target - before) / t.val));
  } else {
    j = static_cast<int>(target - before);
  }
  j = max(1, min(j, static_cast<int>(n_eq)));
  const float val = t.val;
  t.id = first_crossing(
      w, V, static_cast<float>(j) - 0.5f,
      [&](float wi, int i) { return wi == val && pred(wi, i) ? 1.0f : 0.0f; }, sh);
  return t;
}

__global__ void __launch_bounds__(kThreads) sample_kernel(SampleArgs a) {
  __shared__ Shared sh;
  detail::pdl_launch_dependents();
  detail::pdl_wait();  // everything it reads (logits, params, counts, u) is written per step
  const int s = blockIdx.x, V = a.V;
  const GpuSamplingParams p = a.params[s];
  const float* lg = a.logits + static_cast<int64_t>(s) * V;
  const int32_t* cnt =
      a.counts ? a.counts + static_cast<int64_t>(a.count_rows ? a.count_rows[s] : s) * V : nullptr;
  float* w = static_cast<float*>(a.workspace) + static_cast<int64_t>(s) * V;

  // 1. Penalize, validate, argmax (ties to the lowest id).
  float best = -INFINITY;
  int best_i = V, bad = 0, finite = 0;
  for (int base = threadIdx.x; base < V; base += kBatch * kThreads) {
    float lv[kBatch];
    int32_t cv[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int i = base + u * kThreads;
      lv[u] = i < V ? lg[i] : 0.0f;
      cv[u] = i < V && cnt ? cnt[i] : 0;
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int i = base + u * kThreads;
      if (i >= V) break;
      float l = lv[u];
      bad |= isnan(l) || l == INFINITY;
      if (cnt) l = penalize(l, cv[u], p);
      bad |= isnan(l) || l == INFINITY;
      finite |= isfinite(l);
      w[i] = l;
      if (l > best || (l == best && i < best_i)) {
        best = l;
        best_i = i;
      }
    }
  }
  bad = __syncthreads_or(bad);
  finite = __syncthreads_or(finite);
  if (bad || !finite) {
    if (threadIdx.x == 0) a.out[s] = -1;
    return;
  }
  // Block argmax: the max value, then the lowest id holding it.
  {
    float m = best;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    __syncthreads();
    if ((threadIdx.x & 31) == 0) sh.scratch[threadIdx.x >> 5] = m;
    __syncthreads();
    m = sh.scratch[threadIdx.x & 31];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    best_i = -block_max_int(best == m ? -best_i : -V, sh);  // lowest id holding the max
    best = m;
  }
  if (p.temperature == 0.0f) {
    if (threadIdx.x == 0) a.out[s] = best_i;
    return;
  }
  const float lmax = best;

  // 2. Weights relative to the maximum.
  __syncthreads();
  float n_pos = 0.0f;
  for_each_w(w, V, [&](int i, float l) {
    if (i >= V) return;
    const float wi = l == lmax ? 1.0f : expf((l - lmax) / p.temperature);
    w[i] = wi;
    n_pos += wi > 0.0f ? 1.0f : 0.0f;
  });
  n_pos = detail::block_sum(n_pos, sh.scratch);  // exact: counts < 2^24

  // 3. top-k.
  Threshold tk;
  if (p.top_k > 0 && static_cast<float>(p.top_k) < n_pos)
    tk = select_rank<false>(
        w, V, static_cast<float>(p.top_k), [](float wi, int) { return wi > 0.0f; }, sh);
  // 4. top-p, relative to the top-k set's mass.
  Threshold tp;
  if (p.top_p < 1.0f) {
    const auto in_k = [&](float wi, int i) { return wi > 0.0f && tk.keeps(wi, i); };
    float mass = 0.0f;
    for_each_w(w, V, [&](int i, float wi) { mass += i < V && in_k(wi, i) ? wi : 0.0f; });
    mass = detail::block_sum(mass, sh.scratch);
    tp = select_rank<true>(w, V, p.top_p * mass, in_k, sh);
  }
  // 5. min-p, and 6. the pick.
  const float min_p = p.min_p;
  const auto kept = [&](float wi, int i) {
    return wi > 0.0f && tk.keeps(wi, i) && tp.keeps(wi, i) && !(min_p > 0.0f && wi < min_p);
  };
  float total = 0.0f;
  int last = -1;
  for_each_w(w, V, [&](int i, float wi) {
    if (i < V && kept(wi, i)) {
      total += wi;
      last = i;
    }
  });
  total = detail::block_sum(total, sh.scratch);
  last = block_max_int(last, sh);
  const float u = a.u[s];
  const int id = first_crossing(
      w, V, u * total, [&](float wi, int i) { return kept(wi, i) ? wi : 0.0f; }, sh);
  if (threadIdx.x == 0) a.out[s] = id >= 0 ? id : last;
}

__global__ void counts_prompt_kernel(int32_t* counts, int V, int64_t row, const int32_t* ids,
                                     int n) {
  detail::pdl_launch_dependents();
  detail::pdl_wait();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int id = ids[i];
  if (id >= 0 && id < V) atomicOr(&counts[row * V + id], kPromptBit);
}

__global__ void counts_generated_kernel(int32_t* counts, int V, const int32_t* rows,
                                        const int32_t* tokens, int S) {
  detail::pdl_launch_dependents();
  detail::pdl_wait();
  const int s = blockIdx.x * blockDim.x + threadIdx.x;
  if (s >= S) return;
  const int id = tokens[s];
  const int64_t row = rows ? rows[s] : s;
  if (id >= 0 && id < V) atomicAdd(&counts[row * V + id], 1);
}

__device__ uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

__global__ void uniforms_kernel(const uint64_t* seeds, const int64_t* steps, int S, float* u) {
  detail::pdl_launch_dependents();
  detail::pdl_wait();
  const int s = blockIdx.x * blockDim.x + threadIdx.x;
  if (s >= S) return;
  const uint64_t z = mix64(seeds[s] ^ mix64(static_cast<uint64_t>(steps[s])));
  u[s] = static_cast<float>(z >> 40) * 0x1.0p-24f;
}

}  // namespace

size_t sampler_workspace_bytes(int S, int V) {
  return sizeof(float) * static_cast<size_t>(S < 0 ? 0 : S) * static_cast<size_t>(V < 0 ? 0 : V);
}

Status sample(const SampleArgs& a, cudaStream_t stream) {
  if (a.S < 0 || a.V <= 0) return Status::error("sample: bad shape S {} V {}", a.S, a.V);
  if (a.workspace_bytes < sampler_workspace_bytes(a.S, a.V))
    return Status::error("sample: workspace of {} bytes, {} needed", a.workspace_bytes,
                         sampler_workspace_bytes(a.S, a.V));
  if (a.S == 0) return Status();
  if (!a.logits || !a.params || !a.u || !a.out || !a.workspace)
    return Status::error("sample: null device pointer");
  CEILING_CUDA_RETURN(detail::launch_pdl(sample_kernel, dim3(a.S), dim3(kThreads), 0, stream, a));
  return Status();
}

Status counts_add_prompt(int32_t* counts, int V, int row, const int32_t* ids, int n,
                         cudaStream_t stream) {
  if (V <= 0 || row < 0 || n < 0)
    return Status::error("counts_add_prompt: bad V {} row {} n {}", V, row, n);
  if (n == 0) return Status();
  CEILING_CUDA_RETURN(detail::launch_pdl(counts_prompt_kernel, dim3(detail::ceil_div(n, 256)),
                                         dim3(256), 0, stream, counts, V, int64_t{row}, ids, n));
  return Status();
}

Status counts_add_generated(int32_t* counts, int V, const int32_t* rows, const int32_t* tokens,
                            int S, cudaStream_t stream) {
  if (V <= 0 || S < 0) return Status::error("counts_add_generated: bad V {} S {}", V, S);
  if (S == 0) return Status();
  CEILING_CUDA_RETURN(detail::launch_pdl(counts_generated_kernel, dim3(detail::ceil_div(S, 256)),
                                         dim3(256), 0, stream, counts, V, rows, tokens, S));
  return Status();
}

Status sampling_uniforms(const uint64_t* seeds, const int64_t* steps, int S, float* u,
                         cudaStream_t stream) {
  if (S < 0) return Status::error("sampling_uniforms: S {} < 0", S);
  if (S == 0) return Status();
  CEILING_CUDA_RETURN(detail::launch_pdl(uniforms_kernel, dim3(detail::ceil_div(S, 256)), dim3(256),
                                         0, stream, seeds, steps, S, u));
  return Status();
}

}  // namespace ceiling::cuda
