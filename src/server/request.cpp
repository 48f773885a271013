#include "server/request.h"

#include <cmath>
#include <random>

#include "core/json_bounded.h"
#include "serve/prompt.h"
#include "server/api_error.h"

namespace ceiling::server {
namespace {

using nlohmann::json;

constexpr int kMaxPrompts = 256;  // prompts in one completions request
constexpr int kMaxStops = 16;
constexpr int kMaxLogprobs = 20;

// The field's value, or null when absent or JSON null (OpenAI treats both as "unset").
const json* field(const json& body, const char* key) {
  auto it = body.find(key);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

double number(const json& v, const char* key, double lo, double hi, bool lo_open = false) {
  if (!v.is_number()) bad_param(key, "'{}' must be a number", key);
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < lo || x > hi || (lo_open && x == lo))
    bad_param(key, "'{}' must be in {}{}, {}] (got {})", key, lo_open ? "(" : "[", lo, hi, x);
  return x;
}

int64_t integer(const json& v, const char* key, int64_t lo, int64_t hi) {
  if (!v.is_number_integer()) bad_param(key, "'{}' must be an integer", key);
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi))
    bad_param(key, "'{}' must be in [{}, {}]", key, lo, hi);
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) bad_param(key, "'{}' must be in [{}, {}] (got {})", key, lo, hi, x);
  return x;
}

bool boolean(const json& v, const char* key) {
  if (!v.is_boolean()) bad_param(key, "'{}' must be true or false", key);
  return v.get<bool>();
}

std::vector<std::string> stop_list(const json& v) {
  std::vector<std::string> out;
  if (v.is_string()) {
    out.push_back(v.get<std::string>());
  } else if (v.is_array()) {
    if (v.size() > kMaxStops) bad_param("stop", "at most {} stop strings", kMaxStops);
    for (const json& s : v) {
      if (!s.is_string()) bad_param("stop", "'stop' must be a string or a list of strings");
      out.push_back(s.get<std::string>());
    }
  } else {
    bad_param("stop", "'stop' must be a string or a list of strings");
  }
  return out;
}

