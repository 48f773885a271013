#include "bench/timing.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/check.h"

namespace ceiling::bench {
namespace {

// A CUDA graph capturing runs of sets first, first+1, ... (mod copies).
class Graph {
 public:
  Graph(KernelCase& c, int first, int runs, int copies, cudaStream_t s) {
    CEILING_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    std::string error;
    for (int i = 0; i < runs && error.empty(); ++i) {
      const Status st = c.run((first + i) % copies, s);
      if (!st.ok()) error = st.message();
    }
    cudaGraph_t g = nullptr;
    const cudaError_t e = cudaStreamEndCapture(s, &g);
    if (!error.empty()) {
      if (g) cudaGraphDestroy(g);
      fail("{} {}: run failed during capture: {}", c.op(), c.shape(), error);
    }
    CEILING_CUDA_CHECK(e);
    graph_ = g;
    CEILING_CUDA_CHECK(cudaGraphInstantiate(&exec_, graph_, 0));
  }
  ~Graph() {
    if (exec_) cudaGraphExecDestroy(exec_);
    if (graph_) cudaGraphDestroy(graph_);
  }
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  void launch(cudaStream_t s) const { CEILING_CUDA_CHECK(cudaGraphLaunch(exec_, s)); }

 private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

struct Events {
  std::vector<cudaEvent_t> ev;
  explicit Events(size_t n) : ev(n) {
    for (auto& e : ev) CEILING_CUDA_CHECK(cudaEventCreate(&e));
  }
  ~Events() {
    for (auto& e : ev) cudaEventDestroy(e);
  }
  float ms(size_t a, size_t b) const {
    float t = 0;
    CEILING_CUDA_CHECK(cudaEventElapsedTime(&t, ev[a], ev[b]));
    return t;
  }
};

// Replays graphs round-robin, `reps` times; returns each replay's milliseconds.
std::vector<double> replay(const std::vector<std::unique_ptr<Graph>>& graphs, int reps,
                           cudaStream_t s) {
  Events e(reps + 1);
  CEILING_CUDA_CHECK(cudaEventRecord(e.ev[0], s));
  for (int r = 0; r < reps; ++r) {
    graphs[r % graphs.size()]->launch(s);
    CEILING_CUDA_CHECK(cudaEventRecord(e.ev[r + 1], s));
  }
  CEILING_CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<double> t(reps);
  for (int r = 0; r < reps; ++r) t[r] = e.ms(r, r + 1);
  return t;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int copies_for(size_t set_bytes, size_t rotate_bytes, int max_copies) {
  if (set_bytes == 0) return 1;
  const size_t n = (rotate_bytes + set_bytes - 1) / set_bytes;
  return static_cast<int>(std::clamp<size_t>(n, 1, static_cast<size_t>(max_copies)));
}

Timing time_case(KernelCase& c, int copies, const TimingOptions& opt, cudaStream_t s) {
  // Estimate: single-run graphs over a few sets.
  std::vector<std::unique_ptr<Graph>> single;
  for (int i = 0; i < std::min(copies, 4); ++i)
    single.push_back(std::make_unique<Graph>(c, i, 1, copies, s));
  replay(single, 8, s);
  const double est_ms = median(replay(single, 8, s));
  single.clear();

  Timing t;
  t.per_rep = static_cast<int>(std::clamp(std::ceil(opt.min_rep_us * 1e-3 / std::max(est_ms, 1e-6)),
                                          1.0, static_cast<double>(opt.max_per_rep)));
  // Graphs covering the sets once (round-robin replay then cycles through all of them).
  const int n_graphs = std::max(1, (copies + t.per_rep - 1) / t.per_rep);
  std::vector<std::unique_ptr<Graph>> graphs;
  for (int g = 0; g < n_graphs; ++g)
    graphs.push_back(std::make_unique<Graph>(c, g * t.per_rep, t.per_rep, copies, s));
  replay(graphs, std::max<int>(opt.warmup, static_cast<int>(graphs.size())), s);
  std::vector<double> ms = replay(graphs, opt.reps, s);
  for (double& v : ms) v /= t.per_rep;
  t.reps = opt.reps;
  t.median_ms = median(ms);
  t.min_ms = *std::min_element(ms.begin(), ms.end());
  t.max_ms = *std::max_element(ms.begin(), ms.end());
  return t;
}

}  // namespace ceiling::bench
