#include "server/http_server.h"

#include <httplib.h>

#include <chrono>

#include "core/json_bounded.h"
#include "serve/prompt.h"
#include "server/api_error.h"
#include "server/generation.h"
#include "server/response.h"

namespace ceiling::server {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr auto kPoll = 50ms;  // how often a waiting request checks its client

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) {
  send_json(res, e.status, error_body(e));
}

// Adds one engine output to its choice.
void apply(ChoiceResult& c, const serve::RequestOutput& o) {
  c.text += o.new_text;
  c.logprobs.insert(c.logprobs.end(), o.new_logprobs.begin(), o.new_logprobs.end());
  c.prompt_tokens = o.prompt_tokens;
  c.completion_tokens = o.completion_tokens;
  if (o.finished) c.finish = o.finish;
}

// The engine's failure message as an API error: its own request checks are 400s (parsing
// should have caught them), anything else a 500.
ApiError engine_error(const std::string& why) {
  if (why.rfind("request:", 0) == 0) return ApiError(400, why);
  return ApiError(500, why, {}, "server_error");
}

int64_t now_s() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

HttpServer::HttpServer(ServerOptions options)
    : opt_(std::move(options)),
      http_(std::make_unique<httplib::Server>()),
      admission_(opt_.max_num_seqs + opt_.max_queued_requests) {
  const int threads =
      opt_.http_threads > 0 ? opt_.http_threads : opt_.max_num_seqs + opt_.max_queued_requests + 64;
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_->set_payload_max_length(opt_.max_request_bytes);
  // Every SSE chunk goes out at once: with Nagle's algorithm a small write waits for the ACK
  // of the previous one, which a client may delay by 40 ms.
  http_->set_tcp_nodelay(true);
  // Clients keep their connections (httplib's default closes one after 5 requests, and a
  // client racing that close loses its request).
  http_->set_keep_alive_max_count(100000);
  http_->set_keep_alive_timeout(5);
  http_->set_read_timeout(30);
  routes();
}

HttpServer::~HttpServer() {
  stop();
}

int HttpServer::bind() {
  if (opt_.port == 0) {
    const int port = http_->bind_to_any_port(opt_.host);
    CEILING_ENSURE(port > 0, "serve: cannot bind {} (any port)", opt_.host);
    opt_.port = port;
  } else {
    CEILING_ENSURE(http_->bind_to_port(opt_.host, opt_.port), "serve: cannot bind {}:{}", opt_.host,
                   opt_.port);
  }
  return opt_.port;
}

void HttpServer::listen() {
  http_->listen_after_bind();
}

void HttpServer::attach(serve::AsyncEngine& engine, ModelInfo model) {
  metrics_ = std::make_unique<ServerMetrics>(model.name);
  model_ = std::move(model);
  engine_.store(&engine);  // publishes model_ and metrics_ to the HTTP threads
}

void HttpServer::stop() {
  if (http_) http_->stop();
}

