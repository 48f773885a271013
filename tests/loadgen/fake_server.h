// A minimal OpenAI-style streaming server on a free loopback port, in the test's process: a
// fixture for the client (not a model of ceiling's server). The prompt text selects the
// behaviour: "fail500", "drop" (connection closed after 2 chunks), "garbage" (a malformed data
// line), "nousage" (no usage chunk); anything else (token ids included) streams max_tokens
// one-token chunks 2 ms apart, then the usage chunk and [DONE].
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

namespace ceiling::loadgen::fake {

using namespace std::chrono_literals;

inline std::string sse(const nlohmann::json& j) {
  return "data: " + j.dump() + "\n\n";
}

class FakeServer {
 public:
  // `threads`: the server's pool (one per open keep-alive connection); `keep_alive_max`: requests
  // per connection before the server closes it. (httplib's default of 5 makes 64 clients
  // reconnect at once every 5 requests, past its listen backlog of 5: some connections then
  // stall for a SYN retransmit, 1 s, and fail.)
  explicit FakeServer(int threads = 160, int keep_alive_max = 1 << 20, int keep_alive_s = 5) {
    svr_.Get("/v1/models", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"object":"list","data":[{"id":"test-model","object":"model"}]})",
                      "application/json");
    });
    const auto handler = [this](const httplib::Request& req, httplib::Response& res) {
      const nlohmann::json body = nlohmann::json::parse(req.body);
      const bool chat = body.contains("messages");
      const nlohmann::json& prompt = chat ? body["messages"][0]["content"] : body["prompt"];
      const std::string mode = prompt.is_string() ? prompt.get<std::string>() : "";
      const int prompt_tokens = prompt.is_array() ? static_cast<int>(prompt.size()) : 1;
      const int n = body.value("max_tokens", 4);
      if (mode == "fail500") {
        res.status = 500;
        res.set_content(R"({"error":{"message":"boom","type":"server_error"}})",
                        "application/json");
        return;
      }
      const int now = ++in_flight_;
      int prev = peak_.load();
      while (now > prev && !peak_.compare_exchange_weak(prev, now)) {
      }
      res.set_chunked_content_provider(
          "text/event-stream",
          [this, chat, mode, n, prompt_tokens, i = 0](size_t, httplib::DataSink& sink) mutable {
            if (mode == "drop" && i == 2) return false;  // the server closes the connection
            if (mode == "garbage" && i == 1) {
              const std::string bad = "data: {\"choices\": [{\"text\": \n\n";
              sink.write(bad.data(), bad.size());
            }
            if (i < n) {
              std::this_thread::sleep_for(2ms);
              const nlohmann::json c =
                  chat
                      ? nlohmann::json{{"choices", {{{"index", 0}, {"delta", {{"content", "t"}}}}}}}
                      : nlohmann::json{{"choices", {{{"index", 0}, {"text", "t"}}}}};
              const std::string s = sse(c);
              ++i;
              return sink.write(s.data(), s.size());
            }
            std::string tail;
            if (mode != "nousage") {
              tail = sse({{"choices", nlohmann::json::array()},
                          {"usage", {{"prompt_tokens", prompt_tokens}, {"completion_tokens", n}}}});
            }
            tail += "data: [DONE]\n\n";
            sink.write(tail.data(), tail.size());
            sink.done();
            return true;
          },
          [this](bool) { --in_flight_; });
    };
    svr_.Post("/v1/completions", handler);
    svr_.Post("/v1/chat/completions", handler);
    svr_.set_tcp_nodelay(true);  // each chunk its own packet, as a real server sends them
    // A thread per open keep-alive connection (httplib's default pool has 8).
    svr_.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    svr_.set_keep_alive_max_count(keep_alive_max);
    svr_.set_keep_alive_timeout(keep_alive_s);
    port_ = svr_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { svr_.listen_after_bind(); });
    while (!svr_.is_running()) std::this_thread::sleep_for(1ms);
  }
  ~FakeServer() {
    svr_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int peak() const { return peak_.load(); }

 private:
  httplib::Server svr_;
  int port_ = 0;
  std::thread thread_;
  std::atomic<int> in_flight_{0}, peak_{0};
};

}  // namespace ceiling::loadgen::fake
