// The full sampler (semantics: src/kernels/cpu/sampling.h): one thread-block cluster of kCluster
// CTAs per sequence. CTA r owns the ids [r·chunk, (r+1)·chunk) and keeps their logits, then their
// weights, in its shared memory, so the row is read from global memory once.
//
// Cluster-wide decisions go through distributed shared memory: each CTA publishes its partial in
// its own shared memory, the cluster barrier makes it visible, and every CTA reads all kCluster
// partials in rank order — so all CTAs reach bit-identical decisions and take the same branches
// (every exchange is made by every CTA). Small published slots are double-buffered by exchange
// parity (a slot written at exchange n is rewritten at n + 2 at the earliest, after every reader
// of exchange n has passed barrier n + 1); the level-1 histogram is its own publication and is
// rewritten only after a further cluster barrier.
//
// Steps:
//   1. P1: penalize + validate + max and min, penalized logits into shared memory (exchange);
//      greedy rows then take the lowest id at the maximum (one more exchange) and stop.
//   2. P2: weights w = exp((l - l_max) / T) in place (exactly 1 at the maximum; the division
//      bit-identical to `/` with its reciprocal hoisted, see WeightDiv) and a level-1 histogram of
//      w > 0 over the key bits(w) >> 20: 1024 bins of the exponent and 3 mantissa bits, each a
//      w-range of a factor 2^(1/8). w ≥ 0, so keys order like the values, and a bin never splits
//      equal weights. Counts always; when top-p runs over the whole row (top-k off), also each
//      bin's exact mass: in a bin every w is M·2^(e-150) with one e and an integer M < 2^24, so
//      Σ M is kept exactly in two 32-bit integer sums (M >> 12, M & 4095) — shared-memory float
//      atomics compile to CAS loops, and these sums are exact.
//   3. Every CTA reads every CTA's histogram; one block scan in rank order (w descending) gives
//      n_pos, the bin b_k of the k-th candidate and (top-k off) the bin b_p where the mass reaches
//      top_p · Σw. The lowest bin a later step needs is b_g: b_k; else b_p; else the bin of min_p;
//      else bin 0. The N_c elements in bins ≥ b_g — "the candidates" — are a prefix of the rank
//      order holding every token that can be kept, so top-k, top-p, min-p and the pick are exact
//      on them alone.
//   4. Fast path (N_c ≤ the list capacity: 4096, less at the largest slices): each CTA appends its
//      candidates in id order (per-warp ordered compaction, offsets from the histograms) straight
//      into rank 0's shared memory through DSMEM; one cluster barrier; the other CTAs exit and
//      rank 0 finishes alone on the list: radix select of the k-th element inside bin b_k (digits
//      of the 20 bits left: 8, 8, 4, then the tie by id), top-p the same way by mass (a level-1
//      mass histogram over the top-k set, then the digits inside its crossing bin), min-p as a
//      predicate, the pick as an id-ordered crossing. When ≤ 64 tokens are left (top-k ≤ 64, the
//      usual case) one warp sorts them (bitonic, 64-bit keys (~bits(w), index)), cuts top-p and
//      min-p on the sorted prefix sums and picks — no further block barrier.
//   5. Fallback (N_c above the capacity: flat rows, top-p or min-p sets of many thousand tokens,
//      top-k beyond the capacity, pure temperature): the same selection code runs over the
//      slices, one cluster exchange per digit and per crossing. Its passes are shared-memory scans
//      in which nearly every element fails one compare; correctness never depends on the data.
// Sums of weights are exact integers inside a bin and doubles across bins and CTAs; the two
// thresholds, top_p · mass and u · total, are the reference's fp32 products of those sums
// (fp32_threshold), compared in double. So every decision is the reference's wherever its fp32
// sums are exact (tie groups), and otherwise the exact-arithmetic one up to double rounding
// (count decisions — top-k, ties, min-p — are exact). The CPU sums in fp32 in its own order, so
// picks agree except where u·total or the top-p target lies within the CPU's fp32 rounding of a
// boundary (what the tests accept).
//
// Napkin math (H100 SXM, ~1.75 GHz, 4 schedulers per SM; one row of V = 128256 on 8 CTAs, 16032
// logits per CTA; T = 0.7, k = 50, p = 0.9, repetition penalty). Before: ~10 full passes at ~45
// instructions per element (__match_any_sync + shared atomics in each radix pass): 233 K warp
// instructions per SM at the measured IPC 1.2 → 85 µs. Now the full passes are P1 (~4
// instructions per element, plus 128 KB of logits and counts per SM: ~2 µs, latency-bound), P2
// (~20 per element: 3 FMAs for the division, 8 for expf, 2 for the select, 5 for the histogram;
// 16032·20/32 = 10 K warp instructions → ~2.5 µs at IPC 2.3) and the compaction (two scans at ~3
// per element: ~0.5 µs). The candidates are the bins at or above the 50th weight: for logits
// uniform in ±8 at T = 0.7, w ≥ 0.9375, ~360 elements (peaked real logits give fewer). Rank 0
// then needs 3 digit rounds of 3 block barriers and one warp's 64-element sort (~1.5 µs). Three
// cluster barriers and ~12 block barriers (~1.5 µs) and the launch (~1 µs): ~9–11 µs predicted.
// 64 rows of 128256 (clusters of 4: 256 CTAs of 32064 logits, 2 waves on 132 SMs) and 256 rows of
// 32000 (one CTA each, 2 waves) have the same per-CTA work: ~5 µs of P2, ~1.5 µs of other
// passes, ~3 µs of barriers and rank-0 work, plus the loads: 64–66 MB of logits and counts come
// from HBM at ~3 TB/s, ~10 µs of each wave → ~2 × 20 µs ≈ 40 µs (was 405 and 323 µs).
#include <cooperative_groups.h>

#include <algorithm>
#include <climits>
#include <type_traits>

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
// whose slices fit in shared memory (measured: 256 rows of 32000 took 684 µs on clusters of 8
// against 217 µs for the earlier one-CTA-per-row sampler).
constexpr int kClusterLarge = 8;
constexpr int kClusterMinV = 16384;
constexpr int kFewRows = 16;
// Logits per CTA slice (the slice, the candidate list and ~23 KB of static shared memory share a
// CTA's 227 KB).
constexpr int kMaxChunk = 48 * 1024;
constexpr int kSmemPerBlock = 227 * 1024;
constexpr int kSmemSlack = 1024;
// Level-1 key: bits(w) >> 20 for w in [0, 2) (sign 0, 8 exponent bits, 3 mantissa bits).
constexpr int kKeyShift = 20;
constexpr int kBins = 1024;
static_assert(kBins == 2 * kThreads, "l1_scan gives each thread two bins");
// A row of the level-1 histogram: the bins, then 32 never-read slots where P2 sends the zero
// weights (one per lane: no branch, no conflict).
constexpr int kH1 = kBins + 32;
// Digits inside a level-1 bin: bits 19..12, 11..4, 3..0.
constexpr int kDigitBins = 256;
constexpr int kPubWords = 3 * kDigitBins;
// Candidate list in rank 0 (8 bytes per entry), and the one-warp finish.
constexpr int kMaxList = 4096;
constexpr int kSmall = 64;
constexpr unsigned kFull = 0xffffffffu;

