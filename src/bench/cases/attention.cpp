// Attention cases: paged decode (split-KV, GQA) and causal varlen prefill over a bf16 or fp8
// (E4M3) paged KV cache, checked against cpu::attention on the same bf16-rounded inputs (an fp8
// cache: the values it stores, read back · scale).
//
// Tolerance (kAttentionTolerance = 1e-2 on the worst (token, head) row's ‖out − ref‖ / ‖ref‖):
// the output is rounded to bf16 (≤ 2^-9 relative per element, ~1.1e-3 rms) and the softmax
// weights P are rounded to bf16 before the P·V product (another ~2^-9 relative, random across
// keys, so ~2e-3 of the row at most); everything else is fp32. Expected worst rows are ~3-5e-3;
// 1e-2 leaves margin while one wrong key in a short context, a dropped key block, a wrong head or
// an unwritten row (poisoned with NaN) fails. Cache rows past each context and the spare block
// hold NaN, so a kernel that reads them fails too. With an fp8 cache the reference reads the same
// E4M3 values, so the tolerance stays (the kernels' f16 image of an E4M3 value is exact).
#define CEILING_WITH_CUDA_RUNTIME 1
#include "bench/cases/attention.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <utility>

#include "core/check.h"
#include "core/dtype.h"
#include "kernels/cpu/ref.h"
#include "roofline/kernel_cost.h"

namespace ceiling::bench {
namespace {

constexpr uint16_t kNanBf16 = 0xffff;
constexpr uint8_t kNanE4m3 = 0x7f;

uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// U(-scale, scale) rounded to bf16.
void fill_uniform(std::vector<uint16_t>& v, uint64_t seed, float scale) {
  uint64_t s = seed;
  for (size_t i = 0; i < v.size(); i += 4) {
    const uint64_t r = splitmix(s);
    for (size_t j = 0; j < 4 && i + j < v.size(); ++j) {
      const float u = static_cast<float>((r >> (16 * j)) & 0xffff) * (2.0f / 65536.0f) - 1.0f;
      v[i + j] = f32_to_bf16(u * scale);
    }
  }
}

struct DevMem {
  void* p = nullptr;
  DevMem() = default;
  DevMem(const DevMem&) = delete;
  DevMem& operator=(const DevMem&) = delete;
  ~DevMem() {
    if (p) cudaFree(p);
  }
  void alloc(size_t bytes) {
    if (p) CEILING_CUDA_CHECK(cudaFree(p));
    p = nullptr;
    CEILING_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(bytes, 16)));
  }
};

std::string range_str(const std::vector<int>& v) {
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  return *lo == *hi ? std::to_string(*lo) : std::to_string(*lo) + ".." + std::to_string(*hi);
}

class AttentionCase : public KernelCase {
 public:
  explicit AttentionCase(AttentionSpec spec) : sp_(std::move(spec)) {
    const int S = static_cast<int>(sp_.seq_lens.size());
    CEILING_ENSURE(S > 0 && sp_.q_lens.size() == sp_.seq_lens.size(),
                   "attention case: q_lens ({}) and seq_lens ({}) must be equal and non-empty",
                   sp_.q_lens.size(), sp_.seq_lens.size());
    qs_.assign(S + 1, 0);
    for (int s = 0; s < S; ++s) {
      CEILING_ENSURE(sp_.q_lens[s] >= 0 && sp_.q_lens[s] <= sp_.seq_lens[s],
                     "attention case: sequence {} has q_len {} > seq_len {}", s, sp_.q_lens[s],
                     sp_.seq_lens[s]);
      CEILING_ENSURE(!sp_.decode || sp_.q_lens[s] == 1, "attention case: decode needs q_len 1");
      qs_[s + 1] = qs_[s] + sp_.q_lens[s];
      max_blocks_ = std::max(max_blocks_, (sp_.seq_lens[s] + sp_.block_size - 1) / sp_.block_size);
    }
    max_blocks_ = std::max(max_blocks_, 1);
    T_ = qs_[S];
    if (!sp_.decode && sp_.split_decodes)
      while (nd_ < S && sp_.q_lens[nd_] == 1) ++nd_;
    num_blocks_ = 1;  // one spare block, never referenced (NaN)
    for (int len : sp_.seq_lens) num_blocks_ += (len + sp_.block_size - 1) / sp_.block_size;
    std::vector<int32_t> ids(num_blocks_);
    std::iota(ids.begin(), ids.end(), 0);
    if (sp_.shuffle_blocks) std::shuffle(ids.begin(), ids.end(), std::mt19937(1234 + S));
    tables_.assign(static_cast<size_t>(S) * max_blocks_, -1);
    size_t next = 0;
    for (int s = 0; s < S; ++s)
      for (int b = 0; b < (sp_.seq_lens[s] + sp_.block_size - 1) / sp_.block_size; ++b)
        tables_[static_cast<size_t>(s) * max_blocks_ + b] = ids[next++];
    spare_block_ = ids[next];
    plan();
  }

