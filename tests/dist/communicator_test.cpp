// CpuCommunicator: every collective against a hand computation at awkward sizes (1, primes,
// non-multiples of 8), outputs poisoned before the call; identical bits on every rank; and the
// failure paths: mismatched calls, a peer that never comes (timeout), abort. None may hang.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <thread>

#include "core/status.h"
#include "dist/cpu_communicator.h"

namespace ceiling::dist {
namespace {

using engine::Communicator;
using Comms = std::vector<std::unique_ptr<Communicator>>;

// Runs fn(rank, comm) on one thread per rank; returns each rank's error message ("" if none).
std::vector<std::string> on_threads(Comms& comms,
                                    const std::function<void(int, Communicator&)>& fn) {
  std::vector<std::string> errors(comms.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < comms.size(); ++r)
    threads.emplace_back([&, r] {
      try {
        fn(static_cast<int>(r), *comms[r]);
      } catch (const Error& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

std::vector<float> random_floats(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}

const float kPoison = std::numeric_limits<float>::quiet_NaN();

TEST(CpuCommunicator, AllReduceSumsInRankOrderOnEveryRank) {
  for (int world : {1, 2, 3, 4}) {
    for (size_t n : {size_t{1}, size_t{7}, size_t{17}, size_t{4099}}) {
      SCOPED_TRACE(testing::Message() << "world " << world << " n " << n);
      auto comms = make_cpu_communicators(world);
      std::vector<std::vector<float>> in(static_cast<size_t>(world)), out(in.size());
      std::vector<float> want(n, 0.0f);
      for (int r = 0; r < world; ++r) {
        in[static_cast<size_t>(r)] = random_floats(n, 100 + static_cast<uint64_t>(r));
        for (size_t i = 0; i < n; ++i) want[i] += in[static_cast<size_t>(r)][i];
      }
      const auto errors = on_threads(comms, [&](int r, Communicator& c) {
        auto& x = out[static_cast<size_t>(r)];
        x = in[static_cast<size_t>(r)];
        c.all_reduce_sum(TensorView(x.data(), DType::kF32, {static_cast<int64_t>(n)}), nullptr);
      });
      for (int r = 0; r < world; ++r) {
        EXPECT_EQ(errors[static_cast<size_t>(r)], "");
        EXPECT_EQ(out[static_cast<size_t>(r)], want) << "rank " << r;  // bit for bit
      }
    }
  }
}

TEST(CpuCommunicator, AllReduceBf16RoundsOnce) {
  auto comms = make_cpu_communicators(3);
  const size_t n = 13;
  std::vector<std::vector<uint16_t>> x(3, std::vector<uint16_t>(n));
  std::vector<float> want(n, 0.0f);
  for (size_t r = 0; r < 3; ++r) {
    const auto f = random_floats(n, 7 + r);
    for (size_t i = 0; i < n; ++i) {
      x[r][i] = f32_to_bf16(f[i]);
      want[i] += bf16_to_f32(x[r][i]);
    }
  }
  on_threads(comms, [&](int r, Communicator& c) {
    c.all_reduce_sum(TensorView(x[static_cast<size_t>(r)].data(), DType::kBF16, {int64_t(n)}),
                     nullptr);
  });
  for (size_t r = 0; r < 3; ++r)
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(x[r][i], f32_to_bf16(want[i]));
}

TEST(CpuCommunicator, AllGatherAndBroadcast) {
  const int world = 3;
  const size_t n = 5;
  auto comms = make_cpu_communicators(world);
  std::vector<std::vector<float>> in(world),
      gathered(world, std::vector<float>(n * world, kPoison));
  std::vector<std::vector<float>> bc(world);
  for (int r = 0; r < world; ++r) {
    in[static_cast<size_t>(r)] = random_floats(n, 50 + static_cast<uint64_t>(r));
    bc[static_cast<size_t>(r)] = std::vector<float>(n, kPoison);
  }
  bc[2] = in[2];
  const auto errors = on_threads(comms, [&](int r, Communicator& c) {
    const size_t i = static_cast<size_t>(r);
    c.all_gather(TensorView(in[i].data(), DType::kF32, {int64_t(n)}),
                 TensorView(gathered[i].data(), DType::kF32, {int64_t(n * world)}), nullptr);
    c.broadcast(TensorView(bc[i].data(), DType::kF32, {int64_t(n)}), 2, nullptr);
    c.barrier();
  });
  for (int r = 0; r < world; ++r) {
    const size_t i = static_cast<size_t>(r);
    EXPECT_EQ(errors[i], "");
    for (int q = 0; q < world; ++q)
      for (size_t j = 0; j < n; ++j)
        EXPECT_EQ(gathered[i][static_cast<size_t>(q) * n + j], in[static_cast<size_t>(q)][j]);
    EXPECT_EQ(bc[i], in[2]);
  }
}

TEST(CpuCommunicator, MismatchedCallsFailEveryRank) {
  auto comms = make_cpu_communicators(2);
  std::vector<float> a(8, 1.0f), b(8, 1.0f);
  const auto errors = on_threads(comms, [&](int r, Communicator& c) {
    if (r == 0)
      c.all_reduce_sum(TensorView(a.data(), DType::kF32, {8}), nullptr);
    else
      c.all_reduce_sum(TensorView(b.data(), DType::kF32, {4}), nullptr);
  });
  for (const auto& e : errors) EXPECT_NE(e.find("mismatched collectives"), std::string::npos) << e;
}

TEST(CpuCommunicator, DeadPeerTimesOutInsteadOfHanging) {
  auto comms = make_cpu_communicators(3, std::chrono::milliseconds(200));
  std::vector<std::vector<float>> x(3, std::vector<float>(4, 1.0f));
  const auto errors = on_threads(comms, [&](int r, Communicator& c) {
    if (r == 2) return;  // never arrives
    c.all_reduce_sum(TensorView(x[static_cast<size_t>(r)].data(), DType::kF32, {4}), nullptr);
  });
  EXPECT_NE(errors[0].find("waited 200 ms"), std::string::npos) << errors[0];
  EXPECT_NE(errors[1].find("group failed"), std::string::npos) << errors[1];
  // The group stays failed: a later call throws at once.
  EXPECT_THROW(comms[2]->barrier(), Error);
}

TEST(CpuCommunicator, AbortWakesWaitingPeers) {
  auto comms = make_cpu_communicators(2);
  const auto errors = on_threads(comms, [&](int r, Communicator& c) {
    if (r == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      c.abort("out of memory");
      return;
    }
    c.barrier();
  });
  EXPECT_NE(errors[0].find("rank 1: out of memory"), std::string::npos) << errors[0];
}

}  // namespace
}  // namespace ceiling::dist