// Invariants checked by host-side emulation builds of this file (no code otherwise).
#ifdef CEILING_SAMPLER_CHECK
#define SAMPLER_CHECK(cond) CEILING_SAMPLER_CHECK(cond, #cond)
#else
#define SAMPLER_CHECK(cond) ((void)0)
#endif

struct Shared {
  unsigned h1[3][kH1];         // level-1 histogram (count, Σ M >> 12, Σ M & 4095), published
  unsigned pub[2][kPubWords];  // small publications, by exchange parity
  unsigned dh[3][kDigitBins];  // digit histogram (count, Σ M >> 12, Σ M & 4095)
  double red_d[2][kWarps];     // block reductions and scans
  unsigned long long red_q[kWarps];
  float red_f[kWarps];
  int red_i[2][kWarps];
  unsigned red_u[kWarps];
  double res_d[4];  // broadcast results
  unsigned long long res_q[2];
  int res_i[12];
  float e_w[kSmall];  // the one-warp finish: a set of ≤ kSmall candidates
  int e_id[kSmall];
  float e_kept[kSmall];
};

// ---- small helpers -----------------------------------------------------------------------------

struct SumOp {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
  __device__ int operator()(int a, int b) const { return max(a, b); }
};
struct MinOp {
  __device__ float operator()(float a, float b) const { return fminf(a, b); }
  __device__ int operator()(int a, int b) const { return min(a, b); }
};

// Butterfly: every lane gets the same value (a commutative op sees the same operand pairs).
template <typename T, typename Op>
__device__ __forceinline__ T warp_all(T v, Op op) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(kFull, v, o));
  return v;
}

// Every thread gets the same value: warp values combined in warp order. Starts with a barrier
// (a previous call may still read `scratch`), ends after the barrier-protected read.
template <typename T, typename Op>
__device__ T block_all(T v, T* scratch, Op op) {
  v = warp_all(v, op);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = v;
  __syncthreads();
  T r = scratch[0];
#pragma unroll
  for (int w = 1; w < kWarps; ++w) r = op(r, scratch[w]);
  return r;
}

template <typename T>
__device__ __forceinline__ T warp_incl_scan(T v) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const T n = __shfl_up_sync(kFull, v, o);
    if (lane >= o) v += n;
  }
  return v;
}

// Exclusive companion of warp_incl_scan: the previous lane's inclusive value (the same number,
// so consecutive lanes' ranges tile exactly even in floating point).
template <typename T>
__device__ __forceinline__ T warp_excl_of(T incl) {
  const T e = __shfl_up_sync(kFull, incl, 1);
  return (threadIdx.x & 31) == 0 ? T(0) : e;
}

__device__ __forceinline__ void put_d(unsigned* p, double v) {
  const auto b = static_cast<unsigned long long>(__double_as_longlong(v));
  p[0] = static_cast<unsigned>(b);
  p[1] = static_cast<unsigned>(b >> 32);
}
__device__ __forceinline__ double get_d(const unsigned* p) {
  return __longlong_as_double(
      static_cast<long long>((static_cast<unsigned long long>(p[1]) << 32) | p[0]));
}

// w = M · 2^(e-150) with M < 2^24 an integer: M of a weight's bits (w ≥ 0).
__device__ __forceinline__ unsigned mant24(unsigned bits) {
  return (bits & 0x7FFFFFu) | (bits >= 0x800000u ? 0x800000u : 0u);
}
// 2^(e-150) for the level-1 bin `key` (every weight of a bin has the same exponent field e;
// subnormals use e = 1).
__device__ __forceinline__ double key_scale(int key) {
  const int e = max(key >> 3, 1) - 150;
  return __longlong_as_double(static_cast<long long>(e + 1023) << 52);
}

// The reference's thresholds are fp32 products: top_p · mass for top-p and u · total for the pick
// (src/kernels/cpu/sampling.cpp). They are formed here the same way, from the sum rounded to fp32,
// and compared in double. Where the CPU's fp32 sums are exact (tie groups: integer multiples of
// one weight) the decisions are then the reference's bit for bit; top_p · mass taken in double
// instead keeps one more token of a tie group whenever the exact product lies just above an
// integer multiple that fp32 rounds it down to (0.3f · 1000 = 300.0000119 → 300 in fp32: the CPU
// keeps 300 of 1000 equal weights, the double product asked for 301).
__device__ __forceinline__ double fp32_threshold(float f, double sum) {
  return static_cast<double>(__fmul_rn(f, __double2float_rn(sum)));
}

template <int kC, typename T>
__device__ __forceinline__ T* at_rank(T* p, int rank) {
  if constexpr (kC > 1) {
    return cg::this_cluster().map_shared_rank(p, static_cast<unsigned>(rank));
  } else {
    return p;
  }
}

// The exchange protocol of the file comment.
template <int kC>
class Exchange {
 public:
  __device__ explicit Exchange(Shared& sh) : sh_(sh) {}
  // This CTA's slots for the next exchange (written before sync()).
  __device__ unsigned* out() { return sh_.pub[parity_]; }
  // The barrier: every CTA's slots become readable through in() until done().
  __device__ void sync() {
    if constexpr (kC > 1) {
      cg::this_cluster().sync();
    } else {
      __syncthreads();
    }
  }
  __device__ const unsigned* in(int rank) { return at_rank<kC>(sh_.pub[parity_], rank); }
  __device__ void done() { parity_ ^= 1; }

 private:
  Shared& sh_;
  int parity_ = 0;
};

// A rank threshold: the element (val, id) is the last kept; keep w > val, or w == val and
// id <= id.
struct Threshold {
  bool on = false;
  float val = 0.0f;
  int id = 0;
  __device__ bool keeps(float w, int i) const { return !on || w > val || (w == val && i <= id); }
};

// Elements (w, id) with ids ascending in the index: a CTA's slice, or rank 0's candidate list.
struct SliceSrc {
  const float* w;
  int n, base;
  __device__ float at(int i) const { return w[i]; }
  __device__ int id(int i) const { return base + i; }
};
struct ListSrc {
  const float* w;
  const int* ids;
  int n;
  __device__ float at(int i) const { return w[i]; }
  __device__ int id(int i) const { return ids[i]; }
};

// ---- level-1 histogram scan --------------------------------------------------------------------

struct L1 {
  unsigned n = 0;           // elements counted (w > 0 in the domain)
  double mass = 0.0;        // their mass (with_mass)
  int bk = -1;              // bin of the k_target-th element in rank order, or -1
  unsigned ak = 0;          // elements in the bins above bk
  int bp = -1;              // bin where the mass (w descending) first reaches top_p · mass, or -1
  double before_p = 0.0;    // mass of the bins above bp
  unsigned ch = 0, cl = 0;  // this thread's two bins (kBins-1-2t, kBins-2-2t), summed over CTAs
  unsigned chb = 0, clb = 0;  // the same, summed over the CTAs of rank below my_rank
};