  std::string op() const override { return sp_.decode ? "attention_decode" : "attention_prefill"; }
  // Explicit prefill kernels and split-count overrides are comparisons; auto is what runs (for a
  // batch that leads with one-token sequences: with them split off, as CudaOps does).
  bool dispatched() const override {
    if (sp_.decode)
      return sp_.plan_num_sms == 0 && sp_.plan_min_split_tokens == 0 && sp_.plan_stages == 0 &&
             sp_.plan_fp8_ctas == 0;
    return sp_.kernel == cuda::PrefillKernel::kAuto && (sp_.split_decodes || sp_.q_lens[0] != 1);
  }
  std::string shape() const override {
    std::string s = "S=" + std::to_string(sp_.seq_lens.size()) + " q=" + range_str(sp_.q_lens) +
                    " ctx=" + range_str(sp_.seq_lens) + " Hq=" + std::to_string(sp_.num_q_heads) +
                    " Hkv=" + std::to_string(sp_.num_kv_heads) +
                    " D=" + std::to_string(sp_.head_dim) + " BS=" + std::to_string(sp_.block_size);
    if (sp_.fp8_kv) s += " kv=fp8";
    if (sp_.split_decodes) s += " decodes=" + std::to_string(nd_);
    return sp_.label.empty() ? s : s + " " + sp_.label;
  }
  nlohmann::json params() const override {
    nlohmann::json j = {{"batch", sp_.seq_lens.size()},
                        {"q_len", sp_.q_lens.front()},
                        {"ctx", sp_.seq_lens.front()},
                        {"uniform", std::all_of(sp_.seq_lens.begin(), sp_.seq_lens.end(),
                                                [&](int v) { return v == sp_.seq_lens.front(); })},
                        {"Hq", sp_.num_q_heads},
                        {"Hkv", sp_.num_kv_heads},
                        {"D", sp_.head_dim},
                        {"block_size", sp_.block_size},
                        {"causal", true},
                        {"kv_dtype", sp_.fp8_kv ? "fp8" : "bf16"},
                        {"kernel", kernel_name()}};
    if (sp_.decode && !dplan_.warp) {  // the plan's split count and pipeline depth
      j["splits"] = dplan_.max_splits;
      j["stages"] = dplan_.stages;
    }
    return j;
  }
  std::string baseline_name() const override {
    return sp_.decode ? "sdpa_decode_gqa" : "sdpa_prefill_causal";
  }

  // Decode: K and V of every context token once, q and out once. Prefill FLOPs follow the
  // FlashAttention benchmark: 4·D·Hq per visible (query, key) pair, with q_len²/2 pairs for the
  // causal square (S²/2 without a prefix) plus q_len·prefix for the prefix.
  Cost cost() const override {
    Cost c;
    const double kv_row = 2.0 * sp_.num_kv_heads * sp_.head_dim * kv_bytes();  // K+V per token
    double pairs = 0;
    for (size_t s = 0; s < sp_.seq_lens.size(); ++s) {
      const double q = sp_.q_lens[s], prefix = sp_.seq_lens[s] - q;
      c.bytes += sp_.seq_lens[s] * kv_row;
      pairs += q * prefix + (sp_.decode ? q : q * q / 2.0);
    }
    c.bytes += 2.0 * T_ * sp_.num_q_heads * sp_.head_dim * 2;  // q read, out written
    c.write_bytes = 1.0 * T_ * sp_.num_q_heads * sp_.head_dim * 2;
    c.flops = 4.0 * sp_.head_dim * sp_.num_q_heads * pairs;
    c.math = DType::kBF16;  // QK^T and PV on tensor cores
    if (warp_kernel()) {
      // CUDA cores; each of a CTA's 128 threads walks its keys in sequence, a block-table load
      // and the dependent K and V loads per key (attention_warp.cu): two round trips a key.
      c.math = DType::kF32;
      const int ctx = *std::max_element(sp_.seq_lens.begin(), sp_.seq_lens.end());
      c.round_trips = 1 + 2 * ((ctx + 127) / 128);
    } else if (sp_.decode || nd_ == static_cast<int>(sp_.q_lens.size())) {
      c.launches = 1;  // streaming: no wave model
    } else {
      int64_t tiles = 0;  // (head, query tile) CTAs that do work
      for (size_t s = nd_; s < sp_.q_lens.size(); ++s)
        tiles += (sp_.q_lens[s] + pplan_.block_m - 1) / std::max(pplan_.block_m, 1);
      c.tiles = tiles * sp_.num_q_heads;
      c.launches = nd_ > 0 ? 2 : 1;
      c.non_mma = prefill_non_mma();
    }
    return c;
  }
  size_t set_bytes() const override { return 2 * cache_elems() * kv_bytes() + 2 * q_elems() * 2; }

