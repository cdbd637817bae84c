// Runs a scenario with the engine it names (analytic or flow).
#pragma once

#include "sim/plan/result.hpp"
#include "sim/spec/scenario.hpp"

namespace ddlsim::sim {

/// Runs the scenario with its engine. Throws InputError for what only shows when running (e.g. an engine that
/// this build does not have).
[[nodiscard]] RunResult run_scenario(const Scenario& s);

} // namespace ddlsim::sim
