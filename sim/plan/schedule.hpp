// Non-preemptive list scheduling of an iteration DAG on its resources, and the summary's breakdown of a timeline.
// Both engines use them: the analytic engine for its timeline, the flow engine for each resource's task order.
#pragma once

#include "dag/graph.hpp"
#include "sim/plan/result.hpp"

#include <optional>
#include <vector>

namespace ddlsim::sim {

/// How tasks share a GPU beyond its streams.
struct ScheduleOptions {
  /// Compute on a GPU (forward, backward, update, prediction and compression kernels) runs 1 + compute_slowdown
  /// times slower while a communication task of the same GPU runs (NCCL's kernels take SMs and memory bandwidth
  /// from the kernels beside them: `gpu.comm_slowdown`, docs/engines.md). 0: durations as given.
  double compute_slowdown = 0;
};

/// Non-preemptive list scheduling, per device: each resource runs one task at a time (one per lane for tasks with a
/// lane; a lane -1 task waits for every lane), tasks start in order of readiness (ties by task id); Resource::none runs
/// everything at once. Durations are taken from the graph; with a compute slowdown a compute task's progress slows
/// while its GPU communicates (an event-driven pass that gives the same timeline as the list scheduler without one).
[[nodiscard]] std::vector<TaskTiming> schedule(const dag::IterationGraph& g, const ScheduleOptions& options = {});
/// The event-driven pass alone (for tests: with compute_slowdown 0 it equals schedule's list scheduling bit for bit).
[[nodiscard]] std::vector<TaskTiming> schedule_event_driven(const dag::IterationGraph& g,
                                                            const ScheduleOptions& options);
/// Whether a task is compute that a collective beside it slows (ScheduleOptions::compute_slowdown).
[[nodiscard]] bool slowed_by_communication(const dag::Task& t);

/// The graph's dependencies, plus the order of each (device, resource)'s tasks in a schedule (readiness order), as an
/// engine that times tasks in that order must enforce it: a stream runs one task at a time (per lane). The flow engine
/// times its replicas this way, and the analytic engine's Monte Carlo its sampled iterations.
struct Dependencies {
  std::vector<std::vector<std::size_t>> successors; ///< by task id, without duplicates
  std::vector<int> predecessors;                    ///< count, by task id
};

/// with_stream_order of `order` (a schedule of g).
[[nodiscard]] Dependencies with_stream_order(const dag::IterationGraph& g, const std::vector<TaskTiming>& order);

/// The tasks in an order that respects `deps` (Kahn's, the ready tasks in id order).
[[nodiscard]] std::vector<std::size_t> topological_order(const Dependencies& deps);
/// Every task's predecessors in `deps`, in one array laid out in `order` (task v's are list[begin[v]] ..
/// list[end[v] - 1]): what an engine that times the tasks in that order reads (the Monte Carlo, ps-ssp's replay).
struct PredecessorLists {
  std::vector<std::size_t> list, begin, end;
};
[[nodiscard]] PredecessorLists predecessors_in_order(const Dependencies& deps, const std::vector<std::size_t>& order);

/// Splits [0, makespan] into the summary's breakdown.
[[nodiscard]] Breakdown breakdown_of(const dag::IterationGraph& g, const std::vector<TaskTiming>& timing,
                                     double makespan);
/// The same over the window [from, to] (tasks clipped to it), of one device's tasks when `device` is given.
[[nodiscard]] Breakdown breakdown_in(const dag::IterationGraph& g, const std::vector<TaskTiming>& timing, double from,
                                     double to, std::optional<dag::Device> device = std::nullopt);

/// The latest end of any task.
[[nodiscard]] double makespan_of(const std::vector<TaskTiming>& timing);
/// The latest end of any task of each iteration (Task::iteration), by iteration: of the timeline, or of per-task
/// ends such as longest_finish's.
[[nodiscard]] std::vector<double> iteration_ends(const dag::IterationGraph& g, const std::vector<TaskTiming>& timing);
[[nodiscard]] std::vector<double> iteration_ends(const dag::IterationGraph& g, const std::vector<double>& end_s);

/// Longest dependency path ending at each task (durations, resources ignored).
[[nodiscard]] std::vector<double> longest_finish(const dag::IterationGraph& g);

} // namespace ddlsim::sim