  void setup(int copies, uint64_t seed, cudaStream_t /*stream*/) override {
    sets_.clear();
    for (int i = 0; i < copies; ++i) sets_.push_back(std::make_unique<Set>());
    for (auto& st : sets_) {
      st->q.alloc(static_cast<size_t>(T_) * q_stride() * 2);
      st->k.alloc(cache_elems() * kv_bytes());
      st->v.alloc(cache_elems() * kv_bytes());
      st->out.alloc(q_elems() * 2);
    }
    meta_qs_.alloc(qs_.size() * 4);
    meta_lens_.alloc(sp_.seq_lens.size() * 4);
    meta_tables_.alloc(tables_.size() * 4);
    CEILING_CUDA_CHECK(cudaMemcpy(meta_qs_.p, qs_.data(), qs_.size() * 4, cudaMemcpyHostToDevice));
    CEILING_CUDA_CHECK(cudaMemcpy(meta_lens_.p, sp_.seq_lens.data(), sp_.seq_lens.size() * 4,
                                  cudaMemcpyHostToDevice));
    CEILING_CUDA_CHECK(
        cudaMemcpy(meta_tables_.p, tables_.data(), tables_.size() * 4, cudaMemcpyHostToDevice));
    if (workspace_bytes() > 0) {
      workspace_.alloc(workspace_bytes());
      if (sp_.decode || nd_ > 0)
        cuda::init_decode_workspace(dplan_, workspace_.p, nullptr).throw_if_error();
    }
    seed_ = seed;
    for (size_t i = 0; i < sets_.size(); ++i) fill(i, seed + 7919 * i);
  }

  Status run(int set, cudaStream_t stream) override {
    Set& st = *sets_[set];
    cuda::PagedKvDevice kv{st.k.p,         st.v.p,           num_blocks_,
                           sp_.block_size, sp_.num_kv_heads, sp_.head_dim};
    kv.format = kv_format();
    kv.k_scale = sp_.k_scale;
    kv.v_scale = sp_.v_scale;
    const float scale = 1.0f / std::sqrt(static_cast<float>(sp_.head_dim));
    if (sp_.decode)
      return cuda::run_decode_attention(dplan_, st.q.p, q_stride(), kv,
                                        static_cast<int32_t*>(meta_lens_.p),
                                        static_cast<int32_t*>(meta_tables_.p), max_blocks_, scale,
                                        st.out.p, workspace_.p, stream);
    const int S = static_cast<int>(sp_.seq_lens.size());
    const auto* lens = static_cast<const int32_t*>(meta_lens_.p);
    const auto* tables = static_cast<const int32_t*>(meta_tables_.p);
    if (nd_ > 0) {  // the decodes first, then the rest: rows stay absolute in q and out
      CEILING_RETURN_IF_ERROR(cuda::run_decode_attention(dplan_, st.q.p, q_stride(), kv, lens,
                                                         tables, max_blocks_, scale, st.out.p,
                                                         workspace_.p, stream));
      if (nd_ == S) return Status::ok_status();
    }
    const size_t mb = static_cast<size_t>(max_blocks_);
    cuda::AttnBatchDevice b{
        S - nd_,    T_ - nd_,          static_cast<const int32_t*>(meta_qs_.p) + nd_,
        lens + nd_, tables + nd_ * mb, max_blocks_};
    return cuda::run_prefill_attention(pplan_, st.q.p, q_stride(), kv, b, scale, st.out.p, nullptr,
                                       stream);
  }

  CheckResult check(cudaStream_t stream) override {
    if (sets_.empty()) setup(1, 42, stream);
    fill(0, seed_ = splitmix(seed_));
    Set& st = *sets_[0];
    CEILING_CUDA_CHECK(cudaMemsetAsync(st.out.p, 0xff, q_elems() * 2, stream));  // NaN
    run(0, stream).throw_if_error();
    CEILING_CUDA_CHECK(cudaStreamSynchronize(stream));
    CEILING_CUDA_CHECK(cudaGetLastError());
    std::vector<uint16_t> out(q_elems());
    CEILING_CUDA_CHECK(cudaMemcpy(out.data(), st.out.p, out.size() * 2, cudaMemcpyDeviceToHost));
    return compare(out);
  }

 private:
  struct Set {
    DevMem q, k, v, out;
  };

