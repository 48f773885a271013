// The server's one error type: an OpenAI error body {"error": {message, type, param, code}} with
// its HTTP status. Request parsing throws it naming the offending field (`param`); the routes
// (http_server.cpp) catch it, and turn any other ceiling::Error from tokenizing or templating
// into a 400 (see to_api_error). Never carries a key or request text beyond a short excerpt.
#pragma once

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "core/status.h"

namespace ceiling::server {

class ApiError : public Error {
 public:
  ApiError(int status_, std::string message, std::string param_ = {},
           std::string type_ = "invalid_request_error", std::string code_ = {})
      : Error(message),
        status(status_),
        param(std::move(param_)),
        type(std::move(type_)),
        code(std::move(code_)) {}

  int status;
  std::string param, type, code;
};

// A 400 naming the request field `param`.
template <typename... Args>
[[noreturn]] void bad_param(std::string param, fmt::format_string<Args...> f, Args&&... args) {
  throw ApiError(400, fmt::format(f, std::forward<Args>(args)...), std::move(param));
}

// The OpenAI error body. Null `param`/`code` when empty.
nlohmann::json error_body(const ApiError& e);

}  // namespace ceiling::server
