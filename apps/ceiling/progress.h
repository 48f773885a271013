// A one-line progress display for CLI commands: drawn on stderr only when stderr is a terminal
// (quiet when piped), redrawn at most every 100 ms, cleared when done. Not thread-safe: call it
// from the thread doing the work.
#pragma once

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>

#include "ceiling/command.h"
#include "model/weights.h"

namespace ceiling::cli {

class Progress {
 public:
  explicit Progress(std::string label, bool enabled = stderr_is_tty())
      : label_(std::move(label)), enabled_(enabled) {}
  ~Progress() { done(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // `fraction` in [0, 1]; `detail` follows the percentage. Throttled unless `force`.
  void update(double fraction, std::string_view detail, bool force = false) {
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    if (!force && drawn_ && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    drawn_ = true;
    const double pct = 100.0 * (fraction < 0 ? 0 : fraction > 1 ? 1 : fraction);
    fmt::print(stderr, "\r\033[K{}: {:3.0f}% {}", label_, pct, detail);
    std::fflush(stderr);
  }
  // Clears the line (once); later updates draw again.
  void done() {
    if (enabled_ && drawn_) {
      fmt::print(stderr, "\r\033[K");
      std::fflush(stderr);
    }
    drawn_ = false;
  }
  bool enabled() const { return enabled_; }

 private:
  std::string label_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point last_{};
};

// A load_model progress callback drawing "bytes mapped, tensors checked" on `p`.
inline ProgressFn load_progress(Progress& p) {
  return [&p](const LoadProgress& s) {
    const double gb = 1e-9;
    const double frac = s.tensors_total > 0 ? 0.5 + 0.5 * s.tensors_checked / s.tensors_total
                        : s.bytes_total > 0 ? 0.5 * static_cast<double>(s.bytes_mapped) /
                                                  static_cast<double>(s.bytes_total)
                                            : 0.0;
    p.update(
        frac,
        fmt::format("({:.2f} / {:.2f} GB mapped, {} / {} tensors checked)", s.bytes_mapped * gb,
                    s.bytes_total * gb, s.tensors_checked, s.tensors_total),
        s.tensors_total > 0 && s.tensors_checked == s.tensors_total);
  };
}

}  // namespace ceiling::cli
