#include "bench/cases/sampling.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>

#include "bench/cases/case_util.h"
#include "kernels/cpu/ref.h"
#include "kernels/cuda/sampling.h"

namespace ceiling::bench {
namespace {

class ArgmaxCase : public CaseBase {
 public:
  ArgmaxCase(int S, int V) : S_(S), V_(V) {}
  std::string op() const override { return "argmax"; }
  std::string shape() const override { return kv("S", S_) + " " + kv("V", V_); }
  nlohmann::json params() const override { return {{"S", S_}, {"V", V_}}; }
  std::string baseline_name() const override { return "torch.argmax"; }
  Cost cost() const override {
    Cost c;
    c.bytes = 4.0 * S_ * double(V_) + 4.0 * S_;
    c.write_bytes = 4.0 * S_;
    c.flops = double(S_) * V_;
    c.round_trips = 2;  // loads, then the reduction across the cluster before the store
    return c;
  }
  size_t set_bytes() const override { return 4 * size_t(S_) * V_; }
  void setup(int copies, uint64_t seed, cudaStream_t s) override {
    remember(copies, seed);
    logits_ = Pool<float>(size_t(S_) * V_, copies);
    out_ = Pool<int32_t>(S_, copies);
    fill_uniform(logits_.base(), logits_.total(), seed, -10.0f, 10.0f, s);
  }
  Status run(int set, cudaStream_t s) override {
    return cuda::argmax(logits_.at(set), S_, V_, out_.at(set), s);
  }
  CheckResult check(cudaStream_t s) override {
    // Coarse values (multiples of 1/4) so that rows hold ties: the lowest index must win.
    std::mt19937 rng(static_cast<uint32_t>(check_seed()));
    std::vector<float> l(size_t(S_) * V_);
    for (auto& v : l) v = std::floor(std::uniform_real_distribution<float>(-40, 40)(rng)) * 0.25f;
    to_device(logits_.at(0), l, s);
    poison(out_.at(0), 4 * size_t(S_), s);
    run(0, s).throw_if_error();
    const auto got = to_host(out_.at(0), S_, s);
    std::vector<int32_t> ref(S_);
    cpu::argmax(l.data(), S_, V_, ref.data());
    CheckResult r;
    int bad = 0;
    for (int i = 0; i < S_; ++i) bad += got[i] != ref[i];
    r.max_rel_err = double(bad) / S_;
    r.tolerance = 0;
    r.detail = fmt::format("{} of {} rows differ", bad, S_);
    return r;
  }

 private:
  int S_, V_;
  Pool<float> logits_;
  Pool<int32_t> out_;
};

class SampleCase : public CaseBase {
 public:
  SampleCase(int S, int V, const cpu::SamplingParams& p, bool mixed)
      : S_(S), V_(V), p_(p), mixed_(mixed) {}
  std::string op() const override { return mixed_ ? "sample_mixed" : "sample"; }
  std::string shape() const override {
    if (mixed_) return kv("S", S_) + " " + kv("V", V_);
    return fmt::format("S={} V={} T={} k={} p={} minp={} rep={}", S_, V_, p_.temperature, p_.top_k,
                       p_.top_p, p_.min_p, p_.repetition_penalty);
  }
  nlohmann::json params() const override {
    return {{"S", S_},
            {"V", V_},
            {"temperature", p_.temperature},
            {"top_k", p_.top_k},
            {"top_p", p_.top_p},
            {"min_p", p_.min_p},
            {"repetition_penalty", p_.repetition_penalty},
            {"presence_penalty", p_.presence_penalty},
            {"frequency_penalty", p_.frequency_penalty}};
  }
  std::string baseline_name() const override {
    return "torch composite (penalties, softmax, topk, sort/cumsum, multinomial)";
  }
  Cost cost() const override {
    Cost c;
    // Logits, and the token counts when a penalty is on (mixed rows: assume every row has one).
    const bool pen = mixed_ || p_.repetition_penalty != 1.0f || p_.presence_penalty != 0.0f ||
                     p_.frequency_penalty != 0.0f;
    c.bytes = (pen ? 8.0 : 4.0) * S_ * double(V_) + 16.0 * S_;
    c.write_bytes = 4.0 * S_;  // the drawn tokens
    c.flops = 10.0 * S_ * double(V_);
    return c;
  }
  size_t set_bytes() const override { return 8 * size_t(S_) * V_; }  // logits, token counts
  void setup(int copies, uint64_t seed, cudaStream_t s) override {
    remember(copies, seed);
    logits_ = Pool<float>(size_t(S_) * V_, copies);
    counts_ = Pool<int32_t>(size_t(S_) * V_, copies);
    params_ = Pool<cuda::GpuSamplingParams>(S_, copies);
    u_ = Pool<float>(S_, copies);
    out_ = Pool<int32_t>(S_, copies);
    fill_uniform(logits_.base(), logits_.total(), seed, -8.0f, 8.0f, s);
    fill_uniform(u_.base(), u_.total(), seed + 1, 0.0f, 1.0f, s);
    CEILING_ENSURE(cudaMemsetAsync(counts_.base(), 0, counts_.total() * 4, s) == cudaSuccess,
                   "memset");
    std::mt19937_64 rng(seed);
    std::vector<cuda::GpuSamplingParams> all(params_.total());
    for (auto& g : all) g = to_gpu_params(p_);
    to_device(params_.base(), all, s);
    for (int c = 0; c < copies; ++c) {
      const Histories h = draw_histories(rng, p_);
      upload_counts(h, c, s);
    }
  }
  Status run(int set, cudaStream_t s) override {
    cuda::SampleArgs a;
    a.logits = logits_.at(set);
    a.params = params_.at(set);
    a.counts = counts_.at(set);
    a.u = u_.at(set);
    a.out = out_.at(set);
    a.S = S_;
    a.V = V_;
    return cuda::sample(a, s);
  }
  CheckResult check(cudaStream_t s) override;