// Sums the published level-1 histograms of all kC CTAs (thread t: bins 1023-2t and 1022-2t, so
// thread order is rank order) and scans them. Identical results in every thread of every CTA.
template <int kC>
__device__ L1 l1_scan(Shared& sh, bool with_mass, unsigned k_target, float top_p, int my_rank) {
  const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
  const int bh = kBins - 1 - 2 * t, bl = bh - 1;
  unsigned ch = 0, cl = 0, hh = 0, hl = 0, lh = 0, ll = 0, chb = 0, clb = 0;
#pragma unroll 4
  for (int r = 0; r < kC; ++r) {
    const unsigned* h = at_rank<kC>(&sh.h1[0][0], r);
    if (r == my_rank) {
      chb = ch;
      clb = cl;
    }
    ch += h[bh];
    cl += h[bl];
    if (with_mass) {
      hh += h[kH1 + bh];
      hl += h[kH1 + bl];
      lh += h[2 * kH1 + bh];
      ll += h[2 * kH1 + bl];
    }
  }
  double mh = 0.0, ml = 0.0;
  if (with_mass) {
    mh = (static_cast<double>(hh) * 4096.0 + static_cast<double>(lh)) * key_scale(bh);
    ml = (static_cast<double>(hl) * 4096.0 + static_cast<double>(ll)) * key_scale(bl);
  }
  const unsigned ci = warp_incl_scan(ch + cl);
  const double mi = warp_incl_scan(mh + ml);
  const unsigned ce = warp_excl_of(ci);
  const double me = warp_excl_of(mi);
  __syncthreads();  // red_* and res_* may still be read by an earlier step
  if (lane == 31) {
    sh.red_u[warp] = ci;
    sh.red_d[0][warp] = mi;
  }
  if (t == 0) {
    sh.res_i[0] = -1;
    sh.res_i[1] = 0;
    sh.res_i[2] = -1;
    sh.res_d[0] = 0.0;
  }
  __syncthreads();
  unsigned wc = 0, tc = 0;
  double wm = 0.0, tm = 0.0;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    if (w == warp) {
      wc = tc;
      wm = tm;
    }
    tc += sh.red_u[w];
    tm += sh.red_d[0][w];
  }
  // [c_ex, c_in) and [m_ex, m_in] of consecutive threads tile exactly (see warp_excl_of; the
  // warp offsets are the same sequential sums).
  const unsigned c_ex = wc + ce, c_in = wc + ci;
  const double m_ex = wm + me, m_in = wm + mi;
  if (k_target > 0 && c_ex < k_target && k_target <= c_in) {
    const bool hi = c_ex + ch >= k_target;
    sh.res_i[0] = hi ? bh : bl;
    sh.res_i[1] = static_cast<int>(hi ? c_ex : c_ex + ch);
  }
  if (with_mass && top_p < 1.0f) {
    const double target = fp32_threshold(top_p, tm);
    if (m_ex < target && target <= m_in) {
      const bool hi = m_ex + mh >= target;
      sh.res_i[2] = hi ? bh : bl;
      sh.res_d[0] = hi ? m_ex : m_ex + mh;
    }
  }
  __syncthreads();
  L1 r;
  r.n = tc;
  r.mass = tm;
  r.bk = sh.res_i[0];
  r.ak = static_cast<unsigned>(sh.res_i[1]);
  r.bp = sh.res_i[2];
  r.before_p = sh.res_d[0];
  r.ch = ch;
  r.cl = cl;
  r.chb = chb;
  r.clb = clb;
  return r;
}

__device__ __forceinline__ void l1_add(Shared& sh, unsigned bits, bool with_mass) {
  const unsigned key = bits >> kKeyShift;
  SAMPLER_CHECK(key < kBins);
  atomicAdd(&sh.h1[0][key], 1u);
  if (with_mass) {
    const unsigned m = mant24(bits);
    atomicAdd(&sh.h1[1][key], m >> 12);
    atomicAdd(&sh.h1[2][key], m & 4095u);
  }
}

// l1_add for any weight, zero included (to this lane's spare slot): atomics without a branch.
template <bool kMass>
__device__ __forceinline__ void l1_add_any(Shared& sh, unsigned bits, unsigned lane) {
  const unsigned key = bits != 0u ? bits >> kKeyShift : kBins + lane;
  SAMPLER_CHECK(key < kH1 && (bits == 0u || key < kBins));
  atomicAdd(&sh.h1[0][key], 1u);
  if constexpr (kMass) {
    const unsigned m = mant24(bits);
    atomicAdd(&sh.h1[1][key], m >> 12);
    atomicAdd(&sh.h1[2][key], m & 4095u);
  }
}

// ---- crossings in id order ---------------------------------------------------------------------

// Within this CTA's part of `src`: the first index at which the running sum (index order) of
// value(w, id) exceeds thr, or the last index with a positive value when rounding leaves no
// crossing, or -1 when every value is 0. Warp w sums [w·seg, (w+1)·seg); the crossing warp's
// lanes then sum contiguous sub-segments, and the crossing lane walks its sub-segment.
template <class Src, class Val>
__device__ int block_first_crossing(const Src& src, Val value, double thr, Shared& sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n = src.n;
  const int seg = (n + kWarps - 1) / kWarps;
  const int s0 = min(n, warp * seg), s1 = min(n, s0 + seg);
  double sum = 0.0;
  for (int b = s0 + lane; b < s1; b += 32) sum += value(src.at(b), src.id(b));
  sum = warp_all(sum, SumOp{});
  __syncthreads();
  if (lane == 0) sh.red_d[1][warp] = sum;
  if (threadIdx.x == 0) sh.res_i[4] = -1;
  __syncthreads();
  if (warp == 0) {
    const double own = lane < kWarps ? sh.red_d[1][lane] : 0.0;
    const double incl = warp_incl_scan(own);
    const double excl = warp_excl_of(incl);
    const unsigned hit = __ballot_sync(kFull, incl > thr);
    const unsigned nonzero = __ballot_sync(kFull, own > 0.0);
    const int W = hit ? __ffs(hit) - 1 : (nonzero ? 31 - __clz(nonzero) : -1);
    const double base = __shfl_sync(kFull, excl, W < 0 ? 0 : W);
    if (lane == 0) {
      sh.res_i[3] = W;
      sh.res_d[1] = base;
    }
  }
  __syncthreads();
  const int W = sh.res_i[3];
  if (W >= 0 && warp == W) {
    const double base = sh.res_d[1];
    const int sub = (seg + 31) / 32;
    const int a0 = min(s1, s0 + lane * sub), a1 = min(s1, a0 + sub);
    double own = 0.0;
    for (int b = a0; b < a1; ++b) own += value(src.at(b), src.id(b));
    const double incl = warp_incl_scan(own);
    const double excl = warp_excl_of(incl);
    const unsigned hit = __ballot_sync(kFull, base + incl > thr);
    const unsigned nonzero = __ballot_sync(kFull, own > 0.0);
    const int L = hit ? __ffs(hit) - 1 : (nonzero ? 31 - __clz(nonzero) : -1);
    if (lane == L) {
      double run = base + excl;
      int found = -1, last = -1;
      for (int b = a0; b < a1 && found < 0; ++b) {
        const double x = value(src.at(b), src.id(b));
        if (x > 0.0) last = b;
        run += x;
        if (x > 0.0 && run > thr) found = b;
      }
      sh.res_i[4] = found >= 0 ? found : last;
    }
  }
  __syncthreads();
  const int r = W >= 0 ? sh.res_i[4] : -1;
  __syncthreads();
  return r;
}

