// TEMPORARY (engine_kernels.h says what retires it): the fused QKV output split into the
// contiguous q, k, v views the Ops contract and the attention launchers take.
#include "core/check.h"
#include "engine/cuda/engine_kernels.h"

namespace ceiling::engine::cuda_impl {
namespace {

constexpr int kThreads = 128;

// grid T: block t copies row t, `W` elements per access (W = 8: 16-byte vectors).
template <typename Vec, int W>
__global__ void split_kernel(const bf16* __restrict__ qkv, int Q, int KV, bf16* __restrict__ q,
                             bf16* __restrict__ k, bf16* __restrict__ v) {
  const int t = blockIdx.x, row = Q + 2 * KV;
  const Vec* src = reinterpret_cast<const Vec*>(qkv + static_cast<int64_t>(t) * row);
  for (int c = threadIdx.x; c < row / W; c += blockDim.x) {
    const int e = c * W;
    bf16* dst = e < Q        ? q + static_cast<int64_t>(t) * Q + e
                : e < Q + KV ? k + static_cast<int64_t>(t) * KV + (e - Q)
                             : v + static_cast<int64_t>(t) * KV + (e - Q - KV);
    *reinterpret_cast<Vec*>(dst) = src[c];
  }
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

}  // namespace

Status split_qkv(const bf16* qkv, int T, int Q, int KV, bf16* q, bf16* k, bf16* v,
                 cudaStream_t stream) {
  if (T < 0 || Q <= 0 || KV <= 0)
    return Status::error("split_qkv: bad shape T {} Q {} KV {}", T, Q, KV);
  if (T == 0) return Status();
  const bool vec =
      Q % 8 == 0 && KV % 8 == 0 && aligned16(qkv) && aligned16(q) && aligned16(k) && aligned16(v);
  if (vec)
    split_kernel<uint4, 8><<<T, kThreads, 0, stream>>>(qkv, Q, KV, q, k, v);
  else
    split_kernel<bf16, 1><<<T, kThreads, 0, stream>>>(qkv, Q, KV, q, k, v);
  CEILING_CUDA_RETURN_LAST();
  return Status();
}

}  // namespace ceiling::engine::cuda_impl
