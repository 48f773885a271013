// HTTP to an OpenAI-compatible server (cpp-httplib): one keep-alive connection per Connection
// object. Not thread-safe: one Connection per worker thread.
#pragma once

#include <memory>
#include <string>

#include "loadgen/request.h"
#include "loadgen/result.h"
#include "loadgen/stream.h"

namespace httplib {
class Client;
}

namespace ceiling::loadgen {

// "http://host:port/prefix" -> {"http://host:port", "/prefix"}; throws for a URL that is not
// http(s)://host[:port][/path].
struct BaseUrl {
  std::string origin, prefix;
};
BaseUrl parse_base_url(const std::string& url);

class Connection {
 public:
  // `api_key`: sent as `Authorization: Bearer` when not empty. `timeout_s`: connect timeout is
  // min(timeout_s, 10 s); read timeout (the longest silence inside a response) is timeout_s.
  Connection(const BaseUrl& base, const std::string& api_key, double timeout_s);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // POSTs `body` to prefix + endpoint and reads the SSE stream to its end. Never throws: every
  // failure (connection refused, non-200 status with the server's message, a dropped connection,
  // malformed SSE) is a failed result with its error text. `origin`: the benchmark's start, for
  // start_s.
  RequestResult stream(Api api, const std::string& endpoint, const std::string& body,
                       Clock::time_point origin);

  // Opens the connection ahead of the load (GET prefix + /v1/models, the answer ignored): a
  // server with a short listen backlog (cpp-httplib's is 5) drops connections that all arrive at
  // once, which would show as failed requests that the server never saw.
  void open();

  // GET prefix + path; the body, or throws ceiling::Error naming the status or connection error.
  std::string get(const std::string& path);

 private:
  std::string origin_, prefix_;
  std::unique_ptr<httplib::Client> cli_;
};

// The `id` of the first model of GET /v1/models (throws when there is none).
std::string first_model(Connection& c);

}  // namespace ceiling::loadgen
