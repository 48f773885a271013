#include "hw/gpu_spec.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <memory>

#include "core/status.h"

#if defined(CEILING_HW_CUDA)
#include <cuda_runtime.h>
#endif

namespace ceiling::hw {
namespace {

std::string lower(std::string_view s) {
  std::string r(s);
  std::transform(r.begin(), r.end(), r.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return r;
}

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

}  // namespace

const GpuSpec* find_gpu(std::string_view id) {
  const std::string want = lower(id);
  for (const auto& g : gpu_specs())
    if (g.id == want) return &g;
  return nullptr;
}

const GpuSpec& gpu_by_id(std::string_view id) {
  if (const GpuSpec* g = find_gpu(id)) return *g;
  std::string ids;
  for (const auto& g : gpu_specs()) ids += (ids.empty() ? "" : ", ") + g.id;
  fail("unknown GPU '{}' (known: {})", id, ids);
}

std::optional<std::string> gpu_id_for_device_name(std::string_view device_name) {
  const std::string name = trim(lower(device_name));
  for (const auto& g : gpu_specs()) {
    for (const auto& p : g.device_name_patterns) {
      const bool exact = !p.empty() && p[0] == '=';
      const bool hit = exact ? name == p.substr(1) : name.find(p) != std::string::npos;
      if (hit) return g.id;
    }
  }
  return std::nullopt;
}

std::optional<std::string> local_device_name() {
#if defined(CEILING_HW_CUDA)
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    cudaGetLastError();  // clear the sticky "no device" error
    return std::nullopt;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return std::nullopt;
  return std::string(prop.name);
#else
  // No CUDA runtime linked: ask the driver's tool, quietly. Absent tool or GPU -> nullopt.
  std::unique_ptr<FILE, int (*)(FILE*)> p(
      popen("nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null", "r"), pclose);
  if (!p) return std::nullopt;
  std::array<char, 256> buf{};
  if (!fgets(buf.data(), static_cast<int>(buf.size()), p.get())) return std::nullopt;
  std::string name = trim(buf.data());
  if (name.empty()) return std::nullopt;
  return name;
#endif
}

}  // namespace ceiling::hw
