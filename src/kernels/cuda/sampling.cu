// The full sampler (semantics: src/kernels/cpu/sampling.h): one thread-block cluster of kCluster
// CTAs per sequence. CTA r owns the ids [r·chunk, (r+1)·chunk) and keeps their logits, then their
// weights, in its shared memory, so the row is read from global memory once and every later pass
// runs at shared-memory speed on kCluster SMs at once.
//
// Cluster-wide decisions (validity, the maximum, candidate counts, masses, radix histograms,
// crossings) go through distributed shared memory: each CTA publishes its partial in its own
// shared memory, the cluster barrier makes it visible, and every CTA reads all kCluster partials
// in rank order — so all CTAs reach bit-identical decisions without a second round. Published
// slots are double-buffered by exchange parity: a slot written at exchange n is rewritten at
// n + 2 at the earliest, after every reader of exchange n has passed barrier n + 1.
//
// Steps (one barrier per exchange):
//   1. penalize + validate + argmax, penalized logits into shared memory (exchange: max, flags);
//   2. weights w = exp((l - l_max) / T) (exactly 1 at the maximum), count the candidates;
//   3. top-k: radix select (4 × 8-bit digits of w's bits, w > 0 so the bits order like the
//      values) of the k-th candidate in rank order (w desc, id asc), one histogram exchange per
//      digit; ties at the threshold resolved by id with a crossing search;
//   4. top-p: the same select with mass instead of counts, relative to the top-k set's mass;
//   5. min-p is a plain predicate (w ≥ min_p);
//   6. pick: total = Σ kept w, then the first id (ascending) whose running sum exceeds u·total:
//      the CTA whose range holds the crossing walks it and publishes the id.
//
// Roofline (V = 128256, one row): the row is 513 KB of logits (+513 KB of counts when a penalty
// is on), read once by 8 SMs — ~1 µs at the per-SM L2 rate; the ≤ 16 passes over 64 KB of
// shared memory per SM are ~0.3 µs each; ~14 cluster barriers (~0.2 µs each) and the launch add
// the rest: ~10 µs predicted, against 357 µs for the previous one-CTA-per-row sampler, whose 16
// passes each were an L2-latency-bound loop of one SM. Measured (H200, bench/notes.md): 83 µs.
// The prediction misses because a pass is not bandwidth-bound: each SM issues the whole time at
// IPC ~1.2 (~45 instructions per element and pass, the radix passes' __match_any_sync and
// shared-memory atomics), with barrier waits ~32 % of a warp's time (Nsight Compute,
// bench/results/2026-11-23_h200_ncu_sampler.txt). Fewer passes (compacting the candidates after
// the first radix pass) or more SMs per row are the next steps.
#include <cooperative_groups.h>

#include "core/check.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/sampling.h"

namespace ceiling::cuda {
namespace {

namespace cg = cooperative_groups;

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kBatch = 8;  // global loads a thread issues before using any of them
// Cluster size: a few rows (≤ kFewRows) of at least kClusterMinV logits are spread over
// kClusterLarge CTAs each (a single row then runs on 8 SMs); more rows take the smallest cluster
// whose slices fit in shared memory, since every CTA repeats the per-phase barriers and decisions
// (measured: 256 rows of 32000 took 684 µs on clusters of 8 against 217 µs for the earlier
// one-CTA-per-row sampler).
constexpr int kClusterLarge = 8;
constexpr int kClusterMinV = 16384;
constexpr int kFewRows = 16;
// Shared memory per CTA for its slice of the row (the static part is ~21 KB more).
constexpr int kMaxChunk = 48 * 1024;

// Radix histograms: one copy per pair of warps, summed before the exchange.
constexpr int kHistCopies = kWarps / 2;

struct Shared {
  float hist_mass[kHistCopies][256];
  unsigned hist_count[kHistCopies][256];
  float pub_f[2][256];  // published to the cluster, by exchange parity
  unsigned pub_u[2][256];
  float scratch[32];
  int scratch_i[32];
  float bf[4];
  int bi[4];
};

// The exchange protocol of the file comment. Every CTA of the cluster must make the same
// sequence of exchange() calls (control flow is uniform across the cluster by construction:
// every branch depends on exchanged, hence identical, values).
template <int kCluster>
class Exchange {
 public:
  __device__ explicit Exchange(Shared& sh) : sh_(sh) {}
  // This CTA's slots for the next exchange (written before exchange()).
  __device__ float* out_f() { return sh_.pub_f[parity_]; }
  __device__ unsigned* out_u() { return sh_.pub_u[parity_]; }
  // Barrier: every CTA's slots become readable through in_f / in_u until done().
  __device__ void exchange() {
    if constexpr (kCluster > 1) {
      cg::this_cluster().sync();
    } else {
      __syncthreads();
    }
  }
  __device__ const float* in_f(int rank) { return remote(sh_.pub_f[parity_], rank); }
  __device__ const unsigned* in_u(int rank) { return remote(sh_.pub_u[parity_], rank); }
  __device__ void done() { parity_ ^= 1; }

