// One error path for the whole project.
//
//  * Input and environment errors (a malformed file, a bad flag, an unknown preset) throw
//    ceiling::Error with a one-line message naming what was wrong. The CLI, the server and tests
//    are the boundaries that catch it; library code never prints and never exits.
//  * Kernel launchers return ceiling::Status (no exceptions cross a launch). Callers convert a
//    failed Status to an Error at their boundary with Status::throw_if_error().
//  * CUDA/cuBLAS/NCCL calls go through the CEILING_*_CHECK / CEILING_*_RETURN family in check.h,
//    which reports the failing statement, file and line.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace ceiling {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// Throws ceiling::Error with a fmt-formatted message.
template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

// Throws when `cond` is false. Use for validating inputs, not for internal invariants.
#define CEILING_ENSURE(cond, ...)                       \
  do {                                                  \
    if (!(cond)) ::ceiling::fail(__VA_ARGS__);          \
  } while (0)

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status ok_status() { return Status(); }
  template <typename... Args>
  static Status error(fmt::format_string<Args...> f, Args&&... args) {
    Status s;
    s.ok_ = false;
    s.message_ = fmt::format(f, std::forward<Args>(args)...);
    return s;
  }
  bool ok() const { return ok_; }
  const std::string& message() const { return message_; }
  void throw_if_error() const {
    if (!ok_) throw Error(message_);
  }

 private:
  bool ok_ = true;
  std::string message_;
};

// Returns the Status from the enclosing function when `expr` yields a failed Status.
#define CEILING_RETURN_IF_ERROR(expr)          \
  do {                                         \
    ::ceiling::Status _st = (expr);            \
    if (!_st.ok()) return _st;                 \
  } while (0)

}  // namespace ceiling
