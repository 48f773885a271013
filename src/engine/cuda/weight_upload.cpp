#include "engine/cuda/weight_upload.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "core/check.h"
#include "engine/cuda/engine_kernels.h"
#include "engine/thread_pool.h"
#include "kernels/cuda/sampling.h"

namespace ceiling::engine::cuda_impl {
namespace {

constexpr size_t kStageBytes = size_t{64} << 20;  // per staging slot (two slots)
constexpr size_t kCopyGrain = size_t{1} << 20;    // host copy split into 1 MiB pieces

// One host tensor and where its bf16 image starts in the device storage.
struct Piece {
  const TensorView* src;
  size_t dst_offset;
};

// Streams every piece through the two pinned slots: slot i is refilled only after the DMA and
// conversion that last used it (event), so host copies overlap the previous chunk's transfer.
uint64_t copy_pieces(const std::vector<Piece>& pieces, char* base, cudaStream_t stream,
                     const UploadProgress& progress) {
  uint64_t total = 0, done = 0;
  for (const Piece& p : pieces) total += p.src->nbytes();
  PinnedBuffer pinned[2] = {PinnedBuffer(kStageBytes), PinnedBuffer(kStageBytes)};
  DeviceBuffer staging[2];  // device copies of non-bf16 chunks, converted from here
  cudaEvent_t free_ev[2] = {nullptr, nullptr};
  for (auto& e : free_ev) CEILING_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  ThreadPool pool(static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u)));
  int slot = 0;
  try {
    for (const Piece& p : pieces) {
      const TensorView& t = *p.src;
      const size_t esize = dtype_bytes(t.dtype, 1), bytes = t.nbytes();
      const size_t step = kStageBytes / esize * esize;
      for (size_t off = 0; off < bytes; off += step) {
        const size_t n = std::min(step, bytes - off);
        CEILING_CUDA_CHECK(cudaEventSynchronize(free_ev[slot]));
        const char* src = static_cast<const char*>(t.data) + off;
        char* stage = pinned[slot].as<char>();
        pool.parallel_for(static_cast<int64_t>((n + kCopyGrain - 1) / kCopyGrain), 1,
                          [&](int64_t b0, int64_t b1) {
                            const size_t lo = b0 * kCopyGrain, hi = std::min(n, b1 * kCopyGrain);
                            std::memcpy(stage + lo, src + lo, hi - lo);
                          });
        bf16* dst = reinterpret_cast<bf16*>(base + p.dst_offset) + off / esize;
        if (t.dtype == DType::kBF16) {
          CEILING_CUDA_CHECK(cudaMemcpyAsync(dst, stage, n, cudaMemcpyHostToDevice, stream));
        } else {
          if (!staging[slot].get()) staging[slot] = DeviceBuffer(kStageBytes);
          CEILING_CUDA_CHECK(
              cudaMemcpyAsync(staging[slot].get(), stage, n, cudaMemcpyHostToDevice, stream));
          convert_to_bf16(staging[slot].get(), t.dtype, dst, n / esize, stream).throw_if_error();
        }
        CEILING_CUDA_CHECK(cudaEventRecord(free_ev[slot], stream));
        slot ^= 1;
        done += n;
        if (progress) progress(done, total);
      }
    }
    CEILING_CUDA_CHECK(cudaStreamSynchronize(stream));
  } catch (...) {
    cudaStreamSynchronize(stream);  // the staging buffers must outlive queued copies
    for (auto& e : free_ev) cudaEventDestroy(e);
    throw;
  }
  for (auto& e : free_ev) cudaEventDestroy(e);
  return total;
}

}  // namespace

