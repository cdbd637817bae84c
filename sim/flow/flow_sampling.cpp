// Sampled iterations on the flow engine (flow_sampling.hpp).
#include "sim/flow/flow_sampling.hpp"

#include "core/error.hpp"
#include "sim/flow/flow_engine.hpp"
#include "sim/plan/draws.hpp"
#include "sim/plan/schedule.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

namespace ddlsim::sim {
namespace {

// Sampled iterations on the flow engine (`variability`, docs/variability.md): SimGrid's engine runs once per process,
// so the deterministic iteration (copy 0 of the DAG) and the sampled ones (copies 1..N) run in one simulation, one
// after the other: a zero-time barrier after every task of copy k - 1 starts copy k. Each replica of copy k takes its
// own draws (CopyDraws, drawn in the order the analytic engine's Monte Carlo draws them: the same seed gives both
// engines the same task times); collectives take what their flows take.
// The limits keep it to small cases. Measured on the release build (docs/benchmarks.md, "Variability"): ResNet-50 on
// 8 x 4 GPUs over 10 GbE, 100 MG-WFBP samples 0.35 s for 1.47e6 task copies (~0.25 us each), 20 WFBP samples 0.22 s
// for 3,381 allreduce instances on 32 GPUs (~1.3 us per instance and GPU, beyond the task copies); ~700 B per task of
// the chained DAG and ~40 B per task copy (durations, timings, the replicas' timings returned).
constexpr double kFlowSampledSecondsPerTiming = 0.25e-6, kFlowSampledSecondsPerInstanceGpu = 1.3e-6,
                 kFlowSampledBytesPerTask = 700, kFlowSampledBytesPerTiming = 40, kFlowSampledMaxSeconds = 60,
                 kFlowSampledMaxBytes = 4.0 * 1073741824;

struct SampledChain {
  dag::IterationGraph graph;
  std::vector<double> durations;     ///< replica-major
  std::vector<std::size_t> barriers; ///< between the copies (ReplicaTimer::add_barrier)
  std::size_t n = 0;                 ///< tasks of one copy
  int copies = 0;                    ///< 1 + sampled iterations
  [[nodiscard]] std::size_t base(int k) const { return static_cast<std::size_t>(k) * (n + 1); }
};

SampledChain chain_samples(const Scenario& s, const dag::IterationGraph& one, std::size_t slots) {
  const auto& spec = *s.variability;
  SampledChain c{one, {}, {}, one.size(), spec.iterations + 1};
  const std::size_t n = c.n;
  std::vector<std::size_t> sinks, roots;
  for (std::size_t v = 0; v < n; ++v) {
    if (one.successors(v).empty())
      sinks.push_back(v);
    if (one.predecessors(v).empty())
      roots.push_back(v);
  }
  for (int k = 1; k < c.copies; ++k) {
    const auto barrier = c.graph.add({.kind = dag::TaskKind::delay, .resource = dag::Resource::none, .duration_s = 0});
    c.barriers.push_back(barrier);
    for (std::size_t v : sinks)
      c.graph.depend(c.base(k - 1) + v, barrier);
    for (std::size_t v = 0; v < n; ++v)
      c.graph.add(one.task(v));
    for (std::size_t v = 0; v < n; ++v)
      for (std::size_t w : one.successors(v))
        c.graph.depend(c.base(k) + v, c.base(k) + w);
    for (std::size_t v : roots)
      c.graph.depend(barrier, c.base(k) + v);
  }
  const std::size_t total = c.graph.size();
  c.durations.assign(slots * total, 0.0);
  for (std::size_t r = 0; r < slots; ++r)
    for (std::size_t v = 0; v < total; ++v)
      c.durations[r * total + v] = c.graph.task(v).duration_s;
  const auto order = topological_order(with_stream_order(one, schedule(one)));
  CopyDraws draw_plan(one, order, spec, slots);
  Draws draws(spec.seed);
  for (int k = 1; k < c.copies; ++k) {
    draw_plan.next_sample(draws);
    for (std::size_t v : order)
      if (draw_plan.varied(v))
        for (std::size_t r = 0; r < slots; ++r)
          c.durations[r * total + c.base(k) + v] =
              draw_plan.delay(v, r) + one.task(v).duration_s * draw_plan.factor(v, r, draws);
  }
  return c;
}

// Each sampled copy's iteration, read off the latest end of every replica's copy of each task over the plan's window,
// and copy 0's breakdown in it.
SampledIterations sample_copies(const Scenario& s, const Plan& plan, const SampledChain& chain,
                                const std::vector<const std::vector<TaskTiming>*>& by_slot) {
  const std::size_t n = chain.n;
  const auto& first_slot = *by_slot.front();
  SampledIterations out;
  out.report.iterations = s.variability->iterations;
  out.report.seed = s.variability->seed;
  out.report.copies = static_cast<int>(by_slot.size());
  std::vector<double> end_max(n);
  std::vector<TaskTiming> first(n);
  for (int k = 1; k < chain.copies; ++k) {
    const std::size_t base = chain.base(k);
    const double t0 = first_slot[base - 1].end_s; // the barrier: the copy's time origin
    for (std::size_t v = 0; v < n; ++v) {
      double m = 0;
      for (const auto* timing : by_slot)
        m = std::max(m, (*timing)[base + v].end_s - t0);
      end_max[v] = m;
      first[v] = {first_slot[base + v].start_s - t0, first_slot[base + v].end_s - t0};
    }
    const auto [from, to] = sampled_window(plan.graph, plan.window, end_max);
    out.report.iteration_s.push_back(to - from);
    add_breakdown(out.breakdown_sum, breakdown_in(plan.graph, first, from, to));
  }
  out.timed = fmt::format("every one of the DAG's {} copies on the platform", by_slot.size());
  return out;
}

} // namespace

void check_flow_sampling(const Scenario& s, const dag::IterationGraph& g) {
  const auto& spec = *s.variability;
  check_samplable(s, g);
  double collectives = 0; // instances x their GPUs, per copy
  for (std::size_t v = 0; v < g.size(); ++v)
    if (const auto& t = g.task(v); dag::collective_of(t) != dag::Collective::none)
      collectives += g.instances(t) * static_cast<double>(g.instance_communicator(t, 0).ranks.size());
  const double copies = spec.iterations + 1.0;
  const double tasks = copies * static_cast<double>(g.size());
  const double timings = tasks * g.replicas();
  const double seconds =
      timings * kFlowSampledSecondsPerTiming + copies * collectives * kFlowSampledSecondsPerInstanceGpu;
  const double bytes = tasks * kFlowSampledBytesPerTask + timings * kFlowSampledBytesPerTiming;
  if (seconds > kFlowSampledMaxSeconds || bytes > kFlowSampledMaxBytes)
    throw InputError(s.file, "/variability/iterations",
                     fmt::format("{} sampled iterations of {} DAG copies x {} tasks on the flow engine would take "
                                 "~{:.0f} s and ~{:.3g} GiB; its limits are {:.0f} s and {:.0f} GiB (it samples small "
                                 "cases): sample fewer iterations, or use the analytic engine",
                                 spec.iterations, g.replicas(), g.size(), seconds, bytes / 1073741824,
                                 kFlowSampledMaxSeconds, kFlowSampledMaxBytes / 1073741824));
}

std::string reported_replicas_note(const dag::IterationGraph& graph, std::size_t reported, std::size_t simulated) {
  return fmt::format("tasks.csv and timeline.json list the tasks of the first {} of the {} {} simulated "
                     "(flow.report_replicas)",
                     reported, simulated, graph.tensor_peers() > 1 ? "GPUs per stage" : "data-parallel replicas");
}

Timings time_flow_sampled(const Scenario& s, const Plan& plan, std::size_t listed) {
  const auto& graph = plan.graph;
  check_flow_sampling(s, graph);
  const auto slots = static_cast<std::size_t>(graph.replicas());
  auto chain = chain_samples(s, graph, slots);
  const std::size_t n = chain.n;
  auto run = simulate_graph_flow(
      s, chain.graph, [](const std::vector<TaskTiming>& timing) { return makespan_of(timing); }, // over every copy
      slots, &chain.durations, chain.barriers);
  Timings t;
  t.timing.assign(run.timing.begin(), run.timing.begin() + static_cast<std::ptrdiff_t>(n));
  for (const auto& [v, seconds] : run.durations) // the deterministic copy's collectives, as simulated
    if (v < n)
      t.durations.emplace_back(v, seconds);
  t.notes.push_back(std::move(run.note));
  const auto copies = static_cast<double>(chain.copies);
  for (auto& l : run.links) { // per iteration: the mean over the copies
    l.bytes /= copies;
    l.busy_s /= copies;
  }
  t.links = std::move(run.links);
  // Every replica's timing of every copy: replica 0's, then the others'.
  std::vector<const std::vector<TaskTiming>*> by_slot{&run.timing};
  for (const auto& rep : run.replicas)
    by_slot.push_back(&rep.timing);
  t.samples = sample_copies(s, plan, chain, by_slot);
  t.notes.push_back(fmt::format(
      "flow engine with variability: the deterministic iteration and the {} sampled ones ran one after another in one "
      "simulation (a barrier between them), every replica simulated with its own draws; collectives take what their "
      "flows take; link statistics are the mean per iteration over all {} iterations",
      s.variability->iterations, chain.copies));
  const auto reported = std::min(slots, listed);
  for (std::size_t k = 1; k < reported; ++k)
    t.replicas.push_back(
        {static_cast<int>(k),
         std::vector<TaskTiming>(by_slot[k]->begin(), by_slot[k]->begin() + static_cast<std::ptrdiff_t>(n))});
  if (reported < slots)
    t.notes.push_back(reported_replicas_note(graph, reported, slots));
  t.sim.flows = run.flows;
  t.sim.events = run.events;
  return t;
}

} // namespace ddlsim::sim
