#include "bench/run_info.h"

#include <cuda_runtime_api.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <vector>

#ifndef CEILING_BUILD_GIT_SHA
#define CEILING_BUILD_GIT_SHA "unknown"
#endif

namespace ceiling::bench {
namespace {

// stdout of a shell command, or "" when it fails.
std::string capture(const std::string& cmd) {
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen((cmd + " 2>/dev/null").c_str(), "r"), pclose);
  if (!p) return "";
  std::string out;
  std::array<char, 256> buf;
  while (fgets(buf.data(), buf.size(), p.get())) out += buf.data();
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> r;
  std::stringstream ss(line);
  std::string f;
  while (std::getline(ss, f, ',')) {
    const size_t a = f.find_first_not_of(' '), b = f.find_last_not_of(' ');
    r.push_back(a == std::string::npos ? "" : f.substr(a, b - a + 1));
  }
  return r;
}

}  // namespace

std::string git_sha() {
  // A run on a machine without the repository (the GPU machine gets a copy of the working tree)
  // names the commit it was staged from (bench/stage_device_build.sh writes it).
  if (const char* env = std::getenv("CEILING_GIT_SHA"); env && *env) return env;
#ifdef CEILING_SOURCE_DIR_FOR_GIT
  const std::string dir = CEILING_SOURCE_DIR_FOR_GIT;
  const std::string sha = capture("git -C '" + dir + "' rev-parse --short HEAD");
  if (!sha.empty()) {
    const bool dirty =
        !capture("git -C '" + dir + "' status --porcelain --untracked-files=no").empty();
    return sha + (dirty ? "-dirty" : "");
  }
#endif
  return std::string(CEILING_BUILD_GIT_SHA) + " (build)";
}

nlohmann::json clocks() {
  const std::string line = capture(
      "nvidia-smi --query-gpu=clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem "
      "--format=csv,noheader,nounits -i 0");
  const auto f = split_csv(line);
  if (f.size() != 4) return nlohmann::json::object();
  nlohmann::json j;
  const char* keys[] = {"sm_mhz", "mem_mhz", "sm_max_mhz", "mem_max_mhz"};
  for (size_t i = 0; i < 4; ++i) {
    try {
      j[keys[i]] = std::stoi(f[i]);
    } catch (...) {
      j[keys[i]] = f[i];
    }
  }
  return j;
}

nlohmann::json device_info() {
  nlohmann::json j;
  int dev = 0;
  cudaDeviceProp p{};
  if (cudaGetDevice(&dev) == cudaSuccess && cudaGetDeviceProperties(&p, dev) == cudaSuccess) {
    j["gpu"] = p.name;
    j["sm_count"] = p.multiProcessorCount;
    j["l2_bytes"] = p.l2CacheSize;
    j["memory_bytes"] = p.totalGlobalMem;
    j["compute_capability"] = std::to_string(p.major) + "." + std::to_string(p.minor);
  }
  int drv = 0, rt = 0;
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  const std::string smi =
      capture("nvidia-smi --query-gpu=driver_version --format=csv,noheader -i 0");
  j["driver"] = smi.empty() ? std::to_string(drv) : smi;
  j["cuda_runtime"] = rt;
  return j;
}

}  // namespace ceiling::bench
