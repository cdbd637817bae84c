// The analytic engine: closed-form collective costs on the scenario's cluster, list scheduling of the DAG on
// one representative worker (data-parallel workers are symmetric), breakdown by interval accounting.
#include "sim/engine.hpp"

#include "core/units.hpp"
#include "sim/compute.hpp"
#include "sim/lowering/evaluate.hpp"

#include <algorithm>
#include <chrono>
#include <queue>

namespace ddlsim::sim {

std::vector<TaskTiming> schedule(const dag::IterationGraph& g) {
  const std::size_t n = g.size();
  std::vector<TaskTiming> timing(n);
  std::vector<std::size_t> missing(n);
  std::vector<double> ready_at(n, 0);
  std::array<double, dag::kResourceCount> free_at{};
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
      auto& free = free_at[static_cast<std::size_t>(task.resource)];
      start = std::max(start, free);
      free = start + task.duration_s;
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
  // Sweep over interval boundaries; at each elementary interval classify by what is active.
  struct Edge {
    double t;
    int delta;
    int cls; // 0 compute, 1 compression, 2 communication
  };
  std::vector<Edge> edges;
  for (std::size_t v = 0; v < g.size(); ++v) {
    const auto kind = g.task(v).kind;
    int cls = -1;
    if (kind == dag::TaskKind::forward || kind == dag::TaskKind::backward || kind == dag::TaskKind::update)
      cls = 0;
    if (kind == dag::TaskKind::compression)
      cls = 1;
    if (kind == dag::TaskKind::communication)
      cls = 2;
    if (cls < 0 || timing[v].end_s <= timing[v].start_s)
      continue;
    edges.push_back({timing[v].start_s, +1, cls});
    edges.push_back({timing[v].end_s, -1, cls});
  }
  std::sort(edges.begin(), edges.end(),
            [](const Edge& a, const Edge& b) { return a.t != b.t ? a.t < b.t : a.delta < b.delta; });
  Breakdown b;
  std::array<int, 3> active{};
  double last = 0;
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
  b.idle_s = std::max(0.0, makespan - b.compute_s - b.compression_s - b.exposed_communication_s);
  return b;
}

namespace {

double makespan_of(const std::vector<TaskTiming>& timing) {
  double m = 0;
  for (const auto& t : timing)
    m = std::max(m, t.end_s);
  return m;
}

RunResult run_analytic(const Scenario& s) {
  const auto wall_start = std::chrono::steady_clock::now();
  auto prepared = detail::prepare(s, "analytic");
  RunResult& r = prepared.result;
  if (s.cluster.topology.kind != "star")
    r.notes.push_back(fmt::format("the analytic engine treats the {} topology as a non-blocking star (only the NIC "
                                  "links are modelled); use the flow engine for its links and contention",
                                  s.cluster.topology.kind));
  r.timing = schedule(r.graph);
  r.sim.events = r.graph.size();
  detail::finalize(s, prepared);
  r.sim.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  return std::move(r);
}

} // namespace

namespace detail {

Prepared prepare(const Scenario& s, std::string engine) {
  Prepared p;
  RunResult& r = p.result;
  r.engine = std::move(engine);
  r.workers = s.cluster.workers();
  p.costs = compute_costs(s);
  r.compute_source = p.costs.source;
  const Network net = s.cluster.network();
  p.allreduce = s.allreduce.measured ? make_measured_allreduce(net, *s.allreduce.measured)
                                     : find_allreduce_algorithm(s.allreduce.algorithm)->make(net);
  const AllreduceModel& model = *p.allreduce;
  const dag::CommCost allreduce_time = [&model](double bytes) { return model.cost(bytes).time_s; };
  const LoweringShape shape{s.cluster.nodes, s.cluster.gpus_per_node};
  const LinearLoweringCost allgather(sparse_lowering(dag::Collective::allgather), shape, net);
  const dag::StrategyInput input{s.model,    p.costs.worker, dtype_bytes(s.gradient_dtype), allreduce_time,
                                 s.strategy, r.workers,      std::cref(allgather)};
  const bool communicate = r.workers > 1;
  r.groups = communicate ? dag::find_strategy(s.strategy.kind)->plan(input) : std::vector<dag::GradientGroup>{};
  r.graph = dag::build_iteration(s.model, p.costs.worker, r.groups, communicate);
  for (std::size_t v = 0; v < r.graph.size(); ++v) {
    auto& task = r.graph.task(v);
    if (task.collective == dag::Collective::none)
      continue;
    // The closed form, or the phase-synchronous cost of the lowering; the flow engine replaces it with what it
    // simulates.
    CollectiveCost cost;
    if (task.collective == dag::Collective::allreduce) {
      cost = p.allreduce->cost(task.bytes);
    } else {
      const auto phases = sparse_lowering(task.collective).lower(shape, task.bytes, Granularity::aggregated);
      cost = {phase_synchronous_time(phases, net), busiest_sender_bytes(phases, r.workers)};
    }
    task.duration_s = cost.time_s;
    r.communication_bytes_per_worker += cost.bytes_sent;
  }
  if (const auto c = compression_totals(r.groups); c.groups > 0) {
    const double bw = p.costs.worker.memory_bandwidth / 1e9;
    if (c.selected > 0)
      r.notes.push_back(fmt::format(
          "{}: {} of {} gradient elements sent per worker in {} group{} (density {}), {} selection{}; compression {} "
          "and decompression {} per iteration on the GPU (memory traffic at {:.0f} GB/s and {} us per kernel launch)",
          s.strategy.kind, c.selected, c.elements, c.groups, c.groups > 1 ? "s" : "", s.strategy.density,
          dag::selection_name(s.strategy.selection),
          s.strategy.selection_curve ? " (its time from the calibration's cost curve)" : "", format_time(c.compress_s),
          format_time(c.decompress_s), bw, dag::kKernelLaunchS * 1e6));
    else
      r.notes.push_back(fmt::format(
          "{}: {} bits per gradient element on the wire, {} DDP bucket{} allgathered and decoded on every worker; "
          "quantisation {} and decoding {} per iteration on the GPU (memory traffic at {:.0f} GB/s and {} us per "
          "kernel launch)",
          s.strategy.kind, c.wire_bits, c.groups, c.groups > 1 ? "s" : "", format_time(c.compress_s),
          format_time(c.decompress_s), bw, dag::kKernelLaunchS * 1e6));
  }
  if (const auto ps = powersgd_totals(r.groups)) {
    const auto& w = p.costs.worker;
    r.notes.push_back(fmt::format(
        "powersgd: rank {}, {} weight matrices sent as low-rank factors and {} tensors dense; {} of {} gradient "
        "elements allreduced per worker (compression ratio {:.1f}); compression kernels {} per iteration "
        "(roofline at {:.1f} TFLOPS, {:.0f} GB/s) on {}",
        s.strategy.rank, ps->matrices, ps->dense_tensors, ps->wire_elements, ps->elements, ps->compression_ratio(),
        format_time(ps->compress_s), w.peak_flops / 1e12, w.memory_bandwidth / 1e9,
        s.strategy.separate_compression_stream
            ? "a separate GPU stream, assumed to overlap with backward without slowing it"
            : "the compute stream"));
  }
  return p;
}

} // namespace detail

CompressionTotals compression_totals(const std::vector<dag::GradientGroup>& groups) {
  CompressionTotals c;
  for (const auto& g : groups) {
    const auto first = g.first_collective();
    if (first != dag::Collective::allgather && first != dag::Collective::global_topk)
      continue;
    ++c.groups;
    c.elements += g.elements;
    c.selected += g.selected;
    c.wire_bits = g.wire_bits;
    c.compress_s += g.stages.front().kernel_s;
    c.decompress_s += g.kernel_s() - g.stages.front().kernel_s;
  }
  return c;
}

std::optional<PowerSgdTotals> powersgd_totals(const std::vector<dag::GradientGroup>& groups) {
  PowerSgdTotals t;
  bool any = false;
  for (const auto& g : groups) {
    if (g.wire_elements == 0 && g.low_rank_matrices == 0)
      continue;
    any = true;
    t.matrices += g.low_rank_matrices;
    t.dense_tensors += static_cast<int>(g.tensors.size()) - g.low_rank_matrices;
    t.elements += g.elements;
    t.wire_elements += g.wire_elements;
    t.compress_s += g.kernel_s();
  }
  if (!any)
    return std::nullopt;
  return t;
}

const CollectiveLowering& sparse_lowering(dag::Collective c) {
  const CollectiveLowering* l = c == dag::Collective::allgather
                                    ? find_lowering(CollectiveKind::allgather, "recursive-doubling")
                                    : find_lowering(CollectiveKind::global_topk, "tree");
  if (c != dag::Collective::allgather && c != dag::Collective::global_topk)
    throw std::logic_error(fmt::format("no sparse lowering for collective {}", dag::collective_name(c)));
  return *l;
}

namespace detail {

void finalize(const Scenario& s, Prepared& p) {
  RunResult& r = p.result;
  r.iteration_time_s = makespan_of(r.timing);
  r.critical_path_s = r.graph.critical_path().length_s;
  // The same worker alone: the reference for scaling efficiency.
  const auto alone = dag::build_iteration(s.model, p.costs.worker, {}, false);
  r.single_gpu_iteration_s = makespan_of(schedule(alone));
  r.throughput_samples_per_s = r.workers * s.batch_per_gpu / r.iteration_time_s;
  r.scaling_efficiency = r.single_gpu_iteration_s / r.iteration_time_s;
  r.breakdown = breakdown_of(r.graph, r.timing, r.iteration_time_s);
  double largest = 0;
  for (const auto& g : r.groups)
    largest = std::max(largest, g.bytes);
  r.peak_memory_bytes_per_gpu = peak_memory_bytes(s, largest);
}

} // namespace detail

RunResult run_scenario(const Scenario& s) {
  if (s.engine == "flow")
    return run_flow(s);
  return run_analytic(s);
}

} // namespace ddlsim::sim