// Over the whole row (all kC parts of `src`, ids ascending by rank): the first id at which the
// running sum of value(w, id) exceeds thr_of(total), total = Σ value; without a crossing
// (rounding) the last id with a positive value; -1 when every value is 0. The CTA sums locate
// the crossing CTA; it walks its part and publishes the id. Two exchanges.
template <int kC, class Src, class Val, class Thr>
__device__ int ordered_crossing(const Src& src, int my_rank, Val value, Thr thr_of, Shared& sh,
                                Exchange<kC>& x) {
  double own = 0.0;
  int last = -1;
  for (int i = threadIdx.x; i < src.n; i += kThreads) {
    const double v = value(src.at(i), src.id(i));
    own += v;
    if (v > 0.0) last = i;
  }
  own = block_all(own, sh.red_d[0], SumOp{});
  last = block_all(last, sh.red_i[0], MaxOp{});
  if (threadIdx.x == 0) {
    put_d(x.out(), own);
    x.out()[2] = static_cast<unsigned>(last >= 0 ? src.id(last) : -1);
  }
  x.sync();
  double total = 0.0;
#pragma unroll
  for (int r = 0; r < kC; ++r) total += get_d(x.in(r));
  const double thr = thr_of(total);
  double run = 0.0, before = 0.0, before_last = 0.0;
  int R = -1, last_r = -1, last_id = -1;
#pragma unroll
  for (int r = 0; r < kC; ++r) {
    const unsigned* in = x.in(r);
    const double v = get_d(in);
    if (R < 0 && run + v > thr) {
      R = r;
      before = run;
    }
    if (v > 0.0) {
      last_r = r;
      before_last = run;
    }
    run += v;
    last_id = max(last_id, static_cast<int>(in[2]));
  }
  x.done();
  if (R < 0) {
    R = last_r;
    before = before_last;
  }
  int id = -1;
  if (R == my_rank) {
    const int i = block_first_crossing(src, value, thr - before, sh);
    id = i >= 0 ? src.id(i) : -1;
  }
  if (threadIdx.x == 0) x.out()[0] = static_cast<unsigned>(id);
  x.sync();
  const int picked = R >= 0 ? static_cast<int>(x.in(R)[0]) : -1;
  x.done();
  SAMPLER_CHECK(picked >= 0 || last_id >= 0);
  return picked >= 0 ? picked : last_id;
}

// ---- selection inside a level-1 bin ------------------------------------------------------------

// The element at which the running metric (count, or mass when kMass) of the domain elements in
// rank order (w desc, id asc) first reaches `target`, knowing that it lies in level-1 bin `bin`
// and that the domain elements of the bins above carry `before`. Radix select on the 20 bits
// left (digits 8, 8, 4; metric kept in exact integer units of the bin's scale), then the tie at
// the value by id. dom(w, id) is only asked for w > 0.
template <bool kMass, int kC, class Src, class Dom>
__device__ Threshold select_in_bin(const Src& src, int my_rank, Dom dom, int bin, double before,
                                   double target, Shared& sh, Exchange<kC>& x) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  unsigned prefix = static_cast<unsigned>(bin) << kKeyShift;
  unsigned mask = ~0u << kKeyShift;
  const double scale = kMass ? key_scale(bin) : 1.0;
  unsigned long long above = 0;  // metric units of the domain elements ranked above the prefix
  unsigned n_eq = 0;
  bool exhausted = false;
#pragma unroll 1
  for (int round = 0; round < 3; ++round) {
    const int shift = round == 0 ? 12 : (round == 1 ? 4 : 0);
    const int nb = round == 2 ? 16 : kDigitBins;
    for (int b = threadIdx.x; b < 3 * kDigitBins; b += kThreads) (&sh.dh[0][0])[b] = 0u;
    __syncthreads();
    for (int i = threadIdx.x; i < src.n; i += kThreads) {
      const float w = src.at(i);
      const unsigned bits = __float_as_uint(w);
      if (bits != 0u && (bits & mask) == prefix && dom(w, src.id(i))) {
        const unsigned d = (bits >> shift) & static_cast<unsigned>(nb - 1);
        atomicAdd(&sh.dh[0][d], 1u);
        if constexpr (kMass) {
          const unsigned m = mant24(bits);
          atomicAdd(&sh.dh[1][d], m >> 12);
          atomicAdd(&sh.dh[2][d], m & 4095u);
        }
      }
    }
    __syncthreads();
    if constexpr (kC > 1) {
      for (int b = threadIdx.x; b < nb; b += kThreads) {
        x.out()[b] = sh.dh[0][b];
        if constexpr (kMass) {
          x.out()[kDigitBins + b] = sh.dh[1][b];
          x.out()[2 * kDigitBins + b] = sh.dh[2][b];
        }
      }
      x.sync();
      for (int b = threadIdx.x; b < nb; b += kThreads) {
        unsigned c = 0, h = 0, l = 0;
#pragma unroll
        for (int r = 0; r < kC; ++r) {
          const unsigned* in = x.in(r);
          c += in[b];
          if constexpr (kMass) {
            h += in[kDigitBins + b];
            l += in[2 * kDigitBins + b];
          }
        }
        sh.dh[0][b] = c;
        if constexpr (kMass) {
          sh.dh[1][b] = h;
          sh.dh[2][b] = l;
        }
      }
      x.done();
      __syncthreads();
    }
    if (warp == 0) {
      // Lane l holds digits nb-1-8l ... nb-8-8l (descending).
      unsigned c[8];
      unsigned long long m[8];
      unsigned long long own = 0;
      unsigned any = 0;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int idx = lane * 8 + j, d = nb - 1 - idx;
        c[j] = idx < nb ? sh.dh[0][d] : 0u;
        if constexpr (kMass) {
          m[j] = idx < nb ? static_cast<unsigned long long>(sh.dh[1][d]) * 4096ull + sh.dh[2][d]
                          : 0ull;
        } else {
          m[j] = c[j];
        }
        own += m[j];
        any |= c[j];
      }
      const unsigned long long incl = warp_incl_scan(own);
      const unsigned long long excl = warp_excl_of(incl);
      const auto reaches = [&](unsigned long long units) {
        return before + static_cast<double>(units) * scale >= target;
      };
      const unsigned hit = __ballot_sync(kFull, any != 0u && reaches(above + incl));
      const unsigned nonempty = __ballot_sync(kFull, any != 0u);
      const int L = hit ? __ffs(hit) - 1 : (nonempty ? 31 - __clz(nonempty) : -1);
      if (lane == 0) {  // defaults, for a bin with no domain element (never, barring a bug)
        sh.res_i[5] = 0;
        sh.res_i[6] = 1;
        sh.res_i[7] = 0;
        sh.res_q[0] = above;
      }
      __syncwarp();
      if (lane == L) {
        unsigned long long run = above + excl, run_at = run;
        int pick = -1;
        unsigned cnt = 0;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          if (c[j] == 0u) continue;
          pick = nb - 1 - (lane * 8 + j);
          cnt = c[j];
          run_at = run;
          if (hit && reaches(run + m[j])) break;
          run += m[j];
        }
        sh.res_i[5] = pick;
        sh.res_i[6] = hit ? 0 : 1;
        sh.res_i[7] = static_cast<int>(cnt);
        sh.res_q[0] = run_at;
      }
    }
    __syncthreads();
    const int pick = sh.res_i[5];
    SAMPLER_CHECK(pick >= 0 && sh.res_i[7] > 0);
    exhausted = exhausted || sh.res_i[6] != 0;
    n_eq = static_cast<unsigned>(sh.res_i[7]);
    above = sh.res_q[0];
    prefix |= static_cast<unsigned>(max(pick, 0)) << shift;
    mask |= static_cast<unsigned>(nb - 1) << shift;
  }
  Threshold t;
  t.on = true;
  t.val = __uint_as_float(prefix);
  const double before_val = before + static_cast<double>(above) * scale;
  long long j;
  if (exhausted || n_eq == 0u) {
    j = n_eq;
  } else if (kMass) {
    j = static_cast<long long>(ceil((target - before_val) / static_cast<double>(t.val)));
  } else {
    j = static_cast<long long>(target - before_val);
  }
  j = max(1ll, min(j, static_cast<long long>(n_eq)));
  if (n_eq == 0u || j == static_cast<long long>(n_eq)) {
    t.id = INT_MAX;  // every tie is kept (the usual case: one element at val)
    return t;
  }
  const float val = t.val;
  const double jj = static_cast<double>(j) - 0.5;
  t.id = ordered_crossing<kC>(
      src, my_rank, [&](float w, int id) { return w == val && dom(w, id) ? 1.0 : 0.0; },
      [jj](double) { return jj; }, sh, x);
  return t;
}

