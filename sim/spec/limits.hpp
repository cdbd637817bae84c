// The sizes a run may have (issue #15 D13): checked when a scenario is read (sim/spec/limits.cpp).
#pragma once

#include "sim/spec/scenario.hpp"

#include <string>

namespace ddlsim::sim {

/// ps-async's queue model (sim/analytic/ps_async.hpp) runs every worker through kAsyncPsWarmup iterations, then takes
/// its figures over the slowest worker's next kAsyncPsMeasured; check_feasible estimates its events from them.
inline constexpr int kAsyncPsWarmup = 10;
inline constexpr int kAsyncPsMeasured = 100;

/// Refuses, with an InputError naming `file` and the JSON path, a scenario the engine cannot simulate in this
/// machine's memory or in minutes: too many GPUs, hosts or parameter-server pairs for the engine (its capability
/// record, sim/spec/engine.hpp), variability or backup workers it does not sample, backup workers that leave no
/// replica to wait for, planners and queue models that would take more than a minute (the gradient groups' search,
/// ps-async's events).
void check_feasible(const Scenario& s, const std::string& file);

} // namespace ddlsim::sim
