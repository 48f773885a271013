// The values a template computes with: Python's data model as Jinja2 sees it, in the subset chat
// templates use. Strings are UTF-8; lists, tuples and dicts are immutable and shared (copying a
// Value is cheap); dicts keep insertion order like Python's. namespace() objects are the one
// mutable kind. Undefined carries the message Jinja would raise when it is misused.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "tokenizer/template/budget.h"

namespace ceiling::jinja {

class Value;
class Renderer;

struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
};
using NativeFn = std::function<Value(Renderer&, CallArgs&)>;

// Every shared kind records how deeply it nests (1 + its deepest element): values are built
// bottom-up and immutable, so this bounds the recursion of destroying, printing or comparing
// them, however a template loops (see kMaxValueNesting).
struct Function {
  std::string name;
  NativeFn fn;
  int depth = 1;  // a bound method holds its object
};
struct ListData {
  std::vector<Value> items;
  bool tuple = false;
  // Kind::kIter only: Python's type name ("generator", "dict_items", ...). Views (dict_items,
  // dict_keys, dict_values) have a length and a truth value; iterators are always true.
  const char* iter_type = nullptr;
  bool view = false;
  // A generator whose body failed: Jinja's select/map/... are lazy, so the error surfaces only
  // when (if ever) the generator is iterated.
  std::string deferred_error;
  int depth = 1;
};
struct DictData {
  std::vector<std::pair<Value, Value>> items;
  int depth = 1;
};
// A for-loop's `loop` variable: the (filtered) items and the current position.
struct LoopData {
  std::shared_ptr<const std::vector<Value>> items;
  int64_t index0 = 0;
  int depth = 1;
};
struct NamespaceData {
  std::vector<std::pair<std::string, Value>> attrs;
  Value* find(std::string_view name);
};

class Value {
 public:
  enum class Kind : uint8_t {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kDict,
    kNamespace,
    kFunction,
    kLoop,
    kIter  // results Python would not materialize: generators, reverse iterators, dict views
  };

  Value() = default;  // Undefined, with a generic message
  static Value undefined(std::string hint);
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value number(double d);
  static Value string(std::string s);
  static Value list(std::vector<Value> items, bool tuple = false);
  static Value dict(std::vector<std::pair<Value, Value>> items);
  static Value ns(std::shared_ptr<NamespaceData> data);
  static Value function(std::string name, NativeFn fn, int depth = 1);
  static Value loop(std::shared_ptr<const LoopData> data);
  static Value iter(std::vector<Value> items, const char* type, bool view = false);
  static Value failed_generator(std::string error);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_number() const {  // bool counts, as in Python
    return kind_ == Kind::kBool || kind_ == Kind::kInt || kind_ == Kind::kFloat;
  }
  bool is_list() const { return kind_ == Kind::kList; }  // list or tuple
  bool is_dict() const { return kind_ == Kind::kDict; }

  bool as_bool() const { return std::get<bool>(p_); }
  int64_t as_int() const;   // bool or int
  double as_float() const;  // bool, int or float
  const std::string& as_string() const { return *std::get<StrPtr>(p_); }
  const std::string& undefined_hint() const;
  const ListData& as_list() const { return *std::get<ListPtr>(p_); }
  const DictData& as_dict() const { return *std::get<DictPtr>(p_); }
  NamespaceData& as_ns() const { return *std::get<NsPtr>(p_); }
  const Function& as_fn() const { return *std::get<FnPtr>(p_); }
  const LoopData& as_loop() const { return *std::get<LoopPtr>(p_); }
  const void* identity() const;  // for `is sameas` on shared kinds

 private:
  using StrPtr = std::shared_ptr<const std::string>;
  using ListPtr = std::shared_ptr<const ListData>;
  using DictPtr = std::shared_ptr<const DictData>;
  using NsPtr = std::shared_ptr<NamespaceData>;
  using FnPtr = std::shared_ptr<const Function>;
  using LoopPtr = std::shared_ptr<const LoopData>;
  Kind kind_ = Kind::kUndefined;
  std::variant<std::monostate, bool, int64_t, double, StrPtr, ListPtr, DictPtr, NsPtr, FnPtr,
               LoopPtr>
      p_;
};

inline void Budget::alloc_items(uint64_t items) {
  alloc_bytes(items * sizeof(Value));
}

// Python semantics. Functions taking a Budget charge it for the work they do and fail() on
// type errors with Python's wording.
constexpr int kMaxValueNesting = 1000;
int nesting(const Value& v);  // 0 for scalars
int max_nesting(const std::vector<Value>& items);

bool truthy(const Value& v);
std::string type_name(const Value& v);    // Python's type name: "str", "dict", "NoneType", ...
std::string object_repr(const Value& v);  // Jinja's object_type_repr: "dict object", "None"
std::string to_str(const Value& v, Budget& b);                  // str(v); Undefined -> ""
void append_repr(const Value& v, std::string& out, Budget& b);  // repr(v)
bool equal(const Value& a, const Value& b, Budget& budget);
int compare(const Value& a, const Value& b, Budget& budget);  // <0, 0, >0; fails when unordered
void require_hashable(const Value& key);
const Value* dict_find(const DictData& d, const Value& key, Budget& b);
const Value* dict_find(const DictData& d, std::string_view key);
int64_t length(const Value& v);  // len(v); fails for unsized kinds

// JSON (ordered: key order is preserved, as Python's dicts do) to and from Values.
Value from_json(const nlohmann::ordered_json& j, int max_depth);

}  // namespace ceiling::jinja
