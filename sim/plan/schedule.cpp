// List scheduling and breakdown (sim/plan/schedule.hpp).
#include "sim/plan/schedule.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <queue>

namespace ddlsim::sim {

std::vector<TaskTiming> schedule(const dag::IterationGraph& g) {
  const std::size_t n = g.size();
  std::vector<TaskTiming> timing(n);
  std::vector<std::size_t> missing(n);
  std::vector<double> ready_at(n, 0);
  // One queue per (device, resource): a device's stream runs one task at a time.
  const auto devices = g.devices();
  const auto slot_of = [&](const dag::Task& t) {
    const auto d = std::lower_bound(devices.begin(), devices.end(), t.device) - devices.begin();
    return static_cast<std::size_t>(d) * dag::kResourceCount + static_cast<std::size_t>(t.resource);
  };
  std::vector<double> free_at(devices.size() * dag::kResourceCount, 0.0); // for lane -1: after every lane
  std::vector<std::map<int, double>> lane_free(free_at.size());           // lanes >= 0
  using Entry = std::pair<double, std::size_t>; // (ready time, id): earliest first, then lowest id
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> ready;
  for (std::size_t v = 0; v < n; ++v) {
    missing[v] = boost::in_degree(v, g.graph());
    if (missing[v] == 0)
      ready.emplace(0.0, v);
  }
  std::size_t done = 0;
  while (!ready.empty()) {
    const auto [at, v] = ready.top();
    ready.pop();
    const auto& task = g.task(v);
    double start = at;
    if (task.resource != dag::Resource::none) {
      const auto r = slot_of(task);
      start = std::max(start, free_at[r]);
      if (task.lane < 0) {
        for (const auto& [lane, free] : lane_free[r])
          start = std::max(start, free);
        free_at[r] = start + task.duration_s;
      } else {
        auto& free = lane_free[r][task.lane];
        start = std::max(start, free);
        free = start + task.duration_s;
      }
    }
    timing[v] = {start, start + task.duration_s};
    ++done;
    for (auto [it, end] = boost::adjacent_vertices(v, g.graph()); it != end; ++it) {
      ready_at[*it] = std::max(ready_at[*it], timing[v].end_s);
      if (--missing[*it] == 0)
        ready.emplace(ready_at[*it], *it);
    }
  }
  if (done != n)
    (void)g.topological_order(); // throws, naming a task on the cycle
  return timing;
}

Breakdown breakdown_of(const dag::IterationGraph& g, const std::vector<TaskTiming>& timing, double makespan) {
  return breakdown_in(g, timing, 0, makespan);
}

Breakdown breakdown_in(const dag::IterationGraph& g, const std::vector<TaskTiming>& timing, double from, double to,
                       std::optional<dag::Device> device) {
  // Sweep over interval boundaries; at each elementary interval classify by what is active.
  struct Edge {
    double t;
    int delta;
    int cls; // 0 compute, 1 compression, 2 communication
  };
  std::vector<Edge> edges;
  for (std::size_t v = 0; v < g.size(); ++v) {
    if (device && g.task(v).device != *device)
      continue;
    const auto kind = g.task(v).kind;
    int cls = -1;
    if (kind == dag::TaskKind::forward || kind == dag::TaskKind::backward || kind == dag::TaskKind::update ||
        kind == dag::TaskKind::prediction)
      cls = 0;
    if (kind == dag::TaskKind::compression)
      cls = 1;
    if (kind == dag::TaskKind::communication)
      cls = 2;
    const double start = std::max(timing[v].start_s, from), end = std::min(timing[v].end_s, to);
    if (cls < 0 || end <= start)
      continue;
    edges.push_back({start, +1, cls});
    edges.push_back({end, -1, cls});
  }
  std::sort(edges.begin(), edges.end(),
            [](const Edge& a, const Edge& b) { return a.t != b.t ? a.t < b.t : a.delta < b.delta; });
  Breakdown b;
  std::array<int, 3> active{};
  double last = from;
  for (const auto& e : edges) {
    const double span = e.t - last;
    if (span > 0) {
      if (active[0] > 0)
        b.compute_s += span;
      else if (active[1] > 0)
        b.compression_s += span;
      else if (active[2] > 0)
        b.exposed_communication_s += span;
    }
    active[static_cast<std::size_t>(e.cls)] += e.delta;
    last = e.t;
  }
  b.idle_s = std::max(0.0, to - from - b.compute_s - b.compression_s - b.exposed_communication_s);
  return b;
}

double makespan_of(const std::vector<TaskTiming>& timing) {
  double m = 0;
  for (const auto& t : timing)
    m = std::max(m, t.end_s);
  return m;
}

std::vector<double> iteration_ends(const dag::IterationGraph& g, const std::vector<double>& end_s) {
  std::vector<double> ends;
  for (std::size_t v = 0; v < g.size(); ++v) {
    const auto k = static_cast<std::size_t>(g.task(v).iteration);
    if (ends.size() <= k)
      ends.resize(k + 1, 0.0);
    ends[k] = std::max(ends[k], end_s[v]);
  }
  return ends;
}

std::vector<double> iteration_ends(const dag::IterationGraph& g, const std::vector<TaskTiming>& timing) {
  std::vector<double> end_s(timing.size());
  std::transform(timing.begin(), timing.end(), end_s.begin(), [](const TaskTiming& t) { return t.end_s; });
  return iteration_ends(g, end_s);
}

std::vector<double> longest_finish(const dag::IterationGraph& g) {
  std::vector<double> finish(g.size(), 0);
  for (auto v : g.topological_order()) {
    double start = 0;
    for (auto u : g.predecessors(v))
      start = std::max(start, finish[u]);
    finish[v] = start + g.task(v).duration_s;
  }
  return finish;
}

} // namespace ddlsim::sim