// A level-1 histogram (count and exact mass) of the domain elements of `src`, over all kC CTAs,
// scanned for the bin where the mass (w descending) reaches top_p · Σ. It rewrites h1, so in a
// cluster a barrier comes first: every CTA has then finished reading the previous publication.
template <int kC, class Src, class Dom>
__device__ L1 level1_over(const Src& src, Dom dom, float top_p, Shared& sh, Exchange<kC>& x) {
  if constexpr (kC > 1) x.sync();
  for (int b = threadIdx.x; b < 3 * kH1; b += kThreads) (&sh.h1[0][0])[b] = 0u;
  __syncthreads();
  for (int i = threadIdx.x; i < src.n; i += kThreads) {
    const float w = src.at(i);
    const unsigned bits = __float_as_uint(w);
    if (bits != 0u && dom(w, src.id(i))) l1_add(sh, bits, true);
  }
  x.sync();  // the histogram complete (and, in a cluster, published)
  return l1_scan<kC>(sh, true, 0u, top_p, 0);
}

// ---- the one-warp finish -----------------------------------------------------------------------

// Warp 0 only (other threads return -1): top-p, min-p and the pick over a set E of n ≤ kSmall
// candidates (ids ascending in the index) that is a prefix of the row's rank order holding every
// token that can be kept. The first k_lim in rank order form the top-k set; top-p is relative to
// its mass, or to M when use_M (top-k off and E not the whole row). A bitonic sort of 64-bit keys
// (~bits(w), index) gives the rank order; prefix sums in double.
__device__ int warp0_finish(const float* ew, const int* eid, int n, int k_lim, bool use_M, double M,
                            const GpuSamplingParams& p, float u, Shared& sh) {
  if (threadIdx.x >= 32) return -1;
  const int lane = threadIdx.x;
  unsigned long long key[2];
#pragma unroll
  for (int s = 0; s < 2; ++s) {
    const int o = s * 32 + lane;
    key[s] = o < n ? (static_cast<unsigned long long>(~__float_as_uint(ew[o])) << 32) |
                         static_cast<unsigned>(o)
                   : ~0ull;
  }
  // Position i = s·32 + lane; ascending keys = rank order.
#pragma unroll
  for (int kk = 2; kk <= 2 * 32; kk <<= 1) {
#pragma unroll
    for (int j = kk >> 1; j > 0; j >>= 1) {
      if (j == 32) {
        const unsigned long long a = key[0], b = key[1];
        key[0] = a < b ? a : b;
        key[1] = a < b ? b : a;
      } else {
#pragma unroll
        for (int s = 0; s < 2; ++s) {
          const int i = s * 32 + lane;
          const unsigned long long other = __shfl_xor_sync(kFull, key[s], j);
          const bool keep_min = ((i & kk) == 0) == ((i & j) == 0);
          const bool less = key[s] < other;
          key[s] = keep_min == less ? key[s] : other;
        }
      }
    }
  }
  float w[2];
  int o[2];
#pragma unroll
  for (int s = 0; s < 2; ++s) {
    w[s] = key[s] != ~0ull ? __uint_as_float(~static_cast<unsigned>(key[s] >> 32)) : 0.0f;
    o[s] = static_cast<int>(key[s] & 0xffffffffull);
  }
  const int K = min(k_lim, n);
  const double i0 = warp_incl_scan(lane < K ? static_cast<double>(w[0]) : 0.0);
  const double t0 = __shfl_sync(kFull, i0, 31);
  const double i1 = t0 + warp_incl_scan(32 + lane < K ? static_cast<double>(w[1]) : 0.0);
  const double mass_k = K <= 32 ? __shfl_sync(kFull, i0, K - 1) : __shfl_sync(kFull, i1, K - 33);
  int P = K;  // top-p: the shortest prefix whose mass reaches top_p · mass
  if (p.top_p < 1.0f) {
    const double target = fp32_threshold(p.top_p, use_M ? M : mass_k);
    const unsigned h0 = __ballot_sync(kFull, lane < K && i0 >= target);
    const unsigned h1 = __ballot_sync(kFull, 32 + lane < K && i1 >= target);
    if (h0) {
      P = __ffs(h0);
    } else if (h1) {
      P = 32 + __ffs(h1);
    }
  }
  int L = P;  // min-p: sorted by w, so the tokens with w ≥ min_p are a prefix too
  if (p.min_p > 0.0f) {
    const unsigned m0 = __ballot_sync(kFull, lane < P && w[0] >= p.min_p);
    const unsigned m1 = __ballot_sync(kFull, 32 + lane < P && w[1] >= p.min_p);
    L = max(1, __popc(m0) + __popc(m1));
  }
#pragma unroll
  for (int s = 0; s < 2; ++s) {
    const int i = s * 32 + lane;
    if (i < n) sh.e_kept[o[s]] = i < L ? w[s] : 0.0f;
  }
  __syncwarp();
  // The pick: lane l holds indices 2l, 2l+1 (ids ascending).
  const float a = 2 * lane < n ? sh.e_kept[2 * lane] : 0.0f;
  const float b = 2 * lane + 1 < n ? sh.e_kept[2 * lane + 1] : 0.0f;
  const double incl = warp_incl_scan(static_cast<double>(a) + static_cast<double>(b));
  const double excl = warp_excl_of(incl);
  const double thr = fp32_threshold(u, __shfl_sync(kFull, incl, 31));
  const double ra = excl + static_cast<double>(a), rb = ra + static_cast<double>(b);
  const bool ha = a > 0.0f && ra > thr, hb = b > 0.0f && rb > thr;
  const unsigned hit = __ballot_sync(kFull, ha || hb);
  int pick;
  if (hit) {
    pick = __shfl_sync(kFull, ha ? 2 * lane : 2 * lane + 1, __ffs(hit) - 1);
  } else {  // rounding: the kept token with the largest id
    const unsigned nz = __ballot_sync(kFull, a > 0.0f || b > 0.0f);
    pick = __shfl_sync(kFull, b > 0.0f ? 2 * lane + 1 : 2 * lane, nz ? 31 - __clz(nz) : 0);
  }
  __syncwarp();
  return eid[pick];
}

