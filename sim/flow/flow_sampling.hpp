// Sampled iterations on the flow engine (`variability` with "engine": "flow", docs/variability.md): SimGrid's engine
// runs once per process, so the deterministic iteration and the sampled ones run one after another in one simulation
// (sim/flow/flow_sampling.cpp).
#pragma once

#include "sim/plan/prepare.hpp"
#include "sim/plan/result.hpp"
#include "sim/spec/scenario.hpp"

#include <chrono>
#include <cstddef>

namespace ddlsim::sim {

/// run_flow for a scenario with `variability`, after prepare: the deterministic iteration into `prepared` (finalized),
/// then the samples; `listed` replicas go to tasks.csv.
[[nodiscard]] RunResult run_flow_sampled(const Scenario& s, Prepared& prepared, std::size_t listed,
                                         std::chrono::steady_clock::time_point wall_start);

} // namespace ddlsim::sim
