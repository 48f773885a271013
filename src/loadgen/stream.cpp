#include "loadgen/stream.h"

#include <nlohmann/json.hpp>

namespace ceiling::loadgen {

namespace {

// The output of choices[0], or nullptr when the chunk carries none (see stream.h).
const nlohmann::json* chunk_text(Api api, const nlohmann::json& choice) {
  const bool closing = choice.contains("finish_reason") && !choice["finish_reason"].is_null();
  if (api == Api::kCompletions) {
    const auto t = choice.find("text");
    if (t == choice.end() || !t->is_string()) return nullptr;
    return t->get_ref<const std::string&>().empty() && closing ? nullptr : &*t;
  }
  const auto d = choice.find("delta");
  if (d == choice.end() || !d->is_object()) return nullptr;
  for (const char* key : {"content", "reasoning_content"}) {
    const auto c = d->find(key);
    if (c == d->end() || !c->is_string()) continue;
    if (!c->get_ref<const std::string&>().empty()) return &*c;
    if (!d->contains("role") && !closing) return &*c;
  }
  return nullptr;
}

int64_t count(const nlohmann::json& usage, const char* key) {
  const auto v = usage.find(key);
  return v != usage.end() && v->is_number_integer() ? v->get<int64_t>() : -1;
}

}  // namespace

std::string one_line(std::string_view s, size_t max) {
  std::string out;
  for (const char c : s) {
    if (out.size() >= max) {
      out += "...";
      break;
    }
    out.push_back(c == '\n' || c == '\r' || c == '\t' ? ' ' : c);
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

void StreamAccumulator::fail(std::string_view why) {
  if (failed_) return;
  failed_ = true;
  r_.success = false;
  r_.error = one_line(why);
}

bool StreamAccumulator::on_event(std::string_view data, Clock::time_point now) {
  if (failed_) return false;
  if (done_) return true;  // nothing counts after [DONE]
  ++events_;
  if (data == "[DONE]") {
    done_ = true;
    done_at_ = now;
    return true;
  }
  const nlohmann::json j = nlohmann::json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    fail(std::string("malformed SSE data: ") + std::string(data.substr(0, 120)));
    return false;
  }
  if (const auto e = j.find("error"); e != j.end() && !e->is_null()) {
    const bool has_msg = e->is_object() && e->contains("message") && (*e)["message"].is_string();
    fail("error in stream: " + (has_msg ? (*e)["message"].get<std::string>() : e->dump()));
    return false;
  }
  if (const auto c = j.find("choices");
      c != j.end() && c->is_array() && !c->empty() && (*c)[0].is_object()) {
    if (const nlohmann::json* text = chunk_text(api_, (*c)[0])) {
      if (r_.content_chunks == 0) {
        r_.ttft_s = since_sent(now);
      } else {
        r_.itl_s.push_back(std::chrono::duration<double>(now - last_).count());
      }
      last_ = now;
      ++r_.content_chunks;
      r_.text += text->get_ref<const std::string&>();
    }
  }
  if (const auto u = j.find("usage"); u != j.end() && u->is_object()) {
    if (const int64_t n = count(*u, "completion_tokens"); n >= 0) r_.usage_output_tokens = n;
    if (const int64_t n = count(*u, "prompt_tokens"); n >= 0) r_.usage_prompt_tokens = n;
  }
  return true;
}

void StreamAccumulator::finish(Clock::time_point now) {
  r_.e2el_s = since_sent(done_ ? done_at_ : now);
  if (failed_) return;
  if (!done_ && events_ == 0) {
    fail("the response held no SSE event (a server that ignores stream: true?)");
  } else if (!done_) {
    fail("the stream ended before data: [DONE]");
  } else if (r_.content_chunks == 0) {
    fail("the stream carried no output chunk");
  } else {
    r_.success = true;
  }
}

}  // namespace ceiling::loadgen