// Warp 0 copies the top-k set (≤ kSmall elements: tk resolves every tie) of the list, in id
// order, into sh.e_*, and finishes on it.
__device__ int warp0_finish_topk(const ListSrc& src, const Threshold& tk,
                                 const GpuSamplingParams& p, float u, Shared& sh) {
  if (threadIdx.x >= 32) return -1;
  const int lane = threadIdx.x;
  int cnt = 0;
  for (int i0 = 0; i0 < src.n; i0 += 32) {
    const int i = i0 + lane;
    const float w = i < src.n ? src.w[i] : 0.0f;
    const bool f = i < src.n && tk.keeps(w, src.ids[i]);
    const unsigned bal = __ballot_sync(kFull, f);
    const int pos = cnt + __popc(bal & ((1u << lane) - 1u));
    if (f && pos < kSmall) {
      sh.e_w[pos] = w;
      sh.e_id[pos] = src.ids[i];
    }
    cnt += __popc(bal);
  }
  __syncwarp();
  const int n = min(cnt, kSmall);
  return warp0_finish(sh.e_w, sh.e_id, n, n, false, 0.0, p, u, sh);
}

// ---- steps 4–6 on the candidates ---------------------------------------------------------------

// What step 3 decided (identical in every CTA).
struct Plan {
  bool k_act = false;       // top-k applies (0 < k < n_pos)
  int bk = -1;              // bin of the k-th element
  unsigned ak = 0;          // elements in the bins above bk
  bool mass_known = false;  // the row's level-1 masses were taken (top-k off, top-p on)
  double mass = 0.0;        // then: Σ w over the row,
  int bp = -1;              // the bin where the mass reaches top_p · Σ w,
  double before_p = 0.0;    // and the mass of the bins above it
};

// top-k, top-p, min-p and the pick over `src` (rank 0's list with kC = 1, or the slices of the
// cluster). Returns the token (every thread of warp 0; with a list, other warps may return -1).
template <int kC, class Src>
__device__ int finish(const Src& src, int my_rank, const Plan& pl, const GpuSamplingParams& p,
                      float u, Shared& sh, Exchange<kC>& x) {
  constexpr bool kList = std::is_same_v<Src, ListSrc>;
  const auto all = [](float, int) { return true; };
  Threshold tk, tp;
  if (pl.k_act) {
    if constexpr (kList) {
      if (src.n <= kSmall)
        return warp0_finish(src.w, src.ids, src.n, p.top_k, false, 0.0, p, u, sh);
    }
    tk = select_in_bin<false>(src, my_rank, all, pl.bk, static_cast<double>(pl.ak),
                              static_cast<double>(p.top_k), sh, x);
    if constexpr (kList) {
      if (p.top_k <= kSmall) return warp0_finish_topk(src, tk, p, u, sh);
    }
  } else if constexpr (kList) {
    if (src.n <= kSmall)
      return warp0_finish(src.w, src.ids, src.n, src.n, pl.mass_known, pl.mass, p, u, sh);
  }
  if (p.top_p < 1.0f) {
    const auto in_k = [tk](float w, int id) { return tk.keeps(w, id); };
    L1 d;
    if (pl.k_act || !pl.mass_known) {
      d = level1_over<kC>(src, in_k, p.top_p, sh, x);
    } else {
      d.mass = pl.mass;
      d.bp = pl.bp;
      d.before_p = pl.before_p;
    }
    if (d.bp >= 0)  // always (p < 1 puts the target below the mass), barring a bug
      tp = select_in_bin<true>(src, my_rank, in_k, d.bp, d.before_p,
                               fp32_threshold(p.top_p, d.mass), sh, x);
  }
  const float min_p = p.min_p;
  const auto kept = [&](float w, int id) {
    return w > 0.0f && tk.keeps(w, id) && tp.keeps(w, id) && !(min_p > 0.0f && w < min_p)
               ? static_cast<double>(w)
               : 0.0;
  };
  return ordered_crossing<kC>(
      src, my_rank, kept, [u](double total) { return fp32_threshold(u, total); }, sh, x);
}

// ---- steps 1–3 ---------------------------------------------------------------------------------

__device__ __forceinline__ float penalize(float l, int32_t c, const GpuSamplingParams& p) {
  const int gen = c & kGeneratedMask;
  if (p.repetition_penalty != 1.0f && (gen > 0 || (c & kPromptBit)))
    l = l > 0.0f ? l / p.repetition_penalty : l * p.repetition_penalty;
  if ((p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f) && gen > 0)
    l -= p.presence_penalty + p.frequency_penalty * static_cast<float>(gen);
  return l;
}

// One CTA's slice: w[0, n) holds ids [base, base + n), padded to a multiple of 4 (logit -Inf,
// weight 0).
struct Slice {
  float* w;
  int n, base, rank;
};

struct RowStats {
  unsigned bad = 0;  // nonzero: a NaN or +Inf logit, before or after the penalties
  float mx = -INFINITY, mn = INFINITY;  // maximum and minimum (NaN ignored)
};

// A token with no history (c == 0) is not penalized: skipping penalize() then is exact.
__device__ __forceinline__ float take(RowStats& st, float l, int32_t c, bool pen,
                                      const GpuSamplingParams& p) {
  st.bad |= !(l < INFINITY);
  if (pen && c != 0) {
    l = penalize(l, c, p);
    st.bad |= !(l < INFINITY);
  }
  st.mx = fmaxf(st.mx, l);
  st.mn = fminf(st.mn, l);
  return l;
}

// Four tokens; the usual case (none of them has a history) without a branch per token.
__device__ __forceinline__ float4 take4(RowStats& st, float4 l, int4 c, bool pen,
                                        const GpuSamplingParams& p) {
  if (pen && (c.x | c.y | c.z | c.w) != 0) {
    l.x = take(st, l.x, c.x, pen, p);
    l.y = take(st, l.y, c.y, pen, p);
    l.z = take(st, l.z, c.z, pen, p);
    l.w = take(st, l.w, c.w, pen, p);
    return l;
  }
  st.bad |= !(l.x < INFINITY) | !(l.y < INFINITY) | !(l.z < INFINITY) | !(l.w < INFINITY);
  st.mx = fmaxf(st.mx, fmaxf(fmaxf(l.x, l.y), fmaxf(l.z, l.w)));
  st.mn = fminf(st.mn, fminf(fminf(l.x, l.y), fminf(l.z, l.w)));
  return l;
}

// P1: penalized logits into sl.w. vec: the slice starts and ends on multiples of 4 and the rows
// are 16-byte aligned.
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
      for (int b = 0; b < kBatch; ++b) {
        const int j = j0 + b * kThreads;
        if (j < n4) {
          lv[b] = l4[j];
          cv[b] = pen ? c4[j] : make_int4(0, 0, 0, 0);
        }
      }
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const int j = j0 + b * kThreads;
        if (j >= n4) break;
        w4[j] = take4(st, lv[b], cv[b], pen, p);
      }
    }
  } else {
    for (int i0 = threadIdx.x; i0 < sl.n; i0 += kBatch * kThreads) {
      float lv[kBatch];
      int32_t cv[kBatch];
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const int i = i0 + b * kThreads;
        lv[b] = i < sl.n ? lg[sl.base + i] : 0.0f;
        cv[b] = i < sl.n && pen ? cnt[sl.base + i] : 0;
      }
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const int i = i0 + b * kThreads;
        if (i >= sl.n) break;
        sl.w[i] = take(st, lv[b], cv[b], pen, p);
      }
    }
  }
  for (int i = sl.n + static_cast<int>(threadIdx.x); i < ((sl.n + 3) & ~3); i += kThreads)
    sl.w[i] = -INFINITY;
  return st;
}

