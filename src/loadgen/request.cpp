#include "loadgen/request.h"

#include <cmath>
#include <random>

#include "core/status.h"

namespace ceiling::loadgen {

namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

Api api_of_endpoint(const std::string& endpoint) {
  if (ends_with(endpoint, "/chat/completions")) return Api::kChat;
  if (ends_with(endpoint, "/completions")) return Api::kCompletions;
  fail("bench serve: endpoint '{}' is neither .../completions nor .../chat/completions", endpoint);
}

std::string build_body(Api api, const std::string& model, const Prompt& p, bool ignore_eos) {
  nlohmann::ordered_json b;
  b["model"] = model;
  if (api == Api::kCompletions) {
    CEILING_ENSURE(p.messages.is_null(), "bench serve: chat messages need /v1/chat/completions");
    if (p.text) {
      b["prompt"] = *p.text;
    } else {
      b["prompt"] = p.ids;
    }
  } else if (!p.messages.is_null()) {
    b["messages"] = p.messages;
  } else {
    CEILING_ENSURE(p.text.has_value(),
                   "bench serve: /v1/chat/completions needs text prompts, not token ids");
    b["messages"] = nlohmann::ordered_json::array({{{"role", "user"}, {"content", *p.text}}});
  }
  b["max_tokens"] = p.max_tokens;
  b["stream"] = true;
  b["stream_options"] = {{"include_usage", true}};
  if (ignore_eos) b["ignore_eos"] = true;
  for (const auto& [k, v] : p.fields.items()) {
    if (k != "prompt" && k != "messages") b[k] = v;
  }
  return b.dump();
}

std::vector<std::vector<int32_t>> random_token_prompts(int n, int len, int32_t lo, int32_t hi,
                                                       uint64_t seed) {
  CEILING_ENSURE(lo < hi, "bench serve: empty token range [{}, {})", lo, hi);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> pick(lo, hi - 1);
  std::vector<std::vector<int32_t>> out(n);
  for (auto& ids : out) {
    ids.resize(len);
    for (int32_t& id : ids) id = pick(rng);
  }
  return out;
}

std::vector<double> poisson_arrivals(int n, double rate, uint64_t seed, bool normalize) {
  std::vector<double> t(n, 0.0);
  if (n == 0 || std::isinf(rate)) return t;
  CEILING_ENSURE(rate > 0, "bench serve: --request-rate must be > 0 or inf (got {})", rate);
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(rate);
  double at = 0;
  for (double& x : t) x = at += gap(rng);
  if (normalize && t.back() > 0) {
    const double scale = n / rate / t.back();
    for (double& x : t) x *= scale;
  }
  return t;
}

}  // namespace ceiling::loadgen