void HttpServer::routes() {
  httplib::Server& s = *http_;
  // Errors httplib produces itself (no body): an OpenAI error body. A 400 without a body means
  // the request line or headers could not be read: past the header size limit (or malformed).
  s.set_error_handler(
      httplib::Server::HandlerWithResponse([](const httplib::Request&, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        switch (res.status) {
          case 400:
            send_error(res, ApiError(431, "request header fields too large (or malformed)"));
            break;
          case 413:
            send_error(res, ApiError(413, "request body larger than --max-request-bytes", {},
                                     "invalid_request_error", "request_too_large"));
            break;
          case 414:
            send_error(res, ApiError(414, "request URI too long"));
            break;
          case 404:
            send_error(res, ApiError(404, "not found", {}, "invalid_request_error", "not_found"));
            break;
          default:
            send_error(res, ApiError(res.status, "HTTP error " + std::to_string(res.status)));
        }
        return httplib::Server::HandlerResponse::Handled;
      }));
  s.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string why = "internal error";
        try {
          if (ep) std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          why = e.what();
        } catch (...) {
        }
        send_error(res, ApiError(500, why, {}, "server_error"));
      });
  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (req.path.rfind("/v1/", 0) == 0 && !authorized(req, opt_.api_key)) {
      send_error(res, ApiError(401, "invalid or missing API key (Authorization: Bearer ...)", {},
                               "authentication_error", "invalid_api_key"));
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });

  // Runs a handler, turning every error into an OpenAI error response.
  auto guarded = [](auto fn) {
    return [fn](const httplib::Request& req, httplib::Response& res) {
      try {
        fn(req, res);
      } catch (const ApiError& e) {
        send_error(res, e);
      } catch (const Error& e) {
        send_error(res, ApiError(400, e.what()));
      } catch (const std::exception& e) {
        send_error(res, ApiError(500, e.what(), {}, "server_error"));
      }
    };
  };
  // The engine when requests may be served now; else a 503.
  auto ready = [this]() -> serve::AsyncEngine& {
    serve::AsyncEngine* e = engine_.load();
    if (!e) throw ApiError(503, "the model is loading", {}, "server_error", "unavailable");
    if (draining_)
      throw ApiError(503, "the server is shutting down", {}, "server_error", "unavailable");
    if (!e->healthy()) throw ApiError(503, "the engine failed", {}, "server_error", "unavailable");
    return *e;
  };

  s.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    serve::AsyncEngine* e = engine_.load();
    const char* status = !e              ? "loading"
                         : draining_     ? "draining"
                         : !e->healthy() ? "unhealthy"
                                         : "ok";
    send_json(res, std::string_view(status) == "ok" ? 200 : 503, {{"status", status}});
  });
  s.Get("/version", [this](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, {{"version", opt_.version}});
  });
  s.Get("/metrics", guarded([this](const httplib::Request&, httplib::Response& res) {
          serve::AsyncEngine* e = engine_.load();
          if (!e) throw ApiError(503, "the model is loading", {}, "server_error", "unavailable");
          res.set_content(metrics_->render(e->snapshot()), "text/plain; version=0.0.4");
        }));
  s.Get("/v1/models", guarded([this, ready](const httplib::Request&, httplib::Response& res) {
          ready();
          send_json(res, 200,
                    {{"object", "list"},
                     {"data", json::array({{{"id", model_.name},
                                            {"object", "model"},
                                            {"created", now_s()},
                                            {"owned_by", "ceiling"},
                                            {"root", model_.name},
                                            {"max_model_len", model_.max_model_len}}})}});
        }));
  s.Post("/tokenize", guarded([this, ready](const httplib::Request& req, httplib::Response& res) {
           ready();
           const json b = parse_body(req.body);
           check_model(b, model_);
           std::vector<int32_t> ids;
           if (b.contains("messages")) {
             if (!model_.chat_template) bad_param("messages", "this model has no chat template");
             try {
               ids = serve::encode_chat(*model_.tokenizer, *model_.chat_template,
                                        nlohmann::ordered_json::parse(b["messages"].dump()));
             } catch (const Error& e) {
               bad_param("messages", "{}", e.what());
             }
           } else {
             if (!b.contains("prompt") || !b["prompt"].is_string())
               bad_param("prompt", "'prompt' must be a string (or give 'messages')");
             bool special = true;
             if (b.contains("add_special_tokens")) {
               if (!b["add_special_tokens"].is_boolean())
                 bad_param("add_special_tokens", "'add_special_tokens' must be true or false");
               special = b["add_special_tokens"].get<bool>();
             }
             ids = model_.tokenizer->encode(b["prompt"].get<std::string>(), special);
           }
           send_json(
               res, 200,
               {{"count", ids.size()}, {"max_model_len", model_.max_model_len}, {"tokens", ids}});
         }));
  s.Post("/detokenize", guarded([this, ready](const httplib::Request& req, httplib::Response& res) {
           ready();
           const json b = parse_body(req.body);
           check_model(b, model_);
           if (!b.contains("tokens") || !b["tokens"].is_array())
             bad_param("tokens", "'tokens' must be a list of token ids");
           std::vector<int32_t> ids;
           for (const json& t : b["tokens"]) {
             if (!t.is_number_integer() || t.get<int64_t>() < 0 ||
                 t.get<int64_t>() >= model_.vocab_size)
               bad_param("tokens", "token ids must be integers in [0, {})", model_.vocab_size);
             ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
           }
           send_json(res, 200, {{"prompt", model_.tokenizer->decode(ids)}});
         }));

  auto generate = [this, ready](bool chat) {
    return [this, ready, chat](const httplib::Request& req, httplib::Response& res) {
      serve::AsyncEngine& engine = ready();
      const json body = parse_body(req.body);
      auto g = std::make_shared<GenerationRequest>(chat ? parse_chat(body, model_)
                                                        : parse_completion(body, model_));
      const int n = static_cast<int>(g->choices.size());
      if (!admission_.try_take(n))
        throw ApiError(429, "too many requests queued; retry later", {}, "rate_limit_error",
                       "rate_limit_exceeded");
      auto writer = std::make_shared<ResponseWriter>(*g, *model_.tokenizer, model_.name);
      const int fd = connection_socket(req);
      auto job = GenerationJob::start(engine, *g, *metrics_, admission_);
      if (!g->stream) {
        std::vector<ChoiceResult> results(static_cast<size_t>(n));
        int done = 0;
        std::string error;
        while (done < n) {
          for (GenerationJob::Event& e : job->wait(kPoll)) {
            apply(results[static_cast<size_t>(e.choice)], e.out);
            if (!e.out.finished) continue;
            ++done;
            if (!e.out.error.empty() && error.empty()) error = e.out.error;
          }
          if (done < n && (peer_closed(fd) || !error.empty())) {
            job->abort();  // the client went away, or a choice failed: the rest go too
            if (error.empty()) return;
          }
        }
        if (!error.empty()) throw engine_error(error);
        send_json(res, 200, writer->full(results));
        return;
      }
      res.set_header("Cache-Control", "no-cache");
      res.set_chunked_content_provider(
          "text/event-stream",
          [g, writer, job, fd, n](size_t, httplib::DataSink& sink) {
            auto write = [&](const std::string& c) { return sink.write(c.data(), c.size()); };
            std::vector<ChoiceResult> results(static_cast<size_t>(n));
            std::vector<bool> started(static_cast<size_t>(n), false);
            if (g->chat)
              for (int i = 0; i < n; ++i)
                if (!write(writer->role_chunk(i))) return job->abort(), false;
            int done = 0;
            while (done < n) {
              for (GenerationJob::Event& e : job->wait(kPoll)) {
                const int i = e.choice;
                ChoiceResult& r = results[static_cast<size_t>(i)];
                apply(r, e.out);
                if (!e.out.error.empty()) {
                  job->abort();
                  write(ResponseWriter::error_event(error_body(engine_error(e.out.error))));
                  write(ResponseWriter::done());
                  sink.done();
                  return true;
                }
                std::string text = e.out.new_text;
                if (g->echo && !started[static_cast<size_t>(i)])
                  text = g->prompt_texts[static_cast<size_t>(g->choices[i].prompt_index)] + text;
                started[static_cast<size_t>(i)] = true;
                if ((!text.empty() || !e.out.new_logprobs.empty()) &&
                    !write(writer->delta_chunk(i, text, e.out.new_logprobs,
                                               serve::FinishReason::kNone)))
                  return job->abort(), false;
                if (e.out.finished) {
                  ++done;
                  if (!write(writer->delta_chunk(i, "", {}, e.out.finish)))
                    return job->abort(), false;
                }
              }
              if (done < n && peer_closed(fd)) return job->abort(), false;
            }
            if (g->include_usage && !write(writer->usage_chunk(results))) return false;
            write(ResponseWriter::done());
            sink.done();
            return true;
          },
          [job](bool success) {
            if (!success) job->abort();
          });
    };
  };
  s.Post("/v1/completions", guarded(generate(false)));
  s.Post("/v1/chat/completions", guarded(generate(true)));
}

}  // namespace ceiling::server
