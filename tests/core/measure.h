// Time and peak memory of one call, measured in a forked child so that the peak is the call's
// own (ru_maxrss of the child, less that of a child that does nothing) and a crash or runaway
// allocation cannot take the test binary down. Used by the hardening tests to assert that hostile
// inputs cost time linear in their size and memory a stated multiple of it.
#pragma once

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <string>

namespace ceiling::test {

struct Cost {
  double seconds = 0;    // wall time of the call in the child
  double peak_mib = 0;   // the child's peak RSS above an idle child's
  bool threw = false;    // the call threw (an exception derived from std::exception)
  std::string error;     // its what(), first 400 bytes
  bool crashed = false;  // the child died by a signal or did not report
};

namespace detail {

struct ChildResult {
  double seconds;
  int threw;
  char error[400];
};

inline bool run_child(const std::function<void()>& f, ChildResult& r, long& maxrss_kib,
                      bool& crashed) {
  int fds[2];
  if (::pipe(fds) != 0) return false;
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return false;
  if (pid == 0) {
    ::close(fds[0]);
    ChildResult out{};
    const auto t0 = std::chrono::steady_clock::now();
    try {
      f();
    } catch (const std::exception& e) {
      out.threw = 1;
      std::strncpy(out.error, e.what(), sizeof(out.error) - 1);
    }
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    [[maybe_unused]] const auto n = ::write(fds[1], &out, sizeof(out));
    ::_exit(0);
  }
  ::close(fds[1]);
  const ssize_t n = ::read(fds[0], &r, sizeof(r));
  ::close(fds[0]);
  int status = 0;
  struct rusage ru {};
  ::wait4(pid, &status, 0, &ru);
  maxrss_kib = ru.ru_maxrss;
  crashed = n != static_cast<ssize_t>(sizeof(r)) || !WIFEXITED(status);
  return true;
}

}  // namespace detail

inline Cost measure_once(const std::function<void()>& f) {
  Cost c;
  detail::ChildResult r{}, idle{};
  long rss = 0, idle_rss = 0;
  bool crashed = false, idle_crashed = false;
  if (!detail::run_child([] {}, idle, idle_rss, idle_crashed) ||
      !detail::run_child(f, r, rss, crashed)) {
    c.crashed = true;
    return c;
  }
  c.crashed = crashed;
  c.seconds = r.seconds;
  c.threw = r.threw != 0;
  c.error = std::string(r.error, strnlen(r.error, sizeof(r.error)));
  c.peak_mib = static_cast<double>(rss - idle_rss) / 1024.0;
  if (c.peak_mib < 0) c.peak_mib = 0;
  return c;
}

// The fastest of `runs` runs (timing ratios on a loaded machine), with the largest peak.
inline Cost measure(const std::function<void()>& f, int runs = 1) {
  Cost best = measure_once(f);
  for (int i = 1; i < runs && !best.crashed; ++i) {
    const Cost c = measure_once(f);
    if (c.crashed) return c;
    best.peak_mib = std::max(best.peak_mib, c.peak_mib);
    best.seconds = std::min(best.seconds, c.seconds);
  }
  return best;
}

}  // namespace ceiling::test
