#include "hw/measured.h"

#include <algorithm>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/file_read.h"
#include "core/json_bounded.h"
#include "core/status.h"

namespace ceiling::hw {
namespace {

using nlohmann::json;

const json& object_field(const json& j, const char* key, const std::string& origin) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_object()) fail("{}: missing object '{}'", origin, key);
  return *it;
}

double number(const json& j, const char* section, const char* key, const std::string& origin,
              bool allow_zero) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) fail("{}: missing number '{}.{}'", origin, section, key);
  const double v = it->get<double>();
  if (!(v >= 0) || (!allow_zero && v == 0) || v > 1e300)
    fail("{}: '{}.{}' must be {} (got {})", origin, section, key,
         allow_zero ? "non-negative" : "positive", v);
  return v;
}

// A number that older files lack: 0 when absent, else as strict as number() (positive).
double optional_positive(const json& j, const char* section, const char* key,
                         const std::string& origin) {
  return j.contains(key) ? number(j, section, key, origin, false) : 0.0;
}

// An optional array of {"bytes", "us"} points: empty when absent; sorted by bytes.
std::vector<LaunchPoint> optional_points(const json& c, const char* key,
                                         const std::string& origin) {
  std::vector<LaunchPoint> pts;
  auto it = c.find(key);
  if (it == c.end()) return pts;
  if (!it->is_array()) fail("{}: 'ceilings.{}' must be an array of {{bytes, us}}", origin, key);
  const std::string section = std::string("ceilings.") + key + "[]";
  for (const json& p : *it) {
    if (!p.is_object()) fail("{}: '{}' must hold objects", origin, section);
    pts.push_back({number(p, section.c_str(), "bytes", origin, false),
                   number(p, section.c_str(), "us", origin, false) * 1e-6});
  }
  std::sort(pts.begin(), pts.end(),
            [](const LaunchPoint& a, const LaunchPoint& b) { return a.bytes < b.bytes; });
  for (size_t i = 1; i < pts.size(); ++i)
    if (pts[i].bytes == pts[i - 1].bytes)
      fail("{}: '{}' has two points at {} bytes", origin, section, pts[i].bytes);
  return pts;
}

std::string text(const json& j, const char* key) {
  auto it = j.find(key);
  return (it != j.end() && it->is_string()) ? it->get<std::string>() : std::string();
}

}  // namespace

MeasuredCeilings parse_measured_ceilings(const std::string& json_text, const std::string& origin) {
  const json j = parse_json_or_fail(json_text, origin);
  if (!j.is_object()) fail("{}: top level must be a JSON object", origin);
  MeasuredCeilings m;
  m.gpu_id = text(j, "gpu");
  if (m.gpu_id.empty()) fail("{}: missing string 'gpu'", origin);

  const json& c = object_field(j, "ceilings", origin);
  m.read_bw = number(c, "ceilings", "read_gbps", origin, false) * 1e9;
  m.copy_bw = number(c, "ceilings", "copy_gbps", origin, false) * 1e9;
  m.bf16_gemm_flops = number(c, "ceilings", "bf16_gemm_tflops", origin, false) * 1e12;
  m.fp8_gemm_flops = number(c, "ceilings", "fp8_gemm_tflops", origin, true) * 1e12;
  m.launch_eager_s = number(c, "ceilings", "launch_eager_us", origin, false) * 1e-6;
  m.launch_graph_s = number(c, "ceilings", "launch_graph_us", origin, false) * 1e-6;
  m.small_kernel_s = number(c, "ceilings", "small_kernel_us", origin, false) * 1e-6;
  m.stream_fixed_s = optional_positive(c, "ceilings", "stream_fixed_us", origin) * 1e-6;
  m.stream_bw = optional_positive(c, "ceilings", "stream_gbps", origin) * 1e9;
  m.rw_fixed_s = optional_positive(c, "ceilings", "rw_fixed_us", origin) * 1e-6;
  m.rw_bw = optional_positive(c, "ceilings", "rw_gbps", origin) * 1e9;
  m.stream_serial_fixed_s =
      optional_positive(c, "ceilings", "stream_serial_fixed_us", origin) * 1e-6;
  m.stream_serial_bw = optional_positive(c, "ceilings", "stream_serial_gbps", origin) * 1e9;
  m.allreduce_latency_s = optional_positive(c, "ceilings", "allreduce_us", origin) * 1e-6;
  m.stream_points = optional_points(c, "stream_points", origin);
  m.rw_points = optional_points(c, "rw_points", origin);
  m.stream_serial_points = optional_points(c, "stream_serial_points", origin);

  const json& d = object_field(j, "device", origin);
  m.device_name = text(d, "name");
  m.sm_count = static_cast<int>(number(d, "device", "sm_count", origin, false));
  m.l2_bytes = number(d, "device", "l2_bytes", origin, false);
  m.memory_bytes = number(d, "device", "memory_bytes", origin, false);
  m.sm_clock_mhz = static_cast<int>(number(d, "device", "sm_clock_mhz", origin, true));
  m.mem_clock_mhz = static_cast<int>(number(d, "device", "mem_clock_mhz", origin, true));
  m.memory_bus_bits = static_cast<int>(number(d, "device", "memory_bus_bits", origin, true));
  m.compute_capability = text(d, "compute_capability");

  const json& p = object_field(j, "provenance", origin);
  m.date = text(p, "date");
  m.driver = text(p, "driver");
  m.cuda_runtime = text(p, "cuda_runtime");
  m.cublaslt = text(p, "cublaslt");
  m.tool = text(p, "tool");
  if (m.date.empty()) fail("{}: missing string 'provenance.date'", origin);
  if (auto it = p.find("method"); it != p.end() && it->is_object())
    for (const auto& [k, v] : it->items())
      if (v.is_string()) m.method[k] = v.get<std::string>();
  return m;
}

