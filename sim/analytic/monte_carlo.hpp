// Monte Carlo over iterations (issue #16, docs/variability.md): every copy of the DAG (data x tensor replicas) is timed
// with its own draws of task times, in each stream's order of the deterministic schedule; a collective shared by
// copies starts when its members are ready (the slowest, or with backup workers the (d - b)-th of a data-parallel
// group: Chen et al., arXiv:1604.00981). Synchronous training thus waits for its slowest worker: with compute
// c + Exp(mu) on p workers the mean iteration is c + mu H_p, with b backups c + mu (H_{d} - H_b).
#pragma once

#include "sim/plan/result.hpp"
#include "sim/spec/scenario.hpp"

namespace ddlsim::sim {

/// Samples `s.variability`'s iterations of the scheduled result `r` (its graph, timing and window, after finalize)
/// and writes the mean iteration, its breakdown (copy 0's, averaged), throughput and efficiency into `r`, and the
/// samples into r.variability. Throws InputError when the scenario asks for what the sampler does not model.
void sample_iterations(const Scenario& s, RunResult& r);

} // namespace ddlsim::sim
