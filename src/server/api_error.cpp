#include "server/api_error.h"

namespace ceiling::server {

nlohmann::json error_body(const ApiError& e) {
  nlohmann::json err = {
      {"message", e.what()}, {"type", e.type}, {"param", nullptr}, {"code", nullptr}};
  if (!e.param.empty()) err["param"] = e.param;
  if (!e.code.empty()) err["code"] = e.code;
  return {{"error", err}};
}

}  // namespace ceiling::server
