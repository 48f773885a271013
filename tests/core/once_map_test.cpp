// core/once_map.h: make() runs once per key, also under racing threads; a failed make() is not
// stored.
#include "core/once_map.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace ceiling {
namespace {

TEST(OnceMap, MakesEachKeyOnce) {
  OnceMap<int, int> m;
  int calls = 0;
  const auto make = [&](int v) {
    return [&calls, v]() -> std::optional<int> {
      ++calls;
      return v;
    };
  };
  EXPECT_EQ(m.get(3, make(30)), 30);
  EXPECT_EQ(m.get(3, make(99)), 30);  // looked up: the second make() never runs
  EXPECT_EQ(m.get(4, make(40)), 40);
  EXPECT_EQ(calls, 2);
  const auto e = m.entries();
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0], std::make_pair(3, 30));
  EXPECT_EQ(e[1], std::make_pair(4, 40));
}

TEST(OnceMap, FailedMakeIsRetried) {
  OnceMap<std::pair<const void*, int>, int> m;
  const int tag = 0;
  const std::pair<const void*, int> key{&tag, 1};
  EXPECT_FALSE(m.get(key, [] { return std::optional<int>(); }).has_value());
  EXPECT_TRUE(m.entries().empty());
  EXPECT_EQ(m.get(key, [] { return std::optional<int>(7); }), 7);
  EXPECT_EQ(m.get(key, [] { return std::optional<int>(8); }), 7);
}

TEST(OnceMap, RacingThreadsMakeOnce) {
  OnceMap<int, int> m;
  std::atomic<int> calls{0}, wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) {
        const int key = i % 5;
        const auto v = m.get(key, [&]() -> std::optional<int> {
          calls.fetch_add(1);
          return key * 10;
        });
        if (v != key * 10) wrong.fetch_add(1);
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(calls.load(), 5);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(m.entries().size(), 5u);
}

}  // namespace
}  // namespace ceiling
