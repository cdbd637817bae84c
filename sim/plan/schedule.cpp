// List scheduling and breakdown (sim/plan/schedule.hpp).
#include "sim/plan/schedule.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <queue>
#include <set>
#include <tuple>
#include <utility>

namespace ddlsim::sim {

bool slowed_by_communication(const dag::Task& t) {
  using dag::TaskKind;
  const bool kernel = t.kind == TaskKind::forward || t.kind == TaskKind::backward || t.kind == TaskKind::update ||
                      t.kind == TaskKind::prediction || t.kind == TaskKind::compression;
  return kernel && (t.resource == dag::Resource::gpu_compute || t.resource == dag::Resource::gpu_compression);
}

namespace {

// The event-driven list schedule (schedule_event_driven): its per-task, per-slot and per-GPU state, and its steps.
class EventSchedule {
public:
  EventSchedule(const dag::IterationGraph& graph, const ScheduleOptions& opts)
      : g(graph), options(opts), n(graph.size()), devices(graph.devices()), slots(devices.size() * dag::kResourceCount),
        slow_rate(1 / (1 + opts.compute_slowdown)), timing(n), missing(n), ready_at(n, 0), ended(n, 0), blockers(n, 0),
        unblocks(n), last_in_lane(slots), last_barrier(slots, kNone), work_left(n, 0), since(n, 0), rate(n, 1),
        version(n, 0), communicating(devices.size(), 0), running(devices.size()), queued(slots), handed(slots, 0.0),
        handed_tasks(slots, 0), credit(graph.priority_credit()) {
    for (std::size_t v = 0; v < n; ++v) {
      missing[v] = boost::in_degree(v, g.graph());
      if (missing[v] == 0)
        ready.emplace(0.0, v);
    }
  }

  std::vector<TaskTiming> run() {
    std::size_t done = 0;
    while (!ready.empty() || !ends.empty()) {
      if (!ends.empty() && (ready.empty() || std::get<0>(ends.top()) <= ready.top().first)) {
        const auto [now, v, ver] = ends.top();
        ends.pop();
        if (ver != version[v] || ended[v])
          continue;
        ++done;
        finish(v, now);
        continue;
      }
      const auto [now, v] = ready.top();
      ready.pop();
      take_ready(v, now);
    }
    if (done != n)
      (void)g.topological_order(); // throws, naming a task on the cycle
    return std::move(timing);
  }

private:
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);

  std::size_t device_of(const dag::Task& t) const {
    return static_cast<std::size_t>(std::lower_bound(devices.begin(), devices.end(), t.device) - devices.begin());
  }
  std::size_t slot_of(const dag::Task& t) const {
    return device_of(t) * dag::kResourceCount + static_cast<std::size_t>(t.resource);
  }

  void set_rates(std::size_t d, double now) {
    const double r = communicating[d] > 0 ? slow_rate : 1.0;
    for (const auto v : running[d]) {
      if (rate[v] == r)
        continue;
      work_left[v] -= (now - since[v]) * rate[v];
      since[v] = now;
      rate[v] = r;
      ends.emplace(now + std::max(0.0, work_left[v]) / r, v, ++version[v]);
    }
  }

  void start(std::size_t v, double now) {
    const auto& task = g.task(v);
    timing[v].start_s = now;
    const std::size_t d = device_of(task);
    if (options.compute_slowdown > 0 && slowed_by_communication(task)) {
      work_left[v] = task.duration_s;
      since[v] = now;
      rate[v] = communicating[d] > 0 ? slow_rate : 1.0;
      running[d].push_back(v);
      ends.emplace(rate[v] == 1.0 ? now + task.duration_s : now + task.duration_s / rate[v], v, version[v]);
      return;
    }
    ends.emplace(now + task.duration_s, v, version[v]);
    if (task.kind == dag::TaskKind::communication && ++communicating[d] == 1)
      set_rates(d, now);
  }

  // Hands ready task v to its resource: it waits for the tasks that took its lane (or, for lane -1, every lane)
  // before it, and the last lane -1 task.
  void hand_over(std::size_t v, double now) {
    const auto& task = g.task(v);
    const auto r = slot_of(task);
    const auto wait_for = [&](std::size_t u) {
      if (u != kNone && !ended[u]) {
        ++blockers[v];
        unblocks[u].push_back(v);
      }
    };
    wait_for(last_barrier[r]);
    if (task.lane < 0) {
      for (const auto& [lane, u] : last_in_lane[r])
        wait_for(u);
      last_in_lane[r].clear();
      last_barrier[r] = v;
    } else {
      const auto it = last_in_lane[r].find(task.lane);
      if (it != last_in_lane[r].end())
        wait_for(it->second);
      last_in_lane[r][task.lane] = v;
    }
    if (blockers[v] == 0)
      start(v, now);
  }

