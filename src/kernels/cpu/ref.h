// The CPU reference ops: the meaning of every op of the forward, written simply and correctly.
// Activations are fp32; weights may be f32, bf16 or f16 (TensorView.dtype); accumulation is fp32
// (attention softmax in fp32, dot products in fp32). Every CUDA kernel is tested against these.
//
// Shapes use T = tokens in the step, H = hidden size, Hq/Hkv = query/KV heads, D = head dim,
// I = MLP width, V = vocab, S = sequences in the batch.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "model/config.h"

namespace ceiling::cpu {

// One layer's paged KV cache. K and V are each [num_blocks, Hkv, block_size, D] (HND per block:
// one head's block_size×D tile is contiguous). Token slot s lives in block s / block_size at row
// s % block_size.
struct PagedKv {
  float* k = nullptr;
  float* v = nullptr;
  int num_blocks = 0;
  int block_size = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int64_t offset(int64_t slot, int head) const {
    const int64_t block = slot / block_size, row = slot % block_size;
    return ((block * num_kv_heads + head) * block_size + row) * head_dim;
  }
};

// The attention batch: S sequences, each with q_len = query_start[s+1]-query_start[s] new tokens
// (rows of q) appended to a context of seq_lens[s] tokens in total (new tokens included). New
// token j of sequence s sits at position seq_lens[s] - q_len + j and attends causally to
// positions 0..that position. Block b of sequence s is block_tables[s * max_blocks + b].
struct AttnBatch {
  int num_seqs = 0;
  const int32_t* query_start = nullptr;   // [S+1]
  const int32_t* seq_lens = nullptr;      // [S]
  const int32_t* block_tables = nullptr;  // [S, max_blocks]
  int max_blocks = 0;
};

// out[t, :] = table[ids[t], :]. table [V, H]; ids [T]; out [T, H]. Throws on an id outside [0, V).
void embedding(const TensorView& table, const int32_t* ids, int T, float* out);

// Fused residual add + RMSNorm. x, out [T, H]; w [H]; residual [T, H] or null.
// With a residual: r = x + residual; residual <- r. Without: r = x. Then out = r / rms(r) * w,
// rms(r) = sqrt(mean(r^2) + eps). out may alias x.
void rms_norm(const float* x, float* residual, const TensorView& w, int T, int H, float eps,
              float* out);

// out [T, N] = x [T, K] · W[N, K]^T (+ bias [N]). bias may be null.
void linear(const float* x, const TensorView& w, const TensorView* bias, int T, float* out);

// RoPE inverse frequencies [D/2] for a config (theta, llama3 / linear scaling), computed in double
// and rounded to float as transformers does.
std::vector<float> rope_inv_freq(const ModelConfig& c);

// Rotate-half RoPE (Hugging Face layout) in place on q [T, Hq, D] and k [T, Hkv, D]:
// for i < D/2, angle = pos * inv_freq[i]; (x_i, x_{i+D/2}) <- (x_i c - x_{i+D/2} s, x_{i+D/2} c + x_i s).
void rope(float* q, float* k, const int32_t* positions, const float* inv_freq, int T, int Hq,
          int Hkv, int D);

// Writes k, v [T, Hkv, D] into the cache at slot_mapping[T]. A slot of -1 is skipped (padding).
void kv_write(const float* k, const float* v, const int32_t* slot_mapping, int T, PagedKv& cache);

// Causal GQA attention over the paged cache (the new tokens' K/V must already be written).
// q, out [T, Hq, D]; query head h reads KV head h / (Hq / Hkv). softmax(scale · q·k) · v.
void attention(const float* q, const PagedKv& cache, const AttnBatch& batch, int Hq, float scale,
               float* out);

// gate_up [T, 2I] holds gate in columns [0, I) and up in [I, 2I); out [T, I] = silu(gate) * up.
void silu_mul(const float* gate_up, int T, int I, float* out);

// Index of the largest value in each row of logits [T, V]; ties go to the lowest index.
void argmax(const float* logits, int T, int V, int32_t* out);

}  // namespace ceiling::cpu
