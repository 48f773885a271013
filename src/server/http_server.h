// The OpenAI-compatible HTTP server (cpp-httplib): routes, auth, limits, draining. The engine
// stays behind serve::AsyncEngine; the HTTP threads parse, tokenize and render, and only typed
// requests (GenerationRequest) cross to the engine thread.
//
// Routes: POST /v1/completions, /v1/chat/completions; GET /v1/models; GET /health (200 ready, 503
// loading, draining or after an engine failure; never needs the key); GET /metrics (Prometheus);
// POST /tokenize, /detokenize (vLLM shapes); GET /version.
// Lifecycle: construct, listen() on a thread (health 503 "loading"), attach() the engine (ready),
// drain() on SIGTERM (health 503, new requests 503, in-flight ones finish), stop().
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "serve/async_engine.h"
#include "server/guard.h"
#include "server/metrics.h"
#include "server/request.h"

namespace httplib {
class Server;
}

namespace ceiling::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: any free port (see bound_port)
  std::string api_key;
  size_t max_request_bytes = size_t{4} << 20;  // 413 above
  int max_queued_requests = 1024;              // engine requests beyond max_num_seqs; 429 above
  int max_num_seqs = 256;                      // the engine's
  int http_threads = 0;                        // 0: max_num_seqs + max_queued_requests + 64
  std::string version = "0.1.0";
};

class HttpServer {
 public:
  explicit HttpServer(ServerOptions options);
  ~HttpServer();

  // Binds (throws ceiling::Error when it cannot). Returns the port.
  int bind();
  // Serves until stop(); call bind() first. Blocks.
  void listen();
  // The engine is up: requests are served from now on. `engine` and `model` (its pointers
  // included) must outlive the server.
  void attach(serve::AsyncEngine& engine, ModelInfo model);
  // Refuse new work (503) and report unhealthy; in-flight requests go on.
  void drain() { draining_ = true; }
  // Engine requests admitted and not finished.
  int in_flight() const { return admission_.count(); }
  void stop();

 private:
  void routes();
  struct Ctx;

  ServerOptions opt_;
  std::unique_ptr<httplib::Server> http_;
  std::atomic<serve::AsyncEngine*> engine_{nullptr};
  ModelInfo model_;
  std::unique_ptr<ServerMetrics> metrics_;
  Admission admission_;
  std::atomic<bool> draining_{false};
};

}  // namespace ceiling::server