  void admit(std::size_t r, double now) {
    while (!queued[r].empty() && (handed_tasks[r] == 0 || handed[r] < credit)) {
      const auto v = std::get<2>(queued[r].top());
      queued[r].pop();
      handed[r] += dag::bytes_of(g.task(v));
      ++handed_tasks[r];
      hand_over(v, now);
    }
  }

  // Task v ends at `now`: its successors become ready, the tasks waiting for its lane start, its credit returns.
  void finish(std::size_t v, double now) {
    ended[v] = 1;
    timing[v].end_s = now;
    const auto& task = g.task(v);
    const std::size_t d = device_of(task);
    if (options.compute_slowdown > 0 && slowed_by_communication(task))
      std::erase(running[d], v);
    if (task.kind == dag::TaskKind::communication && --communicating[d] == 0)
      set_rates(d, now);
    for (auto [it, last] = boost::adjacent_vertices(v, g.graph()); it != last; ++it) {
      ready_at[*it] = std::max(ready_at[*it], now);
      if (--missing[*it] == 0)
        ready.emplace(ready_at[*it], *it);
    }
    for (const auto w : unblocks[v])
      if (--blockers[w] == 0)
        start(w, now);
    if (task.priority >= 0 && task.resource != dag::Resource::none) {
      // The credit it frees is handed out after every task that becomes ready at this instant has queued (a
      // ready entry after all of them: ids from n on name a slot to hand out).
      const auto r = slot_of(task);
      handed[r] = --handed_tasks[r] == 0 ? 0.0 : handed[r] - dag::bytes_of(task);
      ready.emplace(now, n + r);
    }
  }

  // A ready entry at `now`: a task, or (v >= n) a slot whose credit to hand out.
  void take_ready(std::size_t v, double now) {
    if (v >= n) {
      admit(v - n, now);
      return;
    }
    const auto& task = g.task(v);
    if (task.resource == dag::Resource::none) {
      start(v, now);
      return;
    }
    if (task.priority >= 0) { // queued; handed out once every task ready at this instant has queued too
      const auto r = slot_of(task);
      queued[r].emplace(task.priority, arrivals++, v);
      ready.emplace(now, n + r);
      return;
    }
    hand_over(v, now);
  }

  const dag::IterationGraph& g;
  const ScheduleOptions& options;
  const std::size_t n;
  const std::vector<dag::Device> devices;
  const std::size_t slots; // (device, resource) pairs
  const double slow_rate;

  std::vector<TaskTiming> timing;
  std::vector<std::size_t> missing;
  std::vector<double> ready_at;
  std::vector<char> ended;
  std::vector<int> blockers;
  std::vector<std::vector<std::size_t>> unblocks;
  std::vector<std::map<int, std::size_t>> last_in_lane;
  std::vector<std::size_t> last_barrier;
  // Slowed tasks in progress: work left (s at full speed) as of `since`, at `rate`; `version` invalidates old ends.
  std::vector<double> work_left, since, rate;
  std::vector<unsigned> version;
  std::vector<int> communicating;
  std::vector<std::vector<std::size_t>> running;
  // ByteScheduler (Task::priority): per slot, the ready prioritised tasks by (priority, arrival), and the bytes handed
  // to the resource and not finished; a task is handed over while those are below the credit (bytecore.py's loop).
  using Queued = std::tuple<int, std::size_t, std::size_t>; // priority, arrival, task
  std::vector<std::priority_queue<Queued, std::vector<Queued>, std::greater<>>> queued;
  std::vector<double> handed;
  std::vector<int> handed_tasks;
  std::size_t arrivals = 0;
  const double credit;

  using Ready = std::pair<double, std::size_t>;
  std::priority_queue<Ready, std::vector<Ready>, std::greater<>> ready;
  using End = std::tuple<double, std::size_t, unsigned>;
  std::priority_queue<End, std::vector<End>, std::greater<>> ends;
};

} // namespace

std::vector<TaskTiming> schedule_event_driven(const dag::IterationGraph& g, const ScheduleOptions& options) {
  // Events in time order: a task's end (ends first at one instant, as the list scheduler commits a task's end
  // before its successors compete), then ready tasks by (time, id). A ready task takes its resource's lane once the
  // tasks that took it before have ended (the list scheduler's order); a compute task's remaining work runs at
  // 1 / (1 + s) while its GPU communicates, and its end moves when a collective starts or ends beside it.
  return EventSchedule(g, options).run();
}