 private:
  struct Histories {
    std::vector<std::vector<int32_t>> prompt, generated;
  };
  Histories draw_histories(std::mt19937_64& rng, const cpu::SamplingParams&) const {
    Histories h;
    std::uniform_int_distribution<int> id(0, V_ - 1), small(0, 15);
    for (int i = 0; i < S_; ++i) {
      std::vector<int32_t> p(mixed_ ? small(rng) * 3 : 32), g(mixed_ ? small(rng) * 2 : 16);
      for (auto& v : p) v = id(rng);
      // Generated tokens repeat (frequency penalties count them).
      for (size_t j = 0; j < g.size(); ++j) g[j] = j > 0 && small(rng) < 6 ? g[j - 1] : id(rng);
      h.prompt.push_back(std::move(p));
      h.generated.push_back(std::move(g));
    }
    return h;
  }
  void upload_counts(const Histories& h, int set, cudaStream_t s) {
    std::vector<int32_t> c(size_t(S_) * V_, 0);
    for (int i = 0; i < S_; ++i) {
      for (int32_t t : h.prompt[i]) c[size_t(i) * V_ + t] |= cuda::kPromptBit;
      for (int32_t t : h.generated[i]) c[size_t(i) * V_ + t] += 1;
    }
    to_device(counts_.at(set), c, s);
  }
  int S_, V_;
  cpu::SamplingParams p_;
  bool mixed_;
  Pool<float> logits_, u_;
  Pool<int32_t> counts_, out_;
  Pool<cuda::GpuSamplingParams> params_;
};

CheckResult SampleCase::check(cudaStream_t s) {
  const uint64_t sd = check_seed();
  std::mt19937_64 rng(sd);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::vector<float> logits(size_t(S_) * V_);
  std::vector<cpu::SamplingParams> ps(S_, p_);
  std::vector<float> us(S_);
  for (int i = 0; i < S_; ++i) {
    float scale = 8.0f;
    bool quantize = false;
    if (mixed_) {
      const float temps[] = {0.0f, 0.5f, 0.8f, 1.0f, 1.5f};
      const int ks[] = {0, 0, 1, 7, 50, 1000};
      const float tps[] = {1.0f, 1.0f, 0.95f, 0.7f, 0.3f};
      const float mps[] = {0.0f, 0.0f, 0.02f, 0.3f};
      cpu::SamplingParams& p = ps[i];
      p.temperature = temps[rng() % 5];
      p.top_k = ks[rng() % 6];
      p.top_p = tps[rng() % 5];
      p.min_p = mps[rng() % 4];
      const bool pen = rng() % 2;
      p.repetition_penalty = pen ? 1.3f : 1.0f;
      p.presence_penalty = pen ? 0.4f : 0.0f;
      p.frequency_penalty = pen ? 0.2f : 0.0f;
      const float scales[] = {0.5f, 3.0f, 8.0f, 20.0f};
      scale = scales[rng() % 4];
      quantize = rng() % 3 == 0;
    }
    for (int j = 0; j < V_; ++j) {
      float v = (2 * unit(rng) - 1) * scale;
      if (quantize) v = std::round(v * 2) / 2;  // many exact ties
      logits[size_t(i) * V_ + j] = v;
    }
    if (mixed_ && i % 17 == 5) logits[size_t(i) * V_ + rng() % V_] = NAN;  // an invalid row
    us[i] = cpu::sampling_uniform(sd + i, i);
  }
  const Histories h = draw_histories(rng, p_);
  upload_counts(h, 0, s);
  to_device(logits_.at(0), logits, s);
  to_device(u_.at(0), us, s);
  std::vector<cuda::GpuSamplingParams> gp(S_);
  for (int i = 0; i < S_; ++i) gp[i] = to_gpu_params(ps[i]);
  to_device(params_.at(0), gp, s);
  poison(out_.at(0), 4 * size_t(S_), s);
  run(0, s).throw_if_error();
  const auto got = to_host(out_.at(0), S_, s);

  int exact = 0, boundary = 0, wrong = 0;
  std::string first_wrong;
  for (int i = 0; i < S_; ++i) {
    const float* row = logits.data() + size_t(i) * V_;
    int32_t ref;
    try {
      ref = cpu::sample_token(row, V_, ps[i], h.prompt[i], h.generated[i], us[i]);
    } catch (const Error&) {
      ref = -1;  // the CPU rejects the row; the GPU must answer -1
    }
    if (got[i] == ref) {
      ++exact;
      continue;
    }
    bool explained = false;
    if (ref >= 0) {
      // The CPU sums up to V weights sequentially in fp32 (relative error up to ~V·2^-24), the
      // GPU as a tree: picks may differ where u·total or the top-p target lies that close to a
      // boundary.
      const float kDelta = 2e-5f + 6e-8f * static_cast<float>(V_);
      // The pick is non-decreasing in u (ascending-id walk): every token picked for some u' in
      // [u - kDelta, u + kDelta] lies between the picks at the two ends.
      const auto pick_at = [&](float du) {
        return cpu::sample_token(row, V_, ps[i], h.prompt[i], h.generated[i],
                                 std::clamp(us[i] + du, 0.0f, 0.99999994f));
      };
      explained = pick_at(-kDelta) <= got[i] && got[i] <= pick_at(kDelta);
      for (float dp : {-kDelta, kDelta}) {
        cpu::SamplingParams p2 = ps[i];
        p2.top_p = std::clamp(p2.top_p + dp, 1e-6f, 1.0f);
        explained = explained ||
                    cpu::sample_token(row, V_, p2, h.prompt[i], h.generated[i], us[i]) == got[i];
      }
    }
    if (explained) {
      ++boundary;
    } else {
      ++wrong;
      if (first_wrong.empty())
        first_wrong = fmt::format("row {}: gpu {} cpu {} (T {} k {} p {} minp {})", i, got[i], ref,
                                  ps[i].temperature, ps[i].top_k, ps[i].top_p, ps[i].min_p);
    }
  }
  CheckResult r;
  r.tolerance = 0;
  r.max_rel_err = double(wrong) / S_;
  r.detail = fmt::format("{} same, {} at a rounding boundary, {} wrong{}{}", exact, boundary, wrong,
                         first_wrong.empty() ? "" : "; first: ", first_wrong);
  // A boundary pick is explained only by moving u or top_p by kDelta: a wrong pick of a token
  // wider than that (every token of a peaked row) is never explained and fails the check.
  return r;
}

}  // namespace

cuda::GpuSamplingParams to_gpu_params(const cpu::SamplingParams& p) {
  cuda::GpuSamplingParams g;
  g.temperature = p.temperature;
  g.top_k = p.top_k;
  g.top_p = p.top_p;
  g.min_p = p.min_p;
  g.repetition_penalty = p.repetition_penalty;
  g.presence_penalty = p.presence_penalty;
  g.frequency_penalty = p.frequency_penalty;
  return g;
}

std::unique_ptr<KernelCase> make_argmax_case(int S, int V) {
  return std::make_unique<ArgmaxCase>(S, V);
}
std::unique_ptr<KernelCase> make_sample_case(int S, int V, const cpu::SamplingParams& params,
                                             bool mixed) {
  return std::make_unique<SampleCase>(S, V, params, mixed);
}

// Llama-3 vocabulary (128256), decode at batch 1 and 64.
void register_sampling_cases(CaseList& out) {
  cpu::SamplingParams p;
  p.temperature = 0.7f;
  p.top_k = 50;
  p.top_p = 0.9f;
  p.repetition_penalty = 1.1f;
  for (int S : {1, 64}) {
    out.push_back(make_argmax_case(S, 128256));
    out.push_back(make_sample_case(S, 128256, p));
  }
  // The common request: temperature, top-k, top-p, no penalty (the token counts are not read).
  cpu::SamplingParams plain = p;
  plain.repetition_penalty = 1.0f;
  out.push_back(make_sample_case(1, 128256, plain));
  out.push_back(make_sample_case(256, 32000, p, true));
}

}  // namespace ceiling::bench
