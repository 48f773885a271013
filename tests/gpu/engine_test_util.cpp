#include "engine_test_util.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>

#include "core/status.h"
#include "test_models.h"

namespace ceiling::engine::gpu_test {

bool has_gpu() {
  int n = 0;
  const bool ok = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
  cudaGetLastError();
  return ok;
}

ModelConfig mid_llama(int head_dim, int intermediate_size, const std::string& name) {
  ModelConfig c = testing::small_config(Arch::kLlama);
  c.name = name;
  c.hidden_size = 256;
  c.intermediate_size = intermediate_size;
  c.vocab_size = 1000;
  c.head_dim = head_dim;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  return c;
}

uint64_t fresh_seed() {
  const char* fixed = std::getenv("CEILING_TEST_SEED");
  const uint64_t s = fixed ? std::strtoull(fixed, nullptr, 10) : std::random_device{}();
  std::printf("  seed %llu%s\n", static_cast<unsigned long long>(s),
              fixed ? " (CEILING_TEST_SEED)" : "");
  return s;
}

void NoiseCheck::expect(const std::vector<float>& got, const std::vector<float>& ref,
                        const std::vector<float>& emulated, const std::string& what) {
  const double e = rel_err(got, ref), noise = rel_err(emulated, ref);
  const double limit = kNoiseRatio * noise + kNoiseFloor;
  EXPECT_LT(noise, max_noise_) << what << ": the model amplifies bf16 rounding too much";
  EXPECT_LE(e, limit) << what << ": rel err " << e << " against bf16 rounding noise " << noise;
  worst_err_ = std::max(worst_err_, e);
  worst_noise_ = std::max(worst_noise_, noise);
  if (noise >= kNoiseFloor) worst_ratio_ = std::max(worst_ratio_, e / noise);
}

std::string NoiseCheck::summary() const {
  return fmt::format(
      "worst rel err {:.3g} (bf16 rounding noise {:.3g}; worst ratio {:.2f}, limit {})", worst_err_,
      worst_noise_, worst_ratio_, kNoiseRatio);
}

double rel_err(const std::vector<float>& got, const std::vector<float>& ref) {
  if (got.size() != ref.size()) return INFINITY;
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num += (double{got[i]} - ref[i]) * (double{got[i]} - ref[i]);
    den += double{ref[i]} * ref[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

double rms(const float* x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += double{x[i]} * x[i];
  return std::sqrt(s / std::max<int64_t>(n, 1));
}

int32_t argmax(const float* x, int64_t n) {
  return static_cast<int32_t>(std::max_element(x, x + n) - x);
}

StepDriver::StepDriver(Ops& ops, int max_tokens, int max_rows, int num_blocks, int block_size)
    : ops_(ops),
      fwd_(ops, ForwardLimits{max_tokens, max_rows}),
      kv_(ops.alloc_kv_cache(num_blocks, block_size)),
      block_size_(block_size) {}

void StepDriver::reserve(int s, int tokens) {
  auto& t = tables_[static_cast<size_t>(s)];
  while (static_cast<int>(t.size()) * block_size_ < tokens) {
    CEILING_ENSURE(next_block_ < kv_.num_blocks, "StepDriver: out of KV blocks");
    t.push_back(next_block_++);
  }
}

std::vector<std::vector<float>> StepDriver::prefill(
    const std::vector<std::vector<int32_t>>& prompts, int chunk) {
  const int S = static_cast<int>(prompts.size());
  const int64_t V = ops_.config().vocab_size;
  tables_.assign(static_cast<size_t>(S), {});
  next_block_ = 0;
  lens_.assign(S, 0);
  std::vector<std::vector<float>> last(S);
  for (bool more = true; more;) {
    more = false;
    StepBatch step;
    step.max_blocks = kv_.num_blocks;
    std::vector<int> wants;  // sequences whose prompt ends in this step, in logits-row order
    for (int s = 0; s < S; ++s) {
      const int n = static_cast<int>(prompts[s].size()), at = lens_[s];
      if (at >= n) continue;
      const int end = std::min(n, at + chunk);
      reserve(s, end);
      const bool done = end == n;
      append_sequence(step, std::vector<int32_t>(prompts[s].begin() + at, prompts[s].begin() + end),
                      at, tables_[static_cast<size_t>(s)], block_size_, done);
      if (done) wants.push_back(s);
      lens_[s] = end;
      more = more || !done;
    }
    if (step.token_ids.empty()) break;
    const TensorView logits = fwd_.run(step, kv_);
    std::vector<float> host(static_cast<size_t>(logits.numel()));
    if (!host.empty()) ops_.to_host(logits, host.data());
    for (size_t r = 0; r < wants.size(); ++r)
      last[wants[r]].assign(host.begin() + r * V, host.begin() + (r + 1) * V);
  }
  return last;
}

std::vector<float> StepDriver::decode(const std::vector<int32_t>& tokens) {
  StepBatch step;
  step.max_blocks = kv_.num_blocks;
  for (size_t s = 0; s < tokens.size(); ++s) {
    reserve(static_cast<int>(s), lens_[s] + 1);
    append_sequence(step, {tokens[s]}, lens_[s], tables_[s], block_size_, true);
    ++lens_[s];
  }
  const TensorView logits = fwd_.run(step, kv_);
  std::vector<float> host(static_cast<size_t>(logits.numel()));
  ops_.to_host(logits, host.data());
  return host;
}

std::unique_ptr<Bf16Weights> to_bf16(const ModelWeights& w) {
  auto out = std::make_unique<Bf16Weights>();
  std::map<const void*, void*> done;  // keeps tied tensors tied
  auto conv = [&](const TensorView& t) {
    if (!t.data) return t;
    TensorView r = t;
    r.dtype = DType::kBF16;
    if (auto it = done.find(t.data); it != done.end()) {
      r.data = it->second;
      return r;
    }
    out->storage.emplace_back(static_cast<size_t>(t.numel()));
    auto& s = out->storage.back();
    for (size_t i = 0; i < s.size(); ++i) s[i] = f32_to_bf16(load_as_f32(t.data, t.dtype, i));
    r.data = s.data();
    done[t.data] = r.data;
    return r;
  };
  out->views.embed = conv(w.embed);
  out->views.final_norm = conv(w.final_norm);
  out->views.lm_head = conv(w.lm_head);
  for (const LayerWeights& l : w.layers) {
    LayerWeights o = l;
    for (TensorView* t : {&o.input_norm, &o.q_proj, &o.k_proj, &o.v_proj, &o.q_bias, &o.k_bias,
                          &o.v_bias, &o.q_norm, &o.k_norm, &o.o_proj, &o.post_attn_norm,
                          &o.gate_proj, &o.up_proj, &o.down_proj})
      *t = conv(*t);
    out->views.layers.push_back(o);
  }
  return out;
}

std::filesystem::path fresh_temp_dir(const std::string& tag) {
  const auto dir = std::filesystem::temp_directory_path() /
                   fmt::format("ceiling-{}-{}-{}", tag, ::getpid(), std::rand());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::string check_greedy(const std::vector<int32_t>& got, const std::vector<int32_t>& ref,
                         const std::vector<std::vector<float>>& ref_logits, bool* ok,
                         const std::vector<std::vector<float>>* emulated) {
  const size_t n = std::min(got.size(), ref.size());
  for (size_t i = 0; i < n; ++i) {
    if (got[i] == ref[i]) continue;
    if (i >= ref_logits.size()) {
      *ok = false;
      return fmt::format("differ at token {} with no reference logits", i);
    }
    const std::vector<float>& l = ref_logits[i];
    const double gap = double{l[ref[i]]} - l[got[i]];
    const double r = rms(l.data(), static_cast<int64_t>(l.size()));
    double limit = kNearTieOfRms * r, noise = 0;
    if (emulated && i < emulated->size()) {
      noise = rel_err((*emulated)[i], l);
      limit = std::max(limit, kNearTieSigmas * std::sqrt(2.0) * kNoiseRatio * noise * r);
    }
    *ok = gap <= limit;
    return fmt::format(
        "{} of {} tokens agree; at token {} the reference picked {} over {} by "
        "{:.4g} (near-tie limit {:.4g}{}): {}",
        i, n, i, ref[i], got[i], gap, limit,
        emulated ? fmt::format(" at bf16 noise {:.3g}", noise) : "",
        *ok ? "near tie" : "NOT a near tie");
  }
  *ok = got.size() == ref.size();
  return fmt::format("all {} tokens agree{}", n, *ok ? "" : " (but the lengths differ)");
}

}  // namespace ceiling::engine::gpu_test
