// Validators for numeric flags, for CLI11 2.1 (Debian's), which takes "-1" for an unsigned
// option as 2^64 - 1 and saturates values past 2^64 silently. Use with ->check():
//   sub.add_option("--seed", a.seed)->check(cli::kU64);         // 0 .. 2^64 - 1, digits only
//   sub.add_option("--threads", a.threads)->check(CLI::Range(0, cli::kMaxThreads));
#pragma once

#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdint>
#include <string>

namespace ceiling::cli {

// More threads than any host has cores: a flag past it is a mistake, not a request.
inline constexpr int kMaxThreads = 1024;

// Decimal digits that fit in uint64_t; no sign, no spaces, no exponent.
inline const CLI::Validator kU64(
    [](std::string& s) -> std::string {
      uint64_t v = 0;
      const char* end = s.data() + s.size();
      const auto [p, ec] = std::from_chars(s.data(), end, v);
      if (s.empty() || s[0] == '-' || s[0] == '+' || ec != std::errc() || p != end)
        return "must be an integer in [0, 18446744073709551615], got '" + s.substr(0, 40) + "'";
      return {};
    },
    "UINT64");

}  // namespace ceiling::cli
