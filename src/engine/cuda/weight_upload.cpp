#include "engine/cuda/weight_upload.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <thread>
#include <utility>

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

size_t align256(size_t b) {
  return (b + 255) / 256 * 256;
}

// A host buffer copied as it is (low-precision data, scales), with what it owns when it was
// made here (the re-packed int4 nibbles and group words).
struct RawCopy {
  const void* src;
  size_t bytes, dst_offset;
  std::shared_ptr<std::vector<uint8_t>> owned;
};

// Where one fused group of projections lives in the storage, and in which format.
struct GroupSlot {
  cuda::GemvWeightFormat fmt = cuda::GemvWeightFormat::kBF16;
  int group = 0;
  int64_t N = 0, K = 0;
  size_t data = 0, aux = 0;
};

cuda::GemvWeightFormat gemv_format(WeightFormat f) {
  return f == WeightFormat::kFp8    ? cuda::GemvWeightFormat::kFP8
         : f == WeightFormat::kInt4 ? cuda::GemvWeightFormat::kInt4
                                    : cuda::GemvWeightFormat::kBF16;
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

  // Layout: every tensor 256-byte aligned in one allocation; bf16, or low precision as loaded.
  size_t total = 0;
  auto region_bytes = [&](size_t bytes) {
    const size_t off = align256(total);
    total = off + bytes;
    return off;
  };
  auto region = [&](int64_t numel) { return region_bytes(static_cast<size_t>(numel) * 2); };
  std::vector<Piece> pieces;
  std::vector<RawCopy> raws;
  auto place = [&](const TensorView& src, size_t off) { pieces.push_back({&src, off}); };
  size_t scratch_bytes = 0;  // the largest quantized group's bf16 image
  // The projections `projs` of layer l, rows concatenated, each [rows, K].
  auto place_group = [&](int l, std::initializer_list<std::pair<Proj, int64_t>> projs, int64_t K) {
    const LayerWeights& w = host.layers[l];
    const QuantLinear& q0 = w.quant[projs.begin()->first];
    GroupSlot g;
    g.fmt = gemv_format(q0.format);
    g.group = q0.group_size;
    g.K = K;
    for (const auto& [p, rows] : projs) {
      const QuantLinear& q = w.quant[p];
      CEILING_ENSURE(q.format == q0.format && q.group_size == q0.group_size,
                     "layers.{}: {} is {} (group {}) but {} is {} (group {}): the fused "
                     "projection needs one format",
                     l, proj_name(projs.begin()->first), weight_format_name(q0.format),
                     q0.group_size, proj_name(p), weight_format_name(q.format), q.group_size);
      g.N += rows;
    }
    const bool fp8 = g.fmt == cuda::GemvWeightFormat::kFP8;
    if (g.fmt == cuda::GemvWeightFormat::kBF16) {
      g.data = region(g.N * K);
    } else {
      const int64_t groups = fp8 ? 0 : K / g.group;
      g.data = region_bytes(static_cast<size_t>(fp8 ? g.N * K : g.N * K / 2));
      g.aux = region_bytes(static_cast<size_t>(fp8 ? 4 * g.N : 4 * g.N * groups));
      scratch_bytes = std::max(scratch_bytes, static_cast<size_t>(g.N * K * 2));
    }
    int64_t row = 0;
    for (const auto& [p, rows] : projs) {
      const QuantLinear& q = w.quant[p];
      if (g.fmt == cuda::GemvWeightFormat::kBF16) {
        place(w.dense(p), g.data + row * K * 2);
      } else if (fp8) {
        raws.push_back({q.qweight.data, q.qweight.nbytes(), g.data + row * K, nullptr});
        raws.push_back({q.scale.data, q.scale.nbytes(), g.aux + row * 4, nullptr});
      } else {
        CEILING_ENSURE(K % 32 == 0, "layers.{}.{}: int4 on cuda needs in_features % 32 == 0 ({})",
                       l, proj_name(p), K);
        const int64_t groups = K / g.group;
        auto packed = std::make_shared<std::vector<uint8_t>>(rows * K / 2);
        cuda::pack_gemv_int4(static_cast<const uint8_t*>(q.qweight.data), rows, K, packed->data());
        auto words = std::make_shared<std::vector<uint8_t>>(rows * groups * 4);
        const auto* sc = static_cast<const float*>(q.scale.data);
        const auto* zp = static_cast<const uint8_t*>(q.zero.data);
        for (int64_t i = 0; i < rows * groups; ++i) {
          const uint32_t word = cuda::pack_gemv_int4_group(sc[i], zp[i]);
          std::memcpy(words->data() + 4 * i, &word, 4);
        }
        raws.push_back({packed->data(), packed->size(), g.data + row * K / 2, packed});
        raws.push_back({words->data(), words->size(), g.aux + row * groups * 4, words});
      }
      row += rows;
    }
    return g;
  };
  struct Offsets {
    size_t in_norm, bias, q_norm, k_norm, post_norm;
    GroupSlot qkv, o, gate_up, down;
  };
  const size_t embed = region(V * H);
  place(host.embed, embed);
  std::vector<Offsets> lo(L);
  for (int l = 0; l < L; ++l) {
    const LayerWeights& w = host.layers[l];
    Offsets& o = lo[l];
    place(w.input_norm, o.in_norm = region(H));
    o.qkv = place_group(l, {{kQProj, Q}, {kKProj, KV}, {kVProj, KV}}, H);
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
    o.o = place_group(l, {{kOProj, H}}, Q);
    place(w.post_attn_norm, o.post_norm = region(H));
    o.gate_up = place_group(l, {{kGateProj, I}, {kUpProj, I}}, H);
    o.down = place_group(l, {{kDownProj, H}}, I);
  }
  const size_t final_norm = region(H);
  place(host.final_norm, final_norm);
  const bool tied = host.lm_head.data == host.embed.data;
  const size_t lm_head = tied ? embed : region(V * H);
  if (!tied) place(host.lm_head, lm_head);

  DeviceWeights out;
  out.storage = DeviceBuffer(total);
  if (scratch_bytes > 0) out.dequant_scratch = DeviceBuffer(scratch_bytes);
  char* base = static_cast<char*>(out.storage.get());
  auto view = [&](size_t off, std::initializer_list<int64_t> shape) {
    return TensorView(base + off, DType::kBF16, shape, Device::kCuda);
  };
  // A group's kernel view; the per-projection views of a bf16 group point into it.
  auto linear = [&](const GroupSlot& g, int l, const char* name) {
    DeviceLinear d;
    d.N = static_cast<int>(g.N);
    d.K = static_cast<int>(g.K);
    d.w.format = g.fmt;
    d.w.data = base + g.data;
    if (g.fmt == cuda::GemvWeightFormat::kFP8)
      d.w.row_scale = reinterpret_cast<float*>(base + g.aux);
    if (g.fmt == cuda::GemvWeightFormat::kInt4) {
      d.w.groups = reinterpret_cast<uint32_t*>(base + g.aux);
      d.w.group_size = g.group;
    }
    if (d.quantized()) {
      const std::string why = cuda::gemv_quant_unsupported(d.w, d.N, d.K);
      CEILING_ENSURE(why.empty(), "layers.{}.{}: {} weights are not supported on cuda: {}", l, name,
                     cuda::gemv_weight_format_name(g.fmt), why);
    }
    return d;
  };
  // Projection p's dense view: rows [row, row + rows) of the group (empty when quantized).
  auto member = [&](LayerWeights& w, Proj p, const GroupSlot& g, int64_t row, int64_t rows) {
    if (g.fmt != cuda::GemvWeightFormat::kBF16) {
      w.dense(p) = TensorView(nullptr, DType::kBF16, {rows, g.K}, Device::kCuda);
      w.quant[p].format =
          g.fmt == cuda::GemvWeightFormat::kFP8 ? WeightFormat::kFp8 : WeightFormat::kInt4;
      w.quant[p].group_size = g.group;
      return;
    }
    w.dense(p) = view(g.data + row * g.K * 2, {rows, g.K});
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
    w.k_scale = host.layers[l].k_scale;  // the fp8 KV cache's scales
    w.v_scale = host.layers[l].v_scale;
    f.qkv = linear(o.qkv, l, "qkv_proj");
    member(w, kQProj, o.qkv, 0, Q);
    member(w, kKProj, o.qkv, Q, KV);
    member(w, kVProj, o.qkv, Q + KV, KV);
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
    f.o = linear(o.o, l, "o_proj");
    member(w, kOProj, o.o, 0, H);
    w.post_attn_norm = view(o.post_norm, {H});
    f.gate_up = linear(o.gate_up, l, "gate_up_proj");
    member(w, kGateProj, o.gate_up, 0, I);
    member(w, kUpProj, o.gate_up, I, I);
    f.down = linear(o.down, l, "down_proj");
    member(w, kDownProj, o.down, 0, H);
  }
  out.source_bytes = copy_pieces(pieces, base, stream, progress);
  for (const RawCopy& r : raws) {  // pageable host memory: each copy returns once staged
    CEILING_CUDA_CHECK(
        cudaMemcpyAsync(base + r.dst_offset, r.src, r.bytes, cudaMemcpyHostToDevice, stream));
    out.source_bytes += r.bytes;
  }
  CEILING_CUDA_CHECK(cudaStreamSynchronize(stream));
  return out;
}

}  // namespace ceiling::engine::cuda_impl
