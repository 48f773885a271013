#include "tokenizer/tokenizer.h"

#include "core/status.h"
#include "tokenizer/impl.h"
#include "tokenizer/utf8.h"

namespace ceiling {

namespace tok {

std::vector<int32_t> TokenizerImpl::encode(std::string_view text, bool add_special_tokens) const {
  if (const auto bad = utf8_find_invalid(text); bad != std::string_view::npos) {
    fail("encode: the text is not valid UTF-8 (byte {} of {})", bad, text.size());
  }
  std::vector<int32_t> ids;
  std::vector<Piece> pieces;
  // 1. Added tokens that match the raw text; 2. normalize the rest; 3. added tokens that match
  // the normalized text; 4. pre-tokenize and run BPE on each word.
  for (const AddedVocab::Segment& seg : added.split(text, /*normalized=*/false)) {
    if (seg.id >= 0) {
      ids.push_back(seg.id);
      continue;
    }
    if (seg.end == seg.begin) continue;
    std::string norm(text.substr(seg.begin, seg.end - seg.begin));
    if (normalizer) norm = normalizer->normalize(std::move(norm));
    for (const AddedVocab::Segment& sub : added.split(norm, /*normalized=*/true)) {
      if (sub.id >= 0) {
        ids.push_back(sub.id);
        continue;
      }
      if (sub.end == sub.begin) continue;
      pieces.clear();
      pieces.push_back(
          {norm.substr(sub.begin, sub.end - sub.begin), seg.begin == 0 && sub.begin == 0});
      if (pre_tokenizer) pre_tokenizer->apply(pieces);
      for (const Piece& p : pieces) model->encode_word(p.text, ids);
    }
  }
  return add_special_tokens ? post.process(ids) : ids;
}

std::optional<std::string_view> TokenizerImpl::token_of(int32_t id) const {
  if (const AddedToken* t = added.find(id)) return t->text;
  return model->id_to_token(id);
}

bool TokenizerImpl::decodes(int32_t id, bool skip_special) const {
  const auto t = token_of(id);
  return t && !(skip_special && added.is_special_content(*t));
}

DecodeResult TokenizerImpl::decode(std::span<const int32_t> ids, bool skip_special, bool at_start,
                                   bool at_end) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (decodes(id, skip_special)) tokens.emplace_back(*token_of(id));
  }
  return decoder.decode(std::move(tokens), at_start, at_end);
}

}  // namespace tok

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  return impl_->encode(text, add_special_tokens);
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  return impl_->decode(ids, skip_special_tokens, /*at_start=*/true, /*at_end=*/true).text;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (auto id = impl_->added.token_to_id(token)) return id;
  return impl_->model->token_to_id(token);
}

std::string Tokenizer::id_to_token(int32_t id) const {
  const auto t = impl_->token_of(id);
  return t ? std::string(*t) : std::string();
}

int Tokenizer::vocab_size() const {
  return impl_->vocab_size;
}
std::optional<int32_t> Tokenizer::bos_id() const {
  return impl_->bos;
}
std::optional<int32_t> Tokenizer::eos_id() const {
  return impl_->eos;
}
std::optional<int32_t> Tokenizer::pad_id() const {
  return impl_->pad;
}
const std::string& Tokenizer::chat_template() const {
  return impl_->config.chat_template;
}
const TokenizerConfig& Tokenizer::config() const {
  return impl_->config;
}

bool Tokenizer::is_special(int32_t id) const {
  const auto t = impl_->token_of(id);
  return t && impl_->added.is_special_content(*t);
}

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skip_special)
    : tokenizer_(tokenizer), skip_special_(skip_special) {}

std::string StreamDecoder::push(int32_t id) {
  const tok::TokenizerImpl& impl = tokenizer_.impl();
  if (!impl.decodes(id, skip_special_)) return {};
  window_.push_back(id);
  tok::DecodeResult r = impl.decode(window_, skip_special_, at_start_, /*at_end=*/false);
  if (!r.cut_ok) return {};
  at_start_ = false;
  window_.clear();
  return std::move(r.text);
}

std::string StreamDecoder::flush() {
  tok::DecodeResult r =
      tokenizer_.impl().decode(window_, skip_special_, at_start_, /*at_end=*/true);
  at_start_ = true;
  window_.clear();
  return std::move(r.text);
}

}  // namespace ceiling
