#include "dist/launch.h"

#include <cerrno>
#include <cstdlib>
#include <string>

#include "core/status.h"

namespace ceiling::dist {
namespace {

int parse_int(const char* name, const char* v, int lo, int hi) {
  char* end = nullptr;
  errno = 0;
  const long x = std::strtol(v, &end, 10);
  CEILING_ENSURE(end != v && *end == '\0' && errno == 0 && x >= lo && x <= hi,
                 "environment {}='{}': expected an integer in [{}, {}]", name, v, lo, hi);
  return static_cast<int>(x);
}

}  // namespace

ProcessGroup process_group_from_env(const std::function<const char*(const char*)>& getenv_fn) {
  auto env = [&](const char* n) -> const char* {
    const char* v = getenv_fn ? getenv_fn(n) : std::getenv(n);
    return v && *v ? v : nullptr;
  };
  // The first launcher convention whose size variable is set wins.
  static constexpr const char* kPairs[][2] = {{"RANK", "WORLD_SIZE"},
                                              {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                              {"SLURM_PROCID", "SLURM_NTASKS"}};
  ProcessGroup g;
  for (const auto& p : kPairs) {
    const char* size = env(p[1]);
    if (!size) continue;
    g.size = parse_int(p[1], size, 1, 4096);
    const char* rank = env(p[0]);
    CEILING_ENSURE(rank || g.size == 1, "environment {}={} but {} is not set", p[1], size, p[0]);
    g.rank = rank ? parse_int(p[0], rank, 0, g.size - 1) : 0;
    break;
  }
  if (!g.multi()) return g;
  const char* addr = env("MASTER_ADDR");
  const char* port = env("MASTER_PORT");
  CEILING_ENSURE(addr && port,
                 "{} processes: set MASTER_ADDR and MASTER_PORT to the host and a free port of "
                 "process 0 (missing: {})",
                 g.size, addr ? "MASTER_PORT" : "MASTER_ADDR");
  g.master_addr = addr;
  g.master_port = parse_int("MASTER_PORT", port, 1, 65535);
  return g;
}

int ranks_per_process(const ProcessGroup& g, int world) {
  CEILING_ENSURE(world % g.size == 0,
                 "--tensor-parallel-size {} over {} processes: every process must drive the same "
                 "number of GPUs (the size must be a multiple of the process count)",
                 world, g.size);
  return world / g.size;
}

}  // namespace ceiling::dist
