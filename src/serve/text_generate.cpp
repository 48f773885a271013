#include "serve/text_generate.h"

#include "engine/stop_strings.h"

namespace ceiling::engine {

namespace {

// Drops the first `skip` bytes of the decoder's output stream (the prompt's own text).
class PromptSkipper {
 public:
  explicit PromptSkipper(size_t skip) : skip_(skip) {}
  std::string operator()(std::string s) {
    const size_t n = std::min(skip_, s.size());
    skip_ -= n;
    return s.substr(n);
  }

 private:
  size_t skip_;
};

}  // namespace

TextGenerateResult generate_text(Generator& generator, const Tokenizer& tokenizer,
                                 const std::vector<int32_t>& prompt, const GenerateOptions& options,
                                 const std::vector<std::string>& stop_strings,
                                 const std::function<void(std::string_view)>& on_text) {
  TextGenerateResult result;
  StreamDecoder decoder(tokenizer, /*skip_special=*/true);
  PromptSkipper skip(tokenizer.decode(prompt, /*skip_special_tokens=*/true).size());
  for (int32_t id : prompt) skip(decoder.push(id));  // primes the decoder with the prompt
  StopStringMatcher stops(stop_strings);
  auto emit = [&](const std::string& text) {
    if (text.empty()) return;
    result.text += text;
    if (on_text) on_text(text);
  };
  result.tokens = generator.generate(prompt, options, [&](int32_t id) {
    emit(stops.push(skip(decoder.push(id))));
    return !stops.stopped();
  });
  if (!stops.stopped()) {
    emit(stops.push(skip(decoder.flush())));
    emit(stops.flush());
    if (stops.stopped()) result.tokens.finish = FinishReason::kStopString;
  }
  return result;
}

}  // namespace ceiling::engine
