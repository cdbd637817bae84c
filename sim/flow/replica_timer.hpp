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

  CollectivePlan(const ClusterSpec& cluster, std::vector<Job> jobs, bool per_message, bool use_symmetry)
      : cluster_(cluster), shape_{cluster.network().shape()}, jobs_(std::move(jobs)),
        granularity_(per_message ? Granularity::per_message : Granularity::aggregated) {
    if (!use_symmetry) {
      obstacle_ = "switched off (flow.symmetry: off)";
      return;
    }
    obstacle_ = quotient_obstacle(cluster);
    if (!obstacle_.empty() || jobs_.empty())
      return;
    if (std::any_of(jobs_.begin(), jobs_.end(), [](const Job& j) { return !j.ranks.empty(); })) {
      obstacle_ = "a collective runs over a part of the cluster";
      return;
    }
    auto candidates = candidate_symmetries(shape_);
    for (const auto& job : jobs_) {
      const auto phases = job.lowering->lower(job.shape, job.bytes, granularity_);
      std::erase_if(candidates, [&](NodeSymmetry g) { return !invariant(phases, shape_, g); });
      if (candidates.empty()) {
        obstacle_ = fmt::format("{} {} is not node-symmetric", collective_name(job.lowering->collective),
                                job.lowering->algorithm);
        quotient_.clear();
        return;
      }
      quotient_.push_back(quotient_phases(phases, shape_));
    }
    symmetry_ = candidates.front();
  }

  [[nodiscard]] bool symmetric() const { return symmetry_ != NodeSymmetry::none; }
  /// The cluster to build: the quotient when symmetric.
  [[nodiscard]] ClusterSpec platform_cluster() const { return symmetric() ? quotient_cluster(cluster_) : cluster_; }
  /// Job i's phases in the built platform's ranks (once per job).
  [[nodiscard]] std::vector<Phase> phases(std::size_t i) {
    if (symmetric())
      return std::move(quotient_[i]);
    auto phases = jobs_[i].lowering->lower(jobs_[i].shape, jobs_[i].bytes, granularity_);
    if (jobs_[i].ranks.empty())
      return phases;
    return to_global_ranks(std::move(phases), jobs_[i].shape, jobs_[i].ranks, cluster_);
  }
  /// Every link of the full cluster from the simulated platform's statistics.
  [[nodiscard]] std::vector<LinkStats> link_stats(const Platform& p, double makespan_s) const {
    auto stats = collect_link_stats(p, makespan_s);
    return symmetric() ? expand_link_stats(stats, cluster_) : stats;
  }
  /// What the report says about it.
  [[nodiscard]] std::string note() const {
    if (symmetric())
      return fmt::format("flow engine: the {} nodes are symmetric ({}); node 0's flows were simulated on a 2-node "
                         "quotient of the star, which is exact for max-min sharing, and every node's links report "
                         "their representative's figures (flow.symmetry: off simulates every flow)",
                         cluster_.nodes, symmetry_name(symmetry_));
    return fmt::format("flow engine: every flow simulated (node symmetry not used: {})", obstacle_);
  }
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
               CollectivePlan& plan, const std::vector<double>* durations = nullptr, double compute_slowdown = 0)
      : graph_(graph), deps_(std::move(deps)), n_(graph.size()), slots_(slots), run_(run), plan_(plan),
        durations_(durations), slowdown_(compute_slowdown), instance_of_(n_, -1),
        axis_(n_, dag::IterationGraph::Axis::copy) {
    time_ahead();
    // Per copy, only the tasks that are not timed ahead (a collective and what follows it): a dense index m_ wide.
    dense_.assign(n_, kAhead);
    for (std::size_t v = 0; v < n_; ++v)
      if (!ahead_[v]) {
        dense_[v] = m_++;
        dense_task_.push_back(v);
      }
    std::vector<TaskTiming> first_timing(m_);
    std::vector<int> first_pending(m_);
    for (std::size_t v = 0; v < n_; ++v)
      if (!ahead_[v]) {
        first_timing[dense_[v]] = TaskTiming{ahead_timing_[v].start_s, 0};
        first_pending[dense_[v]] = pending_ahead_[v];
      }
    timing_.reserve(slots_ * m_);
    pending_.reserve(slots_ * m_);
    for (std::size_t k = 0; k < slots_; ++k) {
      timing_.insert(timing_.end(), first_timing.begin(), first_timing.end());
      pending_.insert(pending_.end(), first_pending.begin(), first_pending.end());
    }
    finished_.assign(slots_ * m_, false);
    if (slowdown_ > 0)
      init_slowdown();
  }

  /// Collective task v runs as graph.instances(v) instances (the CollectivePlan's jobs job, job + 1, ...), each
  /// shared by the simulated copies graph.instance_of maps to it. Called for every collective task. `unshared`: its
  /// instances' links carry no other flow while they run (FlowRun::unshared_time times them).
  void add_collective(std::size_t v, std::size_t job, bool unshared = false) {
    if (unshared) {
      if (unshared_.empty())
        unshared_.assign(n_, 0);
      unshared_[v] = 1;
    }
    const auto& task = graph_.task(v);
    const int count = graph_.instances(task);
    instance_of_[v] = static_cast<long>(instances_.size());
    axis_[v] = graph_.axis(task);
    for (int i = 0; i < count; ++i)
      instances_.push_back({.task = v, .job = job + static_cast<std::size_t>(i), .pending = 0});
    for (std::size_t k = 0; k < slots_; ++k)
      ++instances_[instances_.size() - static_cast<std::size_t>(count) + instance(v, k)].pending;
  }

  /// Task v (no collective, no duration) waits for every replica's predecessors: all copies end when the last is
  /// ready (the barrier between sampled iterations).
  void add_barrier(std::size_t v) {
    if (barrier_count_.empty())
      barrier_count_.assign(n_, -1);
    barrier_count_[v] = 0;
  }

  /// Starts every replica's roots at time 0.
  void start() {
    for (std::size_t k = 0; k < slots_; ++k)
      for (std::size_t v = 0; v < n_; ++v)
        if (!ahead_[v] && pending_ahead_[v] == 0)
          ready(k, v);
    drain();
  }

  [[nodiscard]] bool finished(std::size_t slot, std::size_t v) const {
    return ahead_[v] != 0 || finished_[slot * m_ + dense_[v]];
  }
  /// Collective instances timed without SimGrid (FlowRun::unshared_time).
  [[nodiscard]] std::size_t unshared_instances() const { return unshared_instances_; }
  /// Replica `slot`'s timing, by task id, after the run.
  [[nodiscard]] std::vector<TaskTiming> take_timing(std::size_t slot) {
    std::vector<TaskTiming> out(ahead_timing_);
    for (std::size_t v = 0; v < n_; ++v)
      if (!ahead_[v])
        out[v] = timing_[slot * m_ + dense_[v]];
    return out;
  }

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
  void time_ahead() {
    if (durations_ != nullptr || slowdown_ > 0) { // copies of different durations, or slowed: each timed per copy
      ahead_.assign(n_, 0);
      ahead_timing_.assign(n_, TaskTiming{});
      pending_ahead_.assign(deps_.predecessors.begin(), deps_.predecessors.end());
      return;
    }
    ahead_.assign(n_, 1);
    std::vector<std::size_t> stack;
    for (std::size_t v = 0; v < n_; ++v)
      if (graph_.task(v).collective != dag::Collective::none) {
        ahead_[v] = 0;
        stack.push_back(v);
      }
    while (!stack.empty()) {
      const std::size_t v = stack.back();
      stack.pop_back();
      for (std::size_t w : deps_.successors[v])
        if (ahead_[w] != 0) {
          ahead_[w] = 0;
          stack.push_back(w);
        }
    }
    ahead_timing_.assign(n_, TaskTiming{});
    pending_ahead_.assign(deps_.predecessors.begin(), deps_.predecessors.end());
    std::vector<int> waiting(deps_.predecessors.begin(), deps_.predecessors.end());
    for (std::size_t v = 0; v < n_; ++v)
      if (ahead_[v] && waiting[v] == 0)
        stack.push_back(v);
    while (!stack.empty()) { // ahead tasks have ahead predecessors only
      const std::size_t v = stack.back();
      stack.pop_back();
      auto& t = ahead_timing_[v];
      t.end_s = t.start_s + graph_.task(v).duration_s;
      for (std::size_t w : deps_.successors[v]) {
        ahead_timing_[w].start_s = std::max(ahead_timing_[w].start_s, t.end_s);
        --pending_ahead_[w];
        if (ahead_[w] && --waiting[w] == 0)
          stack.push_back(w);
      }
    }
  }
  // Which of collective task v's instances replica `slot`'s copy belongs to (its axis looked up once).
  [[nodiscard]] std::size_t instance(std::size_t v, std::size_t slot) const {
    return static_cast<std::size_t>(graph_.instance_of(axis_[v], static_cast<int>(slot)));
  }

  // Copy (slot, v) has every predecessor done; its start_s holds the last one's end.
  void ready(std::size_t slot, std::size_t v) {
    if (!barrier_count_.empty() && barrier_count_[v] >= 0) {
      barrier_ready_s_ = std::max(barrier_ready_s_, timing(slot, v).start_s);
      if (static_cast<std::size_t>(++barrier_count_[v]) < slots_)
        return;
      for (std::size_t k = 0; k < slots_; ++k) {
        timing(k, v) = {barrier_ready_s_, barrier_ready_s_};
        done_.push_back({k, v});
      }
      barrier_ready_s_ = 0;
      return;
    }
    if (instance_of_[v] < 0) {
      auto& t = timing(slot, v);
      const double duration = durations_ != nullptr ? (*durations_)[slot * n_ + v] : graph_.task(v).duration_s;
      if (slowdown_ > 0 && slowed_by_communication(graph_.task(v))) {
        start_slowed(slot, v, duration);
        return;
      }
      t.end_s = t.start_s + duration;
      done_.push_back({slot, v});
      return;
    }
    const auto first = static_cast<std::size_t>(instance_of_[v]);
    auto& inst = instances_[first + instance(v, slot)];
    inst.ready_s = std::max(inst.ready_s, timing(slot, v).start_s);
    inst.members.push_back(slot);
    if (--inst.pending == 0)
      launch(inst);
  }

  // Ends the copies in done_ and everything that follows from them without the network.
  void drain() {
    while (!done_.empty()) {
      const auto [slot, v] = done_.back();
      done_.pop_back();
      const std::size_t copy = copy_of(slot, v);
      finished_[copy] = true;
      const double end = timing_[copy].end_s;
      for (std::size_t w : deps_.successors[v]) { // not ahead either: it follows a collective
        const std::size_t next = copy_of(slot, w);
        timing_[next].start_s = std::max(timing_[next].start_s, end);
        if (--pending_[next] == 0)
          ready(slot, w);
      }
    }
  }

  // Every member copy is ready: the instance starts at the last one's ready time (never before now: a copy is ready
  // at or after the instant of the event that made it so).
  void launch(Instance& inst) {
    if (slowdown_ <= 0 && !unshared_.empty() && unshared_[inst.task] != 0) { // slowed compute needs its events
      auto phases = plan_.phases(inst.job);
      if (const auto time = run_.unshared_time(phases)) { // ends ahead of the clock, as a task of fixed duration
        inst.start_s = inst.ready_s;
        finish(inst, inst.ready_s + *time);
        ++unshared_instances_;
        return;
      }
    }
    const double delay = inst.ready_s - sg4::Engine::get_clock();
    if (delay <= 0) {
      begin(inst);
      return;
    }
    auto timer = run_.timed(delay);
    run_.on_done(timer.get(), [this, &inst, timer] { begin(inst); });
    timer->start();
  }

  void begin(Instance& inst) {
    inst.start_s = sg4::Engine::get_clock();
    communicate(inst, +1);
    auto done = run_.timed(0);
    run_.on_done(done.get(), [this, &inst, done] { end(inst); });
    run_.start_collective(plan_.phases(inst.job), done);
  }

  void end(const Instance& inst) {
    communicate(inst, -1);
    finish(inst, sg4::Engine::get_clock());
    drain();
  }

  // ---- compute slowed by communication (slowdown_ > 0) ----------------------------------------------------------
  // Per GPU (copy slot x device): the collectives running on it and the slowed compute copies in progress, each with
  // its work left (s at full speed) as of `since` at `rate`; `version` invalidates the end timers of earlier rates.
  struct Slowed {
    double work_left = 0, since = 0, rate = 1;
    unsigned version = 0;
  };

  void init_slowdown() {
    devices_ = graph_.devices();
    device_.resize(n_);
    for (std::size_t v = 0; v < n_; ++v)
      device_[v] = static_cast<std::size_t>(std::lower_bound(devices_.begin(), devices_.end(), graph_.task(v).device) -
                                            devices_.begin());
    communicating_.assign(slots_ * devices_.size(), 0);
    running_.assign(slots_ * devices_.size(), {});
    slowed_.assign(slots_ * m_, Slowed{});
  }
  [[nodiscard]] std::size_t gpu(std::size_t slot, std::size_t v) const { return slot * devices_.size() + device_[v]; }
  [[nodiscard]] double rate_on(std::size_t g) const { return communicating_[g] > 0 ? 1 / (1 + slowdown_) : 1.0; }

  // Copy (slot, v) of a slowed compute task is ready at its start_s (now, or later when a predecessor ended ahead).
  void start_slowed(std::size_t slot, std::size_t v, double duration) {
    const double delay = timing(slot, v).start_s - sg4::Engine::get_clock();
    slowed_[copy_of(slot, v)].work_left = duration;
    if (delay <= 0) {
      run_slowed(slot, v);
      return;
    }
    auto timer = run_.timed(delay);
    run_.on_done(timer.get(), [this, slot, v, timer] { run_slowed(slot, v); });
    timer->start();
  }
  void run_slowed(std::size_t slot, std::size_t v) {
    const std::size_t g = gpu(slot, v);
    auto& c = slowed_[copy_of(slot, v)];
    c.since = sg4::Engine::get_clock();
    c.rate = rate_on(g);
    running_[g].push_back(copy_of(slot, v));
    schedule_end(slot, v);
  }
  void schedule_end(std::size_t slot, std::size_t v) {
    auto& c = slowed_[copy_of(slot, v)];
    const unsigned version = ++c.version;
    auto timer = run_.timed(std::max(0.0, c.work_left) / c.rate);
    run_.on_done(timer.get(), [this, slot, v, version, timer] {
      if (slowed_[copy_of(slot, v)].version != version)
        return;
      std::erase(running_[gpu(slot, v)], copy_of(slot, v));
      timing(slot, v).end_s = sg4::Engine::get_clock();
      done_.push_back({slot, v});
      drain();
    });
    timer->start();
  }
  // A collective instance starts (+1) or ends (-1) on its member copies' GPUs: the compute beside it changes pace.
  void communicate(const Instance& inst, int change) {
    if (slowdown_ <= 0)
      return;
    const double now = sg4::Engine::get_clock();
    for (std::size_t k : inst.members) {
      const std::size_t g = gpu(k, inst.task);
      const bool before = communicating_[g] > 0;
      communicating_[g] += change;
      if (before == (communicating_[g] > 0))
        continue;
      const double r = rate_on(g);
      for (const std::size_t copy : running_[g]) {
        auto& c = slowed_[copy];
        c.work_left -= (now - c.since) * c.rate;
        c.since = now;
        c.rate = r;
        schedule_end(copy / m_, dense_task_[copy % m_]);
      }
    }
  }

  void finish(const Instance& inst, double end_s) {
    for (std::size_t k : inst.members) {
      auto& t = timing(k, inst.task);
      t.start_s = inst.start_s;
      t.end_s = end_s;
      done_.push_back({k, inst.task});
    }
  }

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
