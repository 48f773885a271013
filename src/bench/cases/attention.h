// Benchmark/correctness cases of the attention kernels (decode and prefill over the paged KV
// cache). tests/gpu/attention_*_test.cpp build them at awkward sizes and assert on check();
// register_attention_cases() adds the benchmark shapes.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bench/case.h"
#include "kernels/cuda/attention.h"

namespace ceiling::bench {

struct AttentionSpec {
  bool decode = true;         // decode kernel (every q_len 1) or prefill kernel
  std::vector<int> q_lens;    // [S] new tokens per sequence
  std::vector<int> seq_lens;  // [S] context incl. the new tokens (≥ q_len)
  int num_q_heads = 32;
  int num_kv_heads = 8;
  int head_dim = 128;
  int block_size = 16;
  bool shuffle_blocks = true;  // random, non-contiguous block tables
  float q_scale = 1.0f;        // q ~ U(-q_scale, q_scale): larger gives peakier softmax
  cuda::PrefillKernel kernel = cuda::PrefillKernel::kAuto;
  int plan_max_seq_len = 0;       // decode plan bound; 0 = max(seq_lens)
  int plan_num_sms = 0;           // decode plan SM count; 0 = the device's
  int plan_min_split_tokens = 0;  // decode plan's shortest split; 0 = the library's
  int plan_stages = 0;            // decode plan's pipeline depth (3 or 4); 0 = the library's
  int plan_fp8_ctas = 0;          // decode plan, fp8 cache: CTAs an SM (3 or 4); 0 = the library's
  int check_tokens = 0;           // query tokens compared in check(); 0 = all
  // q rows Hq·D + q_row_pad elements apart (a multiple of 8; the pad is NaN), as the q columns of
  // a fused QKV output are.
  int q_row_pad = 0;
  std::string label;  // shape label suffix for the result JSON
  // An fp8 (E4M3) cache with these per-tensor scales (kernels/cuda/kv_format.h): the bf16 values
  // drawn for K and V are stored as e4m3(x · (1 / scale)), and the reference reads them back.
  bool fp8_kv = false;
  float k_scale = 1.0f, v_scale = 1.0f;
  // Prefill: the leading one-token sequences (a step's decodes) through the decode kernel and the
  // rest through the prefill kernel, as CudaOps runs a mixed step; false: all through prefill.
  bool split_decodes = false;
};

std::unique_ptr<KernelCase> make_attention_case(const AttentionSpec& spec);

// The tolerance on ‖out − ref‖ / ‖ref‖ for bf16 output (see attention.cpp for the argument).
inline constexpr double kAttentionTolerance = 1e-2;

}  // namespace ceiling::bench