// (l - l_max) / T, bit-identical to the IEEE quotient that `/` gives, with the loop-invariant part
// hoisted. nvcc expands `/` (div.rn.f32) per element into a reciprocal estimate and one Newton
// step (MUFU.RCP + 2 FFMA), then q0 = a·r, e = a - T·q0, q = q0 + r·e, guarded per element by
// FCHK with a call to a slow path for operands out of its range (and convergence barriers around
// it): ~11 instructions. Here the reciprocal is computed once with the same instructions and the
// guard is decided once per row, by a stricter test: T within 2^±20, |l_max| ≥ 2^-36 (so every
// nonzero a = l - l_max has |a| ≥ 2^-60) and l_max - l_min ≤ 2^60 (no -Inf logit). Such rows take
// the three FMAs per element; any other row takes `/` itself.
struct WeightDiv {
  float T, r;
  bool fast;
  __device__ WeightDiv(float t, float lmax, float lmin) : T(t) {
    float r0;
#ifdef __CUDA_ARCH__
    asm("rcp.approx.f32 %0, %1;" : "=f"(r0) : "f"(t));
#else
    r0 = 1.0f / t;
#endif
    r = __fmaf_rn(r0, __fmaf_rn(-t, r0, 1.0f), r0);
    const unsigned e = (__float_as_uint(t) >> 23) & 0xFFu;
    fast = e >= 127u - 20u && e <= 127u + 20u && fabsf(lmax) >= 0x1p-36f && lmax - lmin <= 0x1p60f;
  }
  __device__ float quot(float a) const {
    const float q0 = __fmaf_rn(a, r, 0.0f);
    const float e = __fmaf_rn(-T, q0, a);
    return __fmaf_rn(r, e, q0);
  }
};

// P2 over the slice, with the quotient `div`.
template <bool kMass, class Div>
__device__ __forceinline__ void weights_loop(const Slice& sl, float lmax, Div div, Shared& sh) {
  const int n4 = (sl.n + 3) >> 2;
  float4* w4 = reinterpret_cast<float4*>(sl.w);
  const unsigned lane = threadIdx.x & 31;
  // Both sides of the select evaluated (exp(0) at the maximum is discarded): no branch.
  const auto weight = [&](float l) {
    const float e = expf(div(l - lmax));
    return l == lmax ? 1.0f : e;
  };
#pragma unroll 2
  for (int j = threadIdx.x; j < n4; j += kThreads) {
    float4 v = w4[j];
    v.x = weight(v.x);
    v.y = weight(v.y);
    v.z = weight(v.z);
    v.w = weight(v.w);
    if (4 * j + 4 > sl.n) {  // the padding after the last logit weighs 0
      if (4 * j + 1 >= sl.n) v.y = 0.0f;
      if (4 * j + 2 >= sl.n) v.z = 0.0f;
      if (4 * j + 3 >= sl.n) v.w = 0.0f;
    }
    w4[j] = v;
    l1_add_any<kMass>(sh, __float_as_uint(v.x), lane);
    l1_add_any<kMass>(sh, __float_as_uint(v.y), lane);
    l1_add_any<kMass>(sh, __float_as_uint(v.z), lane);
    l1_add_any<kMass>(sh, __float_as_uint(v.w), lane);
  }
}

// P2: weights in place (the expression of the CPU reference, w = exp((l - l_max) / T), exactly 1
// at the maximum) and the level-1 histogram of w > 0 (with the exact masses when kMass).
template <bool kMass>
__device__ void weights(const Slice& sl, float lmax, float lmin, float T, Shared& sh) {
  const WeightDiv dv(T, lmax, lmin);
  if (dv.fast) {
    weights_loop<kMass>(
        sl, lmax, [dv](float a) { return dv.quot(a); }, sh);
  } else {
    weights_loop<kMass>(
        sl, lmax, [T](float a) { return a / T; }, sh);
  }
}

// The candidates of this CTA (bits(w) ≥ thr ≥ 1: w > 0 and key ≥ b_g), in id order, to rank 0's
// list at [off, off + count): warp w takes the w-th sixteenth of the slice, counts its
// candidates, and then appends them in order after the earlier warps' (ballot + scan).
template <int kC>
__device__ void gather(const Slice& sl, unsigned thr, unsigned off, float* gw, int* gid, int cap,
                       Shared& sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int n4 = (sl.n + 3) >> 2;
  const int seg = (n4 + kWarps - 1) / kWarps;
  const int s0 = min(n4, warp * seg), s1 = min(n4, s0 + seg);
  const float4* w4 = reinterpret_cast<const float4*>(sl.w);
  const auto cand = [thr](float w) { return __float_as_uint(w) >= thr ? 1u : 0u; };
  unsigned c = 0;
  for (int j = s0 + lane; j < s1; j += 32) {
    const float4 v = w4[j];
    c += cand(v.x) + cand(v.y) + cand(v.z) + cand(v.w);
  }
  c = warp_all(c, SumOp{});
  __syncthreads();
  if (lane == 0) sh.red_u[warp] = c;
  __syncthreads();
  unsigned pos = off;
  for (int w = 0; w < warp; ++w) pos += sh.red_u[w];
  float* dw = at_rank<kC>(gw, 0);
  int* di = at_rank<kC>(gid, 0);
  const auto put = [&](unsigned q, float w, int id) {
    SAMPLER_CHECK(q < static_cast<unsigned>(cap) && w > 0.0f && !(w != w));
    if (q < static_cast<unsigned>(cap)) {
      dw[q] = w;
      di[q] = id;
    }
  };
  for (int j0 = s0; j0 < s1; j0 += 32) {  // the same trip count for the whole warp
    const int j = j0 + lane;
    const float4 v = j < s1 ? w4[j] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    const unsigned f0 = cand(v.x), f1 = cand(v.y), f2 = cand(v.z), f3 = cand(v.w);
    const unsigned n = f0 + f1 + f2 + f3;
    if (__any_sync(kFull, n != 0u)) {
      const unsigned incl = warp_incl_scan(n);
      unsigned q = pos + incl - n;
      const int id = sl.base + 4 * j;
      if (f0) put(q++, v.x, id);
      if (f1) put(q++, v.y, id + 1);
      if (f2) put(q++, v.z, id + 2);
      if (f3) put(q++, v.w, id + 3);
      pos += __shfl_sync(kFull, incl, 31);
    }
  }
}

