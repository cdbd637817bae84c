// Stale-synchronous parallel parameter server (ps-ssp; Ho et al., "More Effective Distributed ML via a Stale
// Synchronous Parallel Parameter Server", NIPS 2013): every worker runs ps-sync's DAG (dag/strategies/ps.cpp: a push
// of each key as soon as its gradient is ready, the server's update, a pull that the layer's next forward waits for),
// but no longer in lockstep. A worker's pull of key k after iteration i (the parameters it reads for iteration
// i + 1) waits, besides its own push, only for every worker's push of k in iteration i - s to be applied: no worker
// reads parameters more than s iterations ahead of the slowest worker's updates (SSP's read rule, checked per key as
// Petuum's SSP tables check it per row). s = 0 is ps-sync's barrier per key; a bound no worker reaches is an
// asynchronous parameter server with each key pushed as its gradient is ready.
//
// The replay: p copies of the worker's DAG, unrolled over enough iterations, timed in a topological order of its
// dependencies plus each stream's order in the deterministic (lockstep) schedule, as the Monte Carlo times its copies
// (monte_carlo.hpp). Each copy's own tasks (compute, data loading, host work) take their modelled time times the
// worker's speed factor and, with `variability`, its draws; a push or pull takes its lockstep duration (every worker
// pushing the key at once: the servers' links shared by all, which errs slow when the workers drift apart), a
// server's update its modelled time. Each worker's iterations/s is measured over a window from the moment every
// worker has finished its warm-up to the moment the first has finished all its iterations.
#pragma once

#include "dag/graph.hpp"
#include "sim/plan/schedule.hpp"
#include "sim/spec/variability.hpp"

#include <map>
#include <vector>

namespace ddlsim::sim {

struct SspInput {
  const dag::IterationGraph* graph = nullptr; ///< one worker's ps-sync DAG, unrolled (ssp_iterations), costed
  std::vector<TaskTiming> timing;             ///< its deterministic schedule: each stream's order
  std::vector<double> worker_scale;           ///< per worker: a factor on its own tasks' times (speed spread)
  int staleness_bound = 0;
  int warmup = 10;                              ///< iterations of the slowest worker before the window
  const VariabilitySpec* variability = nullptr; ///< draws per worker, iteration and task (nullptr: none)
};

struct SspResult {
  std::vector<double> iterations_per_s; ///< per worker, over the window: its iterations over their span
  std::vector<double> iteration_s;      ///< every worker's iterations that end in the window, worker by worker
  std::map<int, long> staleness;        ///< staleness -> (update, key) pairs applied in the window
  double staleness_mean = 0;
  int staleness_max = 0;
  int clock_lead_max = 0; ///< the largest k + 1 - (iterations of key k applied by every worker) at a pull after k
  int measured = 0;       ///< iterations of the worker with the fewest in the window
};

/// How long ps-ssp's replay runs: `warmup` iterations before the window, `iterations` in all.
struct SspRun {
  int warmup = 10;
  int iterations = 0;
};
/// A run whose window holds at least `measured` iterations of the slowest worker, in the steady state: when the bound
/// can bind (workers whose speeds differ by up to `speed_ratio` >= 1, or `drawn` times that drift apart at random),
/// the warm-up lasts 10 + 50 s iterations, so that a worker gaining g iterations per iteration on the slowest has
/// reached the bound unless g < 1/50 (its rate then errs by less than 2 %); when it cannot, 10.
[[nodiscard]] SspRun ssp_run(int measured, int staleness_bound, double speed_ratio, bool drawn);

[[nodiscard]] SspResult simulate_ps_ssp(const SspInput& in);

} // namespace ddlsim::sim
