// Monte Carlo over iterations (issue #16, docs/variability.md): every copy of the DAG (data x tensor replicas) is timed
// with its own draws of task times, in each stream's order of the deterministic schedule; a collective shared by
// copies starts when its members are ready (the slowest, or with backup workers the (d - b)-th of a data-parallel
// group: Chen et al., arXiv:1604.00981). Synchronous training thus waits for its slowest worker: with compute
// c + Exp(mu) on p workers the mean iteration is c + mu H_p, with b backups c + mu (H_{d} - H_b).
#pragma once

#include "sim/plan/prepare.hpp"
#include "sim/spec/scenario.hpp"

#include <vector>

namespace ddlsim::sim {

/// Refuses (InputError) what the sampler does not model, and samples that would take longer or more memory than its
/// limits, from the scenario and its plan's graph alone (`ddlsim check` asks it too).
void check_sampling(const Scenario& s, const dag::IterationGraph& g);

/// Samples `s.variability`'s iterations of graph `g` as scheduled (`timing`: each stream's order), each read over the
/// plan's `window`; finalize averages them into the figures. Throws InputError when the scenario asks for what the
/// sampler does not model.
[[nodiscard]] SampledIterations sample_iterations(const Scenario& s, const dag::IterationGraph& g,
                                                  const IterationWindow& window, const std::vector<TaskTiming>& timing);

} // namespace ddlsim::sim
