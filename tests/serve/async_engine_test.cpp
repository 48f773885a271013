// AsyncEngine: requests submitted from several threads get the same tokens as the synchronous
// engine; aborts from other threads finish requests with reason abort; bad requests fail alone.
#include "serve/async_engine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

#include "engine/cpu_ops.h"
#include "model/weights.h"

namespace ceiling::serve {
namespace {

const std::filesystem::path kStories =
    std::filesystem::path(CEILING_SOURCE_DIR) / "models/stories260K";

TEST(AsyncEngine, ThreadsSubmitAbortAndGetTheSynchronousResult) {
  Model model = load_model(kStories);
  engine::CpuOps ops{engine::CpuOpsOptions{2}};
  ops.upload(model.config, model.weights);
  EngineConfig c;
  c.max_model_len = 96;
  c.max_num_seqs = 8;
  c.max_num_batched_tokens = 64;
  c.num_kv_blocks = 200;
  c.block_size = 8;
  RequestParams p;
  p.sampling.temperature = 0;
  p.max_tokens = 20;
  p.ignore_eos = true;
  auto prompt = [](int i) { return std::vector<int32_t>{1, 10 + i, 20 + 2 * i, 30}; };

  std::vector<std::vector<int32_t>> want;
  {
    Engine sync(ops, c);
    for (int i = 0; i < 12; ++i) {
      sync.add_request(prompt(i), p);
      std::vector<int32_t> out;
      while (sync.has_unfinished())
        for (const auto& o : sync.step())
          out.insert(out.end(), o.new_tokens.begin(), o.new_tokens.end());
      want.push_back(out);
    }
  }
  Engine engine(ops, c);
  AsyncEngine async(engine);
  std::vector<std::vector<int32_t>> got(12);
  std::vector<std::promise<RequestOutput>> done(13);
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&, t] {
      for (int i = t; i < 12; i += 3)
        async.submit(prompt(i), p, [&, i](const RequestOutput& o) {
          got[static_cast<size_t>(i)].insert(got[static_cast<size_t>(i)].end(),
                                             o.new_tokens.begin(), o.new_tokens.end());
          if (o.finished) done[static_cast<size_t>(i)].set_value(o);
        });
    });
  for (auto& t : threads) t.join();
  // A bad request fails alone, through its callback.
  async.submit({}, p, [&](const RequestOutput& o) { done[12].set_value(o); });
  for (int i = 0; i < 12; ++i) {
    const RequestOutput o = done[static_cast<size_t>(i)].get_future().get();
    EXPECT_EQ(o.finish, FinishReason::kLength);
    EXPECT_EQ(got[static_cast<size_t>(i)], want[static_cast<size_t>(i)]) << i;
  }
  const RequestOutput bad = done[12].get_future().get();
  EXPECT_EQ(bad.finish, FinishReason::kAbort);
  EXPECT_NE(bad.error.find("empty"), std::string::npos);

  // An abort from another thread ends a long request early.
  RequestParams longp = p;
  longp.max_tokens = 80;
  std::promise<RequestOutput> aborted;
  std::atomic<int> tokens{0};
  const uint64_t key = async.submit({1, 2, 3}, longp, [&](const RequestOutput& o) {
    tokens += static_cast<int>(o.new_tokens.size());
    if (o.finished) aborted.set_value(o);
  });
  async.abort(key);  // handled at the engine thread's next turn, usually within a step or two
  const RequestOutput a = aborted.get_future().get();
  EXPECT_EQ(a.finish, FinishReason::kAbort);
  // How many steps run before the abort lands depends on thread scheduling (a loaded CI machine
  // can deschedule this thread for several steps); it must end the request before max_tokens.
  EXPECT_LT(tokens.load(), longp.max_tokens);
  async.shutdown();
  EXPECT_EQ(async.num_in_flight(), 0);
  EXPECT_TRUE(async.healthy());
  EXPECT_EQ(engine.kv().num_free(), engine.kv().num_blocks());
}

}  // namespace
}  // namespace ceiling::serve
