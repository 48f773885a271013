#include "server/response.h"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cmath>

namespace ceiling::server {
namespace {

using nlohmann::json;

std::string random_id(const char* prefix) {
  static std::atomic<uint64_t> counter{0};
  const uint64_t t =
      static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  return fmt::format("{}{:016x}{:08x}", prefix, t, counter.fetch_add(1) & 0xffffffffu);
}

double finite_logprob(float lp) {
  return std::isfinite(lp) ? static_cast<double>(lp) : -9999.0;
}

json finish_json(serve::FinishReason f) {
  if (f == serve::FinishReason::kNone) return nullptr;
  return std::string(serve::finish_reason_name(f));
}

}  // namespace

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

ResponseWriter::ResponseWriter(const GenerationRequest& req, const Tokenizer& tok,
                               std::string model)
    : req_(req),
      tok_(tok),
      model_(std::move(model)),
      id_(random_id(req.chat ? "chatcmpl-" : "cmpl-")),
      created_(std::chrono::duration_cast<std::chrono::seconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count()) {}

json ResponseWriter::usage(const std::vector<ChoiceResult>& choices) const {
  int64_t prompt = 0, completion = 0;
  for (const auto& p : req_.prompts) prompt += static_cast<int64_t>(p.size());
  for (const ChoiceResult& c : choices) completion += c.completion_tokens;
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion}};
}

json ResponseWriter::logprobs_json(std::span<const serve::TokenLogprob> lps,
                                   size_t text_offset) const {
  auto text_of = [&](int32_t id) { return tok_.decode(std::span<const int32_t>(&id, 1)); };
  if (req_.chat) {
    json content = json::array();
    auto entry = [&](int32_t id, float lp) {
      const std::string t = text_of(id);
      json bytes = json::array();
      for (unsigned char c : t) bytes.push_back(static_cast<int>(c));
      return json{{"token", t}, {"logprob", finite_logprob(lp)}, {"bytes", bytes}};
    };
    for (const serve::TokenLogprob& l : lps) {
      json e = entry(l.id, l.logprob);
      json top = json::array();
      for (const auto& [id, lp] : l.top) top.push_back(entry(id, lp));
      e["top_logprobs"] = top;
      content.push_back(std::move(e));
    }
    return {{"content", content}};
  }
  json tokens = json::array(), token_lps = json::array(), tops = json::array(),
       offsets = json::array();
  size_t off = text_offset;
  for (const serve::TokenLogprob& l : lps) {
    const std::string t = text_of(l.id);
    tokens.push_back(t);
    token_lps.push_back(finite_logprob(l.logprob));
    json top = json::object();
    top[t] = finite_logprob(l.logprob);
    for (const auto& [id, lp] : l.top) top[text_of(id)] = finite_logprob(lp);
    tops.push_back(std::move(top));
    offsets.push_back(off);
    off += t.size();
  }
  return {{"tokens", tokens},
          {"token_logprobs", token_lps},
          {"top_logprobs", tops},
          {"text_offset", offsets}};
}

json ResponseWriter::full(const std::vector<ChoiceResult>& choices) const {
  json out_choices = json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChoiceResult& c = choices[i];
    json lp = nullptr;
    if (req_.logprobs >= 0) lp = logprobs_json(c.logprobs, 0);
    if (req_.chat) {
      out_choices.push_back({{"index", i},
                             {"message", {{"role", "assistant"}, {"content", c.text}}},
                             {"logprobs", lp},
                             {"finish_reason", finish_json(c.finish)}});
    } else {
      const int p = req_.choices[i].prompt_index;
      std::string text = req_.echo ? req_.prompt_texts[static_cast<size_t>(p)] + c.text : c.text;
      out_choices.push_back({{"index", i},
                             {"text", std::move(text)},
                             {"logprobs", lp},
                             {"finish_reason", finish_json(c.finish)}});
    }
  }
  return {{"id", id_},
          {"object", req_.chat ? "chat.completion" : "text_completion"},
          {"created", created_},
          {"model", model_},
          {"choices", out_choices},
          {"usage", usage(choices)}};
}

json ResponseWriter::chunk(json choice) const {
  json c = {{"id", id_},
            {"object", req_.chat ? "chat.completion.chunk" : "text_completion"},
            {"created", created_},
            {"model", model_},
            {"choices", json::array({std::move(choice)})}};
  if (req_.include_usage) c["usage"] = nullptr;
  return c;
}

std::string ResponseWriter::role_chunk(int i) const {
  json ch = {{"index", i},
             {"delta", {{"role", "assistant"}, {"content", ""}}},
             {"logprobs", nullptr},
             {"finish_reason", nullptr}};
  return "data: " + dump(chunk(std::move(ch))) + "\n\n";
}

std::string ResponseWriter::delta_chunk(int i, const std::string& text,
                                        std::span<const serve::TokenLogprob> logprobs,
                                        serve::FinishReason finish) const {
  json lp = nullptr;
  if (req_.logprobs >= 0 && !logprobs.empty()) lp = logprobs_json(logprobs, 0);
  json ch;
  if (req_.chat) {
    json delta = json::object();
    if (!text.empty() || finish == serve::FinishReason::kNone) delta["content"] = text;
    ch = {{"index", i}, {"delta", delta}, {"logprobs", lp}, {"finish_reason", finish_json(finish)}};
  } else {
    ch = {{"index", i}, {"text", text}, {"logprobs", lp}, {"finish_reason", finish_json(finish)}};
  }
  return "data: " + dump(chunk(std::move(ch))) + "\n\n";
}

std::string ResponseWriter::usage_chunk(const std::vector<ChoiceResult>& choices) const {
  json c = {{"id", id_},
            {"object", req_.chat ? "chat.completion.chunk" : "text_completion"},
            {"created", created_},
            {"model", model_},
            {"choices", json::array()},
            {"usage", usage(choices)}};
  return "data: " + dump(c) + "\n\n";
}

std::string ResponseWriter::error_event(const json& error_body) {
  return "data: " + dump(error_body) + "\n\n";
}

}  // namespace ceiling::server
