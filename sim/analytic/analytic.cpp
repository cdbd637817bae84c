// The analytic engine (sim/analytic/analytic.hpp): the planned DAG with closed-form collective durations, list
// scheduled on one representative worker; ps-async's workers through the FIFO link-queue simulation.
#include "sim/analytic/analytic.hpp"

#include "core/units.hpp"
#include "sim/analytic/monte_carlo.hpp"
#include "sim/analytic/ps_async.hpp"
#include "sim/plan/host.hpp"
#include "sim/plan/prepare.hpp"
#include "sim/plan/schedule.hpp"

#include <fmt/format.h>

#include <chrono>

namespace ddlsim::sim {
namespace {

// ps-async: the asynchronous workers' loops (compute, push of the whole gradient, pull; no barrier) simulated with
// FIFO link queues; worker 0's timeline takes the mean push and pull durations.
void simulate_async_parameter_server(const Scenario& s, detail::Prepared& p) {
  RunResult& r = p.result;
  const auto& o = s.strategy.get<dag::ParameterServerOptions>();
  auto& ps = *r.parameter_server;
  const LoweringShape shape{s.cluster.nodes, s.cluster.gpus_per_node, o.servers, o.dedicated_servers};
  const auto shard = server_shard_bytes(r.groups, o.servers);
  auto alone = dag::build_ps_sync(s.model, p.costs.worker, {}, 1);
  add_host_tasks(alone, HostTimes(p.costs.worker));
  const double compute = makespan_of(schedule(alone));
  AsyncPsInput in;
  in.shape = shape;
  in.net = s.cluster.network();
  in.server_bytes = shard;
  // Each server applies a push to its shards at the worker's optimizer rate (MXNet's update_on_kvstore).
  const double model_bytes = ps.push_bytes_per_worker;
  for (double b : shard)
    in.server_update_s.push_back(model_bytes > 0 ? p.costs.worker.update_s * b / model_bytes : 0.0);
  for (int w = 0; w < r.workers; ++w)
    in.compute_s.push_back(compute * (1 + (r.workers > 1 ? o.worker_speed_spread * w / (r.workers - 1) : 0.0)));
  in.staleness_bound = o.staleness_bound;
  const auto sim = simulate_ps_async(in);
  ps.async = true;
  ps.staleness_bound = o.staleness_bound;
  ps.clock_lead_max = sim.clock_lead_max;
  ps.iterations_simulated = in.warmup + in.measured;
  ps.warmup_iterations = in.warmup;
  ps.worker_compute_s = in.compute_s;
  for (double rate : sim.iterations_per_s) {
    ps.worker_throughput_samples_per_s.push_back(rate * s.batch_per_gpu);
    ps.aggregate_throughput_samples_per_s += rate * s.batch_per_gpu;
  }
  ps.staleness_histogram = sim.staleness;
  ps.staleness_mean = sim.staleness_mean;
  ps.staleness_max = sim.staleness_max;
  for (std::size_t v = 0; v < r.graph.size(); ++v) {
    auto& t = r.graph.task(v);
    if (t.collective == dag::Collective::ps_push)
      t.duration_s = sim.mean_push_s[0];
    if (t.collective == dag::Collective::ps_pull)
      t.duration_s = sim.mean_pull_s[0];
  }
  if (o.staleness_bound >= 0)
    r.notes.push_back(fmt::format(
        "ps-ssp: stale-synchronous parallel (Ho et al., NIPS 2013) with staleness bound {}: a worker whose push of "
        "iteration k is applied pulls for iteration k + 1 only once every worker's pushes up to iteration k - {} are "
        "applied (its pull time includes that wait); the largest lead over the slowest worker was {} iteration(s)",
        o.staleness_bound, o.staleness_bound, sim.clock_lead_max));
  r.notes.push_back(fmt::format(
      "{}: {}; each of the {} workers loops compute, push of its whole gradient, pull, {} "
      "(compute {} x (1 + {} w/(p-1)) for worker w); every link direction is a FIFO queue (sim/analytic/ps_async.hpp); "
      "{} "
      "warm-up iterations per worker excluded, figures over the next {} of the slowest worker; iteration_time_s = "
      "workers x batch / aggregate throughput; the timeline is worker 0's mean iteration; a server applies a push to "
      "its shards at the worker's optimizer rate",
      s.strategy.kind(), parameter_server_placement(s), r.workers,
      o.staleness_bound >= 0 ? "waiting for the slowest only at the staleness bound" : "without a barrier",
      format_time(compute), o.worker_speed_spread, in.warmup, in.measured));
}

} // namespace

RunResult run_analytic(const Scenario& s) {
  const auto wall_start = std::chrono::steady_clock::now();
  auto prepared = detail::prepare(s, "analytic");
  RunResult& r = prepared.result;
  if (s.strategy.asynchronous() && r.parameter_server)
    simulate_async_parameter_server(s, prepared);
  if (s.cluster.topology.kind != TopologyKind::star)
    r.notes.push_back(fmt::format("the analytic engine treats the {} topology as a non-blocking star (only the NIC "
                                  "links are modelled); use the flow engine for its links and contention",
                                  topology_name(s.cluster.topology.kind)));
  const auto slowdown = comm_slowdown(s);
  if (slowdown.factor > 0)
    r.notes.push_back(fmt::format("compute on a GPU runs {:.3g} x slower while a collective runs on it ({}{}; "
                                  "docs/engines.md)",
                                  1 + slowdown.factor, slowdown.source == "gpu.comm_slowdown" ? "" : "calibration ",
                                  slowdown.source));
  r.timing = schedule(r.graph, {.compute_slowdown = slowdown.factor});
  r.sim.events = r.graph.size();
  detail::finalize(s, prepared);
  if (s.variability)
    sample_iterations(s, r);
  r.sim.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  return std::move(r);
}

} // namespace ddlsim::sim
