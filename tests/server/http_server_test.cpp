// HttpServer in process over loopback: a failure inside the engine (a NaN logit makes the sampler
// throw) fails the request in flight with a 500 server_error, turns /health to 503 and refuses
// later requests with 503; before that, /health is 200 and /metrics answers.
#include "server/http_server.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <cmath>
#include <filesystem>
#include <thread>

#include "engine/cpu_ops.h"
#include "engine/test_models.h"

namespace ceiling::server {
namespace {

const std::filesystem::path kStories =
    std::filesystem::path(CEILING_SOURCE_DIR) / "models/stories260K";

TEST(HttpServer, EngineFailureFailsTheRequestWith500AndMarksUnhealthy) {
  const Tokenizer tok = Tokenizer::from_dir(kStories);
  ModelConfig c = engine::testing::small_config();
  c.vocab_size = tok.vocab_size();
  auto m = engine::testing::make_random_model(c, DType::kF32, 1);
  static_cast<float*>(m->weights.lm_head.data)[0] = NAN;  // logit 0 of every row is NaN
  engine::CpuOps ops{engine::CpuOpsOptions{1}};
  ops.upload(m->config, m->weights);
  serve::EngineConfig ec;
  ec.max_model_len = 64;
  ec.max_num_seqs = 4;
  ec.num_kv_blocks = 32;
  serve::Engine engine(ops, ec, &tok);
  serve::AsyncEngine async(engine);

  ServerOptions opt;
  opt.port = 0;
  opt.max_num_seqs = 4;
  opt.http_threads = 8;
  HttpServer server(opt);
  const int port = server.bind();
  std::thread listener([&] { server.listen(); });
  httplib::Client http("127.0.0.1", port);
  for (int i = 0; i < 200 && !http.Get("/health"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(http.Get("/health")->status, 503);  // loading: no engine yet

  ModelInfo info;
  info.name = "tiny";
  info.tokenizer = &tok;
  info.vocab_size = c.vocab_size;
  info.max_model_len = 64;
  server.attach(async, info);
  EXPECT_EQ(http.Get("/health")->status, 200);
  EXPECT_EQ(http.Get("/metrics")->status, 200);

  const auto r =
      http.Post("/v1/completions", R"({"prompt": [1, 2, 3], "max_tokens": 4})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 500);
  const auto err = nlohmann::json::parse(r->body)["error"];
  EXPECT_EQ(err["type"], "server_error");
  EXPECT_NE(err["message"].get<std::string>().find("NaN"), std::string::npos) << r->body;
  EXPECT_EQ(http.Get("/health")->status, 503);
  EXPECT_EQ(http.Post("/v1/completions", R"({"prompt": [1], "max_tokens": 1})", "application/json")
                ->status,
            503);
  server.stop();
  listener.join();
}

}  // namespace
}  // namespace ceiling::server