  bool warp_kernel() const {
    return sp_.decode ? dplan_.warp : pplan_.kernel == cuda::PrefillKernel::kWarp;
  }
  std::string kernel_name() const {
    const char* dname = dplan_.warp ? "decode_warp" : "decode_split_kv";
    if (sp_.decode) return dname;
    const int S = static_cast<int>(sp_.seq_lens.size());
    if (nd_ == S) return dname;
    const std::string pname = cuda::prefill_kernel_name(pplan_.kernel);
    return nd_ > 0 ? std::string(dname) + "+" + pname : pname;
  }
  // The warp-specialized kernels' softmax and full diagonal tiles, counted from their SASS
  // (roofline::prefill_ws_work); the mma.sync and two-warpgroup wgmma kernels are not counted.
  roofline::NonMmaWork prefill_non_mma() const {
    if (pplan_.kernel != cuda::PrefillKernel::kWgmmaWs &&
        pplan_.kernel != cuda::PrefillKernel::kWgmmaTma)
      return {};
    std::vector<std::pair<int, int>> seqs;
    for (size_t s = 0; s < sp_.seq_lens.size(); ++s)
      seqs.emplace_back(sp_.q_lens[s], sp_.seq_lens[s]);
    return roofline::prefill_ws_work(seqs, sp_.num_q_heads, sp_.head_dim);
  }
  size_t q_elems() const { return static_cast<size_t>(T_) * sp_.num_q_heads * sp_.head_dim; }
  int64_t q_stride() const {
    return static_cast<int64_t>(sp_.num_q_heads) * sp_.head_dim + sp_.q_row_pad;
  }
  cuda::KvFormat kv_format() const {
    return sp_.fp8_kv ? cuda::KvFormat::kFP8 : cuda::KvFormat::kBF16;
  }
  size_t kv_bytes() const { return sp_.fp8_kv ? 1 : 2; }
  size_t cache_elems() const {
    return static_cast<size_t>(num_blocks_) * sp_.num_kv_heads * sp_.block_size * sp_.head_dim;
  }
  size_t workspace_bytes() const {
    return sp_.decode || nd_ > 0 ? dplan_.workspace_bytes : pplan_.workspace_bytes;
  }

  void plan() {
    const int S = static_cast<int>(sp_.seq_lens.size());
    if (sp_.decode || nd_ > 0) {
      const int n = sp_.decode ? S : nd_;  // the sequences the decode kernel takes
      cuda::DecodeShape sh{n,
                           sp_.num_q_heads,
                           sp_.num_kv_heads,
                           sp_.head_dim,
                           sp_.block_size,
                           sp_.plan_max_seq_len > 0
                               ? sp_.plan_max_seq_len
                               : *std::max_element(sp_.seq_lens.begin(), sp_.seq_lens.begin() + n),
                           sp_.plan_min_split_tokens,
                           kv_format(),
                           sp_.plan_fp8_ctas};
      int sms = sp_.plan_num_sms, dev = 0;
      if (sms <= 0 &&
          (cudaGetDevice(&dev) != cudaSuccess ||
           cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)) {
        cudaGetLastError();
        sms = 132;  // no device here: plan as for an H100/H200 (the case is not run)
      }
      cuda::plan_decode_attention(sh, sms, &dplan_).throw_if_error();
      if (sp_.plan_stages > 0) dplan_.stages = sp_.plan_stages;
    }
    if (!sp_.decode && nd_ < S) {
      cuda::PrefillShape sh{S - nd_,      T_ - nd_,       sp_.num_q_heads, sp_.num_kv_heads,
                            sp_.head_dim, sp_.block_size, sp_.kernel,      kv_format()};
      cuda::plan_prefill_attention(sh, &pplan_).throw_if_error();
    }
  }