  // Cluster-wide sum (rank order) of a value uniform across this CTA.
  __device__ float sum(float v) {
    if (threadIdx.x == 0) out_f()[0] = v;
    exchange();
    float t = 0.0f;
#pragma unroll
    for (int r = 0; r < kCluster; ++r) t += in_f(r)[0];
    done();
    return t;
  }

 private:
  template <typename T>
  __device__ const T* remote(T* p, int rank) {
    if constexpr (kCluster > 1) {
      return cg::this_cluster().map_shared_rank(p, rank);
    } else {
      return p;
    }
  }
  Shared& sh_;
  int parity_ = 0;
};

// body(i, w[i]) for the local i = threadIdx.x + j·kThreads < n. The trip count is uniform across
// the block: body is also called for i ≥ n (with 0), so it may use warp collectives, and must
// ignore those i.
template <typename Body>
__device__ __forceinline__ void for_each_w(const float* w, int n, Body body) {
  for (int i0 = 0; i0 < n; i0 += kThreads) {
    const int i = i0 + static_cast<int>(threadIdx.x);
    body(i, i < n ? w[i] : 0.0f);
  }
}

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
  v = (threadIdx.x & 31) < kWarps ? sh.scratch_i[threadIdx.x & 31] : INT_MIN;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Within this CTA's slice w[0, n): the first local i at which the inclusive running sum of
// value(w[i], i) exceeds `thr`, or -1. value ≥ 0. Warp w sums [w·seg, (w+1)·seg); the crossing
// warp's lanes then sum contiguous sub-segments, and the crossing lane walks its sub-segment.
// When rounding (sums in another order) leaves no crossing, the last positive i is taken.
template <typename F>
__device__ int block_first_crossing(const float* w, int n, float thr, F value, Shared& sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int seg = (n + kWarps - 1) / kWarps;
  const int s0 = min(n, warp * seg), s1 = min(n, s0 + seg);
  float sum = 0.0f;
  for (int b = s0 + lane; b < s1; b += 32) sum += value(w[b], b);
  sum = detail::warp_sum(sum);
  __syncthreads();
  if (lane == 0) sh.scratch[warp] = sum;
  if (threadIdx.x == 0) sh.bi[1] = -1;
  __syncthreads();
  if (warp == 0) {
    const float own = lane < kWarps ? sh.scratch[lane] : 0.0f;
    const float incl = warp_incl_scan(own, lane);
    const unsigned hit = __ballot_sync(0xffffffffu, incl > thr);
    const unsigned nonzero = __ballot_sync(0xffffffffu, own > 0.0f);
    const int W = hit ? __ffs(hit) - 1 : (nonzero ? 31 - __clz(nonzero) : -1);
    const float excl = __shfl_sync(0xffffffffu, incl - own, W < 0 ? 0 : W);
    if (lane == 0) {
      sh.bi[0] = W;
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
    for (int b = a0; b < a1; ++b) own += value(w[b], b);
    const float incl = base + warp_incl_scan(own, lane);
    const unsigned hit = __ballot_sync(0xffffffffu, incl > thr);
    const unsigned nonzero = __ballot_sync(0xffffffffu, own > 0.0f);
    const int L = hit ? __ffs(hit) - 1 : (nonzero ? 31 - __clz(nonzero) : -1);
    if (lane == L) {
      float run = incl - own;
      int found = -1, last = -1;
      for (int b = a0; b < a1 && found < 0; ++b) {
        const float x = value(w[b], b);
        if (x > 0.0f) last = b;
        run += x;
        if (run > thr) found = b;
      }
      sh.bi[1] = found >= 0 ? found : last;
    }
  }
  __syncthreads();
  const int r = W >= 0 ? sh.bi[1] : -1;
  __syncthreads();
  return r;
}

// One CTA's view of its slice: w[0, n) holds ids [base, base + n).
struct Slice {
  float* w;
  int n, base, rank;
};

// The first id (ascending, over the whole row) at which the running sum of value(w, id) exceeds
// `thr`, or -1 when every value is 0. The CTA ranges' sums locate the crossing CTA; it walks its
// slice and publishes the id. Without a crossing (rounding), the last positive id is taken.
template <int kCluster, typename F>
__device__ int first_crossing(const Slice& sl, float thr, F value, Shared& sh,
                              Exchange<kCluster>& x) {
  float own = 0.0f;
  for_each_w(sl.w, sl.n, [&](int i, float wi) { own += i < sl.n ? value(wi, sl.base + i) : 0.0f; });
  own = detail::block_sum(own, sh.scratch);
  if (threadIdx.x == 0) x.out_f()[0] = own;
  x.exchange();
  float run = 0.0f, before = 0.0f, before_last = 0.0f;
  int R = -1, last = -1;
#pragma unroll
  for (int r = 0; r < kCluster; ++r) {
    const float v = x.in_f(r)[0];
    if (R < 0 && run + v > thr) {
      R = r;
      before = run;
    }
    if (v > 0.0f) {
      last = r;
      before_last = run;
    }
    run += v;
  }
  x.done();
  if (R < 0) {
    R = last;
    before = before_last;
  }
  int id = -1;
  if (R == sl.rank) {
    const int i = block_first_crossing(
        sl.w, sl.n, thr - before, [&](float wi, int j) { return value(wi, sl.base + j); }, sh);
    id = i >= 0 ? sl.base + i : -1;
  }
  if (threadIdx.x == 0) x.out_u()[0] = static_cast<unsigned>(id);
  x.exchange();
  const int picked = R >= 0 ? static_cast<int>(x.in_u(R)[0]) : -1;
  x.done();
  return picked;
}

// The element at which the running metric (count or mass, in rank order: w desc, id asc) over
// the candidates (pred) first reaches `target`: radix select on w's bits, then the tie by id.
template <bool kMass, int kCluster, typename Pred>
__device__ Threshold select_rank(const Slice& sl, float target, Pred pred, Shared& sh,
                                 Exchange<kCluster>& x) {
  unsigned prefix = 0, mask = 0;
  float before = 0.0f;  // metric of candidates ranked above the current prefix
  bool exhausted = false;
  const int lane = threadIdx.x & 31;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < kHistCopies * 256; b += kThreads) {
      sh.hist_mass[b / 256][b % 256] = 0.0f;
      sh.hist_count[b / 256][b % 256] = 0;
    }
    __syncthreads();
    const int copy = (threadIdx.x >> 5) / 2;
    // Warp-aggregated counts (__match_any_sync: the top digits of the weights fall into a few
    // bins). Measured against a ballot loop over a step's distinct bins (one atomic per bin,
    // masses summed with shuffles): the loop was ~20 % slower (bench/notes.md). Uniform trip
    // count per warp, so the whole warp reaches __match_any_sync.
    for_each_w(sl.w, sl.n, [&](int i, float wi) {
      const unsigned bits = __float_as_uint(wi);
      const bool in = i < sl.n && (bits & mask) == prefix && pred(wi, sl.base + i);
      const int bin = in ? static_cast<int>((bits >> shift) & 255) : 256;
      const unsigned same = __match_any_sync(0xffffffffu, bin);
      if (in) {
        if (lane == __ffs(same) - 1) atomicAdd(&sh.hist_count[copy][bin], __popc(same));
        if (kMass) atomicAdd(&sh.hist_mass[copy][bin], wi);
      }
    });
    __syncthreads();
    // This CTA's histogram to the cluster; the cluster's histogram into copy 0.
    for (int b = threadIdx.x; b < 256; b += kThreads) {
      float m = 0.0f;
      unsigned c = 0;
      for (int k = 0; k < kHistCopies; ++k) {
        m += sh.hist_mass[k][b];
        c += sh.hist_count[k][b];
      }
      x.out_f()[b] = m;
      x.out_u()[b] = c;
    }
    x.exchange();
    for (int b = threadIdx.x; b < 256; b += kThreads) {
      float m = 0.0f;
      unsigned c = 0;
#pragma unroll
      for (int r = 0; r < kCluster; ++r) {
        m += x.in_f(r)[b];
        c += x.in_u(r)[b];
      }
      sh.hist_mass[0][b] = m;
      sh.hist_count[0][b] = c;
    }
    x.done();
    __syncthreads();
    if (threadIdx.x < 32) {
      // Lane l holds bins 255 - 8l ... 248 - 8l (descending).
      float m[8];
      unsigned c[8];
      float own = 0.0f;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int bin = 255 - 8 * lane - j;
        c[j] = sh.hist_count[0][bin];
        m[j] = kMass ? sh.hist_mass[0][bin] : static_cast<float>(c[j]);
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
  const unsigned n_eq = sh.hist_count[0][prefix & 255];
  int j;
  if (exhausted) {
    j = static_cast<int>(n_eq);
  } else if (kMass) {
    j = static_cast<int>(ceilf((target - before) / t.val));
  } else {
    j = static_cast<int>(target - before);
  }
  j = max(1, min(j, static_cast<int>(n_eq)));
  if (j == static_cast<int>(n_eq)) {
    t.id = INT_MAX;  // every tie is kept (the usual case: one element at val)
    return t;
  }
  const float val = t.val;
  t.id = first_crossing(
      sl, static_cast<float>(j) - 0.5f,
      [&](float wi, int i) { return wi == val && pred(wi, i) ? 1.0f : 0.0f; }, sh, x);
  return t;
}

// Step 1 for this CTA's slice: penalized logits into sl.w; the slice's validity flags and its
// (max, lowest id at the max).
struct RowStats {
  int bad = 0, finite = 0;
  float best = -INFINITY;
  int best_i = INT_MAX;
};

__device__ __forceinline__ void take(RowStats& st, float l, int32_t c, bool pen, int id,
                                     const GpuSamplingParams& p, float& out) {
  st.bad |= isnan(l) || l == INFINITY;
  if (pen) l = penalize(l, c, p);
  st.bad |= isnan(l) || l == INFINITY;
  st.finite |= isfinite(l);
  out = l;
  if (l > st.best || (l == st.best && id < st.best_i)) {
    st.best = l;
    st.best_i = id;
  }
}

// vec: the slice starts and ends on multiples of 4 and the rows are 16-byte aligned.
__device__ RowStats load_slice(const Slice& sl, const float* lg, const int32_t* cnt, bool vec,
                               const GpuSamplingParams& p) {
  RowStats st;
  const bool pen = cnt != nullptr;
  if (vec) {
    const int n4 = sl.n / 4;
    const float4* l4 = reinterpret_cast<const float4*>(lg + sl.base);
    const int4* c4 = reinterpret_cast<const int4*>(cnt + (pen ? sl.base : 0));
    float4* w4 = reinterpret_cast<float4*>(sl.w);
    for (int j0 = threadIdx.x; j0 < n4; j0 += kBatch * kThreads) {
      float4 lv[kBatch];
      int4 cv[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int j = j0 + u * kThreads;
        if (j < n4) {
          lv[u] = l4[j];
          cv[u] = pen ? c4[j] : make_int4(0, 0, 0, 0);
        }
      }
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int j = j0 + u * kThreads;
        if (j >= n4) break;
        float4 o;
        const int id = sl.base + 4 * j;
        take(st, lv[u].x, cv[u].x, pen, id, p, o.x);
        take(st, lv[u].y, cv[u].y, pen, id + 1, p, o.y);
        take(st, lv[u].z, cv[u].z, pen, id + 2, p, o.z);
        take(st, lv[u].w, cv[u].w, pen, id + 3, p, o.w);
        w4[j] = o;
      }
    }
  } else {
    for (int i0 = threadIdx.x; i0 < sl.n; i0 += kBatch * kThreads) {
      float lv[kBatch];
      int32_t cv[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int i = i0 + u * kThreads;
        lv[u] = i < sl.n ? lg[sl.base + i] : 0.0f;
        cv[u] = i < sl.n && pen ? cnt[sl.base + i] : 0;
      }
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int i = i0 + u * kThreads;
        if (i >= sl.n) break;
        take(st, lv[u], cv[u], pen, sl.base + i, p, sl.w[i]);
      }
    }
  }
  return st;
}

// The token of one row (uniform across the cluster), or -1 where the row is invalid.
template <int kCluster>
__device__ int sample_row(const Slice& sl, const float* lg, const int32_t* cnt, bool vec,
                          const GpuSamplingParams& p, float u, Shared& sh, Exchange<kCluster>& x) {
  // 1. Penalize, validate, argmax (ties to the lowest id).
  RowStats st = load_slice(sl, lg, cnt, vec, p);
  st.bad = __syncthreads_or(st.bad);
  st.finite = __syncthreads_or(st.finite);
  {
    float m = st.best;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    __syncthreads();
    if ((threadIdx.x & 31) == 0) sh.scratch[threadIdx.x >> 5] = m;
    __syncthreads();
    m = (threadIdx.x & 31) < kWarps ? sh.scratch[threadIdx.x & 31] : -INFINITY;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    st.best_i = -block_max_int(st.best == m ? -st.best_i : -INT_MAX, sh);
    st.best = m;
  }
  if (threadIdx.x == 0) {
    x.out_f()[0] = st.best;
    x.out_u()[0] = static_cast<unsigned>(st.best_i);
    x.out_u()[1] = static_cast<unsigned>(st.bad) | static_cast<unsigned>(st.finite) << 1;
  }
  x.exchange();
  float lmax = -INFINITY;
  int best_i = INT_MAX;
  unsigned flags = 0;
#pragma unroll
  for (int r = 0; r < kCluster; ++r) {
    const float b = x.in_f(r)[0];
    const int bi = static_cast<int>(x.in_u(r)[0]);
    flags |= x.in_u(r)[1];
    if (b > lmax || (b == lmax && bi < best_i)) {
      lmax = b;
      best_i = bi;
    }
  }
  x.done();
  if ((flags & 1u) || !(flags & 2u)) return -1;
  if (p.temperature == 0.0f) return best_i;

  // 2. Weights relative to the maximum.
  __syncthreads();
  float n_pos = 0.0f;
  for_each_w(sl.w, sl.n, [&](int i, float l) {
    if (i >= sl.n) return;
    const float wi = l == lmax ? 1.0f : expf((l - lmax) / p.temperature);
    sl.w[i] = wi;
    n_pos += wi > 0.0f ? 1.0f : 0.0f;
  });
  n_pos = x.sum(detail::block_sum(n_pos, sh.scratch));  // exact: counts < 2^24

  // 3. top-k.
  Threshold tk;
  if (p.top_k > 0 && static_cast<float>(p.top_k) < n_pos)
    tk = select_rank<false>(
        sl, static_cast<float>(p.top_k), [](float wi, int) { return wi > 0.0f; }, sh, x);
  // 4. top-p, relative to the top-k set's mass.
  Threshold tp;
  if (p.top_p < 1.0f) {
    const auto in_k = [&](float wi, int i) { return wi > 0.0f && tk.keeps(wi, i); };
    float mass = 0.0f;
    for_each_w(sl.w, sl.n,
               [&](int i, float wi) { mass += i < sl.n && in_k(wi, sl.base + i) ? wi : 0.0f; });
    mass = x.sum(detail::block_sum(mass, sh.scratch));
    tp = select_rank<true>(sl, p.top_p * mass, in_k, sh, x);
  }
  // 5. min-p, and 6. the pick.
  const float min_p = p.min_p;
  const auto kept = [&](float wi, int i) {
    return wi > 0.0f && tk.keeps(wi, i) && tp.keeps(wi, i) && !(min_p > 0.0f && wi < min_p);
  };
  float total = 0.0f;
  int last = -1;
  for_each_w(sl.w, sl.n, [&](int i, float wi) {
    if (i < sl.n && kept(wi, sl.base + i)) {
      total += wi;
      last = sl.base + i;
    }
  });
  total = detail::block_sum(total, sh.scratch);
  last = block_max_int(last, sh);
  if (threadIdx.x == 0) {
    x.out_f()[0] = total;
    x.out_u()[0] = static_cast<unsigned>(last);
  }
  x.exchange();
  total = 0.0f;
#pragma unroll
  for (int r = 0; r < kCluster; ++r) {
    total += x.in_f(r)[0];
    last = max(last, static_cast<int>(x.in_u(r)[0]));
  }
  x.done();
  const int id = first_crossing(
      sl, u * total, [&](float wi, int i) { return kept(wi, i) ? wi : 0.0f; }, sh, x);
  return id >= 0 ? id : last;
}

// grid kCluster·S CTAs (clusters of kCluster along x): cluster s samples row s; CTA `rank` owns
// ids [rank·chunk, rank·chunk + chunk) ∩ [0, V), its slice in dynamic shared memory.
template <int kCluster>
__global__ void __cluster_dims__(kCluster, 1, 1) __launch_bounds__(kThreads)
    sample_kernel(SampleArgs a, int chunk, bool vec) {
  __shared__ Shared sh;
  extern __shared__ float4 slice_smem[];
  detail::pdl_launch_dependents();
  detail::pdl_wait();  // everything it reads (logits, params, counts, u) is written per step
  const int s = blockIdx.x / kCluster, rank = blockIdx.x % kCluster, V = a.V;
  const GpuSamplingParams p = a.params[s];
  const bool pen = a.counts && (p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f ||
                                p.frequency_penalty != 0.0f);
  const int32_t* cnt =
      pen ? a.counts + static_cast<int64_t>(a.count_rows ? a.count_rows[s] : s) * V : nullptr;
  Slice sl;
  sl.w = reinterpret_cast<float*>(slice_smem);
  sl.base = min(V, rank * chunk);
  sl.n = min(V, sl.base + chunk) - sl.base;
  sl.rank = rank;
  Exchange<kCluster> x(sh);
  const int id =
      sample_row<kCluster>(sl, a.logits + static_cast<int64_t>(s) * V, cnt, vec, p, a.u[s], sh, x);
  if (rank == 0 && threadIdx.x == 0) a.out[s] = id;
  // No CTA leaves while another may still read its published slots.
  if constexpr (kCluster > 1) cg::this_cluster().sync();
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

int sampler_max_vocab() {
  return kClusterLarge * kMaxChunk;
}

Status sample(const SampleArgs& a, cudaStream_t stream) {
  if (a.S < 0 || a.V <= 0) return Status::error("sample: bad shape S {} V {}", a.S, a.V);
  if (a.V > sampler_max_vocab())
    return Status::error("sample: a vocabulary of {} tokens exceeds the GPU sampler's limit of {}",
                         a.V, sampler_max_vocab());
  if (a.S == 0) return Status();
  if (!a.logits || !a.params || !a.u || !a.out) return Status::error("sample: null device pointer");
  int cluster = 1;
  while (cluster < kClusterLarge && (a.V + cluster - 1) / cluster > kMaxChunk) cluster *= 2;
  if (a.V >= kClusterMinV && a.S <= kFewRows) cluster = kClusterLarge;
  const int chunk = ((a.V + cluster - 1) / cluster + 3) / 4 * 4;
  const bool vec =
      a.V % 4 == 0 && detail::aligned16(a.logits) && (!a.counts || detail::aligned16(a.counts));
  const size_t smem = sizeof(float) * static_cast<size_t>(chunk);
  const auto launch = [&](auto kern, int c) -> Status {
    CEILING_CUDA_RETURN(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(smem)));
    CEILING_CUDA_RETURN(
        detail::launch_pdl(kern, dim3(c * a.S), dim3(kThreads), smem, stream, a, chunk, vec));
    return Status();
  };
  switch (cluster) {
    case 1:
      return launch(sample_kernel<1>, 1);
    case 2:
      return launch(sample_kernel<2>, 2);
    case 4:
      return launch(sample_kernel<4>, 4);
    default:
      return launch(sample_kernel<kClusterLarge>, kClusterLarge);
  }
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