// The token of one row, or -1 where the row is invalid. Uniform across the cluster, except on
// the fast path (fast = true), where only rank 0 returns the token (its other warps may return
// -1 too) and the other CTAs have left the row.
template <int kC>
__device__ int sample_row(const Slice& sl, const float* lg, const int32_t* cnt, bool vec,
                          const GpuSamplingParams& p, float u, int V, float* gw, int* gid, int cap,
                          Shared& sh, Exchange<kC>& x, bool& fast) {
  fast = false;
  for (int b = threadIdx.x; b < 3 * kH1; b += kThreads) (&sh.h1[0][0])[b] = 0u;
  // 1. Penalize, validate, maximum.
  const RowStats st = load_slice(sl, lg, cnt, vec, p);
  const bool bad = __syncthreads_or(static_cast<int>(st.bad)) != 0;
  const float mx = block_all(st.mx, sh.red_f, MaxOp{});
  const float mn = block_all(st.mn, sh.red_f, MinOp{});
  if (threadIdx.x == 0) {
    x.out()[0] = __float_as_uint(mx);
    x.out()[1] = bad ? 1u : 0u;
    x.out()[2] = __float_as_uint(mn);
  }
  x.sync();
  float lmax = -INFINITY, lmin = INFINITY;
  unsigned flags = 0;
#pragma unroll
  for (int r = 0; r < kC; ++r) {
    lmax = fmaxf(lmax, __uint_as_float(x.in(r)[0]));
    flags |= x.in(r)[1];
    lmin = fminf(lmin, __uint_as_float(x.in(r)[2]));
  }
  x.done();
  if (flags != 0u || !(lmax > -INFINITY)) return -1;
  if (p.temperature == 0.0f) {  // greedy: the lowest id at the maximum
    int first = INT_MAX;
    for (int i = threadIdx.x; i < sl.n; i += kThreads) {
      if (sl.w[i] == lmax) {
        first = i;
        break;
      }
    }
    first = block_all(first, sh.red_i[0], MinOp{});
    if (threadIdx.x == 0)
      x.out()[0] = static_cast<unsigned>(first == INT_MAX ? INT_MAX : sl.base + first);
    x.sync();
    int best = INT_MAX;
#pragma unroll
    for (int r = 0; r < kC; ++r) best = min(best, static_cast<int>(x.in(r)[0]));
    x.done();
    return best;
  }

  // 2. Weights and the level-1 histogram (with masses when top-p runs over the whole row).
  const bool kmass = p.top_p < 1.0f && (p.top_k <= 0 || p.top_k >= V);
  __syncthreads();
  if (kmass) {
    weights<true>(sl, lmax, lmin, p.temperature, sh);
  } else {
    weights<false>(sl, lmax, lmin, p.temperature, sh);
  }
  x.sync();

  // 3. The plan, and the candidates: bins ≥ b_g.
  const L1 g = l1_scan<kC>(sh, kmass, p.top_k > 0 ? static_cast<unsigned>(p.top_k) : 0u,
                           kmass ? p.top_p : 1.0f, sl.rank);
  Plan pl;
  pl.k_act = p.top_k > 0 && static_cast<unsigned>(p.top_k) < g.n && g.bk >= 0;
  pl.bk = g.bk;
  pl.ak = g.ak;
  pl.mass_known = kmass && g.bp >= 0;
  pl.mass = g.mass;
  pl.bp = g.bp;
  pl.before_p = g.before_p;
  int b_g = 0;
  if (pl.k_act) {
    b_g = pl.bk;
  } else if (p.top_p < 1.0f) {
    b_g = pl.mass_known ? pl.bp : 0;
  } else if (p.min_p > 0.0f) {
    b_g = static_cast<int>(__float_as_uint(p.min_p) >> kKeyShift);
  }
  const int bh = kBins - 1 - 2 * static_cast<int>(threadIdx.x), bl = bh - 1;
  const unsigned long long mine = (bh >= b_g ? g.ch : 0u) + (bl >= b_g ? g.cl : 0u);
  // candidates of the CTAs of lower rank
  const unsigned before_me = (bh >= b_g ? g.chb : 0u) + (bl >= b_g ? g.clb : 0u);
  const unsigned long long tot = block_all((mine << 32) | before_me, sh.red_q, SumOp{});
  const int n_c = static_cast<int>(tot >> 32);
  fast = n_c <= cap;
  if (fast) {
    // 4. Candidates to rank 0, which finishes alone.
    gather<kC>(sl, max(static_cast<unsigned>(b_g) << kKeyShift, 1u), static_cast<unsigned>(tot), gw,
               gid, cap, sh);
    x.sync();
    if (sl.rank != 0) return -1;
    Exchange<1> x1(sh);
    const ListSrc src{gw, gid, n_c};
    return finish<1>(src, 0, pl, p, u, sh, x1);
  }
  // 5. Fallback over the slices.
  const SliceSrc src{sl.w, sl.n, sl.base};
  return finish<kC>(src, sl.rank, pl, p, u, sh, x);
}

// grid kCluster·S CTAs (clusters of kCluster along x): cluster s samples row s; CTA `rank` owns
// ids [rank·chunk, rank·chunk + chunk) ∩ [0, V), its slice in dynamic shared memory, followed
// by the candidate list (cap entries; used in rank 0).
template <int kCluster>
__global__ void __cluster_dims__(kCluster, 1, 1) __launch_bounds__(kThreads)
    sample_kernel(SampleArgs a, int chunk, int cap, bool vec) {
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
  float* gw = sl.w + chunk;
  int* gid = reinterpret_cast<int*>(gw + cap);
  Exchange<kCluster> x(sh);
  bool fast = false;
  const int id = sample_row<kCluster>(sl, a.logits + static_cast<int64_t>(s) * V, cnt, vec, p,
                                      a.u[s], V, gw, gid, cap, sh, x, fast);
  if (rank == 0 && threadIdx.x == 0) a.out[s] = id;
  // No CTA leaves while another may still read its shared memory (on the fast path nothing is
  // read across CTAs after the barrier that completes the list).
  if constexpr (kCluster > 1) {
    if (!fast) cg::this_cluster().sync();
  }
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

__global__ void logit_bias_kernel(float* logits, int V, const int32_t* rows, const int32_t* ids,
                                  const float* bias, int n) {
  detail::pdl_launch_dependents();
  detail::pdl_wait();
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int id = ids[i];
  if (id >= 0 && id < V) atomicAdd(&logits[static_cast<int64_t>(rows[i]) * V + id], bias[i]);
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
  // The candidate list takes what the slice and the static part leave (≥ 1400 entries at the
  // largest slice).
  const long room = static_cast<long>(kSmemPerBlock) - static_cast<long>(sizeof(Shared)) -
                    kSmemSlack - 4L * chunk;
  const int cap = static_cast<int>(std::clamp(room / 8, 0L, static_cast<long>(kMaxList)));
  const size_t smem = 4 * static_cast<size_t>(chunk) + 8 * static_cast<size_t>(cap);
  const auto launch = [&](auto kern, int c) -> Status {
    CEILING_CUDA_RETURN(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(smem)));
    CEILING_CUDA_RETURN(
        detail::launch_pdl(kern, dim3(c * a.S), dim3(kThreads), smem, stream, a, chunk, cap, vec));
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

Status add_logit_bias(float* logits, int V, const int32_t* rows, const int32_t* ids,
                      const float* bias, int n, cudaStream_t stream) {
  if (V <= 0 || n < 0) return Status::error("add_logit_bias: bad V {} n {}", V, n);
  if (n == 0) return Status();
  CEILING_CUDA_RETURN(detail::launch_pdl(logit_bias_kernel, dim3(detail::ceil_div(n, 256)),
                                         dim3(256), 0, stream, logits, V, rows, ids, bias, n));
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
