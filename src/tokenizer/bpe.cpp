#include "tokenizer/bpe.h"

#include <algorithm>
#include <mutex>
#include <queue>

#include "core/file_read.h"
#include "tokenizer/utf8.h"

namespace ceiling::tok {

std::unique_ptr<Bpe> Bpe::parse(const Json& model, const JsonPath& p, const BpeTables& tables) {
  if (!model.is_object())
    json_fail(p, fmt::format("expected an object, got {}", model.type_name()));
  if (const auto type = json_opt_string(model, "type", p); type && *type != "BPE") {
    json_fail(p / "type", fmt::format("model type \"{}\" is not supported (only BPE)", *type));
  }
  if (const Json* dropout = json_find(model, "dropout", p)) {
    if (!dropout->is_number() || dropout->get<double>() != 0.0) {
      json_fail(p / "dropout", "BPE dropout is not supported (must be null)");
    }
  }
  auto bpe = std::unique_ptr<Bpe>(new Bpe());
  bpe->unk_token_ = json_opt_string(model, "unk_token", p);
  bpe->prefix_ = json_opt_string(model, "continuing_subword_prefix", p).value_or("");
  bpe->suffix_ = json_opt_string(model, "end_of_word_suffix", p).value_or("");
  bpe->fuse_unk_ = json_opt_bool(model, "fuse_unk", p, false);
  bpe->byte_fallback_ = json_opt_bool(model, "byte_fallback", p, false);
  bpe->ignore_merges_ = json_opt_bool(model, "ignore_merges", p, false);

  // The vocab and merges themselves were streamed into `tables`; the DOM only keeps their type.
  const Json& vocab = json_require(model, "vocab", p);
  if (!vocab.is_object()) {
    json_fail(p / "vocab", fmt::format("expected an object, got {}", vocab.type_name()));
  }
  bpe->vocab_.reserve(tables.vocab.size());
  int32_t max_id = -1;
  for (const auto& [token, id] : tables.vocab) {
    bpe->vocab_.insert(token, id);
    max_id = std::max(max_id, id);
  }
  bpe->id_to_token_.resize(static_cast<std::size_t>(max_id + 1));
  bpe->id_present_.assign(static_cast<std::size_t>(max_id + 1), 0);
  bpe->vocab_.for_each([&](std::string_view token, int32_t id) {
    if (bpe->id_present_[id]) return;  // duplicate id: keep one, as HF's reverse map does
    bpe->id_present_[id] = 1;
    bpe->id_to_token_[id] = token;
  });
  for (int b = 0; b < 256; ++b) {
    const auto id = bpe->token_to_id(fmt::format("<0x{:02X}>", b));
    bpe->byte_ids_[b] = id.value_or(-1);
  }

  const JsonPath mp = p / "merges";
  if (const Json* merges = json_find(model, "merges", p); merges && !merges->is_array()) {
    json_fail(mp, fmt::format("expected an array, got {}", merges->type_name()));
  }
  if (tables.merges.size() > static_cast<std::size_t>(kMaxTokenId))
    json_fail(mp, "too many merges");
  bpe->merges_.reserve(tables.merges.size());
  const std::size_t prefix_len = bpe->prefix_.size();
  std::string joined;
  std::optional<int32_t> a, b, merged;
  auto resolve = [&](std::string_view left, std::string_view right) {
    a = bpe->token_to_id(left);
    b = bpe->token_to_id(right);
    merged.reset();
    if (!a || !b || right.size() < prefix_len) return false;
    joined.assign(left);
    joined.append(right.substr(prefix_len));
    merged = bpe->token_to_id(joined);
    return merged.has_value();
  };
  for (std::size_t i = 0; i < tables.merges.size(); ++i) {
    const BpeTables::Merge& m = tables.merges[i];
    const JsonPath ip = mp.at(i);
    if (m.pair) {
      if (!resolve(m.a, m.b)) {
        json_fail(ip, fmt::format("merge [{}, {}] names a token not in the vocab (or makes one)",
                                  quote_text(m.a, 64), quote_text(m.b, 64)));
      }
    } else {
      // "a b" with exactly one space, as Hugging Face tokenizers requires (a merge with more
      // is ambiguous, and trying every split point would be quadratic in its length).
      const std::string_view s = m.a;
      const auto first = s.find(' ');
      if (first == std::string::npos)
        json_fail(ip, fmt::format("merge {} has no space", quote_text(s, 64)));
      if (s.find(' ', first + 1) != std::string::npos)
        json_fail(ip, fmt::format("merge {} has more than one space (write it as [\"a\", \"b\"])",
                                  quote_text(s, 64)));
      if (!resolve(s.substr(0, first), s.substr(first + 1)))
        json_fail(ip, fmt::format("merge {} names a token not in the vocab (or makes one)",
                                  quote_text(s, 64)));
    }
    // A repeated pair takes its last rank, as HF's map does.
    bpe->merges_.insert_or_assign(pair_key(*a, *b), Merge{static_cast<int32_t>(i), *merged});
  }
  if (bpe->unk_token_ && !bpe->token_to_id(*bpe->unk_token_)) {
    // HF fails only when an unknown character needs it; refusing early gives a clearer error.
    json_fail(p / "unk_token", fmt::format("\"{}\" is not in the vocab", *bpe->unk_token_));
  }
  return bpe;
}

std::optional<int32_t> Bpe::token_to_id(std::string_view token) const {
  return vocab_.find(token);
}

std::optional<std::string_view> Bpe::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= id_to_token_.size() || !id_present_[id]) {
    return std::nullopt;
  }
  return id_to_token_[id];
}

