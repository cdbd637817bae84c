// CollectivePlan and ReplicaTimer (replica_timer.hpp): the flow engine's collectives and its timing of the DAG's
// copies around them.
#include "sim/flow/replica_timer.hpp"

#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Exec.hpp>

#include <fmt/format.h>

#include <algorithm>

namespace ddlsim::sim::flow {

CollectivePlan::CollectivePlan(const ClusterSpec& cluster, std::vector<Job> jobs, bool per_message, bool use_symmetry)
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

std::vector<Phase> CollectivePlan::phases(std::size_t i) {
  if (symmetric())
    return std::move(quotient_[i]);
  auto phases = jobs_[i].lowering->lower(jobs_[i].shape, jobs_[i].bytes, granularity_);
  if (jobs_[i].ranks.empty())
    return phases;
  return to_global_ranks(std::move(phases), jobs_[i].shape, jobs_[i].ranks, cluster_);
}

std::vector<LinkStats> CollectivePlan::link_stats(const Platform& p, double makespan_s) const {
  auto stats = collect_link_stats(p, makespan_s);
  return symmetric() ? expand_link_stats(stats, cluster_) : stats;
}

std::string CollectivePlan::note() const {
  if (symmetric())
    return fmt::format("flow engine: the {} nodes are symmetric ({}); node 0's flows were simulated on a 2-node "
                       "quotient of the star, which is exact for max-min sharing, and every node's links report "
                       "their representative's figures (flow.symmetry: off simulates every flow)",
                       cluster_.nodes, symmetry_name(symmetry_));
  return fmt::format("flow engine: every flow simulated (node symmetry not used: {})", obstacle_);
}
ReplicaTimer::ReplicaTimer(const dag::IterationGraph& graph, Dependencies deps, std::size_t slots, FlowRun& run,
                           CollectivePlan& plan, const std::vector<double>* durations, double compute_slowdown)
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

void ReplicaTimer::add_collective(std::size_t v, std::size_t job, bool unshared) {
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

void ReplicaTimer::add_barrier(std::size_t v) {
  if (barrier_count_.empty())
    barrier_count_.assign(n_, -1);
  barrier_count_[v] = 0;
}

void ReplicaTimer::start() {
  for (std::size_t k = 0; k < slots_; ++k)
    for (std::size_t v = 0; v < n_; ++v)
      if (!ahead_[v] && pending_ahead_[v] == 0)
        ready(k, v);
  drain();
}

bool ReplicaTimer::finished(std::size_t slot, std::size_t v) const {
  return ahead_[v] != 0 || finished_[slot * m_ + dense_[v]];
}

std::vector<TaskTiming> ReplicaTimer::take_timing(std::size_t slot) {
  std::vector<TaskTiming> out(ahead_timing_);
  for (std::size_t v = 0; v < n_; ++v)
    if (!ahead_[v])
      out[v] = timing_[slot * m_ + dense_[v]];
  return out;
}

void ReplicaTimer::time_ahead() {
  if (durations_ != nullptr || slowdown_ > 0) { // copies of different durations, or slowed: each timed per copy
    ahead_.assign(n_, 0);
    ahead_timing_.assign(n_, TaskTiming{});
    pending_ahead_.assign(deps_.predecessors.begin(), deps_.predecessors.end());
    return;
  }
  ahead_.assign(n_, 1);
  std::vector<std::size_t> stack;
  for (std::size_t v = 0; v < n_; ++v)
    if (dag::collective_of(graph_.task(v)) != dag::Collective::none) {
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

std::size_t ReplicaTimer::instance(std::size_t v, std::size_t slot) const {
  return static_cast<std::size_t>(graph_.instance_of(axis_[v], static_cast<int>(slot)));
}

void ReplicaTimer::ready(std::size_t slot, std::size_t v) {
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

void ReplicaTimer::drain() {
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

void ReplicaTimer::launch(Instance& inst) {
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

void ReplicaTimer::begin(Instance& inst) {
  inst.start_s = sg4::Engine::get_clock();
  communicate(inst, +1);
  auto done = run_.timed(0);
  run_.on_done(done.get(), [this, &inst, done] { end(inst); });
  run_.start_collective(plan_.phases(inst.job), done);
}

void ReplicaTimer::end(const Instance& inst) {
  communicate(inst, -1);
  finish(inst, sg4::Engine::get_clock());
  drain();
}

void ReplicaTimer::init_slowdown() {
  devices_ = graph_.devices();
  device_.resize(n_);
  for (std::size_t v = 0; v < n_; ++v)
    device_[v] = static_cast<std::size_t>(std::lower_bound(devices_.begin(), devices_.end(), graph_.task(v).device) -
                                          devices_.begin());
  communicating_.assign(slots_ * devices_.size(), 0);
  running_.assign(slots_ * devices_.size(), {});
  slowed_.assign(slots_ * m_, Slowed{});
}

void ReplicaTimer::start_slowed(std::size_t slot, std::size_t v, double duration) {
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

void ReplicaTimer::run_slowed(std::size_t slot, std::size_t v) {
  const std::size_t g = gpu(slot, v);
  auto& c = slowed_[copy_of(slot, v)];
  c.since = sg4::Engine::get_clock();
  c.rate = rate_on(g);
  running_[g].push_back(copy_of(slot, v));
  schedule_end(slot, v);
}

void ReplicaTimer::schedule_end(std::size_t slot, std::size_t v) {
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

void ReplicaTimer::communicate(const Instance& inst, int change) {
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

void ReplicaTimer::finish(const Instance& inst, double end_s) {
  for (std::size_t k : inst.members) {
    auto& t = timing(k, inst.task);
    t.start_s = inst.start_s;
    t.end_s = end_s;
    done_.push_back({k, inst.task});
  }
}

} // namespace ddlsim::sim::flow