DeviceWeights upload_weights(const ModelConfig& c, const ModelWeights& host, cudaStream_t stream,
                             const UploadProgress& progress) {
  const int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size, D = c.head_dim;
  const int64_t Q = c.q_dim(), KV = c.kv_dim(), QKV = Q + 2 * KV;
  const int L = c.num_layers;
  CEILING_ENSURE(V <= cuda::sampler_max_vocab(),
                 "model: vocab_size {} exceeds the CUDA sampler's limit of {} tokens", V,
                 cuda::sampler_max_vocab());

  // Layout: every tensor 256-byte aligned in one allocation; bf16 throughout.
  size_t total = 0;
  auto region = [&](int64_t numel) {
    const size_t off = (total + 255) / 256 * 256;
    total = off + static_cast<size_t>(numel) * 2;
    return off;
  };
  std::vector<Piece> pieces;
  auto place = [&](const TensorView& src, size_t off) { pieces.push_back({&src, off}); };
  struct Offsets {
    size_t in_norm, qkv, bias, q_norm, k_norm, o, post_norm, gate_up, down;
  };
  const size_t embed = region(V * H);
  place(host.embed, embed);
  std::vector<Offsets> lo(L);
  for (int l = 0; l < L; ++l) {
    const LayerWeights& w = host.layers[l];
    Offsets& o = lo[l];
    place(w.input_norm, o.in_norm = region(H));
    o.qkv = region(QKV * H);
    place(w.q_proj, o.qkv);
    place(w.k_proj, o.qkv + Q * H * 2);
    place(w.v_proj, o.qkv + (Q + KV) * H * 2);
    if (c.attention_bias) {
      o.bias = region(QKV);
      place(w.q_bias, o.bias);
      place(w.k_bias, o.bias + Q * 2);
      place(w.v_bias, o.bias + (Q + KV) * 2);
    }
    if (c.qk_norm) {
      place(w.q_norm, o.q_norm = region(D));
      place(w.k_norm, o.k_norm = region(D));
    }
    place(w.o_proj, o.o = region(H * Q));
    place(w.post_attn_norm, o.post_norm = region(H));
    o.gate_up = region(2 * I * H);
    place(w.gate_proj, o.gate_up);
    place(w.up_proj, o.gate_up + I * H * 2);
    place(w.down_proj, o.down = region(H * I));
  }
  const size_t final_norm = region(H);
  place(host.final_norm, final_norm);
  const bool tied = host.lm_head.data == host.embed.data;
  const size_t lm_head = tied ? embed : region(V * H);
  if (!tied) place(host.lm_head, lm_head);

  DeviceWeights out;
  out.storage = DeviceBuffer(total);
  char* base = static_cast<char*>(out.storage.get());
  auto view = [&](size_t off, std::initializer_list<int64_t> shape) {
    return TensorView(base + off, DType::kBF16, shape, Device::kCuda);
  };
  out.views.embed = view(embed, {V, H});
  out.views.final_norm = view(final_norm, {H});
  out.views.lm_head = view(lm_head, {V, H});
  out.views.layers.resize(L);
  out.fused.resize(L);
  for (int l = 0; l < L; ++l) {
    const Offsets& o = lo[l];
    LayerWeights& w = out.views.layers[l];
    FusedLayerWeights& f = out.fused[l];
    w.input_norm = view(o.in_norm, {H});
    f.qkv = view(o.qkv, {QKV, H});
    w.q_proj = view(o.qkv, {Q, H});
    w.k_proj = view(o.qkv + Q * H * 2, {KV, H});
    w.v_proj = view(o.qkv + (Q + KV) * H * 2, {KV, H});
    if (c.attention_bias) {
      f.qkv_bias = view(o.bias, {QKV});
      w.q_bias = view(o.bias, {Q});
      w.k_bias = view(o.bias + Q * 2, {KV});
      w.v_bias = view(o.bias + (Q + KV) * 2, {KV});
    }
    if (c.qk_norm) {
      w.q_norm = view(o.q_norm, {D});
      w.k_norm = view(o.k_norm, {D});
    }
    w.o_proj = view(o.o, {H, Q});
    w.post_attn_norm = view(o.post_norm, {H});
    f.gate_up = view(o.gate_up, {2 * I, H});
    w.gate_proj = view(o.gate_up, {I, H});
    w.up_proj = view(o.gate_up + I * H * 2, {I, H});
    w.down_proj = view(o.down, {H, I});
  }
  out.source_bytes = copy_pieces(pieces, base, stream, progress);
  return out;
}

}  // namespace ceiling::engine::cuda_impl