std::vector<TaskTiming> schedule(const dag::IterationGraph& g, const ScheduleOptions& options) {
  if (options.compute_slowdown > 0 || g.priority_credit() > 0)
    return schedule_event_driven(g, options);
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
    // (an update on no GPU stream is an offloaded optimizer step on the host: not the GPU's compute)
    if (kind == dag::TaskKind::forward || kind == dag::TaskKind::backward || kind == dag::TaskKind::prediction ||
        (kind == dag::TaskKind::update && g.task(v).resource != dag::Resource::none))
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

Dependencies with_stream_order(const dag::IterationGraph& graph, const std::vector<TaskTiming>& order) {
  const std::size_t n = graph.size();
  const auto devices = graph.devices();
  std::vector<std::vector<std::size_t>> by_resource(devices.size() * dag::kResourceCount);
  for (std::size_t v = 0; v < n; ++v) {
    const auto& t = graph.task(v);
    if (t.resource == dag::Resource::none)
      continue;
    const auto d =
        static_cast<std::size_t>(std::lower_bound(devices.begin(), devices.end(), t.device) - devices.begin());
    by_resource[d * dag::kResourceCount + static_cast<std::size_t>(t.resource)].push_back(v);
  }
  std::set<std::pair<std::size_t, std::size_t>> edges;
  for (std::size_t v = 0; v < n; ++v)
    for (std::size_t w : graph.successors(v))
      edges.emplace(v, w);
  // Tasks that start at one instant go in a topological order (the smallest id first among those ready), so that a
  // zero-duration task keeps its place before what depends on it.
  std::vector<std::size_t> rank(n, 0), indegree(n, 0);
  for (const auto& [v, w] : edges)
    ++indegree[w];
  std::priority_queue<std::size_t, std::vector<std::size_t>, std::greater<>> ready;
  for (std::size_t v = 0; v < n; ++v)
    if (indegree[v] == 0)
      ready.push(v);
  for (std::size_t next = 0; !ready.empty(); ++next) {
    const std::size_t v = ready.top();
    ready.pop();
    rank[v] = next;
    for (auto it = edges.lower_bound({v, 0}); it != edges.end() && it->first == v; ++it)
      if (--indegree[it->second] == 0)
        ready.push(it->second);
  }
  for (auto& tasks : by_resource) {
    std::sort(tasks.begin(), tasks.end(), [&](std::size_t a, std::size_t b) {
      return order[a].start_s != order[b].start_s ? order[a].start_s < order[b].start_s : rank[a] < rank[b];
    });
    // In that order within a lane; a lane -1 task after every lane's previous task and before every next one.
    std::optional<std::size_t> last_all;
    std::map<int, std::size_t> last_in_lane; // since last_all
    for (std::size_t v : tasks) {
      const int lane = graph.task(v).lane;
      if (lane < 0) {
        if (last_all)
          edges.emplace(*last_all, v);
        for (const auto& [l, u] : last_in_lane)
          edges.emplace(u, v);
        last_in_lane.clear();
        last_all = v;
        continue;
      }
      const auto it = last_in_lane.find(lane);
      if (it != last_in_lane.end())
        edges.emplace(it->second, v);
      else if (last_all)
        edges.emplace(*last_all, v);
      last_in_lane[lane] = v;
    }
  }
  Dependencies deps{std::vector<std::vector<std::size_t>>(n), std::vector<int>(n, 0)};
  for (const auto& [v, w] : edges) {
    deps.successors[v].push_back(w);
    ++deps.predecessors[w];
  }
  return deps;
}

PredecessorLists predecessors_in_order(const Dependencies& deps, const std::vector<std::size_t>& order) {
  const std::size_t n = deps.successors.size();
  std::vector<std::vector<std::size_t>> preds(n);
  for (std::size_t v = 0; v < n; ++v)
    for (std::size_t w : deps.successors[v])
      preds[w].push_back(v);
  PredecessorLists out{{}, std::vector<std::size_t>(n, 0), std::vector<std::size_t>(n, 0)};
  for (std::size_t v : order) {
    out.begin[v] = out.list.size();
    out.list.insert(out.list.end(), preds[v].begin(), preds[v].end());
    out.end[v] = out.list.size();
  }
  return out;
}

std::vector<std::size_t> topological_order(const Dependencies& deps) {
  const std::size_t n = deps.successors.size();
  std::vector<std::size_t> order;
  order.reserve(n);
  std::vector<int> waiting = deps.predecessors;
  for (std::size_t v = 0; v < n; ++v)
    if (waiting[v] == 0)
      order.push_back(v);
  for (std::size_t i = 0; i < order.size(); ++i)
    for (std::size_t w : deps.successors[order[i]])
      if (--waiting[w] == 0)
        order.push_back(w);
  return order;
}

} // namespace ddlsim::sim
