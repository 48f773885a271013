// A small writer for the Prometheus text exposition format (version 0.0.4): `# HELP` / `# TYPE`
// lines, samples `name{label="value",...} number`, label values escaped (\\, \", \n), numbers as
// Go formats them (+Inf, -Inf, NaN; integers without an exponent). Histograms are written as
// cumulative `_bucket{le=...}` samples ending at +Inf, then `_sum` and `_count`.
// Not thread-safe; build one per scrape.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ceiling::server {

using Labels = std::vector<std::pair<std::string, std::string>>;

// A histogram's state: counts per bucket (not cumulative) with upper bounds `bounds` (ascending),
// plus the +Inf bucket last.
struct Histogram {
  std::vector<double> bounds;
  std::vector<uint64_t> counts;  // bounds.size() + 1
  double sum = 0;
  uint64_t count = 0;

  explicit Histogram(std::vector<double> upper_bounds = {});
  void observe(double x);
};

class PromText {
 public:
  // type: "counter", "gauge" or "histogram".
  void family(std::string_view name, std::string_view help, std::string_view type);
  void sample(std::string_view name, const Labels& labels, double value);
  void histogram(std::string_view name, const Labels& labels, const Histogram& h);
  const std::string& str() const { return out_; }

  static std::string number(double v);
  static std::string escape(std::string_view label_value);

 private:
  std::string out_;
};

}  // namespace ceiling::server
