// CudaOps memory: the workspace arena (alloc), the weight upload, KV caches and host copies.
#include <chrono>
#include <vector>

#include "core/check.h"
#include "engine/cuda/cuda_ops.h"
#include "engine/cuda/engine_kernels.h"
#include "kernels/cpu/ref.h"
#include "kernels/cuda/attention.h"

namespace ceiling::engine {

using cuda_impl::bf16;

// ---- memory -------------------------------------------------------------------------------

void CudaOps::probe_fp8_gemm() {
  fp8_weights_ = false;
  bool shapes_ok = true;
  for (const cuda_impl::FusedLayerWeights& f : weights_.fused)
    for (const cuda_impl::DeviceLinear* d : {&f.qkv, &f.o, &f.gate_up, &f.down})
      if (d->w.format == cuda::GemvWeightFormat::kFP8) {
        fp8_weights_ = true;
        shapes_ok = shapes_ok && d->N % 16 == 0 && d->K % 16 == 0;
      }
  fp8_gemm_ = false;
  if (!fp8_weights_) return;
  const cuda_impl::DeviceLinear& d = weights_.fused.at(0).qkv;
  const Status st = shapes_ok ? linear_->lt().plan_fp8(kFp8ActRowsMin, d.N, d.K, false)
                              : Status::error("a projection's N or K is not a multiple of 16");
  fp8_gemm_ = st.ok();
  if (!fp8_gemm_)
    fmt::print(stderr,
               "[cuda] no cuBLASLt FP8 GEMM here ({}): fp8 projections of {} rows or more run "
               "W8A8's product as bf16 GEMMs of dequantized operands (slower)\n",
               st.message(), kFp8ActRowsMin);
}

TensorView CudaOps::alloc(DType dtype, std::initializer_list<int64_t> shape) {
  CEILING_ENSURE(mode_ != Mode::kCapture && mode_ != Mode::kReplay,
                 "CudaOps::alloc: not allowed inside a graph step");
  TensorView t(nullptr, dtype, shape, Device::kCuda);
  for (int i = 0; i < t.ndim; ++i)
    CEILING_ENSURE(t.shape[i] >= 0, "CudaOps::alloc: negative size {}", t.shape_str());
  t.data = arena_.allocate(t.nbytes());
  // 0xFF bytes: NaN in bf16/f16/f32, so a read before a write shows.
  CEILING_CUDA_CHECK(cudaMemsetAsync(t.data, 0xFF, t.nbytes(), stream_));
  if (t.ndim >= 2) row_cap_ = std::min(row_cap_, t.shape[0]);
  stats_.arena_bytes = arena_.bytes_reserved();
  return t;
}

const ModelWeights& CudaOps::upload(const ModelConfig& config, const ModelWeights& host) {
  CEILING_ENSURE(!uploaded_, "CudaOps::upload: weights were already uploaded");
  check_weights(config, host, Device::kCpu);
  const int D = config.head_dim;
  CEILING_ENSURE(cuda::attention_head_dim_supported(D),
                 "cuda: head_dim {} not supported (8, 16, 32, 64, 128)", D);
  const auto t0 = std::chrono::steady_clock::now();
  weights_ = cuda_impl::upload_weights(config, host, stream_, options_.upload_progress);
  stats_.upload_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  stats_.upload_bytes = weights_.source_bytes;
  stats_.weight_bytes = weights_.storage.bytes() + weights_.dequant_scratch.bytes();
  config_ = config;
  probe_fp8_gemm();
  const std::vector<float> inv = cpu::rope_inv_freq(config);
  inv_freq_ = static_cast<float*>(arena_.allocate(inv.size() * sizeof(float)));
  CEILING_CUDA_CHECK(
      cudaMemcpy(inv_freq_, inv.data(), inv.size() * sizeof(float), cudaMemcpyHostToDevice));
  uploaded_ = true;
  return weights_.views;
}

const ModelWeights& CudaOps::weights() const {
  CEILING_ENSURE(uploaded_, "CudaOps: no weights uploaded");
  return weights_.views;
}

const ModelConfig& CudaOps::config() const {
  CEILING_ENSURE(uploaded_, "CudaOps: no weights uploaded");
  return config_;
}

KvCache CudaOps::alloc_kv_cache(int num_blocks, int block_size) {
  const ModelConfig& c = config();
  CEILING_ENSURE(num_blocks > 0 && block_size > 0,
                 "KV cache: num_blocks {} and block_size {} must be positive", num_blocks,
                 block_size);
  // Per layer K and V each [num_blocks + 1, Hkv, block_size, D]: the extra block is the dummy.
  const DType dt = kv_dtype();
  const size_t per = dtype_bytes(
      dt, static_cast<size_t>(num_blocks + 1) * c.num_kv_heads * block_size * c.head_dim);
  KvAlloc a;
  a.mem = cuda_impl::DeviceBuffer(per * 2 * c.num_layers);
  CEILING_CUDA_CHECK(cudaMemsetAsync(a.mem.get(), 0, a.mem.bytes(), stream_));
  KvCache kv{c.num_layers, num_blocks, block_size, c.num_kv_heads, c.head_dim, dt, {}, {}};
  char* base = static_cast<char*>(a.mem.get());
  for (int l = 0; l < c.num_layers; ++l) {
    for (int which = 0; which < 2; ++which) {
      TensorView t(base + per * (2 * l + which), dt,
                   {num_blocks, c.num_kv_heads, block_size, c.head_dim}, Device::kCuda);
      (which ? kv.v : kv.k).push_back(t);
    }
  }
  a.k0 = kv.k[0].data;
  kv_allocs_.push_back(std::move(a));
  CEILING_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return kv;
}

void CudaOps::to_host(const TensorView& src, float* dst) {
  CEILING_ENSURE(mode_ != Mode::kCapture && mode_ != Mode::kReplay,
                 "CudaOps::to_host: not allowed inside a graph step (results exist after lm_head)");
  CEILING_ENSURE(src.device == Device::kCuda && src.is_contiguous(),
                 "CudaOps::to_host: needs a contiguous device view (got {})", src.shape_str());
  materialize_qkv();  // q/k/v views hold their values only after this
  const size_t n = static_cast<size_t>(src.numel());
  if (src.dtype == DType::kF32) {
    CEILING_CUDA_CHECK(cudaMemcpyAsync(dst, src.data, n * 4, cudaMemcpyDeviceToHost, stream_));
    CEILING_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return;
  }
  CEILING_ENSURE(src.dtype == DType::kBF16, "CudaOps::to_host: dtype {} not supported",
                 dtype_name(src.dtype));
  std::vector<uint16_t> tmp(n);
  CEILING_CUDA_CHECK(cudaMemcpyAsync(tmp.data(), src.data, n * 2, cudaMemcpyDeviceToHost, stream_));
  CEILING_CUDA_CHECK(cudaStreamSynchronize(stream_));
  for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(tmp[i]);
}

void CudaOps::from_host(const float* src, const TensorView& dst) {
  CEILING_ENSURE(mode_ != Mode::kCapture && mode_ != Mode::kReplay,
                 "CudaOps::from_host: not allowed inside a graph step");
  CEILING_ENSURE(dst.device == Device::kCuda && dst.is_contiguous(),
                 "CudaOps::from_host: needs a contiguous device view (got {})", dst.shape_str());
  materialize_qkv();  // a pending split would overwrite what is written here
  prequant_ = {};     // the next op's W8A8 input may be what is written here
  const size_t n = static_cast<size_t>(dst.numel());
  if (dst.dtype == DType::kF32) {
    CEILING_CUDA_CHECK(cudaMemcpyAsync(dst.data, src, n * 4, cudaMemcpyHostToDevice, stream_));
  } else {
    CEILING_ENSURE(dst.dtype == DType::kBF16, "CudaOps::from_host: dtype {} not supported",
                   dtype_name(dst.dtype));
    std::vector<uint16_t> tmp(n);
    for (size_t i = 0; i < n; ++i) tmp[i] = f32_to_bf16(src[i]);
    CEILING_CUDA_CHECK(
        cudaMemcpyAsync(dst.data, tmp.data(), n * 2, cudaMemcpyHostToDevice, stream_));
  }
  CEILING_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaOps::bind_thread() {
  CEILING_CUDA_CHECK(cudaSetDevice(options_.device_index));
}

void CudaOps::synchronize() {
  CEILING_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

bool CudaOps::device_memory(size_t* free_bytes, size_t* total_bytes) {
  CEILING_CUDA_CHECK(cudaMemGetInfo(free_bytes, total_bytes));
  return true;
}

}  // namespace ceiling::engine
