// Per-render accounting against ChatTemplateLimits (see chat_template.h): output and value sizes,
// total work, loop iterations plus calls, and nesting depth.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/status.h"
#include "tokenizer/template/chat_template.h"

namespace ceiling {

namespace jinja {

// One per render; not thread-safe.
class Budget {
 public:
  explicit Budget(const ChatTemplateLimits& limits) : limits_(limits) {}
  const ChatTemplateLimits& limits() const { return limits_; }

  void step() {
    if (++steps_ > limits_.max_steps)
      fail("template exceeded {} loop iterations and calls", limits_.max_steps);
  }
  void charge(uint64_t units) {
    work_ += units;
    if (work_ > limits_.max_work)
      fail("template exceeded its work limit ({} units)", limits_.max_work);
  }
  // A new string of `bytes` bytes or list of `items` elements is about to be built: counts
  // against max_alloc_bytes for the whole render (never given back, so the bound is on the total
  // ever allocated, which bounds the peak).
  void alloc_bytes(uint64_t bytes) {
    allocated_ += bytes;
    if (allocated_ > limits_.max_alloc_bytes)
      fail("template allocated more than its limit of {} bytes in total", limits_.max_alloc_bytes);
  }
  void alloc_items(uint64_t items);  // items × sizeof(Value); defined in value.h's users
  // A string or list about to hold `n` bytes or elements.
  void check_size(uint64_t n) const {
    if (n > limits_.max_output_bytes)
      fail("template built a value of {} bytes/items, over the {} limit", n,
           limits_.max_output_bytes);
  }
  // RAII nesting guard for recursion (expressions, statements, calls, value walks).
  class Nest {
   public:
    explicit Nest(Budget& b) : b_(b) {
      if (b_.depth_ >= b_.limits_.max_depth)
        fail("template nesting deeper than {} (recursion?)", b_.limits_.max_depth);
      ++b_.depth_;
    }
    ~Nest() { --b_.depth_; }
    Nest(const Nest&) = delete;
    Nest& operator=(const Nest&) = delete;

   private:
    Budget& b_;
  };

 private:
  ChatTemplateLimits limits_;
  uint64_t steps_ = 0;
  uint64_t work_ = 0;
  uint64_t allocated_ = 0;
  int depth_ = 0;
};

}  // namespace jinja
}  // namespace ceiling
