// The flow engine's timing of the DAG's copies (flow_engine.cpp): the plan of its collectives (lowered once per job,
// or as node-symmetric representatives) and the ReplicaTimer that times every simulated replica's tasks around the
// SimGrid activities of the collectives. Internal to sim/flow: included by flow_engine.cpp only.
#pragma once

#include "dag/graph.hpp"
#include "sim/flow/flow_run.hpp"
#include "sim/flow/platform.hpp"
#include "sim/flow/symmetry.hpp"
#include "sim/network/collectives.hpp"
#include "sim/network/communicator.hpp"
#include "sim/plan/result.hpp"
#include "sim/plan/schedule.hpp"

#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Exec.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <string>
#include <utility>
#include <vector>

namespace ddlsim::sim::flow {

namespace sg4 = simgrid::s4u;

// The collectives of a run and how they are simulated: when the platform admits the 2-node quotient and every
// collective's lowering is invariant under one node symmetry, each is lowered now and kept as its representatives
// (flow/symmetry.hpp); otherwise each is lowered with the full shape when it starts.
class CollectivePlan {
public:
  struct Job {
    const CollectiveLowering* lowering;
    double bytes;
    LoweringShape shape; ///< the ranks it runs over (its communicator's, with a parameter server's servers and shard)
    std::vector<int> ranks = {}; ///< the lowering's rank v is global GPU ranks[v]; empty: the whole cluster in order
  };

  CollectivePlan(const ClusterSpec& cluster, std::vector<Job> jobs, bool per_message, bool use_symmetry);

  [[nodiscard]] bool symmetric() const { return symmetry_ != NodeSymmetry::none; }
  /// The cluster to build: the quotient when symmetric.
  [[nodiscard]] ClusterSpec platform_cluster() const { return symmetric() ? quotient_cluster(cluster_) : cluster_; }
  /// Job i's phases in the built platform's ranks (once per job).
  [[nodiscard]] std::vector<Phase> phases(std::size_t i);
  /// Every link of the full cluster from the simulated platform's statistics.
  [[nodiscard]] std::vector<LinkStats> link_stats(const Platform& p, double makespan_s) const;
  /// What the report says about it.
  [[nodiscard]] std::string note() const;
  [[nodiscard]] NodeSymmetry symmetry() const { return symmetry_; }

private:
  ClusterSpec cluster_;
  LoweringShape shape_;
  std::vector<Job> jobs_;
  Granularity granularity_;
  NodeSymmetry symmetry_ = NodeSymmetry::none;
  std::string obstacle_;
  std::vector<std::vector<Phase>> quotient_;
};

// Times every simulated replica's copy of the DAG. A task that is not a collective (compute, copies, host work,
// waits) has a fixed duration and shares nothing with other tasks (each stream runs one at a time, in the order of
// Dependencies), so its copy ends its duration after the last of its predecessors: that is known as soon as they
// have ended, and is worked out at once, ahead of the simulated clock. A collective instance (one shared by every
// replica over a data-parallel group, or one per replica inside it) is lowered onto the platform at the instant its
// last member copy is ready, and its member copies end when its last flow does. Only the flows (and a timer for an
// instance that starts later than now) are SimGrid activities.
class ReplicaTimer {
public:
  /// `slots`: how many replicas are simulated (0 .. slots-1). `durations`: each copy's time of each task that is not
  /// a collective (slot-major, slots x graph.size()); nullptr: the graph's, the same in every copy.
  /// `compute_slowdown` s > 0: compute kernels run at 1/(1 + s) while a collective runs on their GPU (the analytic
  /// engine's gpu.comm_slowdown, schedule.hpp): every copy is then timed on the clock, none ahead of it.
  ReplicaTimer(const dag::IterationGraph& graph, Dependencies deps, std::size_t slots, FlowRun& run,
               CollectivePlan& plan, const std::vector<double>* durations = nullptr, double compute_slowdown = 0);

  /// Collective task v runs as graph.instances(v) instances (the CollectivePlan's jobs job, job + 1, ...), each
  /// shared by the simulated copies graph.instance_of maps to it. Called for every collective task. `unshared`: its
  /// instances' links carry no other flow while they run (FlowRun::unshared_time times them).
  void add_collective(std::size_t v, std::size_t job, bool unshared = false);

  /// Task v (no collective, no duration) waits for every replica's predecessors: all copies end when the last is
  /// ready (the barrier between sampled iterations).
  void add_barrier(std::size_t v);

  /// Starts every replica's roots at time 0.
  void start();

  [[nodiscard]] bool finished(std::size_t slot, std::size_t v) const;
  /// Collective instances timed without SimGrid (FlowRun::unshared_time).
  [[nodiscard]] std::size_t unshared_instances() const { return unshared_instances_; }
  /// Replica `slot`'s timing, by task id, after the run.
  [[nodiscard]] std::vector<TaskTiming> take_timing(std::size_t slot);

private:
  struct Instance {
    std::size_t task;
    std::size_t job;
    int pending;                        ///< member copies not yet ready
    std::vector<std::size_t> members{}; ///< the copies ready, in that order
    double ready_s = 0;
    double start_s = 0;
  };