  // Fresh q, K, V for set i; cache rows past each context and the spare block are NaN. Set 0's
  // host copies are kept for the reference.
  void fill(size_t i, uint64_t seed) {
    std::vector<uint16_t> q(q_elems()), k(cache_elems()), v(cache_elems());
    fill_uniform(q, seed, sp_.q_scale);
    fill_uniform(k, seed ^ 0x1111, 1.0f);
    fill_uniform(v, seed ^ 0x2222, 1.0f);
    const size_t tile = static_cast<size_t>(sp_.block_size) * sp_.head_dim;
    auto poison_rows = [&](int block, int from_row) {
      for (int h = 0; h < sp_.num_kv_heads; ++h) {
        const size_t base = (static_cast<size_t>(block) * sp_.num_kv_heads + h) * tile;
        std::fill(k.begin() + base + from_row * sp_.head_dim, k.begin() + base + tile, kNanBf16);
        std::fill(v.begin() + base + from_row * sp_.head_dim, v.begin() + base + tile, kNanBf16);
      }
    };
    poison_rows(spare_block_, 0);
    for (size_t s = 0; s < sp_.seq_lens.size(); ++s) {
      const int len = sp_.seq_lens[s], last = (len + sp_.block_size - 1) / sp_.block_size - 1;
      if (last >= 0 && len % sp_.block_size != 0)
        poison_rows(tables_[s * max_blocks_ + last], len % sp_.block_size);
    }
    Set& st = *sets_[i];
    const size_t row_bytes = static_cast<size_t>(sp_.num_q_heads) * sp_.head_dim * 2;
    if (sp_.q_row_pad > 0)  // NaN between the rows
      CEILING_CUDA_CHECK(cudaMemset(st.q.p, 0xff, static_cast<size_t>(T_) * q_stride() * 2));
    CEILING_CUDA_CHECK(cudaMemcpy2D(st.q.p, q_stride() * 2, q.data(), row_bytes, row_bytes, T_,
                                    cudaMemcpyHostToDevice));
    if (sp_.fp8_kv) {  // what the cache stores of those bf16 values; NaN stays NaN
      std::vector<float> fk(k.size()), fv(v.size());
      const float ik = 1.0f / sp_.k_scale, iv = 1.0f / sp_.v_scale;
      std::vector<uint8_t> k8(k.size()), v8(v.size());
      for (size_t e = 0; e < k.size(); ++e) {
        k8[e] = k[e] == kNanBf16 ? kNanE4m3 : f32_to_e4m3(bf16_to_f32(k[e]) * ik);
        v8[e] = v[e] == kNanBf16 ? kNanE4m3 : f32_to_e4m3(bf16_to_f32(v[e]) * iv);
      }
      CEILING_CUDA_CHECK(cudaMemcpy(st.k.p, k8.data(), k8.size(), cudaMemcpyHostToDevice));
      CEILING_CUDA_CHECK(cudaMemcpy(st.v.p, v8.data(), v8.size(), cudaMemcpyHostToDevice));
      if (i == 0) {
        hk8_ = std::move(k8);
        hv8_ = std::move(v8);
      }
    } else {
      CEILING_CUDA_CHECK(cudaMemcpy(st.k.p, k.data(), k.size() * 2, cudaMemcpyHostToDevice));
      CEILING_CUDA_CHECK(cudaMemcpy(st.v.p, v.data(), v.size() * 2, cudaMemcpyHostToDevice));
    }
    if (i == 0) {
      hq_ = std::move(q);
      hk_ = std::move(k);
      hv_ = std::move(v);
    }
  }
  // Cache element e of set 0 as the kernels must read it.
  float cached_k(size_t e) const {
    return sp_.fp8_kv ? e4m3_to_f32(hk8_[e]) * sp_.k_scale : bf16_to_f32(hk_[e]);
  }
  float cached_v(size_t e) const {
    return sp_.fp8_kv ? e4m3_to_f32(hv8_[e]) * sp_.v_scale : bf16_to_f32(hv_[e]);
  }

