// The host side of an iteration: the CPU thread of each GPU's training process issues its kernels and collectives
// one after the other, asynchronously (a launch returns before the kernel runs), and a GPU task cannot start before
// the host has issued it. When the host takes longer than the kernels it issues, the step is host-bound: a faster
// GPU does not shorten it. Trace-driven peers replay the CPU threads for this reason (dPRO, Hu et al., MLSys 2022;
// Lumos, Liang et al., MLSys 2025).
#pragma once

#include "dag/graph.hpp"
#include "dag/strategy.hpp"

#include <functional>
#include <vector>

namespace ddlsim::sim {

/// What the host thread of a GPU spends: per GPU task, and per iteration before its first task.
struct HostTimes {
  /// A data-parallel worker's (dag::WorkerCosts): forward and backward tasks of a layer take the layer's host time,
  /// the update the optimizer's, every other GPU task one launch. Not copyable (`issue` refers to the fields).
  explicit HostTimes(const dag::WorkerCosts& w);
  HostTimes(const HostTimes&) = delete;
  HostTimes& operator=(const HostTimes&) = delete;

  /// Host time to issue a GPU task: `before` it can start, and `after` that, while it runs (a task that stands for
  /// many kernels, such as a pipeline pass, starts once its first ones are issued; the thread goes on issuing the
  /// rest).
  struct Issue {
    double before_s = 0;
    double after_s = 0;
  };
  std::function<Issue(const dag::Task&)> issue; ///< callers may replace it
  double iteration_s = 0;                       ///< per iteration (Python loop, zero_grad, loss), before the first task
  double launch_s = 0;
  double update_s = 0;
  std::vector<double> forward_s, backward_s; ///< by layer
  /// Whether the host costs anything (else add_host_tasks adds nothing).
  [[nodiscard]] bool any() const;
  /// Whether an iteration should be measured in the steady state: host times were given (not the default launch
  /// cost) and cost something. The host thread then runs ahead of the GPU into the next iteration, as a training
  /// loop does, and a single iteration's makespan would count the GPU's lag behind it.
  [[nodiscard]] bool steady_state() const { return given && any(); }
  bool given = false; ///< dag::WorkerCosts::host_times_given
};

/// Adds the host threads' tasks to `g`: for every GPU task (on a GPU device and a GPU resource: compute, compression,
/// collectives, transfers), a TaskKind::launch task on Resource::host_thread of the same GPU that the task waits
/// for (and, when the issue has an `after` part, a second launch task after it that the GPU task does not wait for);
/// a GPU's launch tasks run one after the other in the order its GPU tasks start in the DAG's schedule without
/// them (the order the program issues them), each iteration (Task::iteration) led by a launch task of
/// `iteration_s` when that is positive. A host task (data loading) that a GPU task waits for delays its launch as
/// well, and waits for the previous iteration's launches: the thread that loaded the batch issues the work on it.
/// On a DAG of several iterations, each GPU's launches run on across them.
void add_host_tasks(dag::IterationGraph& g, const HostTimes& times);

} // namespace ddlsim::sim
