// The analytic engine (sim/analytic/analytic.hpp): the planned DAG with closed-form collective durations, list
// scheduled on one representative worker; ps-async's workers through the FIFO link-queue simulation.
#include "sim/analytic/analytic.hpp"

#include "core/error.hpp"
#include "core/units.hpp"
#include "sim/analytic/monte_carlo.hpp"
#include "sim/analytic/ps_async.hpp"
#include "sim/analytic/ps_ssp.hpp"
#include "sim/plan/draws.hpp"
#include "sim/plan/host.hpp"
#include "sim/plan/prepare.hpp"
#include "sim/plan/schedule.hpp"

#include <fmt/format.h>

#include <chrono>

namespace ddlsim::sim {
namespace {

// One worker's iteration alone, without communication: ps-async's and ps-ssp's compute per worker.
double alone_compute_s(const Scenario& s, const Plan& p) {
  auto alone = dag::build_ps_sync(s.model, p.costs.worker, {}, 1);
  add_host_tasks(alone, HostTimes(p.costs.worker));
  return makespan_of(schedule(alone));
}

// ps-ssp's replay, measured on the release build (ResNet-50, 1,244 tasks per iteration: 16 workers x 155 iterations
// 0.63 s, x 1,073 iterations 5.1 s and 0.9 GB, 64 workers x 155 iterations 0.96 s): ~4 us and ~700 B per task of the
// unrolled DAG (its construction, schedule and stream order), ~40 ns and 16 B per task copy replayed (twice with
// variability). Refused beyond the Monte Carlo's limits (monte_carlo.cpp).
constexpr double kSspSecondsPerTiming = 40e-9, kSspSecondsPerTask = 4e-6, kSspBytesPerTask = 700,
                 kSspBytesPerTiming = 16, kSspMaxSeconds = 60, kSspMaxBytes = 4.0 * 1073741824;

void check_ssp_size(const Scenario& s, const Plan& p, int iterations) {
  const double tasks = static_cast<double>(p.graph.size()) / kPsSyncIterations * iterations;
  const double copies = tasks * p.workers;
  const double seconds = copies * kSspSecondsPerTiming * (s.variability ? 2 : 1) + tasks * kSspSecondsPerTask;
  const double bytes = kSspBytesPerTiming * copies + kSspBytesPerTask * tasks;
  if (seconds > kSspMaxSeconds || bytes > kSspMaxBytes)
    throw InputError(s.file, s.variability ? "/variability/iterations" : "/strategy",
                     fmt::format("ps-ssp would replay {} workers over {} iterations of {:.3g} tasks, ~{:.0f} s and "
                                 "~{:.3g} GiB; the limits are {:.0f} s and {:.0f} GiB: fewer iterations, workers or "
                                 "a smaller speed spread",
                                 p.workers, iterations, tasks / iterations, seconds, bytes / 1073741824, kSspMaxSeconds,
                                 kSspMaxBytes / 1073741824));
}

// Worker w of p computes 1 + spread w/(p-1) times slower (`worker_speed_spread`).
double speed_factor(const dag::ParameterServerOptions& o, int w, int p) {
  return 1 + (p > 1 ? o.worker_speed_spread * w / (p - 1) : 0.0);
}

// The asynchronous workers' figures, from ps-async's queue model or ps-ssp's replay: each worker's and the aggregate
// throughput, the staleness histogram.
template <class Workers> void report_workers(const Scenario& s, const Workers& sim, AsyncWorkersReport& ps) {
  for (double rate : sim.iterations_per_s) {
    ps.worker_throughput_samples_per_s.push_back(rate * s.batch_per_gpu);
    ps.aggregate_throughput_samples_per_s += rate * s.batch_per_gpu;
  }
  ps.staleness_histogram = sim.staleness;
  ps.staleness_mean = sim.staleness_mean;
  ps.staleness_max = sim.staleness_max;
}

// ps-async: the asynchronous workers' loops (compute, push of the whole gradient, pull; no barrier) simulated with
// FIFO link queues; worker 0's timeline takes the mean push and pull durations.
void simulate_async_parameter_server(const Scenario& s, const Plan& p, Timings& t) {
  const auto& o = s.strategy.get<dag::ParameterServerOptions>();
  auto& ps = t.async_workers.emplace();
  const LoweringShape shape = server_shape(s, s.cluster.network().shape());
  const auto shard = server_shard_bytes(p.groups, o.servers);
  const double compute = alone_compute_s(s, p);
  AsyncPsInput in;
  in.shape = shape;
  in.net = s.cluster.network();
  in.server_bytes = shard;
  // Each server applies a push to its shards at the worker's optimizer rate (MXNet's update_on_kvstore).
  const double model_bytes = p.parameter_server->push_bytes_per_worker;
  for (double b : shard)
    in.server_update_s.push_back(model_bytes > 0 ? p.costs.worker.update_s * b / model_bytes : 0.0);
  for (int w = 0; w < p.workers; ++w)
    in.compute_s.push_back(compute * speed_factor(o, w, p.workers));
  const auto sim = simulate_ps_async(in);
  report_workers(s, sim, ps);
  ps.iterations_simulated = in.warmup + in.measured;
  ps.warmup_iterations = in.warmup;
  ps.worker_compute_s = in.compute_s;
  for (std::size_t v = 0; v < p.graph.size(); ++v) {
    const auto c = dag::collective_of(p.graph.task(v));
    if (c == dag::Collective::ps_push || c == dag::Collective::ps_pull)
      t.durations.emplace_back(v, c == dag::Collective::ps_push ? sim.mean_push_s[0] : sim.mean_pull_s[0]);
  }
  t.notes.push_back(fmt::format(
      "ps-async: {}; each of the {} workers loops compute, push of its whole gradient, pull, without a barrier "
      "(compute {} x (1 + {} w/(p-1)) for worker w); every link direction is a FIFO queue (sim/analytic/ps_async.hpp); "
      "{} "
      "warm-up iterations per worker excluded, figures over the next {} of the slowest worker; iteration_time_s = "
      "workers x batch / aggregate throughput; the timeline is worker 0's mean iteration; a server applies a push to "
      "its shards at the worker's optimizer rate",
      parameter_server_placement(s), p.workers, format_time(compute), o.worker_speed_spread, in.warmup, in.measured));
}

// ps-ssp: the workers replayed on ps-sync's DAG, unrolled, each at its speed (and with variability, its draws), a
// pull after iteration k waiting for every worker's push of its key in k - s (sim/analytic/ps_ssp.hpp). Runs before
// the lockstep schedule of the prepared (three-iteration) DAG, which stays the timeline.
void simulate_ssp_parameter_server(const Scenario& s, const Plan& p, Timings& t) {
  const auto& o = s.strategy.get<dag::ParameterServerOptions>();
  auto& ps = t.async_workers.emplace();
  if (const auto slowdown = comm_slowdown(s); slowdown.factor > 0)
    throw InputError(s.file, "/strategy/kind",
                     fmt::format("ps-ssp's replay of the workers does not slow compute beside communication ({}): set "
                                 "gpu.comm_slowdown to 0, or use ps-sync",
                                 slowdown.source));
  constexpr int kMeasured = 40;
  const int measured = s.variability ? s.variability->iterations : kMeasured;
  SspInput in;
  for (int w = 0; w < p.workers; ++w)
    in.worker_scale.push_back(speed_factor(o, w, p.workers));
  const auto run = ssp_run(measured, o.staleness_bound, 1 + o.worker_speed_spread, s.variability.has_value());
  const int iterations = run.iterations;
  check_ssp_size(s, p, iterations);
  const auto graph = unrolled_ps_sync(s, p, iterations);
  in.graph = &graph;
  in.timing = schedule(graph);
  in.staleness_bound = o.staleness_bound;
  in.warmup = run.warmup;
  const auto fixed = simulate_ps_ssp(in);
  SspResult drawn;
  if (s.variability) {
    in.variability = &*s.variability;
    drawn = simulate_ps_ssp(in);
  }
  const auto& sim = s.variability ? drawn : fixed;
  report_workers(s, sim, ps);
  ps.staleness_bound = o.staleness_bound;
  ps.clock_lead_max = sim.clock_lead_max;
  ps.iterations_simulated = iterations;
  ps.warmup_iterations = run.warmup;
  const double compute = alone_compute_s(s, p);
  for (double scale : in.worker_scale)
    ps.worker_compute_s.push_back(compute * scale);
  if (s.variability) {
    auto& v = t.async_variability.emplace();
    v.iterations = static_cast<int>(sim.iteration_s.size());
    v.seed = s.variability->seed;
    v.copies = p.workers;
    double rate = 0;
    for (double x : fixed.iterations_per_s)
      rate += x;
    v.deterministic_s = p.workers / rate;
    v.iteration_s = sim.iteration_s;
    set_percentiles(v.iteration_s, v);
  }
  t.notes.push_back(fmt::format(
      "ps-ssp: stale-synchronous parallel (Ho et al., NIPS 2013) with staleness bound {}, {}: each of the {} workers "
      "runs ps-sync's DAG (each key pushed as its gradient is ready, the server's update, a pull that the layer's "
      "next forward waits for) at its own speed (its tasks x (1 + {} w/(p-1)) for worker w{}); a pull after iteration "
      "k waits for every worker's push of its key in k - {} to be applied (sim/analytic/ps_ssp.hpp). Pushes and pulls "
      "take ps-sync's lockstep durations. {} iterations unrolled, the first {} excluded; iteration_time_s = workers x "
      "batch / aggregate throughput over the window ({} or more iterations of each worker); the largest lead over "
      "the slowest worker's applied updates was {} iteration(s); the timeline is ps-sync's lockstep iteration",
      o.staleness_bound, parameter_server_placement(s), p.workers, o.worker_speed_spread,
      s.variability ? ", and the variability's draws" : "", o.staleness_bound, iterations, run.warmup, sim.measured,
      sim.clock_lead_max));
}

} // namespace

void check_analytic(const Scenario& s) {
  const Plan plan = prepare(s, Engine::analytic);
  const bool ssp = plan.parameter_server && s.strategy.parameter_server()->staleness_bound >= 0;
  if (s.variability && !ssp)
    check_sampling(s, plan.graph);
}

RunResult run_analytic(const Scenario& s) {
  const auto wall_start = std::chrono::steady_clock::now();
  Plan plan = prepare(s, Engine::analytic);
  Timings t;
  const bool ssp = plan.parameter_server && s.strategy.parameter_server()->staleness_bound >= 0;
  if (ssp)
    simulate_ssp_parameter_server(s, plan, t);
  else if (s.strategy.asynchronous() && plan.parameter_server)
    simulate_async_parameter_server(s, plan, t);
  if (s.cluster.topology.kind != TopologyKind::star)
    t.notes.push_back(fmt::format("the analytic engine treats the {} topology as a non-blocking star (only the NIC "
                                  "links are modelled); use the flow engine for its links and contention",
                                  topology_name(s.cluster.topology.kind)));
  // ps-async's push and pull take the queue model's means: the plan's DAG retimed.
  std::optional<dag::IterationGraph> retimed;
  if (!t.durations.empty()) {
    retimed = plan.graph;
    for (const auto& [v, seconds] : t.durations)
      retimed->task(v).duration_s = seconds;
  }
  const auto& graph = retimed ? *retimed : plan.graph;
  t.timing = schedule(graph, {.compute_slowdown = comm_slowdown(s).factor});
  t.sim.events = graph.size();
  if (s.variability && !ssp) { // ps-ssp's replay drew its own
    t.samples = sample_iterations(s, graph, plan.window, t.timing);
    t.sim.events += t.samples->events;
  }
  auto r = finalize(s, std::move(plan), std::move(t));
  r.sim.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  return r;
}

} // namespace ddlsim::sim
