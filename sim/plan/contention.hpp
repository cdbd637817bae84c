// Collectives that run at the same time over links they share, as the analytic engine sees them (docs/engines.md,
// "Groups that share a link"). A replicated DAG (tensor x pipeline x data layouts) stands for d x t copies that run
// its tasks in step, so each collective task is several instances at once (one per tensor rank over its data-parallel
// group, one per data-parallel replica over its tensor group, one per copy for a transfer between stages): eight
// data-parallel groups of a t = 8 layout cross one node's NIC together. Their time is that of their lowerings' phases
// run together on the whole cluster, each link shared by every flow crossing it (concurrent_phase_time), exact for
// identical groups on a symmetric cluster, where the flow engine's max-min sharing gives the same rates.
#pragma once

#include "dag/graph.hpp"
#include "sim/spec/scenario.hpp"

#include <map>
#include <tuple>

namespace ddlsim::sim {

/// The slowdown of a collective task's instances run together over each one alone (>= 1; 1 when they share no link
/// or the task has one instance), cached by communicator, collective, shard and bytes.
class InstanceContention {
public:
  InstanceContention(const Scenario& s, const dag::IterationGraph& graph) : s_(s), graph_(graph) {}
  [[nodiscard]] double factor(const dag::Task& task);

private:
  using Key = std::tuple<int, dag::Collective, bool, int, int, double>; // bool: a parameter gather
  const Scenario& s_;
  const dag::IterationGraph& graph_;
  std::map<Key, double> memo_;
};

} // namespace ddlsim::sim
