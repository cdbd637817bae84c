// The sizes a run may have (issue #15 D13): checked when a scenario is read (sim/spec/limits.cpp).
#pragma once

#include "sim/spec/scenario.hpp"

#include <string>

namespace ddlsim::sim {

/// Refuses, with an InputError naming `file` and the JSON path, a scenario the engine cannot simulate in this
/// machine's memory or in minutes: too many GPUs, hosts or parameter-server pairs for the engine (its capability
/// record, sim/spec/engine.hpp), variability or backup workers it does not sample, backup workers that leave no
/// replica to wait for.
void check_feasible(const Scenario& s, const std::string& file);

} // namespace ddlsim::sim