std::vector<cpu::LogitBias> logit_bias(const json& v, int vocab) {
  if (!v.is_object()) bad_param("logit_bias", "'logit_bias' must be an object of token id: bias");
  std::vector<cpu::LogitBias> out;
  for (const auto& [key, b] : v.items()) {
    int64_t id = -1;
    size_t used = 0;
    try {
      id = std::stoll(key, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != key.size())
      bad_param("logit_bias", "logit_bias key '{}' is not a token id", key.substr(0, 32));
    if (id < 0 || id >= vocab)
      bad_param("logit_bias", "logit_bias token id {} is outside the vocabulary [0, {})", id,
                vocab);
    out.emplace_back(static_cast<int32_t>(id),
                     static_cast<float>(number(b, "logit_bias", -100, 100)));
  }
  return out;
}

// Fields both endpoints share. Returns whether max_tokens was set.
struct Common {
  serve::RequestParams params;
  int n = 1;
  bool seeded = false, max_tokens_set = false;
};

Common parse_common(const json& b, const ModelInfo& m, GenerationRequest& r) {
  Common c;
  c.params = m.defaults;
  serve::RequestParams& p = c.params;
  cpu::SamplingParams& s = p.sampling;
  if (auto* v = field(b, "temperature")) s.temperature = number(*v, "temperature", 0, 1e6);
  if (auto* v = field(b, "top_p")) s.top_p = number(*v, "top_p", 0, 1, /*lo_open=*/true);
  if (auto* v = field(b, "top_k")) s.top_k = std::max<int>(0, integer(*v, "top_k", -1, 1 << 30));
  if (auto* v = field(b, "min_p")) s.min_p = number(*v, "min_p", 0, 1);
  if (auto* v = field(b, "repetition_penalty"))
    s.repetition_penalty = number(*v, "repetition_penalty", 0, 1e6, /*lo_open=*/true);
  if (auto* v = field(b, "presence_penalty"))
    s.presence_penalty = number(*v, "presence_penalty", -2, 2);
  if (auto* v = field(b, "frequency_penalty"))
    s.frequency_penalty = number(*v, "frequency_penalty", -2, 2);
  if (auto* v = field(b, "n")) c.n = static_cast<int>(integer(*v, "n", 1, m.max_n));
  if (auto* v = field(b, "stop")) p.stop = stop_list(*v);
  if (auto* v = field(b, "seed")) {
    s.seed = static_cast<uint64_t>(integer(*v, "seed", INT64_MIN, INT64_MAX));
    c.seeded = true;
  }
  if (auto* v = field(b, "logit_bias")) p.logit_bias = logit_bias(*v, m.vocab_size);
  if (auto* v = field(b, "ignore_eos")) p.ignore_eos = boolean(*v, "ignore_eos");
  const char* mt = b.contains("max_completion_tokens") && !b["max_completion_tokens"].is_null()
                       ? "max_completion_tokens"
                       : "max_tokens";
  if (auto* v = field(b, mt)) {
    p.max_tokens = static_cast<int>(integer(*v, mt, 1, 1 << 30));
    c.max_tokens_set = true;
  }
  if (auto* v = field(b, "min_tokens"))
    p.min_tokens = static_cast<int>(integer(*v, "min_tokens", 0, 1 << 30));
  if (auto* v = field(b, "stream")) r.stream = boolean(*v, "stream");
  if (auto* v = field(b, "stream_options")) {
    if (!r.stream) bad_param("stream_options", "'stream_options' needs 'stream': true");
    if (!v->is_object()) bad_param("stream_options", "'stream_options' must be an object");
    if (auto* u = field(*v, "include_usage")) r.include_usage = boolean(*u, "stream_options");
  }
  if (auto* v = field(b, "user"); v && !v->is_string())
    bad_param("user", "'user' must be a string");
  return c;
}

// Checks the prompt against the limits and adds its n choices.
void add_choices(GenerationRequest& r, const Common& c, const ModelInfo& m, int prompt_index) {
  const std::vector<int32_t>& prompt = r.prompts[static_cast<size_t>(prompt_index)];
  const char* what = r.chat ? "messages" : "prompt";
  if (prompt.empty()) bad_param(what, "the prompt encodes to no tokens");
  const int64_t P = static_cast<int64_t>(prompt.size());
  serve::RequestParams p = c.params;
  if (P >= m.max_model_len)
    bad_param(what,
              "This model's maximum context length is {} tokens. However, your prompt has {} "
              "tokens, leaving no room for a completion.",
              m.max_model_len, P);
  if (!c.max_tokens_set) {
    p.max_tokens = static_cast<int>(std::min<int64_t>(p.max_tokens, m.max_model_len - P));
  } else if (P + p.max_tokens > m.max_model_len) {
    bad_param(r.chat ? "max_completion_tokens" : "max_tokens",
              "This model's maximum context length is {} tokens. However, you requested {} tokens "
              "({} in the {}, {} in the completion).",
              m.max_model_len, P + p.max_tokens, P, what, p.max_tokens);
  }
  if (p.min_tokens > p.max_tokens)
    bad_param("min_tokens", "'min_tokens' ({}) must not exceed max_tokens ({})", p.min_tokens,
              p.max_tokens);
  p.logprobs = r.logprobs;
  for (int j = 0; j < c.n; ++j) {
    ChoiceJob job{prompt_index, prompt, p};
    job.params.sampling.seed =
        c.seeded ? c.params.sampling.seed + static_cast<uint64_t>(j)
                 : (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
    r.choices.push_back(std::move(job));
  }
}

std::vector<int32_t> token_prompt(const json& v, int vocab) {
  std::vector<int32_t> ids;
  ids.reserve(v.size());
  for (const json& x : v) {
    if (!x.is_number_integer()) bad_param("prompt", "a token prompt must be a list of integers");
    const int64_t id = x.get<int64_t>();
    if (id < 0 || id >= vocab)
      bad_param("prompt", "prompt token id {} is outside the vocabulary [0, {})", id, vocab);
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

void check_common_object(const json& body) {
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
}

}  // namespace

json parse_body(std::string_view body) {
  BoundedJson j = parse_json_bounded(body);
  if (j.error) throw ApiError(400, "the request body is not valid JSON: " + *j.error);
  check_common_object(j.value);
  return std::move(j.value);
}

void check_model(const json& body, const ModelInfo& m) {
  const json* v = field(body, "model");
  if (!v) return;
  if (!v->is_string()) bad_param("model", "'model' must be a string");
  if (v->get<std::string>() != m.name)
    throw ApiError(
        404, fmt::format("The model '{}' does not exist.", v->get<std::string>().substr(0, 128)),
        "model", "invalid_request_error", "model_not_found");
}

GenerationRequest parse_completion(const json& b, const ModelInfo& m) {
  check_common_object(b);
  check_model(b, m);
  GenerationRequest r;
  if (auto* v = field(b, "echo")) r.echo = boolean(*v, "echo");
  if (auto* v = field(b, "logprobs"))
    r.logprobs = static_cast<int>(integer(*v, "logprobs", 0, kMaxLogprobs));
  if (r.echo && r.logprobs >= 0)
    bad_param("echo", "'echo' together with 'logprobs' is not supported (no prompt logprobs)");
  const Common c = parse_common(b, m, r);
  const json* prompt = field(b, "prompt");
  if (!prompt) bad_param("prompt", "'prompt' is required");
  const Tokenizer& tok = *m.tokenizer;
  auto add_text = [&](const std::string& text) {
    r.prompts.push_back(serve::encode_text(tok, text));
    r.prompt_texts.push_back(text);
  };
  auto add_ids = [&](const json& v) {
    r.prompts.push_back(token_prompt(v, m.vocab_size));
    r.prompt_texts.push_back(tok.decode(r.prompts.back()));
  };
  if (prompt->is_string()) {
    add_text(prompt->get<std::string>());
  } else if (prompt->is_array() && !prompt->empty()) {
    const json& first = prompt->front();
    if (first.is_number()) {  // one prompt of token ids (any length up to max_model_len)
      add_ids(*prompt);
    } else {
      if (prompt->size() > kMaxPrompts) bad_param("prompt", "at most {} prompts", kMaxPrompts);
      for (const json& x : *prompt) {
        if (x.is_string()) {
          add_text(x.get<std::string>());
        } else if (x.is_array() && !x.empty()) {
          add_ids(x);
        } else {
          bad_param("prompt",
                    "'prompt' must be a string, a list of strings, a list of token ids "
                    "or a list of token-id lists (none empty)");
        }
      }
    }
  } else {
    bad_param("prompt",
              "'prompt' must be a string, a list of strings, a list of token ids or a "
              "list of token-id lists (none empty)");
  }
  for (int i = 0; i < static_cast<int>(r.prompts.size()); ++i) add_choices(r, c, m, i);
  return r;
}

GenerationRequest parse_chat(const json& b, const ModelInfo& m) {
  check_common_object(b);
  check_model(b, m);
  GenerationRequest r;
  r.chat = true;
  bool lp = false;
  if (auto* v = field(b, "logprobs")) lp = boolean(*v, "logprobs");
  if (auto* v = field(b, "top_logprobs")) {
    const int k = static_cast<int>(integer(*v, "top_logprobs", 0, kMaxLogprobs));
    if (!lp && k > 0) bad_param("top_logprobs", "'top_logprobs' needs 'logprobs': true");
    r.logprobs = k;
  }
  if (lp && r.logprobs < 0) r.logprobs = 0;
  const Common c = parse_common(b, m, r);
  const json* msgs = field(b, "messages");
  if (!msgs || !msgs->is_array() || msgs->empty())
    bad_param("messages", "'messages' must be a non-empty list of messages");
  for (const json& msg : *msgs) {
    if (!msg.is_object() || !msg.contains("role") || !msg["role"].is_string())
      bad_param("messages", "every message must be an object with a string 'role'");
    const std::string role = msg["role"].get<std::string>();
    if (role != "system" && role != "user" && role != "assistant" && role != "developer")
      bad_param("messages", "unsupported message role '{}'", role.substr(0, 32));
  }
  if (!m.chat_template)
    bad_param("messages",
              "this model has no chat template (use /v1/completions or --chat-template)");
  try {
    r.prompts.push_back(serve::encode_chat(*m.tokenizer, *m.chat_template,
                                           nlohmann::ordered_json::parse(msgs->dump())));
  } catch (const ApiError&) {
    throw;
  } catch (const Error& e) {
    bad_param("messages", "{}", e.what());
  }
  r.prompt_texts.emplace_back();
  add_choices(r, c, m, 0);
  return r;
}

}  // namespace ceiling::server
