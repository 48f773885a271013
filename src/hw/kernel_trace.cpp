// The summary side of hw/kernel_trace.h: replays → exposed time per kernel and per layer slot.
// The CUPTI collector is kernel_trace_cupti.cpp (CUDA builds only).
#include "hw/kernel_trace.h"

#include <cxxabi.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <string_view>

#include "core/status.h"

namespace ceiling::hw {
namespace {

// Drops "ns::" qualifiers made of identifier characters (and "(anonymous namespace)::") wherever
// they occur, so template arguments lose theirs too.
std::string strip_qualifiers(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  const std::string_view anon = "(anonymous namespace)::";
  size_t i = 0;
  while (i < s.size()) {
    if (s.substr(i, anon.size()) == anon) {
      i += anon.size();
      continue;
    }
    const auto ident = [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    };
    if (ident(s[i])) {
      size_t j = i;
      while (j < s.size() && ident(s[j])) ++j;
      if (s.substr(j, 2) == "::") {  // a qualifier: skip it and its "::"
        i = j + 2;
        continue;
      }
      out.append(s.substr(i, j - i));
      i = j;
      continue;
    }
    out.push_back(s[i++]);
  }
  return out;
}

// Cuts the argument list: the trailing "(...)", matched from the end (namespaces such as
// "(anonymous namespace)" and template arguments hold parentheses too).
std::string_view cut_arguments(std::string_view s) {
  if (s.empty() || s.back() != ')') return s;
  int depth = 0;
  for (size_t i = s.size(); i-- > 0;) {
    if (s[i] == ')') ++depth;
    if (s[i] == '(' && --depth == 0) return s.substr(0, i);
  }
  return s;
}

struct Row {
  const KernelRecord* r;
  double duration_us, exposed_us, idle_us;
};

// One replay's kernels in start order, with exposed and idle time (file comment of the header).
std::vector<Row> replay_rows(std::vector<const KernelRecord*> ks) {
  std::stable_sort(ks.begin(), ks.end(), [](const KernelRecord* a, const KernelRecord* b) {
    return a->start_ns < b->start_ns;
  });
  std::vector<Row> rows;
  uint64_t frontier = ks.empty() ? 0 : ks.front()->start_ns;
  for (const KernelRecord* k : ks) {
    const uint64_t from = std::max(frontier, k->start_ns);
    Row row{k, (k->end_ns - std::min(k->start_ns, k->end_ns)) * 1e-3,
            k->end_ns > from ? (k->end_ns - from) * 1e-3 : 0.0,
            k->start_ns > frontier ? (k->start_ns - frontier) * 1e-3 : 0.0};
    rows.push_back(row);
    frontier = std::max(frontier, k->end_ns);
  }
  return rows;
}

bool same_kernel(const TraceSlot& a, const TraceSlot& b) {
  return a.kernel == b.kernel && a.grid == b.grid && a.block == b.block;
}

nlohmann::json slot_json(const TraceSlot& s) {
  return {{"position", s.position}, {"kernel", s.kernel},           {"grid", s.grid},
          {"block", s.block},       {"duration_us", s.duration_us}, {"exposed_us", s.exposed_us},
          {"idle_us", s.idle_us}};
}

}  // namespace

std::string short_kernel_name(const std::string& mangled) {
  int status = 0;
  char* d = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
  if (status != 0 || d == nullptr) {
    std::free(d);
    return mangled;
  }
  const std::string full(d);
  std::free(d);
  std::string_view v = cut_arguments(full);
  if (v.substr(0, 5) == "void ") v.remove_prefix(5);  // a kernel's return type
  return strip_qualifiers(v);
}

TraceSummary summarize_replays(std::vector<KernelRecord> records, int replays, int num_layers) {
  CEILING_ENSURE(replays > 0, "kernel trace: need at least one replay (got {})", replays);
  CEILING_ENSURE(!records.empty(), "kernel trace: CUPTI reported no kernel of the {} replays",
                 replays);
  // Split into replays: by correlation id when it gives equal groups, else by count.
  std::map<uint32_t, std::vector<const KernelRecord*>> by_corr;
  for (const KernelRecord& r : records) by_corr[r.correlation].push_back(&r);
  std::vector<std::vector<const KernelRecord*>> groups;
  const size_t per = records.size() / static_cast<size_t>(replays);
  bool equal = static_cast<int>(by_corr.size()) == replays;
  for (const auto& [id, ks] : by_corr) equal = equal && ks.size() == per;
  if (equal) {
    for (auto& [id, ks] : by_corr) groups.push_back(std::move(ks));
    std::sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) {
      return a.front()->start_ns < b.front()->start_ns;
    });
  } else {
    CEILING_ENSURE(records.size() % static_cast<size_t>(replays) == 0,
                   "kernel trace: {} kernel records do not split into {} equal replays",
                   records.size(), replays);
    std::vector<const KernelRecord*> all;
    for (const KernelRecord& r : records) all.push_back(&r);
    std::stable_sort(all.begin(), all.end(), [](const KernelRecord* a, const KernelRecord* b) {
      return a->start_ns < b->start_ns;
    });
    for (size_t g = 0; g < static_cast<size_t>(replays); ++g)
      groups.emplace_back(all.begin() + g * per, all.begin() + (g + 1) * per);
  }

  TraceSummary s;
  s.replays = replays;
  s.kernels_per_step = static_cast<int>(per);
  s.positions.resize(per);
  for (const auto& g : groups) {
    const std::vector<Row> rows = replay_rows(g);
    for (size_t i = 0; i < rows.size(); ++i) {
      TraceSlot& p = s.positions[i];
      const std::string name = short_kernel_name(rows[i].r->name);
      if (&g == &groups.front()) {
        p.kernel = name;
        p.grid = rows[i].r->grid;
        p.block = rows[i].r->block;
        p.position = static_cast<int>(i);
      } else {
        CEILING_ENSURE(p.kernel == name && p.grid == rows[i].r->grid,
                       "kernel trace: replays differ at kernel {} ({} against {})", i, p.kernel,
                       name);
      }
      p.duration_us += rows[i].duration_us / replays;
      p.exposed_us += rows[i].exposed_us / replays;
      p.idle_us += rows[i].idle_us / replays;
    }
  }
  for (const TraceSlot& p : s.positions) {
    s.exposed_us += p.exposed_us;
    s.idle_us += p.idle_us;
  }
  s.step_us = s.exposed_us + s.idle_us;

  // The layer pattern: the smallest period p (then the earliest start) at which num_layers
  // copies of p kernels repeat the same kernels, grids and blocks.
  const int K = s.kernels_per_step;
  for (int p = 1; num_layers > 0 && p * num_layers <= K && s.layer_kernels == 0; ++p)
    for (int o = 0; o + p * num_layers <= K; ++o) {
      bool ok = true;
      for (int l = 1; l < num_layers && ok; ++l)
        for (int i = 0; i < p && ok; ++i)
          ok = same_kernel(s.positions[o + i], s.positions[o + l * p + i]);
      if (!ok) continue;
      s.layer_first = o;
      s.layer_kernels = p;
      s.layers = num_layers;
      break;
    }
  for (int i = 0; i < s.layer_kernels; ++i) {
    TraceSlot slot = s.positions[s.layer_first + i];
    slot.duration_us = slot.exposed_us = slot.idle_us = 0;
    for (int l = 0; l < s.layers; ++l) {
      const TraceSlot& p = s.positions[s.layer_first + l * s.layer_kernels + i];
      slot.duration_us += p.duration_us / s.layers;
      slot.exposed_us += p.exposed_us / s.layers;
      slot.idle_us += p.idle_us / s.layers;
    }
    s.per_layer_us += slot.exposed_us + slot.idle_us;
    s.layer_slots.push_back(slot);
  }
  return s;
}