  // Reference for a sample of query tokens: each becomes a one-token sequence over a compact
  // float copy of its sequence's blocks, which cpu::attention evaluates as the same function.
  CheckResult compare(const std::vector<uint16_t>& out) const {
    const int S = static_cast<int>(sp_.seq_lens.size()), Hq = sp_.num_q_heads, D = sp_.head_dim,
              BS = sp_.block_size, Hkv = sp_.num_kv_heads;
    CheckResult r;
    r.tolerance = kAttentionTolerance;
    std::vector<int> toks;  // query tokens checked
    if (sp_.check_tokens <= 0 || sp_.check_tokens >= T_) {
      toks.resize(T_);
      std::iota(toks.begin(), toks.end(), 0);
    } else {
      for (int j = 0; j < sp_.check_tokens; ++j)
        toks.push_back(static_cast<int>((static_cast<int64_t>(j) * T_) / sp_.check_tokens));
      toks.back() = T_ - 1;
    }
    std::vector<int> seq_of(T_);
    for (int s = 0; s < S; ++s)
      for (int t = qs_[s]; t < qs_[s + 1]; ++t) seq_of[t] = s;

    std::vector<int> compact(S, -1);  // sequence → first compact block
    int n_compact = 0;
    for (int t : toks) {
      const int s = seq_of[t];
      if (compact[s] < 0) {
        compact[s] = n_compact;
        n_compact += (sp_.seq_lens[s] + BS - 1) / BS;
      }
    }
    const size_t tile = static_cast<size_t>(BS) * D;
    std::vector<float> ck(static_cast<size_t>(std::max(n_compact, 1)) * Hkv * tile), cv(ck.size());
    int mb = 1;
    for (int s = 0; s < S; ++s) {
      if (compact[s] < 0) continue;
      const int nb = (sp_.seq_lens[s] + BS - 1) / BS;
      mb = std::max(mb, nb);
      for (int b = 0; b < nb; ++b) {
        const size_t src = static_cast<size_t>(tables_[static_cast<size_t>(s) * max_blocks_ + b]) *
                           Hkv * tile,
                     dst = static_cast<size_t>(compact[s] + b) * Hkv * tile;
        for (size_t e = 0; e < Hkv * tile; ++e) {
          ck[dst + e] = cached_k(src + e);
          cv[dst + e] = cached_v(src + e);
        }
      }
    }
    const int n = static_cast<int>(toks.size());
    std::vector<int32_t> bqs(n + 1), blens(n), btab(static_cast<size_t>(n) * mb);
    std::vector<float> bq(static_cast<size_t>(n) * Hq * D), ref(bq.size());
    for (int j = 0; j < n; ++j) {
      const int t = toks[j], s = seq_of[t];
      bqs[j + 1] = j + 1;
      blens[j] = sp_.seq_lens[s] - sp_.q_lens[s] + (t - qs_[s]) + 1;
      for (int b = 0; b < mb; ++b) btab[static_cast<size_t>(j) * mb + b] = compact[s] + b;
      for (int e = 0; e < Hq * D; ++e)
        bq[static_cast<size_t>(j) * Hq * D + e] =
            bf16_to_f32(hq_[static_cast<size_t>(t) * Hq * D + e]);
    }
    cpu::PagedKv cache{ck.data(), cv.data(), std::max(n_compact, 1), BS, Hkv, D};
    cpu::AttnBatch batch{n, bqs.data(), blens.data(), btab.data(), mb};
    cpu::attention(bq.data(), cache, batch, Hq, 1.0f / std::sqrt(static_cast<float>(D)),
                   ref.data());

    double num = 0, den = 0, worst = 0;
    for (int j = 0; j < n; ++j)
      for (int h = 0; h < Hq; ++h) {
        double rn = 0, rd = 0;
        for (int d = 0; d < D; ++d) {
          const size_t ri = (static_cast<size_t>(j) * Hq + h) * D + d;
          const double o = bf16_to_f32(out[(static_cast<size_t>(toks[j]) * Hq + h) * D + d]);
          rn += (o - ref[ri]) * (o - ref[ri]);
          rd += static_cast<double>(ref[ri]) * ref[ri];
        }
        num += rn;
        den += rd;
        const double e = std::sqrt(rn / std::max(rd, 1e-30));
        worst = std::isnan(e) ? INFINITY : std::max(worst, e);
      }
    size_t unwritten = 0;  // any NaN left anywhere in out (poison or propagated)
    for (uint16_t x : out) unwritten += std::isnan(bf16_to_f32(x)) ? 1 : 0;
    const double global = std::sqrt(num / std::max(den, 1e-30));
    r.max_rel_err = unwritten > 0 || std::isnan(global) ? INFINITY : worst;
    r.detail = fmt::format("out: worst row {:.2e}, global {:.2e} over {} tokens x {} heads; {} NaN",
                           worst, global, n, Hq, unwritten);
    return r;
  }

  AttentionSpec sp_;
  std::vector<int32_t> qs_, tables_;
  int T_ = 0, max_blocks_ = 0, num_blocks_ = 0, spare_block_ = 0;
  int nd_ = 0;  // split_decodes: leading one-token sequences run by the decode kernel
  cuda::DecodePlan dplan_;
  cuda::PrefillPlan pplan_;
  std::vector<std::unique_ptr<Set>> sets_;
  DevMem meta_qs_, meta_lens_, meta_tables_, workspace_;
  std::vector<uint16_t> hq_, hk_, hv_;
  std::vector<uint8_t> hk8_, hv8_;  // fp8 cache: the stored bytes
  uint64_t seed_ = 0;
};

AttentionSpec uniform(bool decode, int batch, int q_len, int ctx, int hq, int hkv, int d, int bs) {
  AttentionSpec s;
  s.decode = decode;
  s.q_lens.assign(batch, q_len);
  s.seq_lens.assign(batch, ctx);
  s.num_q_heads = hq;
  s.num_kv_heads = hkv;
  s.head_dim = d;
  s.block_size = bs;
  s.check_tokens = 16;
  return s;
}

}  // namespace

std::unique_ptr<KernelCase> make_attention_case(const AttentionSpec& spec) {
  return std::make_unique<AttentionCase>(spec);
}

