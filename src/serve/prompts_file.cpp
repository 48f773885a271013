#include "serve/prompts_file.h"

#include <fstream>
#include <sstream>

#include "core/status.h"

namespace ceiling::serve {

namespace {

constexpr uintmax_t kMaxFileBytes = uintmax_t{1} << 30;
constexpr int kMaxDepth = 64;

template <typename T>
T number(const nlohmann::json& v, const std::string& where, const char* key, double lo, double hi) {
  CEILING_ENSURE(v.is_number(), "{}: '{}' must be a number", where, key);
  const double d = v.get<double>();
  CEILING_ENSURE(d >= lo && d <= hi, "{}: '{}' must be in [{}, {}] (got {})", where, key, lo, hi,
                 d);
  if constexpr (std::is_integral_v<T>) {
    CEILING_ENSURE(v.is_number_integer() || d == static_cast<double>(static_cast<int64_t>(d)),
                   "{}: '{}' must be an integer", where, key);
  }
  return static_cast<T>(d);
}

}  // namespace

void apply_request_fields(RequestParams& p, const nlohmann::json& obj, const std::string& where) {
  cpu::SamplingParams& s = p.sampling;
  for (const auto& [key, v] : obj.items()) {
    const char* k = key.c_str();
    if (key == "prompt" || key == "messages") continue;
    if (key == "max_tokens") {
      p.max_tokens = number<int>(v, where, k, 1, 1 << 30);
    } else if (key == "min_tokens") {
      p.min_tokens = number<int>(v, where, k, 0, 1 << 30);
    } else if (key == "temperature") {
      s.temperature = number<float>(v, where, k, 0, 1e6);
    } else if (key == "top_p") {
      s.top_p = number<float>(v, where, k, 1e-9, 1);
    } else if (key == "top_k") {
      s.top_k = number<int>(v, where, k, -1, 1 << 30);
      if (s.top_k < 0) s.top_k = 0;  // vLLM: -1 = off
    } else if (key == "min_p") {
      s.min_p = number<float>(v, where, k, 0, 1);
    } else if (key == "repetition_penalty") {
      s.repetition_penalty = number<float>(v, where, k, 1e-6, 1e6);
    } else if (key == "presence_penalty") {
      s.presence_penalty = number<float>(v, where, k, -2, 2);
    } else if (key == "frequency_penalty") {
      s.frequency_penalty = number<float>(v, where, k, -2, 2);
    } else if (key == "seed") {
      CEILING_ENSURE(v.is_number_integer(), "{}: 'seed' must be an integer", where);
      s.seed = v.is_number_unsigned() ? v.get<uint64_t>() : static_cast<uint64_t>(v.get<int64_t>());
    } else if (key == "stop") {
      p.stop.clear();
      if (v.is_string()) {
        p.stop.push_back(v.get<std::string>());
      } else {
        CEILING_ENSURE(v.is_array(), "{}: 'stop' must be a string or a list of strings", where);
        for (const auto& x : v) {
          CEILING_ENSURE(x.is_string(), "{}: 'stop' must be a string or a list of strings", where);
          p.stop.push_back(x.get<std::string>());
        }
      }
    } else if (key == "ignore_eos") {
      CEILING_ENSURE(v.is_boolean(), "{}: 'ignore_eos' must be true or false", where);
      p.ignore_eos = v.get<bool>();
    } else {
      fail("{}: unknown field '{}'", where, key.substr(0, 64));
    }
  }
}

std::vector<PromptLine> read_prompts_file(const std::filesystem::path& path) {
  std::error_code ec;
  CEILING_ENSURE(std::filesystem::is_regular_file(path, ec), "{}: not a regular file",
                 path.string());
  CEILING_ENSURE(std::filesystem::file_size(path, ec) <= kMaxFileBytes, "{}: larger than 1 GiB",
                 path.string());
  std::ifstream in(path, std::ios::binary);
  CEILING_ENSURE(in.good(), "{}: cannot open", path.string());
  std::vector<PromptLine> lines;
  std::string text;
  for (int n = 1; std::getline(in, text); ++n) {
    const std::string where = path.filename().string() + ":" + std::to_string(n);
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    int depth = 0;
    nlohmann::json obj = nlohmann::json::parse(
        text,
        [&](int, nlohmann::json::parse_event_t ev, nlohmann::json&) {
          if (ev == nlohmann::json::parse_event_t::object_start ||
              ev == nlohmann::json::parse_event_t::array_start) {
            CEILING_ENSURE(++depth <= kMaxDepth, "{}: JSON nested deeper than {}", where,
                           kMaxDepth);
          } else if (ev == nlohmann::json::parse_event_t::object_end ||
                     ev == nlohmann::json::parse_event_t::array_end) {
            --depth;
          }
          return true;
        },
        /*allow_exceptions=*/false);
    CEILING_ENSURE(!obj.is_discarded(), "{}: not valid JSON", where);
    CEILING_ENSURE(obj.is_object(), "{}: must be a JSON object with \"prompt\" or \"messages\"",
                   where);
    PromptLine pl;
    pl.line = n;
    const bool has_prompt = obj.contains("prompt"), has_messages = obj.contains("messages");
    CEILING_ENSURE(has_prompt != has_messages,
                   "{}: needs exactly one of \"prompt\" and \"messages\"", where);
    if (has_prompt) {
      CEILING_ENSURE(obj["prompt"].is_string(), "{}: 'prompt' must be a string", where);
      pl.prompt = obj["prompt"].get<std::string>();
      CEILING_ENSURE(!pl.prompt->empty(), "{}: 'prompt' is empty", where);
    } else {
      CEILING_ENSURE(obj["messages"].is_array() && !obj["messages"].empty(),
                     "{}: 'messages' must be a non-empty list", where);
      pl.messages = nlohmann::ordered_json::parse(obj["messages"].dump());
    }
    RequestParams probe;  // checks the fields now, so errors come before any work
    apply_request_fields(probe, obj, where);
    pl.fields = std::move(obj);
    lines.push_back(std::move(pl));
  }
  CEILING_ENSURE(!lines.empty(), "{}: no prompts (the file is empty)", path.string());
  return lines;
}

}  // namespace ceiling::serve
