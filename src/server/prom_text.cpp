#include "server/prom_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace ceiling::server {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds(std::move(upper_bounds)), counts(bounds.size() + 1, 0) {}

void Histogram::observe(double x) {
  const size_t i = static_cast<size_t>(std::lower_bound(bounds.begin(), bounds.end(), x) -
                                       bounds.begin());  // first bound >= x (le is inclusive)
  ++counts[i];
  sum += x;
  ++count;
}

std::string PromText::number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{}", static_cast<int64_t>(v));
  return fmt::format("{}", v);  // shortest round-trip form
}

std::string PromText::escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void PromText::family(std::string_view name, std::string_view help, std::string_view type) {
  std::string h;
  for (char c : help) h += c == '\n' ? ' ' : c;
  out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, h, name, type);
}

void PromText::sample(std::string_view name, const Labels& labels, double value) {
  out_ += name;
  if (!labels.empty()) {
    out_ += '{';
    for (size_t i = 0; i < labels.size(); ++i)
      out_ += fmt::format("{}{}=\"{}\"", i ? "," : "", labels[i].first, escape(labels[i].second));
    out_ += '}';
  }
  out_ += ' ';
  out_ += number(value);
  out_ += '\n';
}

void PromText::histogram(std::string_view name, const Labels& labels, const Histogram& h) {
  uint64_t cum = 0;
  const std::string bucket = std::string(name) + "_bucket";
  for (size_t i = 0; i <= h.bounds.size(); ++i) {
    cum += h.counts[i];
    Labels l = labels;
    l.emplace_back("le", i < h.bounds.size() ? number(h.bounds[i]) : "+Inf");
    sample(bucket, l, static_cast<double>(cum));
  }
  sample(std::string(name) + "_sum", labels, h.sum);
  sample(std::string(name) + "_count", labels, static_cast<double>(h.count));
}

}  // namespace ceiling::server