  static constexpr std::size_t kAhead = static_cast<std::size_t>(-1);
  // Copy (slot, v) of a task that is not timed ahead.
  [[nodiscard]] std::size_t copy_of(std::size_t slot, std::size_t v) const { return slot * m_ + dense_[v]; }
  TaskTiming& timing(std::size_t slot, std::size_t v) { return timing_[copy_of(slot, v)]; }

  // The tasks that no collective precedes (through the dependencies and the streams' order: the host threads'
  // launches, the data loading, most of the forward and backward passes) take the same time in every copy,
  // whatever the network does: they are timed once, ahead, and every copy starts from them (pending_ahead_: the
  // predecessors of each other task still to end; its start holds the ahead ones' last end).
  void time_ahead();
  // Which of collective task v's instances replica `slot`'s copy belongs to (its axis looked up once).
  [[nodiscard]] std::size_t instance(std::size_t v, std::size_t slot) const;

  // Copy (slot, v) has every predecessor done; its start_s holds the last one's end.
  void ready(std::size_t slot, std::size_t v);

  // Ends the copies in done_ and everything that follows from them without the network.
  void drain();

  // Every member copy is ready: the instance starts at the last one's ready time (never before now: a copy is ready
  // at or after the instant of the event that made it so).
  void launch(Instance& inst);

  void begin(Instance& inst);

  void end(const Instance& inst);

  // ---- compute slowed by communication (slowdown_ > 0) ----------------------------------------------------------
  // Per GPU (copy slot x device): the collectives running on it and the slowed compute copies in progress, each with
  // its work left (s at full speed) as of `since` at `rate`; `version` invalidates the end timers of earlier rates.
  struct Slowed {
    double work_left = 0, since = 0, rate = 1;
    unsigned version = 0;
  };

  void init_slowdown();
  [[nodiscard]] std::size_t gpu(std::size_t slot, std::size_t v) const { return slot * devices_.size() + device_[v]; }
  [[nodiscard]] double rate_on(std::size_t g) const { return communicating_[g] > 0 ? 1 / (1 + slowdown_) : 1.0; }

  // Copy (slot, v) of a slowed compute task is ready at its start_s (now, or later when a predecessor ended ahead).
  void start_slowed(std::size_t slot, std::size_t v, double duration);
  void run_slowed(std::size_t slot, std::size_t v);
  void schedule_end(std::size_t slot, std::size_t v);
  // A collective instance starts (+1) or ends (-1) on its member copies' GPUs: the compute beside it changes pace.
  void communicate(const Instance& inst, int change);

  void finish(const Instance& inst, double end_s);

  const dag::IterationGraph& graph_;
  Dependencies deps_;
  std::size_t n_, slots_;
  FlowRun& run_;
  CollectivePlan& plan_;
  const std::vector<double>* durations_;
  double slowdown_ = 0;
  std::vector<dag::Device> devices_;              ///< slowdown: the graph's devices, sorted
  std::vector<std::size_t> device_;               ///< slowdown: by task, its device's index in devices_
  std::vector<int> communicating_;                ///< slowdown: by GPU, collectives running
  std::vector<std::vector<std::size_t>> running_; ///< slowdown: by GPU, slowed copies in progress (copy_of)
  std::vector<Slowed> slowed_;                    ///< slowdown: by copy_of
  std::vector<std::size_t> dense_task_;           ///< by dense index, its task
  std::vector<long> barrier_count_;      ///< by task: -1, or a barrier's copies ready (add_barrier); empty: none
  double barrier_ready_s_ = 0;           ///< the barrier being reached: its copies' latest readiness
  std::vector<char> ahead_;              ///< by task: no collective precedes it (time_ahead)
  std::vector<TaskTiming> ahead_timing_; ///< by task: an ahead task's timing; another's start after its ahead ones
  std::vector<int> pending_ahead_;       ///< by task: predecessors that are not ahead
  std::vector<std::size_t> dense_;       ///< by task: its index among the tasks not timed ahead, kAhead for one that is
  std::size_t m_ = 0;                    ///< tasks not timed ahead
  std::vector<TaskTiming> timing_;       ///< by copy_of(slot, task), of the tasks not timed ahead
  std::vector<int> pending_;             ///< predecessors not yet done, by copy_of(slot, task)
  std::vector<bool> finished_;           ///< by copy_of(slot, task)
  std::vector<long> instance_of_;        ///< by task: its (first) instance, -1 for a task that is not a collective
  std::vector<dag::IterationGraph::Axis> axis_; ///< by task: what a collective's communicator spans
  std::deque<Instance> instances_;              ///< stable addresses (handlers hold them)
  std::vector<std::pair<std::size_t, std::size_t>>
      done_;                   ///< copies (slot, task) ended whose successors are still to be told
  std::vector<char> unshared_; ///< by task: its instances' links are their own (empty: none is)
  std::size_t unshared_instances_ = 0;
};

} // namespace ddlsim::sim::flow
