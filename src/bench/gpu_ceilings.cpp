#include "bench/ceilings.h"
#include "roofline/rejoin.h"

namespace ceiling::bench {

// One definition with `ceiling roofline --rejoin`: the ceilings are built from the same JSON the
// run writes as its measured_ceilings.
roofline::GpuCeilings gpu_ceilings(const nlohmann::json& dev, const MeasuredCeilings& m) {
  return roofline::ceilings_from_bench_run(dev, m.to_json());
}

}  // namespace ceiling::bench
