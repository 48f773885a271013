// Attention over the paged KV cache on the GPU: decode (one new token per sequence, split-KV,
// GQA) and causal varlen prefill (FlashAttention-style, with a prefix already in the cache).
//
// Meaning: cpu::attention in src/kernels/cpu/ref.h. Layouts (all bf16, fp32 softmax/accumulation):
//   q, out   [T, Hq, D]                       T = tokens of the step
//   K, V     [num_blocks, Hkv, block_size, D]  one head's block_size×D tile contiguous
//   query head h reads KV head h / (Hq / Hkv).
// Supported: head_dim 64 or 128 with block_size 16, 32, 64, 128 or 256 (the tiled kernels), and
// head_dim 8, 16, 32 or 64 with any block size (the warp kernel, attention_warp.cu: 4 warps per
// query token and head on CUDA cores, for small models); Hq a multiple of Hkv. plan_* picks the
// kernel.
//
// Plan → run: plan_* is host-only (validates shapes, picks splits / tiles, sizes the workspace);
// run_* only launches kernels on `stream` — no allocation, no sync, no host read of device data —
// so it can be captured in a CUDA graph. Kernels are launched with programmatic dependent launch
// (pdl.cuh): each waits for the previous kernel in the stream before reading anything, and lets
// the next one launch early. A plan stays valid for any batch whose sizes stay within
// the shape it was made for (same S and T, seq_lens[s] ≤ max_seq_len for decode).
//
// Device-side contract (not checkable without reading device memory): q_len ≤ seq_len for every
// sequence, the new tokens' K/V are already in the cache, and every block-table entry a sequence
// uses lies in [0, num_blocks). A table entry outside that range reads as zeros (no out-of-bounds
// access); the result is then meaningless but defined.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/status.h"
#include "kernels/cuda/kv_format.h"

