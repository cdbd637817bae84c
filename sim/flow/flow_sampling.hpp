// Sampled iterations on the flow engine (`variability` with "engine": "flow", docs/variability.md): SimGrid's engine
// runs once per process, so the deterministic iteration and the sampled ones run one after another in one simulation
// (sim/flow/flow_sampling.cpp).
#pragma once

#include "sim/plan/prepare.hpp"
#include "sim/plan/result.hpp"
#include "sim/spec/scenario.hpp"

#include <cstddef>
#include <string>

namespace ddlsim::sim {

/// The flow engine's timings of a plan with `variability`: the deterministic iteration (copy 0) and the samples;
/// `listed` replicas go to tasks.csv.
[[nodiscard]] Timings time_flow_sampled(const Scenario& s, const Plan& plan, std::size_t listed);

/// Refuses (InputError) what the flow engine's sampler does not model, and samples beyond its limits, from the
/// scenario and its plan's graph alone (`ddlsim check` asks it too).
void check_flow_sampling(const Scenario& s, const dag::IterationGraph& g);

/// The note when tasks.csv and timeline.json list fewer replicas than were simulated (flow.report_replicas).
[[nodiscard]] std::string reported_replicas_note(const dag::IterationGraph& graph, std::size_t reported,
                                                 std::size_t simulated);

} // namespace ddlsim::sim
