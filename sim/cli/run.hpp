// Runs a scenario with the engine it names (analytic or flow).
#pragma once

#include "sim/plan/result.hpp"
#include "sim/spec/scenario.hpp"

namespace ddlsim::sim {

/// Runs the scenario with its engine. Throws InputError for what only shows when running (e.g. an engine that
/// this build does not have).
[[nodiscard]] RunResult run_scenario(const Scenario& s);

/// Throws the InputError that run_scenario would throw before simulating, from the scenario alone: the plan's
/// refusals and the samplers' limits (`ddlsim check`).
void check_runnable(const Scenario& s);

} // namespace ddlsim::sim
