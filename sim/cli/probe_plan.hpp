// `ddlsim probe-plan SCENARIO --out PLAN.json`: what `ddlsim-probe` should measure on a GPU node for this scenario
// (issue #13): each layer's forward kernel at the scenario's batch (convolutions, GEMMs, batched GEMMs, memory-bound
// kernels; dag/kernel_shapes.hpp), the gradient sizes and densities a sparsifying strategy selects from, the matrices
// PowerSGD factorises, and the collectives the strategy issues with their sizes and communicators.
#pragma once

#include "core/json.hpp"
#include "sim/spec/scenario.hpp"

#include <string>
#include <vector>

namespace ddlsim::sim {

/// The plan (format "ddlsim-probe-plan", version 1; docs/calibration.md#probe-plan).
[[nodiscard]] OrderedJson probe_plan(const Scenario& s);

/// Writes the plan of the scenario at `path` (with --set overrides) to `out` atomically and prints a summary.
int probe_plan_command(const std::string& path, const std::vector<std::string>& overrides, const std::string& out);

} // namespace ddlsim::sim