nlohmann::json TraceSummary::to_json() const {
  nlohmann::json pos = nlohmann::json::array(), slots = nlohmann::json::array();
  for (const TraceSlot& p : positions) pos.push_back(slot_json(p));
  for (const TraceSlot& p : layer_slots) slots.push_back(slot_json(p));
  return {{"replays", replays},
          {"kernels_per_step", kernels_per_step},
          {"step_us", step_us},
          {"exposed_us", exposed_us},
          {"idle_us", idle_us},
          {"layers",
           {{"first", layer_first},
            {"kernels_per_layer", layer_kernels},
            {"count", layers},
            {"per_layer_us", per_layer_us},
            {"slots", slots}}},
          {"positions", pos},
          {"method",
           "CUPTI kernel activity (CONCURRENT_KERNEL) of back-to-back replays of the decode "
           "step's CUDA graph; per replay, kernels in start order: exposed = end minus the later "
           "of its start and the latest end before it, idle = start minus that latest end when "
           "positive; means over replays (and, for layer slots, over layers)"}};
}

std::string trace_table(const TraceSummary& s) {
  std::string t = fmt::format(
      "kernel trace: {} replays, {} kernels a step, {:.1f} us a step ({:.1f} exposed, {:.1f} "
      "idle)\n",
      s.replays, s.kernels_per_step, s.step_us, s.exposed_us, s.idle_us);
  const auto row = [&t](const std::string& label, const TraceSlot& p) {
    t += fmt::format("  {:>5}  {:>9.2f} {:>9.2f} {:>9.2f}  {:>5}x{}x{} {:>4}  {}\n", label,
                     p.exposed_us, p.idle_us, p.duration_us, p.grid[0], p.grid[1], p.grid[2],
                     p.block[0], p.kernel.substr(0, 110));
  };
  const std::string head = "  {:>5}  {:>9} {:>9} {:>9}  {:>11} {:>4}  kernel\n";
  if (s.layer_kernels > 0) {
    t += fmt::format("layers: {} x {} kernels from #{}: {:.2f} us a layer, {:.1f} us in all\n",
                     s.layers, s.layer_kernels, s.layer_first, s.per_layer_us,
                     s.per_layer_us * s.layers);
    t += fmt::format(fmt::runtime(head), "slot", "exposed", "idle", "duration", "grid", "block");
    for (int i = 0; i < s.layer_kernels; ++i) row(fmt::format("{}", i), s.layer_slots[i]);
  }
  t += "outside the layers:\n";
  t += fmt::format(fmt::runtime(head), "#", "exposed", "idle", "duration", "grid", "block");
  const int end = s.layer_first + s.layer_kernels * s.layers;
  for (const TraceSlot& p : s.positions)
    if (s.layer_kernels == 0 || p.position < s.layer_first || p.position >= end)
      row(fmt::format("{}", p.position), p);
  return t;
}

#ifndef CEILING_HW_CUDA
std::unique_ptr<KernelTracer> KernelTracer::start() {
  fail("kernel trace: this build has no CUDA support");
}
KernelTracer::~KernelTracer() = default;
void KernelTracer::pause() {}
void KernelTracer::resume() {}
void KernelTracer::clear() {}
std::vector<KernelRecord> KernelTracer::collect() {
  return {};
}
#endif

}  // namespace ceiling::hw
