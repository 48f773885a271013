#include "tokenizer/added_vocab.h"

#include <algorithm>

#include "tokenizer/utf8.h"

namespace ceiling::tok {

namespace {

char32_t last_char(std::string_view s) {
  std::size_t k = s.size() - 1;
  while (k > 0 && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
  char32_t c = 0;
  utf8_decode(s, k, &c);
  return c;
}

char32_t first_char(std::string_view s) {
  char32_t c = 0;
  utf8_decode(s, 0, &c);
  return c;
}

// Start of the whitespace run that ends `s` (s.size() when none).
std::size_t trailing_space_start(std::string_view s) {
  std::size_t e = s.size();
  while (e > 0) {
    std::size_t k = e - 1;
    while (k > 0 && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
    char32_t c = 0;
    utf8_decode(s, k, &c);
    if (!is_white_space(c)) break;
    e = k;
  }
  return e;
}

std::size_t leading_space_len(std::string_view s) {
  std::size_t b = 0;
  while (b < s.size()) {
    char32_t c = 0;
    const int n = utf8_decode(s, b, &c);
    if (!is_white_space(c)) break;
    b += n;
  }
  return b;
}

}  // namespace

void AddedVocab::MatchSet::build() {
  by_first_byte.assign(256, {});
  for (std::size_t i = 0; i < patterns.size(); ++i) {
    if (patterns[i].empty()) continue;
    by_first_byte[static_cast<unsigned char>(patterns[i][0])].push_back(static_cast<int32_t>(i));
  }
  for (auto& bucket : by_first_byte) {
    // Longest first; equal lengths keep insertion order (the first added wins, as in HF's trie).
    std::stable_sort(bucket.begin(), bucket.end(),
                     [&](int32_t a, int32_t b) { return patterns[a].size() > patterns[b].size(); });
  }
}

AddedVocab AddedVocab::parse(const Json* list, const JsonPath& p, const Bpe& model,
                             const Normalizer* normalizer) {
  AddedVocab v;
  if (list == nullptr) {
    v.raw_.build();
    v.normalized_.build();
    return v;
  }
  if (!list->is_array()) json_fail(p, fmt::format("expected an array, got {}", list->type_name()));
  std::vector<AddedToken> parsed;
  for (std::size_t i = 0; i < list->size(); ++i) {
    const Json& j = (*list)[i];
    const JsonPath ip = p.at(i);
    AddedToken t;
    t.content = json_string(json_require(j, "content", ip), ip / "content");
    t.special = json_opt_bool(j, "special", ip, false);
    t.single_word = json_opt_bool(j, "single_word", ip, false);
    t.lstrip = json_opt_bool(j, "lstrip", ip, false);
    t.rstrip = json_opt_bool(j, "rstrip", ip, false);
    t.normalized = json_opt_bool(j, "normalized", ip, !t.special);
    if (const Json* id = json_find(j, "id", ip)) json_int(*id, ip / "id", 0, kMaxTokenId);
    if (t.content.empty()) continue;
    t.text = t.normalized && normalizer ? normalizer->normalize(t.content) : t.content;
    parsed.push_back(std::move(t));
  }
  std::vector<AddedToken> specials, plain;  // HF matches specials first, then the others
  for (const AddedToken& t : parsed) {
    if (t.special && !v.special_contents_.contains(t.content)) {
      v.special_contents_.insert(t.content);
      specials.push_back(t);
    }
  }
  int64_t max_added = -1;
  for (AddedToken t : parsed) {
    // HF re-derives the id rather than trusting the file's: an existing token keeps its id.
    if (auto known = v.token_to_id(t.content)) {
      t.id = *known;
    } else if (auto in_model = model.token_to_id(t.content)) {
      t.id = *in_model;
    } else {
      const int64_t model_size = model.vocab_entries();
      const int64_t next = max_added >= model_size || model_size == 0 ? max_added + 1 : model_size;
      if (next > kMaxTokenId) json_fail(p, "too many added tokens");
      t.id = static_cast<int32_t>(next);
    }
    max_added = std::max<int64_t>(max_added, t.id);
    v.by_content_[t.content] = t.id;
    if (auto it = v.by_id_.find(t.id); it != v.by_id_.end()) {
      v.tokens_[it->second] = t;
    } else {
      v.by_id_[t.id] = v.tokens_.size();
      v.tokens_.push_back(t);
    }
    if (!v.special_contents_.contains(t.content)) plain.push_back(t);
  }
  for (const auto* group : {&specials, &plain}) {
    for (const AddedToken& t : *group) {
      const int32_t id = *v.token_to_id(t.content);
      MatchSet& set = t.normalized ? v.normalized_ : v.raw_;
      set.patterns.push_back(t.text);
      set.ids.push_back(id);
    }
  }
  v.raw_.build();
  v.normalized_.build();
  return v;
}

std::vector<AddedVocab::Segment> AddedVocab::split(std::string_view s, bool normalized) const {
  const MatchSet& set = normalized ? normalized_ : raw_;
  std::vector<Segment> out;
  if (s.empty() || set.patterns.empty()) {
    out.push_back({0, s.size(), -1});
    return out;
  }
  std::size_t start_offset = 0;
  std::size_t i = 0;
  while (i < s.size()) {
    int32_t hit = -1;
    for (int32_t k : set.by_first_byte[static_cast<unsigned char>(s[i])]) {
      if (s.compare(i, set.patterns[k].size(), set.patterns[k]) == 0) {
        hit = k;
        break;
      }
    }
    if (hit < 0) {
      ++i;
      continue;
    }
    std::size_t start = i, stop = i + set.patterns[hit].size();
    i = stop;  // the next search starts after this match, whether or not it is kept
    const int32_t id = set.ids[hit];
    const AddedToken& tok = tokens_[by_id_.at(id)];
    if (tok.single_word) {
      const bool start_space = start == 0 || !is_word_char(last_char(s.substr(0, start)));
      const bool stop_space = stop == s.size() || !is_word_char(first_char(s.substr(stop)));
      if (!start_space || !stop_space) continue;
    }
    if (tok.lstrip) start = std::max(trailing_space_start(s.substr(0, start)), start_offset);
    if (tok.rstrip) stop += leading_space_len(s.substr(stop));
    if (start_offset < start) out.push_back({start_offset, start, -1});
    out.push_back({start, stop, id});
    start_offset = stop;
  }
  if (start_offset != s.size()) out.push_back({start_offset, s.size(), -1});
  return out;
}

std::optional<int32_t> AddedVocab::token_to_id(std::string_view content) const {
  auto it = by_content_.find(content);
  if (it == by_content_.end()) return std::nullopt;
  return it->second;
}

const AddedToken* AddedVocab::find(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

bool AddedVocab::is_special_content(std::string_view content) const {
  return special_contents_.contains(content);
}

}  // namespace ceiling::tok