MeasuredCeilings load_measured_ceilings(const std::filesystem::path& file) {
  constexpr uint64_t kMaxBytes = 64ull << 20;  // a measured file is a few KB
  return parse_measured_ceilings(read_regular_file(file, kMaxBytes), file.string());
}

std::string measured_ceilings_to_json(const MeasuredCeilings& m) {
  json j;
  j["format"] = "ceiling-measured-ceilings/1";
  j["gpu"] = m.gpu_id;
  j["device"] = {{"name", m.device_name},
                 {"sm_count", m.sm_count},
                 {"l2_bytes", m.l2_bytes},
                 {"memory_bytes", m.memory_bytes},
                 {"sm_clock_mhz", m.sm_clock_mhz},
                 {"mem_clock_mhz", m.mem_clock_mhz},
                 {"memory_bus_bits", m.memory_bus_bits},
                 {"compute_capability", m.compute_capability}};
  j["ceilings"] = {{"read_gbps", m.read_bw / 1e9},
                   {"copy_gbps", m.copy_bw / 1e9},
                   {"bf16_gemm_tflops", m.bf16_gemm_flops / 1e12},
                   {"fp8_gemm_tflops", m.fp8_gemm_flops / 1e12},
                   {"launch_eager_us", m.launch_eager_s * 1e6},
                   {"launch_graph_us", m.launch_graph_s * 1e6},
                   {"small_kernel_us", m.small_kernel_s * 1e6}};
  // The grid-wide fits only when measured: a file without them reads back as "unknown".
  auto optional = [&](const char* key, double v) {
    if (v > 0) j["ceilings"][key] = v;
  };
  optional("stream_fixed_us", m.stream_fixed_s * 1e6);
  optional("stream_gbps", m.stream_bw / 1e9);
  optional("rw_fixed_us", m.rw_fixed_s * 1e6);
  optional("rw_gbps", m.rw_bw / 1e9);
  optional("stream_serial_fixed_us", m.stream_serial_fixed_s * 1e6);
  optional("stream_serial_gbps", m.stream_serial_bw / 1e9);
  optional("allreduce_us", m.allreduce_latency_s * 1e6);
  auto points = [&](const char* key, const std::vector<LaunchPoint>& pts) {
    if (pts.empty()) return;
    json a = json::array();
    for (const LaunchPoint& p : pts) a.push_back({{"bytes", p.bytes}, {"us", p.seconds * 1e6}});
    j["ceilings"][key] = std::move(a);
  };
  points("stream_points", m.stream_points);
  points("rw_points", m.rw_points);
  points("stream_serial_points", m.stream_serial_points);
  json method = json::object();
  for (const auto& [k, v] : m.method) method[k] = v;
  j["provenance"] = {
      {"date", m.date},         {"driver", m.driver}, {"cuda_runtime", m.cuda_runtime},
      {"cublaslt", m.cublaslt}, {"tool", m.tool},     {"method", method}};
  return j.dump(2) + "\n";
}

LineFit fit_fixed_plus_rate(const std::vector<std::pair<double, double>>& pts) {
  if (pts.size() < 2) fail("fit_fixed_plus_rate: needs two or more distinct sizes");
  const double n = static_cast<double>(pts.size());
  double sx = 0, sy = 0;
  for (const auto& [x, y] : pts) {
    sx += x;
    sy += y;
  }
  const double mx = sx / n, my = sy / n;
  double sxx = 0, sxy = 0;  // centred sums: no cancellation between 1e6 and 1e8-byte sizes
  for (const auto& [x, y] : pts) {
    sxx += (x - mx) * (x - mx);
    sxy += (x - mx) * (y - my);
  }
  if (!(sxx > 0)) fail("fit_fixed_plus_rate: needs two or more distinct sizes");
  const double slope = sxy / sxx;
  return {my - slope * mx, slope > 0 ? 1.0 / slope : 0.0};
}

std::optional<std::filesystem::path> find_repo_file(const std::filesystem::path& relative) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<fs::path> roots;
  if (const char* env = std::getenv("CEILING_SOURCE_DIR"); env && *env) roots.emplace_back(env);
  roots.push_back(fs::current_path(ec));
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) roots.push_back(exe.parent_path());
  for (const fs::path& root : roots) {
    for (fs::path dir = root; !dir.empty(); dir = dir.parent_path()) {
      fs::path candidate = dir / relative;
      if (fs::is_regular_file(candidate, ec)) return candidate;
      if (dir == dir.parent_path()) break;
    }
  }
  if (!exe.empty()) {  // installed: <prefix>/bin/ceiling, <prefix>/share/ceiling/<relative>
    fs::path candidate = exe.parent_path().parent_path() / "share" / "ceiling" / relative;
    if (fs::is_regular_file(candidate, ec)) return candidate;
  }
  return std::nullopt;
}

std::optional<std::filesystem::path> find_measured_ceilings_file(const std::string& gpu_id) {
  namespace fs = std::filesystem;
  const fs::path name = gpu_id + ".json";
  if (const char* env = std::getenv("CEILING_DATA_DIR"); env && *env) {
    std::error_code ec;
    fs::path p = fs::path(env) / "ceilings" / name;
    if (fs::is_regular_file(p, ec)) return p;
  }
  return find_repo_file(fs::path("data") / "ceilings" / name);
}

}  // namespace ceiling::hw
