#include "tokenizer/json_sax.h"

#include <algorithm>

#include "core/file_read.h"
#include "core/json_bounded.h"
#include "tokenizer/bpe.h"

namespace ceiling::tok {

namespace {

constexpr std::size_t kMaxDepth = 256;

// A vocab key for an error message: as is when short printable ASCII, else quoted and cut.
std::string key_for_error(const std::string& k) {
  const bool plain = k.size() <= 64 && std::all_of(k.begin(), k.end(), [](char c) {
                       return c > 0x20 && c < 0x7f && c != '\'' && c != '\\';
                     });
  return plain ? k : quote_text(k, 64);
}

class Builder final : public nlohmann::json_sax<Json> {
 public:
  explicit Builder(ParsedTokenizerJson& out) : out_(out) {}
  std::string error;

  bool null() override { return value(nullptr); }
  bool boolean(bool v) override { return value(v); }
  bool number_integer(number_integer_t v) override {
    if (mode_ == Mode::kVocab) return vocab_id(v < 0 ? -1 : v);
    return value(v);
  }
  bool number_unsigned(number_unsigned_t v) override {
    if (mode_ == Mode::kVocab)
      return vocab_id(v > static_cast<uint64_t>(kMaxTokenId) ? -2 : static_cast<int64_t>(v));
    return value(v);
  }
  bool number_float(number_float_t v, const string_t&) override { return value(v); }
  bool binary(binary_t&) override { return fail_at("binary values are not JSON"); }
  bool string(string_t& s) override {
    if (mode_ == Mode::kMerges) {
      out_.bpe.merges.push_back({std::move(s), {}, false});
      return true;
    }
    if (mode_ == Mode::kMergePair) {
      if (pair_size_ == 0)
        out_.bpe.merges.back().a = std::move(s);
      else if (pair_size_ == 1)
        out_.bpe.merges.back().b = std::move(s);
      ++pair_size_;
      return true;
    }
    return value(std::move(s));
  }
  bool key(string_t& k) override {
    key_ = std::move(k);
    return true;
  }
  bool start_object(std::size_t) override {
    if (mode_ != Mode::kNone) return capture_type_error("an object");
    const bool capture = at_model_member("vocab");
    if (!open(Json::object())) return false;
    if (capture) {
      out_.bpe.vocab.clear();
      mode_ = Mode::kVocab;
    }
    return true;
  }
  bool end_object() override {
    mode_ = Mode::kNone;
    stack_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override {
    if (mode_ == Mode::kMerges) {
      out_.bpe.merges.push_back({{}, {}, true});
      pair_size_ = 0;
      mode_ = Mode::kMergePair;
      return true;
    }
    if (mode_ != Mode::kNone) return capture_type_error("an array");
    const bool capture = at_model_member("merges");
    if (!open(Json::array())) return false;
    if (capture) {
      out_.bpe.merges.clear();
      mode_ = Mode::kMerges;
    }
    return true;
  }
  bool end_array() override {
    if (mode_ == Mode::kMergePair) {
      if (pair_size_ != 2) {
        return fail_at(fmt::format("model.merges[{}]: a merge pair must have two tokens",
                                   out_.bpe.merges.size() - 1));
      }
      mode_ = Mode::kMerges;
      return true;
    }
    mode_ = Mode::kNone;
    stack_.pop_back();
    return true;
  }
  bool parse_error(std::size_t byte, const std::string&,
                   const nlohmann::detail::exception& e) override {
    error = fmt::format("not valid JSON (syntax error at byte {}: {})", byte, json_error_rule(e));
    return false;
  }

 private:
  enum class Mode { kNone, kVocab, kMerges, kMergePair };
  struct Frame {
    Json* node;
    std::string key;  // the key this node has in its parent object ("" in an array / root)
  };

  bool fail_at(std::string msg) {
    error = std::move(msg);
    return false;
  }
  bool capture_type_error(const char* what) {
    if (mode_ == Mode::kVocab) {
      return fail_at(
          fmt::format("model.vocab.{}: expected an integer id, got {}", key_for_error(key_), what));
    }
    return fail_at(fmt::format("model.merges[{}]: expected \"a b\" or [\"a\", \"b\"], got {}",
                               out_.bpe.merges.size(), what));
  }
  bool vocab_id(int64_t id) {
    if (id < 0) {
      return fail_at(
          fmt::format("model.vocab.{}: id must be in [0, {}]", key_for_error(key_), kMaxTokenId));
    }
    out_.bpe.vocab.emplace_back(std::move(key_), static_cast<int32_t>(id));
    return true;
  }
  bool at_model_member(std::string_view name) const {
    return stack_.size() == 2 && stack_[1].key == "model" && stack_[1].node->is_object() &&
           key_ == name;
  }
  Json* insert(Json&& v) {
    if (stack_.empty()) {
      out_.dom = std::move(v);
      return &out_.dom;
    }
    Json& parent = *stack_.back().node;
    if (parent.is_object()) {
      Json& slot = parent[key_];
      slot = std::move(v);
      return &slot;
    }
    parent.push_back(std::move(v));
    return &parent.back();
  }
  bool value(Json&& v) {
    if (mode_ == Mode::kVocab) return capture_type_error(v.type_name());
    if (mode_ == Mode::kMerges || mode_ == Mode::kMergePair)
      return capture_type_error(v.type_name());
    insert(std::move(v));
    return true;
  }
  bool open(Json&& container) {
    if (stack_.size() >= kMaxDepth) return fail_at("nested too deeply");
    const bool in_object = !stack_.empty() && stack_.back().node->is_object();
    std::string k = in_object ? key_ : std::string();
    Json* node = insert(std::move(container));
    stack_.push_back({node, std::move(k)});
    return true;
  }

  ParsedTokenizerJson& out_;
  std::vector<Frame> stack_;
  std::string key_;
  Mode mode_ = Mode::kNone;
  int pair_size_ = 0;
};

}  // namespace

ParsedTokenizerJson parse_tokenizer_json_text(std::string_view text, const std::string& origin) {
  ParsedTokenizerJson out;
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos)
    fail("{}: not valid JSON (NUL byte at byte {})", origin, nul);
  Builder builder(out);
  bool ok = false;
  try {
    ok = Json::sax_parse(text, &builder);
  } catch (const Json::exception& e) {
    fail("{}: not valid JSON ({})", origin, json_error_rule(e));
  }
  if (!ok) fail("{}: {}", origin, builder.error.empty() ? "not valid JSON" : builder.error);
  return out;
}

}  // namespace ceiling::tok
