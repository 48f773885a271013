// Benchmark / test cases of the prefill-sized linear layer with fp8 weights (model/weights.h
// kFp8ActRowsMin and up): W8A8 — quantize_rows_fp8 (kernels/cuda/quantize_act.h) then cuBLASLt's
// FP8 GEMM with outer-vector scales (gemm_lt.h run_fp8), as CudaOps runs it — and, as the
// comparison it replaced, dequantizing the weight to bf16 then the bf16 GEMM (W8A16).
#pragma once

#include <memory>

#include "bench/case.h"

namespace ceiling::bench {

// out [M, N] (+)= x [M, K] · W^T (+ bias), W fp8 [N, K] with row scales (random E4M3 codes).
// w8a8: the engine's path, checked against CPU W8A8 (model/quantize.h quantize_act_row_fp8),
// with the E4M3 bytes and scales of x required to match the CPU's exactly; otherwise the
// dequantize + bf16 GEMM path, checked against W8A16. precise_accum: W8A8 with cuBLASLt's fp32
// promotion of the partial sums (LtGemm::set_fp8_fast_accum(false)), the comparison.
std::unique_ptr<KernelCase> make_linear_fp8_case(bool w8a8, int M, int N, int K, bool bias = false,
                                                 bool accumulate = false,
                                                 bool precise_accum = false);

}  // namespace ceiling::bench