void Bpe::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (auto id = token_to_id(word)) {
      out.push_back(*id);
      return;
    }
  }
  {
    std::shared_lock lock(cache_mutex_);
    auto it = cache_.find(word);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const std::size_t start = out.size();
  merge_word(word, out);
  if (word.size() < kCacheMaxWordBytes) {
    std::unique_lock lock(cache_mutex_);
    if (cache_.size() < kCacheCapacity) {
      cache_.emplace(std::string(word), std::vector<int32_t>(out.begin() + start, out.end()));
    }
  }
}

void Bpe::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  struct Symbol {
    int32_t id;
    int32_t prev, next;
    bool alive;
  };
  std::vector<Symbol> syms;
  syms.reserve(word.size());
  auto add = [&](int32_t id) {
    const auto n = static_cast<int32_t>(syms.size());
    if (n > 0) syms.back().next = n;
    syms.push_back({id, n - 1, -1, true});
  };
  int32_t pending_unk = -1;  // HF adds a (fused) unk only when a known char follows
  std::string buf;
  for (std::size_t i = 0; i < word.size();) {
    const std::size_t n =
        static_cast<std::size_t>(utf8_seq_len(static_cast<unsigned char>(word[i])));
    const bool first = i == 0, last = i + n >= word.size();
    std::string_view ch = word.substr(i, n);
    i += n;
    std::string_view key = ch;
    if ((!first && !prefix_.empty()) || (last && !suffix_.empty())) {
      buf.clear();
      if (!first) buf += prefix_;
      buf += ch;
      if (last) buf += suffix_;
      key = buf;
    }
    if (auto id = token_to_id(key)) {
      if (pending_unk >= 0) add(pending_unk);
      pending_unk = -1;
      add(*id);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (unsigned char b : key) all = all && byte_ids_[b] >= 0;
      if (all) {
        for (unsigned char b : key) add(byte_ids_[b]);
        continue;
      }
    }
    if (unk_token_) {
      const int32_t unk = *token_to_id(*unk_token_);
      if (pending_unk >= 0 && !fuse_unk_) add(pending_unk);
      pending_unk = unk;
    }
    // Without unk_token an unknown character is dropped, as in HF.
  }
  if (pending_unk >= 0) add(pending_unk);

  struct Candidate {
    int32_t rank, pos, new_id;
    bool operator<(const Candidate& o) const {  // max-heap: lowest rank, then leftmost, on top
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::vector<Candidate> heap_storage;
  heap_storage.reserve(syms.size());
  std::priority_queue<Candidate> queue(std::less<Candidate>(), std::move(heap_storage));
  auto find_merge = [&](int32_t a, int32_t b) { return merges_.find(pair_key(a, b)); };
  for (std::size_t k = 0; k + 1 < syms.size(); ++k) {
    if (const Merge* m = find_merge(syms[k].id, syms[k + 1].id)) {
      queue.push({m->rank, static_cast<int32_t>(k), m->new_id});
    }
  }
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& cur = syms[top.pos];
    if (!cur.alive || cur.next < 0) continue;
    const int32_t right_pos = cur.next;
    const Symbol right = syms[right_pos];
    const Merge* m = find_merge(cur.id, right.id);
    if (m == nullptr || m->new_id != top.new_id) continue;  // stale entry
    cur.id = top.new_id;
    cur.next = right.next;
    syms[right_pos].alive = false;
    if (right.next >= 0) syms[right.next].prev = top.pos;
    if (cur.prev >= 0) {
      if (const Merge* pm = find_merge(syms[cur.prev].id, cur.id)) {
        queue.push({pm->rank, cur.prev, pm->new_id});
      }
    }
    if (cur.next >= 0) {
      if (const Merge* nm = find_merge(cur.id, syms[cur.next].id)) {
        queue.push({nm->rank, top.pos, nm->new_id});
      }
    }
  }
  for (int32_t k = syms.empty() ? -1 : 0; k >= 0; k = syms[k].next) out.push_back(syms[k].id);
}

}  // namespace ceiling::tok
