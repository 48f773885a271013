#include "loadgen/client.h"

#include <httplib.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/status.h"
#include "loadgen/sse.h"

namespace ceiling::loadgen {

namespace {

constexpr size_t kMaxErrorBody = 4096;

std::string error_of_body(int status, const std::string& body) {
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  std::string msg = body;
  if (j.is_object() && j.contains("error")) {
    const nlohmann::json& e = j["error"];
    msg = e.is_object() && e.contains("message") && e["message"].is_string()
              ? e["message"].get<std::string>()
              : e.dump();
  } else if (j.is_object() && j.contains("message") && j["message"].is_string()) {
    msg = j["message"].get<std::string>();
  }
  return fmt::format("HTTP {}: {}", status, msg.empty() ? "(empty body)" : msg);
}

void set_timeouts(httplib::Client& c, double timeout_s) {
  const auto us = [](double s) { return std::chrono::microseconds(static_cast<int64_t>(s * 1e6)); };
  c.set_connection_timeout(us(std::min(timeout_s, 10.0)));
  c.set_read_timeout(us(timeout_s));
  c.set_write_timeout(us(std::min(timeout_s, 60.0)));
}

}  // namespace

BaseUrl parse_base_url(const std::string& url) {
  const size_t scheme = url.find("://");
  CEILING_ENSURE(scheme != std::string::npos &&
                     (url.compare(0, scheme, "http") == 0 || url.compare(0, scheme, "https") == 0),
                 "bench serve: --base-url '{}' must start with http:// or https://", url);
  const size_t path = url.find('/', scheme + 3);
  BaseUrl b;
  b.origin = url.substr(0, path);
  CEILING_ENSURE(b.origin.size() > scheme + 3, "bench serve: --base-url '{}' names no host", url);
  if (path != std::string::npos) b.prefix = url.substr(path);
  while (!b.prefix.empty() && b.prefix.back() == '/') b.prefix.pop_back();
  return b;
}

Connection::Connection(const BaseUrl& base, const std::string& api_key, double timeout_s)
    : origin_(base.origin),
      prefix_(base.prefix),
      cli_(std::make_unique<httplib::Client>(base.origin)) {
  CEILING_ENSURE(cli_->is_valid(), "bench serve: cannot use base URL '{}'", base.origin);
  cli_->set_keep_alive(true);
  cli_->set_tcp_nodelay(true);
  set_timeouts(*cli_, timeout_s);
  if (!api_key.empty()) cli_->set_bearer_token_auth(api_key);
}

Connection::~Connection() = default;

RequestResult Connection::stream(Api api, const std::string& endpoint, const std::string& body,
                                 Clock::time_point origin) {
  RequestResult r;
  httplib::Request req;
  req.method = "POST";
  req.path = prefix_ + endpoint;
  req.body = body;
  req.set_header("Content-Type", "application/json");
  req.set_header("Accept", "text/event-stream");
  int status = 0;
  std::string error_body;
  SseParser parser;
  const Clock::time_point sent = Clock::now();
  r.start_s = std::chrono::duration<double>(sent - origin).count();
  StreamAccumulator acc(api, r, sent);
  const auto on_event = [&](std::string_view data) { acc.on_event(data, Clock::now()); };
  req.response_handler = [&](const httplib::Response& res) {
    status = res.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    if (status != 200) {
      error_body.append(data,
                        std::min(n, kMaxErrorBody - std::min(kMaxErrorBody, error_body.size())));
      return true;
    }
    try {
      parser.feed(std::string_view(data, n), on_event);
    } catch (const std::exception& e) {
      acc.fail(e.what());
    }
    return !acc.failed();
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  const bool ok = cli_->send(req, res, err);
  if (ok && status == 0) status = res.status;  // a response without a body
  if (acc.failed()) {
    acc.finish(Clock::now());
  } else if (!ok && !acc.done()) {
    const char* what = status != 0                         ? "connection lost to"
                       : err == httplib::Error::Connection ? "cannot connect to"
                                                           : "no response from";
    acc.fail(fmt::format("{} {}{}: {} error", what, origin_, req.path, httplib::to_string(err)));
    acc.finish(Clock::now());
  } else if (status != 200) {
    if (error_body.empty()) error_body = res.body.substr(0, kMaxErrorBody);
    acc.fail(error_of_body(status, error_body));
    acc.finish(Clock::now());
  } else {
    try {
      parser.finish(on_event);
    } catch (const std::exception& e) {
      acc.fail(e.what());
    }
    acc.finish(Clock::now());
  }
  return r;
}

void Connection::open() {
  (void)cli_->Get(prefix_ + "/v1/models");
}

std::string Connection::get(const std::string& path) {
  const httplib::Result res = cli_->Get(prefix_ + path);
  CEILING_ENSURE(
      res, "bench serve: {} {}{}: {} error",
      res.error() == httplib::Error::Connection ? "cannot connect to" : "no response from", origin_,
      prefix_ + path, httplib::to_string(res.error()));
  CEILING_ENSURE(res->status == 200, "bench serve: GET {}: {}", prefix_ + path,
                 one_line(error_of_body(res->status, res->body.substr(0, kMaxErrorBody))));
  return res->body;
}

std::string first_model(Connection& c) {
  const nlohmann::json j = nlohmann::json::parse(c.get("/v1/models"), nullptr, false);
  CEILING_ENSURE(j.is_object() && j.contains("data") && j["data"].is_array() &&
                     !j["data"].empty() && j["data"][0].is_object() &&
                     j["data"][0].contains("id") && j["data"][0]["id"].is_string(),
                 "bench serve: GET /v1/models lists no model; pass --model");
  return j["data"][0]["id"].get<std::string>();
}

}  // namespace ceiling::loadgen
