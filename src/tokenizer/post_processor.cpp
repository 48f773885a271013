#include "tokenizer/post_processor.h"

#include "tokenizer/bpe.h"

namespace ceiling::tok {

namespace {

using Item = std::variant<std::monostate, std::vector<int32_t>>;

std::vector<int32_t> parse_ids(const Json& j, const JsonPath& p) {
  if (!j.is_array()) json_fail(p, fmt::format("expected an array of ids, got {}", j.type_name()));
  std::vector<int32_t> ids;
  for (std::size_t i = 0; i < j.size(); ++i) {
    ids.push_back(static_cast<int32_t>(json_int(j[i], p.at(i), 0, kMaxTokenId)));
  }
  return ids;
}

std::vector<Item> parse_template(const Json& j, const JsonPath& p) {
  const JsonPath sp = p / "single";
  const Json& single = json_require(j, "single", p);
  if (!single.is_array()) json_fail(sp, "expected an array of template pieces");
  const Json& specials = json_require(j, "special_tokens", p);
  std::vector<Item> items;
  for (std::size_t i = 0; i < single.size(); ++i) {
    const JsonPath ip = sp.at(i);
    if (const Json* special = json_find(single[i], "SpecialToken", ip)) {
      const std::string name = json_string(json_require(*special, "id", ip / "SpecialToken"),
                                           ip / "SpecialToken" / "id");
      const JsonPath tp = p / "special_tokens" / name;
      const Json* entry = json_find(specials, name, p / "special_tokens");
      if (entry == nullptr) json_fail(tp, "missing (the template names it)");
      items.emplace_back(parse_ids(json_require(*entry, "ids", tp), tp / "ids"));
    } else if (json_find(single[i], "Sequence", ip) != nullptr) {
      items.emplace_back(std::monostate{});
    } else {
      json_fail(ip, "expected {\"SpecialToken\": ...} or {\"Sequence\": ...}");
    }
  }
  return items;
}

// BertProcessing / RobertaProcessing: "cls": ["[CLS]", 101], "sep": ["[SEP]", 102].
std::vector<Item> parse_cls_sep(const Json& j, const JsonPath& p) {
  auto id_of = [&](const char* key) {
    const Json& pair = json_require(j, key, p);
    if (!pair.is_array() || pair.size() != 2) json_fail(p / key, "expected [token, id]");
    return static_cast<int32_t>(json_int(pair[1], (p / key).at(1), 0, kMaxTokenId));
  };
  std::vector<Item> items;
  items.emplace_back(std::vector<int32_t>{id_of("cls")});
  items.emplace_back(std::monostate{});
  items.emplace_back(std::vector<int32_t>{id_of("sep")});
  return items;
}

void parse_into(const Json& j, const JsonPath& p, std::vector<std::vector<Item>>& out) {
  const std::string type = json_string(json_require(j, "type", p), p / "type");
  if (type == "TemplateProcessing") {
    out.push_back(parse_template(j, p));
  } else if (type == "BertProcessing" || type == "RobertaProcessing") {
    out.push_back(parse_cls_sep(j, p));
  } else if (type == "ByteLevel") {
    // Adjusts offsets only.
  } else if (type == "Sequence") {
    const Json& list = json_require(j, "processors", p);
    if (!list.is_array()) json_fail(p / "processors", "expected an array");
    for (std::size_t i = 0; i < list.size(); ++i) {
      if (!list[i].is_null()) parse_into(list[i], (p / "processors").at(i), out);
    }
  } else {
    json_fail(p / "type", fmt::format("unsupported post_processor \"{}\"", type));
  }
}

}  // namespace

PostProcessor PostProcessor::parse(const Json* j, const JsonPath& p) {
  PostProcessor pp;
  if (j != nullptr) parse_into(*j, p, pp.templates_);
  return pp;
}

std::vector<int32_t> PostProcessor::process(const std::vector<int32_t>& ids) const {
  std::vector<int32_t> cur = ids;
  for (const auto& tmpl : templates_) {
    std::vector<int32_t> next;
    next.reserve(cur.size() + 4);
    for (const Item& item : tmpl) {
      if (const auto* special = std::get_if<std::vector<int32_t>>(&item)) {
        next.insert(next.end(), special->begin(), special->end());
      } else {
        next.insert(next.end(), cur.begin(), cur.end());
      }
    }
    cur = std::move(next);
  }
  return cur;
}

std::optional<int32_t> PostProcessor::leading_id() const {
  if (templates_.empty() || templates_.front().empty()) return std::nullopt;
  const auto* special = std::get_if<std::vector<int32_t>>(&templates_.front().front());
  if (special == nullptr || special->empty()) return std::nullopt;
  return special->front();
}

}  // namespace ceiling::tok
