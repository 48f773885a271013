// Python-style argument binding for filters, tests, methods and globals: positional and keyword
// arguments matched against a parameter list, with Python's error messages.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/template/value.h"

namespace ceiling::jinja {

class ArgReader {
 public:
  // `first_pos` skips positional arguments already consumed (e.g. a filter name in map()).
  ArgReader(const CallArgs& args, std::string_view fn,
            std::initializer_list<std::string_view> params, size_t first_pos = 0)
      : args_(args), fn_(fn), params_(params), first_(first_pos) {
    if (args.pos.size() - std::min(first_pos, args.pos.size()) > params_.size())
      fail("{}() takes at most {} arguments ({} given)", fn, params_.size(),
           args.pos.size() - first_pos);
    for (const auto& [k, v] : args.kw) {
      bool known = false;
      for (size_t i = 0; i < params_.size(); ++i)
        if (params_[i] == k) {
          known = true;
          if (first_ + i < args.pos.size())
            fail("{}() got multiple values for argument '{}'", fn, k);
        }
      if (!known) fail("{}() got an unexpected keyword argument '{}'", fn, k);
    }
  }

  // The i-th parameter, or nullptr when not passed.
  const Value* get(size_t i) const {
    if (first_ + i < args_.pos.size()) return &args_.pos[first_ + i];
    for (const auto& [k, v] : args_.kw)
      if (k == params_[i]) return &v;
    return nullptr;
  }
  Value get_or(size_t i, Value dflt) const {
    const Value* v = get(i);
    return v ? *v : std::move(dflt);
  }
  const Value& require(size_t i) const {
    const Value* v = get(i);
    if (!v) fail("{}() missing required argument '{}'", fn_, params_[i]);
    return *v;
  }
  int64_t get_int(size_t i, int64_t dflt) const {
    const Value* v = get(i);
    if (!v || v->is_none()) return dflt;
    if (v->kind() != Value::Kind::kInt && v->kind() != Value::Kind::kBool)
      fail("{}() argument '{}' must be an integer, not '{}'", fn_, params_[i], type_name(*v));
    return v->as_int();
  }
  bool get_bool(size_t i, bool dflt) const {
    const Value* v = get(i);
    return v ? truthy(*v) : dflt;
  }

 private:
  const CallArgs& args_;
  std::string_view fn_;
  std::vector<std::string_view> params_;
  size_t first_;
};

}  // namespace ceiling::jinja
