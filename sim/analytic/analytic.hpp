// The analytic engine: closed-form collective costs on the scenario's cluster, list scheduling of the DAG on one
// representative worker (data-parallel workers are symmetric), breakdown by interval accounting; ps-async by its
// FIFO link-queue simulation (sim/analytic/ps_async.hpp).
#pragma once

#include "sim/plan/result.hpp"
#include "sim/spec/scenario.hpp"

namespace ddlsim::sim {

/// Runs the scenario on the analytic engine.
[[nodiscard]] RunResult run_analytic(const Scenario& s);

/// Throws the InputError that run_analytic would throw before simulating (its plan's, its sampler's limits), without
/// simulating: what `ddlsim check` asks.
void check_analytic(const Scenario& s);

} // namespace ddlsim::sim