namespace ceiling::cuda {

// One layer's paged KV cache (device pointers; bf16, or E4M3 bytes with per-tensor scales:
// kv_format.h).
struct PagedKvDevice {
  const void* k = nullptr;  // [num_blocks, Hkv, block_size, D]
  const void* v = nullptr;  // [num_blocks, Hkv, block_size, D]
  int num_blocks = 0;
  int block_size = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  KvFormat format = KvFormat::kBF16;
  float k_scale = 1.0f, v_scale = 1.0f;  // fp8: a stored value means value · scale
};

// Device copies of cpu::AttnBatch plus the host-known token count. query_start holds rows of q
// and out: it may start above 0 (a step's sequences after its decodes, the rows before them
// untouched), and then T = query_start[S] − query_start[0].
struct AttnBatchDevice {
  int num_seqs = 0;
  int num_tokens = 0;                    // T = query_start[S] − query_start[0], known on the host
  const int32_t* query_start = nullptr;  // [S+1]
  const int32_t* seq_lens = nullptr;     // [S]
  const int32_t* block_tables = nullptr;  // [S, max_blocks]
  int max_blocks = 0;
};

// Whether some kernel takes head_dim (with block sizes 16..256; the warp kernel's head dims with
// any block size): 8, 16, 32, 64 or 128.
bool attention_head_dim_supported(int head_dim);

// ---- decode -----------------------------------------------------------------------------------

struct DecodeShape {
  int num_seqs = 0;      // S; q row s belongs to sequence s (query_start[s] = s)
  int num_q_heads = 0;   // Hq
  int num_kv_heads = 0;  // Hkv
  int head_dim = 0;      // D
  int block_size = 0;
  int max_seq_len = 0;  // upper bound of seq_lens[s] the plan is sized for
  // Shortest KV split (a multiple of 16); 0 = the library's choice (256, measured).
  int min_split_tokens = 0;
  KvFormat kv_format = KvFormat::kBF16;  // the cache the plan will read (sizes its pipeline)
  // An fp8 cache: CTAs an SM the plan may take, 3 (4 stages a warp) or 4 (3 stages); 0 = the
  // library's choice (benchmarks compare the two).
  int fp8_ctas_per_sm = 0;
};

struct DecodePlan {
  DecodeShape shape;
  int min_split_tokens = 0;  // each sequence takes min(max_splits, len / this) splits (≥ 1)
  int max_splits = 1;        // most splits of any sequence (whole waves of CTAs)
  int q_chunks = 1;          // ceil(group / 16): query heads of a group handled 16 at a time
  // cp.async stages per warp: 4 when the grid fits one CTA per SM (a deeper pipeline, and its
  // 128 KB of shared memory (head_dim 128) costs no co-resident CTA), else 3; an fp8 cache 4
  // (three CTAs an SM), or 3 (four CTAs an SM) when that puts the grid in one fuller wave.
  int stages = 3;
  // Partial outputs, log-sum-exps and per-group split counters; 0 when max_splits == 1.
  size_t workspace_bytes = 0;
  // The warp kernel (a shape the split-KV kernel does not take): no splits, no workspace.
  bool warp = false;
};

// Chooses the KV split for the current device (reads its SM count).
Status plan_decode_attention(const DecodeShape& shape, DecodePlan* plan);
// Same, for an explicit SM count (tests, benchmarks of what-if shapes).
Status plan_decode_attention(const DecodeShape& shape, int num_sms, DecodePlan* plan);

// Zeroes a fresh workspace (the split counters) once, before its first run; every run leaves it
// zeroed again, so reuse across runs, graphs and plans of the same size needs no further call.
Status init_decode_workspace(const DecodePlan& plan, void* workspace, cudaStream_t stream);

// q [S, Hq, D] bf16 with its rows q_stride elements apart (≥ Hq·D, a multiple of 8: e.g. the q
// columns of a fused QKV projection's output, read in place); out [S, Hq, D] bf16; seq_lens [S] (≥
// 1; a 0 gives zeros; any length is correct: a sequence longer than plan.max_seq_len gets longer
// splits, not more); block_tables [S, max_blocks]; workspace: device buffer of plan.workspace_bytes
// (may be null when that is 0).
// PDL: the tiled decode kernel reads seq_lens, block_tables and the cached tokens [0, len − 1) of
// each sequence before it waits on the previous kernel in the stream, so those must be complete
// before the kernel launches: written before a non-kernel operation of the stream (a memory copy,
// an event wait) or in an earlier step. Under PDL a kernel two launches back may still run. Only
// q and the newest token's K/V (position len − 1) may come from the kernels of the same chain —
// as in a decode step, where the step's metadata copy comes first and the RoPE + KV write
// precedes the attention.
Status run_decode_attention(const DecodePlan& plan, const void* q, int64_t q_stride,
                            const PagedKvDevice& kv, const int32_t* seq_lens,
                            const int32_t* block_tables, int max_blocks, float scale, void* out,
                            void* workspace, cudaStream_t stream);

// ---- prefill ----------------------------------------------------------------------------------

enum class PrefillKernel {
  kAuto,      // the fastest built for the device
  kMmaSync,   // FlashAttention-2 style: mma.sync m16n8k16, cp.async, 8 warps × 16 query rows
  kWgmma,     // sm_90a warpgroup MMA, 2 warpgroups that all load K/V (when built)
  kWgmmaWs,   // FlashAttention-3 style: producer warpgroup + 2 ping-ponging consumer warpgroups
              // with softmax/MMA overlap (sm_90a, when built); the producer gathers with cp.async
  kWgmmaTma,  // the same with a TMA producer (one warp, a tensor copy per cache block and panel)
  kWarp,      // 4 warps per (token, query head), CUDA cores: head dims 8..64, any block size
              // (attention_warp.cu); kAuto takes it for the shapes the tiled kernels do not
};
// "mma_sync", "wgmma", "wgmma_ws", "wgmma_tma", "warp" ("auto" for kAuto).
const char* prefill_kernel_name(PrefillKernel kernel);

// Whether plan_prefill_attention accepts `kernel` for head_dim on the current device (kAuto and
// kMmaSync always, for a supported head_dim). When false, *why (if not null) says why.
bool prefill_kernel_available(PrefillKernel kernel, int head_dim, const char** why = nullptr);

struct PrefillShape {
  int num_seqs = 0;    // S
  int num_tokens = 0;  // T = query_start[S] − query_start[0]
  int num_q_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int block_size = 0;
  PrefillKernel kernel = PrefillKernel::kAuto;
  // An fp8 cache is read by the mma.sync kernel (kAuto resolves to it for the tiled shapes; the
  // wgmma kernels refuse it): its K/V tiles land as E4M3 and are converted to f16 in shared
  // memory. The warp kernel reads it too.
  KvFormat kv_format = KvFormat::kBF16;
};

struct PrefillPlan {
  PrefillShape shape;
  PrefillKernel kernel = PrefillKernel::kMmaSync;  // resolved
  int block_m = 0;                                 // query rows per CTA (warp kernel: 1)
  int tile_slots = 0;  // CTAs per head: ≥ Σ_s ceil(q_len_s / block_m) for any split of T into S
  size_t workspace_bytes = 0;
};

Status plan_prefill_attention(const PrefillShape& shape, PrefillPlan* plan);

// q [T, Hq, D] bf16, rows q_stride elements apart (as decode); out [T, Hq, D]. Causal within each
// sequence; a sequence may have a prefix in the cache (seq_len > q_len). Works for any q_len ≥ 0,
// including decode-like q_len = 1.
Status run_prefill_attention(const PrefillPlan& plan, const void* q, int64_t q_stride,
                             const PagedKvDevice& kv, const AttnBatchDevice& batch, float scale,
                             void* out, void* workspace, cudaStream_t stream);

}  // namespace ceiling::cuda
