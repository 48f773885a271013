// CpuOps: the reference backend. fp32 activations and KV cache, f32/bf16/f16 weights, fp32
// accumulation; every op has the meaning of the matching function in kernels/cpu/ref.h.
// Low-precision formats are defined here first, as the oracle of later GPU kernels: quantized
// projections (fp8, int4; model/weights.h QuantLinear) are dequantized row by row and computed in
// fp32, and an fp8 KV cache rounds each value written through E4M3 with the layer's scale. The
// projections are split over output rows across a small thread pool; everything else calls the
// reference functions (row-parallel where that is free).
#pragma once

#include <memory>
#include <vector>

#include "engine/ops.h"
#include "engine/thread_pool.h"

namespace ceiling::engine {

struct CpuOpsOptions {
  int n_threads = 0;  // <= 0: all hardware threads
  // Round every activation an op writes (and the KV cache) to bf16 after computing it in fp32,
  // where CudaOps stores bf16: the rounding noise of a bf16-activation backend on this model, the
  // floor the GPU parity tests judge CudaOps against. The logits stay fp32, as CudaOps writes them.
  bool bf16_activations = false;
  // --kv-cache-dtype fp8: every K and V value written to the cache is rounded through E4M3 with
  // the layer's k_scale / v_scale (x -> e4m3(x · (1 / scale)) · scale, model/quantize.h); the cache
  // stays f32 storage.
  bool fp8_kv_cache = false;
};

class CpuOps final : public Ops {
 public:
  explicit CpuOps(CpuOpsOptions options = {});
  ~CpuOps() override;

  std::string name() const override { return "cpu"; }
  Device device() const override { return Device::kCpu; }
  DType act_dtype() const override { return DType::kF32; }
  DType kv_dtype() const override { return DType::kF32; }

  TensorView alloc(DType dtype, std::initializer_list<int64_t> shape) override;
  const ModelWeights& upload(const ModelConfig& config, const ModelWeights& host) override;
  const ModelWeights& weights() const override;
  const ModelConfig& config() const override;
  KvCache alloc_kv_cache(int num_blocks, int block_size) override;
  void to_host(const TensorView& src, float* dst) override;
  void from_host(const float* src, const TensorView& dst) override;

  void prepare(const StepBatch& step, const KvCache& kv) override;
  void embedding(const TensorView& out) override;
  void rms_norm(const TensorView& x, const TensorView* residual, const TensorView& weight,
                const TensorView& out) override;
  void qkv_proj(int layer, const TensorView& x, const TensorView& q, const TensorView& k,
                const TensorView& v) override;
  void qk_norm(int layer, const TensorView& q, const TensorView& k) override;
  void rope_kv_write(int layer, const TensorView& q, const TensorView& k, const TensorView& v,
                     KvCache& kv) override;
  void attention(int layer, const TensorView& q, const KvCache& kv, const TensorView& out) override;
  void o_proj(int layer, const TensorView& attn, const TensorView& out) override;
  void gate_up_proj(int layer, const TensorView& x, const TensorView& gate_up) override;
  void silu_mul(const TensorView& gate_up, const TensorView& out) override;
  void down_proj(int layer, const TensorView& act, const TensorView& out) override;
  void norm_qkv_rope(int layer, const TensorView& residual, const TensorView& h,
                     const TensorView& q, const TensorView& k, const TensorView& v,
                     KvCache& kv) override;
  void o_proj_residual(int layer, const TensorView& attn, const TensorView& scratch,
                       const TensorView& residual, ResidualUpdate update) override;
  void mlp_residual(int layer, const TensorView& residual, const TensorView& h,
                    const TensorView& gate_up, const TensorView& act, const TensorView& scratch,
                    ResidualUpdate update) override;
  void gather_rows(const TensorView& x, const TensorView& out) override;
  void lm_head(const TensorView& x, const TensorView& logits) override;
  void sample(const TensorView& logits, std::span<const SampleRequest> reqs, int32_t* ids) override;

  // out[t, n] (row stride ldo) = x [T, K] · w[n, :]ᵀ (+ bias[n]) for a weight w [N, K]: the
  // thread-parallel equivalent of cpu::linear, exposed for tests.
  void linear(const float* x, const TensorView& w, const TensorView* bias, int T, float* out,
              int64_t ldo);
  // The same for a quantized weight W [N, K] (rows dequantized to f32, model/quantize.h).
  void linear(const float* x, const QuantLinear& w, const TensorView* bias, int T, float* out,
              int64_t ldo);

 private:
  const LayerWeights& layer(int l) const;
  // linear() with projection p of layer l, dense or quantized.
  void project(int l, Proj p, const float* x, const TensorView* bias, int T, float* out,
               int64_t ldo);
  // out[t, n] = x[t, :] · row(n) (+ bias[n]) for N rows of K, row(n, dst) writing row n as f32.
  template <typename RowFn>
  void linear_rows(const float* x, int64_t N, int64_t K, RowFn row_of, const TensorView* bias,
                   int T, float* out, int64_t ldo);
  void add_into(const TensorView& x, const TensorView& residual);  // residual += x
  // With bf16_activations: the first `rows` rows of t rounded to bf16 in place (all rows: -1).
  void round_bf16(const TensorView& t, int64_t rows = -1) const;

  ThreadPool pool_;
  bool bf16_activations_;
  bool fp8_kv_cache_;
  std::vector<std::unique_ptr<float[]>> f32_buffers_;
  std::vector<std::unique_ptr<unsigned char[]>> raw_buffers_;
  bool uploaded_ = false;
  ModelConfig config_;
  ModelWeights weights_;
  std::vector<float> inv_freq_;  // [D/2]
  StepBatch step_;               // the prepared step (host copies the kernels read)
};

}  // namespace ceiling::engine
