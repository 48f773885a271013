// `ceiling serve`: the OpenAI-compatible HTTP server over the engine core (src/server/). Binds
// first (GET /health answers 503 while the model loads), loads the model, starts the engine
// thread (serve::AsyncEngine) and serves until SIGTERM/SIGINT: then /health turns 503, new
// requests get 503, in-flight ones finish (up to --shutdown-timeout, then they are aborted), and
// the process exits 0.
#include <fmt/format.h>
#include <pthread.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <optional>
#include <thread>

#include "ceiling/command.h"
#include "ceiling/engine_flags.h"
#include "core/file_read.h"
#include "core/status.h"
#include "serve/async_engine.h"
#include "serve/prompt.h"
#include "server/http_server.h"
#include "tokenizer/template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace ceiling::cli {
namespace {

struct Args {
  std::string model, served_model_name, chat_template;
  server::ServerOptions server;
  double shutdown_timeout = 30;
  int max_n = 16;
  EngineFlags engine;
};

// Blocks SIGTERM/SIGINT in this thread (and the threads it starts) so that one thread can
// sigwait for them.
sigset_t block_stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::signal(SIGPIPE, SIG_IGN);  // a client that went away is a failed write, not a signal
  return set;
}

int run(Args a) {
  CEILING_ENSURE(!a.model.empty(), "serve: --model DIR is required");
  if (a.server.api_key.empty())
    if (const char* k = std::getenv("CEILING_API_KEY")) a.server.api_key = k;
  const sigset_t stop_signals = block_stop_signals();
  a.server.max_num_seqs = a.engine.max_num_seqs.value_or(256);
  server::HttpServer http(a.server);
  const int port = http.bind();
  std::thread listener([&] { http.listen(); });
  fmt::print(stderr, "ceiling serve: listening on http://{}:{} (loading {})\n", a.server.host, port,
             a.model);

  try {
    LoadedModel lm = load_on_device(a.model, a.engine);
    const Tokenizer tok = Tokenizer::from_dir(a.model);
    std::optional<ChatTemplate> tmpl;
    if (!a.chat_template.empty()) {
      tmpl.emplace(read_regular_file(a.chat_template, uint64_t{1} << 20));
    } else if (!tok.chat_template().empty()) {
      tmpl.emplace(ChatTemplate::from_model_dir(a.model, false));
    }
    serve::EngineConfig ec = engine_config(a.engine);
    ec.eos_token_ids = serve::eos_token_ids(lm.model, tok);
    // (declared after what they use: destroyed first)
    std::unique_ptr<serve::Engine> engine = lm.make_engine(ec, &tok);  // TP-aware
    std::optional<serve::AsyncEngine> async;
    fmt::print(stderr, "{}\n", engine->kv_summary());
    async.emplace(*engine);
    server::ModelInfo info;
    info.name = a.served_model_name.empty() ? a.model : a.served_model_name;
    info.tokenizer = &tok;
    info.chat_template = tmpl ? &*tmpl : nullptr;
    info.defaults = serve::default_params(lm.model.generation);
    info.vocab_size = lm.model.config.vocab_size;
    info.max_model_len = engine->config().max_model_len;
    info.max_n = a.max_n;
    http.attach(*async, info);
    fmt::print(stderr, "ceiling serve: ready ({} on {}, max_model_len {})\n", info.name,
               lm.device_name(), info.max_model_len);

    int sig = 0;
    sigwait(&stop_signals, &sig);
    fmt::print(stderr, "ceiling serve: signal {}: draining\n", sig);
    http.drain();
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(a.shutdown_timeout);
    while (http.in_flight() > 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (http.in_flight() > 0)
      fmt::print(stderr, "ceiling serve: {} requests still running at the timeout: aborted\n",
                 http.in_flight());
    async->shutdown();  // aborts what is left; their HTTP threads answer and return
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    http.stop();
    listener.join();
    async.reset();
    engine.reset();
  } catch (...) {
    http.stop();
    listener.join();
    throw;
  }
  fmt::print(stderr, "ceiling serve: stopped\n");
  return 0;
}

CEILING_COMMAND(
    "serve", "OpenAI-compatible HTTP server (/v1/completions, /v1/chat/completions, /metrics)",
    [](CLI::App& sub) -> std::function<int()> {
      auto a = std::make_shared<Args>();
      sub.add_option("--model", a->model, "Hugging Face model directory")->required();
      sub.add_option("--host", a->server.host, "address to listen on (default 127.0.0.1)");
      sub.add_option("--port", a->server.port, "port (default 8000; 0: any free port)")
          ->check(CLI::Range(0, 65535));
      sub.add_option("--api-key", a->server.api_key,
                     "require `Authorization: Bearer KEY` on /v1 routes (default: "
                     "$CEILING_API_KEY, else none)");
      sub.add_option("--served-model-name", a->served_model_name,
                     "the model name clients use (default: the --model path)");
      sub.add_option("--chat-template", a->chat_template,
                     "Jinja chat template file (default: the model's)");
      sub.add_option("--max-request-bytes", a->server.max_request_bytes,
                     "largest request body (413 above; default 4 MiB)")
          ->check(CLI::Range(size_t{1024}, size_t{1} << 30));
      sub.add_option("--max-queued-requests", a->server.max_queued_requests,
                     "engine requests waiting beyond --max-num-seqs before 429 (default 1024)")
          ->check(CLI::Range(0, 1 << 20));
      sub.add_option("--max-n", a->max_n, "largest n per request (default 16)")
          ->check(CLI::Range(1, 1024));
      sub.add_option("--http-threads", a->server.http_threads,
                     "HTTP worker threads (default: max-num-seqs + max-queued-requests + 64)")
          ->check(CLI::Range(0, 65536));
      sub.add_option("--shutdown-timeout", a->shutdown_timeout,
                     "seconds in-flight requests get to finish after SIGTERM (default 30)")
          ->check(CLI::Range(0.0, 86400.0));
      add_engine_flags(sub, a->engine);
      add_tensor_parallel_flags(sub, a->engine);
      return [a] { return run(*a); };
    },
    25);

}  // namespace
}  // namespace ceiling::cli
