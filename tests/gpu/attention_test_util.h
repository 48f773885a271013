// Shared by the attention gpu tests: device presence, and running one case's check().
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "bench/cases/attention.h"

namespace ceiling::bench::attn_test {

inline bool has_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

#define ATTN_REQUIRE_GPU() \
  if (!::ceiling::bench::attn_test::has_gpu()) GTEST_SKIP() << "no CUDA device"

// Builds the case, runs check() (fresh inputs, NaN-poisoned output, CPU reference) and expects
// the worst row within kAttentionTolerance. Prints the errors so the log records them.
inline void expect_matches_reference(const AttentionSpec& spec) {
  auto c = make_attention_case(spec);
  const CheckResult r = c->check(nullptr);
  std::printf("  %-18s %-60s %s\n", c->op().c_str(), c->shape().c_str(), r.detail.c_str());
  EXPECT_TRUE(r.passed()) << c->op() << " " << c->shape() << ": " << r.detail << " (tolerance "
                          << r.tolerance << ")";
}

inline AttentionSpec spec(bool decode, std::vector<int> q_lens, std::vector<int> seq_lens, int hq,
                          int hkv, int d, int bs) {
  AttentionSpec s;
  s.decode = decode;
  s.q_lens = std::move(q_lens);
  s.seq_lens = std::move(seq_lens);
  s.num_q_heads = hq;
  s.num_kv_heads = hkv;
  s.head_dim = d;
  s.block_size = bs;
  return s;
}

}  // namespace ceiling::bench::attn_test
