// GEMV, cuBLASLt and the dispatcher vs cpu::linear: M 1..16 (and beyond for cuBLASLt), N and K
// off the tiles (primes, K % 8 != 0 takes the scalar GEMV), bias, f32 output.
#include "bench/cases/linear.h"

#include "gpu_test_util.h"
#include "kernels/cuda/gemv.h"
#include "kernels/cuda/linear.h"

namespace ceiling {
namespace {

using namespace gpu_test;
using bench::LinearImpl;

TEST(GpuGemv, MatchesReference) {
  CEILING_REQUIRE_GPU();
  Stream s;
  for (int M : {1, 2, 3, 5, 8, 11, 16})
    for (int N : {1, 13, 257})
      for (int K : {8, 7, 24, 1003, 4096})
        for (bool bias : {false, true})
          expect_case_passes(*bench::make_linear_case(LinearImpl::kGemv, M, N, K, bias,
                                                      (M + N) % 2 ? DType::kF32 : DType::kBF16),
                             s);
}

TEST(GpuGemv, RejectsLargeM) {
  CEILING_REQUIRE_GPU();
  const Status st = cuda::gemv(nullptr, nullptr, nullptr, nullptr, DType::kBF16, 17, 8, 8, nullptr);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("M 17"), std::string::npos) << st.message();
}

TEST(GpuCublasLt, MatchesReference) {
  CEILING_REQUIRE_GPU();
  Stream s;
  for (int M : {1, 17, 64, 300})
    for (int N : {8, 264})
      for (int K : {16, 1000}) {
        expect_case_passes(*bench::make_linear_case(LinearImpl::kCublasLt, M, N, K, false), s);
        expect_case_passes(*bench::make_linear_case(LinearImpl::kCublasLt, M, N, K, true), s);
        expect_case_passes(
            *bench::make_linear_case(LinearImpl::kCublasLt, M, N, K, false, DType::kF32), s);
      }
}

TEST(GpuLinear, DispatchMatchesReferenceOnBothSides) {
  CEILING_REQUIRE_GPU();
  Stream s;
  for (int M : {1, 4, 9, 16, 17, 100})
    expect_case_passes(*bench::make_linear_case(LinearImpl::kDispatch, M, 520, 512, M % 2 == 0), s);
}

TEST(GpuLinear, CrossoverTableIsUsable) {
  const int m = cuda::linear_crossover_m(4096, 4096);
  EXPECT_GE(m, 1);
  EXPECT_LE(m, cuda::kGemvMaxM + 1);
  EXPECT_EQ(cuda::linear_path(cuda::kGemvMaxM + 1, 4096, 4096), cuda::LinearPath::kCublasLt);
  EXPECT_FALSE(cuda::linear_crossover_source().empty());
}

}  // namespace
}  // namespace ceiling
