// Host threads' launch tasks (sim/plan/host.hpp).
#include "sim/plan/host.hpp"

#include "sim/plan/schedule.hpp"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

namespace ddlsim::sim {

namespace {

bool on_gpu(const dag::Task& t) {
  switch (t.resource) {
  case dag::Resource::gpu_compute:
  case dag::Resource::gpu_compression:
  case dag::Resource::comm:
  case dag::Resource::comm_pull:
  case dag::Resource::p2p:
  case dag::Resource::copy:
    return true;
  default:
    return false;
  }
}

} // namespace

bool HostTimes::any() const {
  return iteration_s > 0 || launch_s > 0 || update_s > 0 ||
         std::any_of(forward_s.begin(), forward_s.end(), [](double t) { return t > 0; }) ||
         std::any_of(backward_s.begin(), backward_s.end(), [](double t) { return t > 0; });
}

HostTimes::HostTimes(const dag::WorkerCosts& w)
    : iteration_s(w.iteration_host_s), launch_s(w.launch_s), update_s(w.update_host_s), forward_s(w.fwd_host_s),
      backward_s(w.bwd_host_s), given(w.host_times_given) {
  issue = [this](const dag::Task& t) {
    const auto layer = static_cast<std::size_t>(dag::layer_of(t));
    if (t.kind == dag::TaskKind::forward && dag::layer_of(t) >= 0 && layer < forward_s.size())
      return Issue{forward_s[layer]};
    if (t.kind == dag::TaskKind::backward && dag::layer_of(t) >= 0 && layer < backward_s.size())
      return Issue{backward_s[layer]};
    if (t.kind == dag::TaskKind::update)
      return Issue{update_s};
    return Issue{launch_s};
  };
}

void add_host_tasks(dag::IterationGraph& g, const HostTimes& times) {
  if (!times.any())
    return;
  const auto timing = schedule(g);
  const std::size_t n = g.size();
  // Each GPU's tasks in the order they start (ties by id: the order they were built in).
  std::map<int, std::vector<std::size_t>> by_gpu;
  for (std::size_t v = 0; v < n; ++v)
    if (on_gpu(g.task(v)))
      by_gpu[g.task(v).device.index].push_back(v);
  for (auto& [gpu, tasks] : by_gpu) {
    std::sort(tasks.begin(), tasks.end(), [&](std::size_t a, std::size_t b) {
      return timing[a].start_s != timing[b].start_s ? timing[a].start_s < timing[b].start_s : a < b;
    });
    bool have_previous = false;
    std::size_t previous = 0;
    int iteration = -1;
    for (const std::size_t v : tasks) {
      const dag::Task task = g.task(v); // a copy: add() may move the graph's storage
      const auto chain = [&](std::size_t launch) {
        if (have_previous)
          g.depend(previous, launch);
        previous = launch;
        have_previous = true;
      };
      if (task.iteration != iteration) {
        iteration = task.iteration;
        // a batch loaded on this thread (no prefetch) is loaded after the previous iteration's work was issued
        if (have_previous)
          for (const auto u : g.predecessors(v))
            if (g.task(u).resource == dag::Resource::host_cpu)
              g.depend(previous, u);
        if (times.iteration_s > 0) {
          const auto lead = g.add({.kind = dag::TaskKind::launch,
                                   .resource = dag::Resource::host_thread,
                                   .iteration = task.iteration,
                                   .duration_s = times.iteration_s,
                                   .device = task.device});
          chain(lead);
          // the iteration's first GPU task waits for host work (the batch, loaded without prefetch): the thread that
          // loaded it runs the iteration's loop after it, not beside it
          for (const auto u : g.predecessors(v))
            if (g.task(u).resource == dag::Resource::host_cpu)
              g.depend(u, lead);
        }
      }
      const auto issue = times.issue(task);
      dag::Task host{.kind = dag::TaskKind::launch,
                     .resource = dag::Resource::host_thread,
                     .iteration = task.iteration,
                     .duration_s = issue.before_s,
                     .device = task.device,
                     .payload = dag::Compute{.layer = dag::layer_of(task),
                                             .micro_batch = dag::micro_batch_of(task),
                                             .virtual_stage = dag::virtual_stage_of(task)}};
      const auto launch = g.add(host);
      chain(launch);
      g.depend(launch, v);
      if (issue.after_s > 0) {
        host.duration_s = issue.after_s;
        chain(g.add(host));
      }
      for (const auto u : g.predecessors(v))
        if (g.task(u).resource == dag::Resource::host_cpu)
          g.depend(u, launch);
    }
  }
}

} // namespace ddlsim::sim