void register_attention_cases(CaseList& out) {
  if (const char* why = nullptr;
      !cuda::prefill_kernel_available(cuda::PrefillKernel::kWgmmaTma, 128, &why))
    fmt::print(stderr, "warning: attention: the TMA prefill kernel is unavailable ({})\n",
               why ? why : "?");
  // Decode targets: B=32 ctx 4096 (≥ 90% of read bandwidth) and B=1 ctx 32768 (≥ 80%), GQA 32/8.
  for (int bs : {16, 64})
    out.push_back(make_attention_case(uniform(true, 32, 1, 4096, 32, 8, 128, bs)));
  out.push_back(make_attention_case(uniform(true, 1, 1, 32768, 32, 8, 128, 16)));
  for (int sms : {264, 528}) {  // split-count sensitivity: 33 and 66 splits instead of 16
    AttentionSpec s = uniform(true, 1, 1, 32768, 32, 8, 128, 16);
    s.plan_num_sms = sms;
    s.label = "plan_sms=" + std::to_string(sms);
    out.push_back(make_attention_case(s));
  }
  // Batch 1 at a short context, as in the decode step of the latency benchmark (Llama-3.1-8B
  // and -3.2-1B attention shapes), with the plan sized for a long one as a captured graph's is;
  // 64-token splits (one tile per warp, 4 splits) are the comparison to the default (one CTA per
  // KV head at this context).
  for (int d : {128, 64})
    for (int min_split : {0, 64}) {
      AttentionSpec s = uniform(true, 1, 1, 256, 32, 8, d, 16);
      s.plan_max_seq_len = 8192;
      s.plan_min_split_tokens = min_split;
      if (min_split > 0) s.label = "min_split=" + std::to_string(min_split);
      out.push_back(make_attention_case(s));
    }
  out.push_back(make_attention_case(uniform(true, 8, 1, 8192, 32, 8, 128, 16)));
  out.push_back(make_attention_case(uniform(true, 64, 1, 1024, 32, 8, 64, 16)));
  // The 8B's decode step at batch 64 and 128, context 640 (bench latency's 512 in / 256 out),
  // plans bounded by 2048 as the engine's: 512 CTAs are ~1.9 waves of two per SM. The splits
  // overrides (2, 4 and 5 per sequence) are the comparison; q_pad reads q in place from the fused
  // QKV output as the engine does.
  for (int b : {64, 128}) {
    AttentionSpec s = uniform(true, b, 1, 640, 32, 8, 128, 16);
    s.plan_max_seq_len = 2048;
    out.push_back(make_attention_case(s));
    if (b != 64) continue;
    s.q_row_pad = 2 * 8 * 128;
    s.label = "q_pad";
    out.push_back(make_attention_case(s));
    s.q_row_pad = 0;
    s.plan_stages = 3;  // two CTAs an SM, as the default plan's
    for (auto [sms, min_split] : {std::pair{1024, 256}, {2048, 128}, {4096, 128}}) {
      s.plan_num_sms = sms;
      s.plan_min_split_tokens = min_split;
      s.label = "plan_sms=" + std::to_string(sms) + " min_split=" + std::to_string(min_split) +
                " stages=3";
      out.push_back(make_attention_case(s));
    }
  }
  // fp8 (E4M3) cache, per-tensor scales: the #16 target B=32 ctx 4096 GQA 32/8 d 128 (≥ 85 % of
  // read bandwidth on its bytes, ≈ 1.8× the bf16 kernel), B=16 at the same context, B=1 ctx
  // 32768 (splits), a batch of 64 at ctx 1024, and the decode step of `bench throughput` 1000 ×
  // 1024 / 1024 (B=256 at its mean context, 1536; bf16 beside it). Prefill reads an fp8 cache with
  // the mma.sync kernel only: beside the bf16 mma_sync and auto cases below.
  for (auto [b, ctx] : {std::pair{32, 4096}, {16, 4096}, {1, 32768}, {64, 1024}, {256, 1536}}) {
    AttentionSpec s = uniform(true, b, 1, ctx, 32, 8, 128, 16);
    s.fp8_kv = true;
    s.k_scale = 0.02f;
    s.v_scale = 0.02f;
    out.push_back(make_attention_case(s));
    // The other kernel: three CTAs an SM (4 stages) where the plan takes four (3 stages) — B=32,
    // 64 — and four where it takes three (B=16: 4 splits against 3; B=1: 66 against 49).
    if (b != 256) {
      AttentionSpec t = s;
      t.plan_fp8_ctas = b == 32 || b == 64 ? 3 : 4;
      t.label = "fp8_ctas=" + std::to_string(t.plan_fp8_ctas);
      out.push_back(make_attention_case(t));
    }
    // The three-an-SM kernel's split sweep: 1, 2, 4, 5, 6, 8 and 10 splits instead of 3 (256
    // CTAs fill ~2 of 3 slots; the plan's SM count that yields each count).
    if (b == 32)
      for (int sms : {86, 176, 114, 107, 512, 228, 285}) {
        AttentionSpec t = s;
        t.plan_fp8_ctas = 3;
        t.plan_num_sms = sms;
        t.label = "fp8_ctas=3 plan_sms=" + std::to_string(sms);
        out.push_back(make_attention_case(t));
      }
    if (b == 1)  // the comparison: 16 and 33 splits instead of 49 (three CTAs an SM)
      for (int sms : {44, 88}) {
        s.plan_num_sms = sms;
        s.label = "plan_sms=" + std::to_string(sms);
        out.push_back(make_attention_case(s));
      }
    if (b == 256) {  // larger cache blocks (longer contiguous runs of K / V), and bf16
      for (int bs : {32, 64}) {
        AttentionSpec t = s;
        t.block_size = bs;
        out.push_back(make_attention_case(t));
      }
      s.fp8_kv = false;
      out.push_back(make_attention_case(s));
    }
  }
  // Head dim 64 (Llama-3.2-1B's attention) with an fp8 cache at B=32 ctx 4096: the plan's four
  // CTAs an SM (2 splits, 3 stages) against three (3 splits, 4 stages; at D = 64 that kernel's
  // 122 registers and 32 KB let four an SM run too).
  for (int ctas : {0, 3}) {
    AttentionSpec s = uniform(true, 32, 1, 4096, 32, 8, 64, 16);
    s.fp8_kv = true;
    s.k_scale = s.v_scale = 0.02f;
    s.plan_fp8_ctas = ctas;
    if (ctas) s.label = "fp8_ctas=3";
    out.push_back(make_attention_case(s));
  }
  {
    AttentionSpec s = uniform(false, 1, 4096, 4096, 32, 8, 128, 16);
    s.fp8_kv = true;
    s.k_scale = s.v_scale = 0.02f;
    s.check_tokens = 8;
    out.push_back(make_attention_case(s));
    s.fp8_kv = false;
    s.kernel = cuda::PrefillKernel::kMmaSync;
    s.label = "mma_sync";
    out.push_back(make_attention_case(s));
  }
  // The steady-state step of `bench throughput` 1000 × 1024 / 1024 that carries prefill: 248
  // decodes at the run's mean context (1536) and 8 new prompts of 1024 tokens (the 8192-token
  // budget), fp8 and bf16 cache. Split (what CudaOps runs: the decodes through the decode kernel)
  // against every row through the prefill kernel, which gives each decode row a query tile of
  // its own per head.
  for (bool fp8 : {true, false})
    for (bool split : {true, false}) {
      AttentionSpec s = uniform(false, 248, 1, 1536, 32, 8, 128, 16);
      s.q_lens.insert(s.q_lens.end(), 8, 1024);
      s.seq_lens.insert(s.seq_lens.end(), 8, 1024);
      s.fp8_kv = fp8;
      s.k_scale = s.v_scale = fp8 ? 0.02f : 1.0f;
      s.split_decodes = split;
      s.label = split ? "mixed_step" : "mixed_step all_prefill";
      out.push_back(make_attention_case(s));
    }
  // Prefill target: causal S=4096, 32 heads (MHA, as SDPA's benchmark), d=128; batch 1 and 4.
  // "auto" is what the engine gets; the explicit kernels are the comparison (a kernel that this
  // build or device lacks is left out rather than failing the whole family).
  for (cuda::PrefillKernel k : {cuda::PrefillKernel::kMmaSync, cuda::PrefillKernel::kWgmma,
                                cuda::PrefillKernel::kWgmmaWs, cuda::PrefillKernel::kAuto}) {
    if (!cuda::prefill_kernel_available(k, 128)) continue;
    for (int b : {1, 4}) {
      AttentionSpec s = uniform(false, b, 4096, 4096, 32, 32, 128, 16);
      s.kernel = k;
      s.label = cuda::prefill_kernel_name(k);
      s.check_tokens = 8;
      out.push_back(make_attention_case(s));
    }
  }
  // GQA 32/8 with 64-token blocks, and head_dim 64: auto (unlabelled), the 2-warpgroup wgmma and
  // the cp.async producer.
  for (cuda::PrefillKernel k :
       {cuda::PrefillKernel::kWgmma, cuda::PrefillKernel::kWgmmaWs, cuda::PrefillKernel::kAuto}) {
    if (!cuda::prefill_kernel_available(k, 128)) continue;
    AttentionSpec gqa = uniform(false, 1, 4096, 4096, 32, 8, 128, 64);
    AttentionSpec d64 = uniform(false, 1, 4096, 4096, 32, 32, 64, 16);
    AttentionSpec gqa16 = uniform(false, 1, 4096, 4096, 32, 8, 128, 16);
    AttentionSpec mha64 = uniform(false, 1, 4096, 4096, 32, 32, 128, 64);
    for (AttentionSpec* s : {&gqa, &d64, &gqa16, &mha64}) {
      s->kernel = k;
      s->check_tokens = 8;
      if (k != cuda::PrefillKernel::kAuto) s->label = cuda::prefill_kernel_name(k);
      out.push_back(make_attention_case(*s));
    }
  }
  // The warp kernel (head dims below 64): stories260K's heads (8 q, 4 kv of 8) decoding 64
  // sequences at context 1024, and its 512-token prompt; head_dim 32 at batch 16. The prediction
  // (attention_warp.cu): latency-bound, 10-20x its bandwidth floor.
  out.push_back(make_attention_case(uniform(true, 64, 1, 1024, 8, 4, 8, 16)));
  out.push_back(make_attention_case(uniform(true, 16, 1, 1024, 8, 2, 32, 16)));
  out.push_back(make_attention_case(uniform(false, 1, 512, 512, 8, 4, 8, 16)));
}

}  // namespace ceiling::bench
