// The flow-level engine. Collectives are lowered into phases of point-to-point flows (sim/network/lowering) that
// share the platform's links by max-min fairness (SimGrid's CM02, configured as in docs/engines.md, "The flow
// engine"); a collective's next phase is started from the completion callback of its previous one (FlowRun,
// flow_run.hpp), so only the flows in flight are SimGrid activities. Every data-parallel replica's copy of the DAG is
// timed by ReplicaTimer (replica_timer.hpp), which works out the tasks that wait for no collective ahead of SimGrid's
// clock; or node 0's replicas' when nodes are symmetric (flow/symmetry.hpp) and node 0's traffic is simulated on a
// 2-node quotient platform, exactly.
#include "sim/flow/flow_engine.hpp"

#include "core/error.hpp"
#include "sim/flow/flow_run.hpp"
#include "sim/flow/flow_sampling.hpp"
#include "sim/flow/platform.hpp"
#include "sim/flow/replica_timer.hpp"
#include "sim/flow/symmetry.hpp"
#include "sim/network/collectives.hpp"
#include "sim/network/communicator.hpp"
#include "sim/plan/measured_links.hpp"
#include "sim/plan/prepare.hpp"
#include "sim/plan/schedule.hpp"

#include <simgrid/s4u/Activity.hpp>
#include <simgrid/s4u/Actor.hpp>
#include <simgrid/s4u/Comm.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Exec.hpp>
#include <simgrid/s4u/Host.hpp>
#include <simgrid/s4u/Link.hpp>
#include <simgrid/s4u/NetZone.hpp>
#include <simgrid/version.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <list>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <queue>
#include <set>
#include <stdexcept>
#include <unordered_map>

namespace sg4 = simgrid::s4u;

namespace ddlsim::sim {
namespace {

using flow::CollectivePlan;
using flow::FlowRun;
using flow::kClockCores;
using flow::kClockSpeed;
using flow::ReplicaTimer;

// SimGrid engine, settings, platform and the clock host, in that order (the engine must exist first).
struct Simulation {
  int argc = 1;
  char program[7] = "ddlsim";
  char* argv[2] = {program, nullptr};
  sg4::Engine engine{&argc, argv};
  flow::Platform platform;
  sg4::Host* clock = nullptr;

  explicit Simulation(const ClusterSpec& cluster) {
    flow::configure_closed_form(engine);
    flow::enable_link_stats(flow::LinkVisits::noted_links); // FlowRun notes every flow's links
    platform = flow::build_platform(cluster);
    auto* zone = sg4::create_star_zone("ddlsim-clock");
    zone->set_parent(engine.get_netzone_root());
    clock = zone->create_host("ddlsim-clock", kClockSpeed)->set_core_count(kClockCores);
    zone->seal();
    // Sealed now rather than by Engine::run: the split-duplex links' halves exist (and carry their statistics) from
    // here on, for the routes looked up before the run starts (collectives timed ahead of the clock).
    engine.get_netzone_root()->seal();
  }
};

std::vector<LinkUsage> link_usage(const CollectivePlan& plan, const flow::Platform& platform, double makespan_s) {
  std::vector<LinkUsage> out;
  for (const auto& l : plan.link_stats(platform, makespan_s))
    out.push_back({l.name, l.role, l.bytes, l.busy_s, l.peak_utilisation, l.mean_utilisation});
  return out;
}

const CollectiveLowering& lowering_for(const Scenario& s) {
  if (s.allreduce.measured) {
    std::vector<std::string_view> algorithms;
    for (const auto& a : lowerings(Collective::allreduce))
      algorithms.push_back(a.algorithm);
    throw InputError(s.file, "/collectives/allreduce",
                     fmt::format("a measured alpha-beta fit has no network lowering: the flow engine needs an "
                                 "algorithm ({}); use the analytic engine to replay a fit",
                                 fmt::join(algorithms, ", ")));
  }
  return *s.allreduce.algorithm;
}

// The tensor-group collectives whose flows have links of their own: the group lies inside one node, and no other
// communicator has two GPUs on that node (so no other collective or transfer sends over its GPUs' intra-node links;
// inter-node routes do not cross them, platform.cpp). The group's own collectives run one at a time (each GPU's run
// on its compute stream, in one order). By task: 1 where that holds for every instance.
std::vector<char> unshared_tensor_collectives(const Scenario& s, const dag::IterationGraph& graph,
                                              const std::vector<CollectivePlan::Job>& jobs,
                                              const std::vector<std::size_t>& first_job) {
  const std::size_t n = graph.size();
  std::vector<char> out(n, 0);
  bool any = false;
  for (std::size_t v = 0; v < n && !any; ++v)
    any = dag::collective_of(graph.task(v)) != dag::Collective::none &&
          graph.axis(graph.task(v)) == dag::IterationGraph::Axis::tensor;
  if (!any)
    return out;
  const int g = s.cluster.gpus_per_node;
  // Per node: the one communicator with two or more GPUs there (its sorted ranks), or a mark that there are several.
  struct Use {
    std::vector<int> ranks;
    bool several = false;
  };
  std::unordered_map<int, Use> nodes;
  std::vector<int> ranks;
  for (const auto& job : jobs) {
    ranks = job.ranks;
    if (ranks.empty()) { // the whole cluster
      ranks.resize(static_cast<std::size_t>(s.cluster.workers()));
      std::iota(ranks.begin(), ranks.end(), 0);
    }
    std::sort(ranks.begin(), ranks.end());
    for (std::size_t i = 0; i + 1 < ranks.size(); ++i) {
      if (ranks[i] / g != ranks[i + 1] / g || (i > 0 && ranks[i - 1] / g == ranks[i] / g))
        continue; // the first two ranks of each node with two or more
      auto& use = nodes[ranks[i] / g];
      if (use.ranks.empty())
        use.ranks = ranks;
      else if (use.ranks != ranks)
        use.several = true;
    }
  }
  for (std::size_t v = 0; v < n; ++v) {
    const auto& task = graph.task(v);
    if (dag::collective_of(task) == dag::Collective::none || graph.axis(task) != dag::IterationGraph::Axis::tensor)
      continue;
    bool own = true;
    for (int i = 0; i < graph.instances(task) && own; ++i) {
      const auto& job = jobs[first_job[v] + static_cast<std::size_t>(i)];
      if (job.ranks.empty()) {
        own = false;
        break;
      }
      const int node = job.ranks.front() / g;
      own =
          std::all_of(job.ranks.begin(), job.ranks.end(), [&](int r) { return r / g == node; }) && !nodes[node].several;
    }
    out[v] = own ? 1 : 0;
  }
  return out;
}

} // namespace

FlowGraphRun simulate_graph_flow(const Scenario& s, const dag::IterationGraph& graph,
                                 const std::function<double(const std::vector<TaskTiming>&)>& window,
                                 std::size_t listed, const std::vector<double>* copy_durations,
                                 const std::vector<std::size_t>& barriers) {
  // Per-resource order: the analytic schedule's order (readiness order), compute slowed beside communication as the
  // analytic engine slows it.
  const double slowdown = comm_slowdown(s).factor;
  auto deps = with_stream_order(graph, schedule(graph, {.compute_slowdown = slowdown}));

  // The collectives: one job per instance (IterationGraph::instances): a collective over a data-parallel group is one
  // instance per tensor rank, one over a tensor group one per data-parallel replica, a transfer between pipeline
  // stages one per copy. Those that run over a part of the cluster keep the plan from using node symmetry: every
  // copy is simulated then.
  const std::size_t n = graph.size();
  const int replicas = graph.replicas();
  std::vector<CollectivePlan::Job> jobs;
  std::vector<std::size_t> first_job(n, 0);
  std::vector<std::optional<CommunicatorLayout>> layouts(graph.communicators().size());
  for (std::size_t v = 0; v < n; ++v) {
    const auto& task = graph.task(v);
    if (dag::collective_of(task) == dag::Collective::none)
      continue;
    const auto* lowering =
        dag::collective_of(task) == dag::Collective::allreduce ? &lowering_for(s) : &task_lowering(s, task);
    first_job[v] = jobs.size();
    const int count = graph.instances(task);
    for (int i = 0; i < count; ++i) {
      if (i == 0) {
        const auto& layout = task_layout(s, graph, task, layouts);
        jobs.push_back({lowering, dag::bytes_of(task), task_shape(s, task, layout.shape),
                        layout.whole_cluster ? std::vector<int>{} : layout.ranks});
        continue;
      }
      auto layout = layout_of(graph.instance_communicator(task, i).ranks, s.cluster);
      jobs.push_back({lowering, dag::bytes_of(task), task_shape(s, task, layout.shape), std::move(layout.ranks)});
    }
  }
  const auto unshared =
      s.flow_own_links ? unshared_tensor_collectives(s, graph, jobs, first_job) : std::vector<char>(n, 0);
  // Copies of different durations are not symmetric: every one is simulated then.
  CollectivePlan plan(s.cluster, std::move(jobs), s.flow_per_message, s.flow_symmetry && copy_durations == nullptr);

  // The replicas simulated: all of them, or under node symmetry those on node 0 (the quotient's node 1 stands for
  // every other node; its GPUs' tasks are those of node 0's).
  std::size_t slots = static_cast<std::size_t>(replicas);
  if (plan.symmetric()) {
    const auto devices = graph.devices();
    const auto on_node0 = [&](int k) {
      return std::all_of(devices.begin(), devices.end(), [&](dag::Device d) {
        const auto image = graph.replica_device(k, d);
        return image.kind == dag::Device::Kind::gpu ? image.index < s.cluster.gpus_per_node : image.index == 0;
      });
    };
    slots = 0;
    while (slots < static_cast<std::size_t>(replicas) && on_node0(static_cast<int>(slots)))
      ++slots;
  }

  FlowGraphRun result;
  result.simulated_replicas = slots;
  result.note = plan.note();
  // HSDP lays its shard groups out as the DAG copies' tensor peers (sim/plan/sharding.hpp): named as shard ranks.
  const bool shards = !s.pipeline && sharded(s) != nullptr;
  const std::string node0 = slots < static_cast<std::size_t>(replicas) ? " (node 0's)" : "";
  if (replicas > 1 && graph.tensor_peers() > 1 && shards)
    result.note += fmt::format("; the tasks of {} of the {} data-parallel replicas ({} shard groups x {} GPUs) were "
                               "timed{}",
                               slots, replicas, replicas / graph.tensor_peers(), graph.tensor_peers(), node0);
  else if (replicas > 1 && graph.tensor_peers() > 1)
    result.note += fmt::format("; the tasks of {} of the {} GPUs per stage ({} data-parallel replicas x {} tensor "
                               "ranks) were timed{}",
                               slots, replicas, replicas / graph.tensor_peers(), graph.tensor_peers(), node0);
  else if (replicas > 1)
    result.note += fmt::format("; the tasks of {} of the {} data-parallel replicas were timed{}", slots, replicas,
                               slots < static_cast<std::size_t>(replicas) ? " (node 0's)" : "");
  Simulation sim(plan.platform_cluster());
  FlowRun run(sim.platform, sim.clock);
  // Collectives one at a time: every collective task on the comm stream of one GPU, without lanes, each one instance
  // over all the copies (a data-parallel DAG): each copy's stream runs them in one order, and an instance ends for
  // all its copies at once, so the next cannot start before it has ended.
  bool one_at_a_time = true;
  std::optional<dag::Device> issuer;
  for (std::size_t v = 0; v < n && one_at_a_time; ++v) {
    const auto& task = graph.task(v);
    if (dag::collective_of(task) == dag::Collective::none)
      continue;
    one_at_a_time = task.resource == dag::Resource::comm && task.lane < 0 && graph.instances(task) == 1 &&
                    (!issuer || *issuer == task.device);
    issuer = task.device;
  }
  run.set_one_at_a_time(one_at_a_time);
  ReplicaTimer timer(graph, std::move(deps), slots, run, plan, copy_durations, slowdown);
  for (std::size_t v = 0; v < n; ++v)
    if (dag::collective_of(graph.task(v)) != dag::Collective::none)
      timer.add_collective(v, first_job[v], unshared[v] != 0);
  for (std::size_t v : barriers)
    timer.add_barrier(v);
  timer.start();
  sim.engine.run();

  for (std::size_t k = 0; k < slots; ++k)
    for (std::size_t v = 0; v < n; ++v)
      if (!timer.finished(k, v))
        throw std::logic_error(fmt::format("flow engine: task {} ({}) of replica {} never finished", v,
                                           dag::task_kind_name(graph.task(v).kind), k));
  if (timer.unshared_instances() > 0)
    result.note += fmt::format("; except {} {}-group collectives ({} flows) on intra-node links that no other "
                               "traffic uses, timed without the platform as exactly: each flow its latencies plus its "
                               "bytes at its route's bandwidth, as alone on the platform (flow.own_links: off "
                               "simulates them)",
                               timer.unshared_instances(), shards ? "shard" : "tensor", run.unshared_flows());
  result.timing = timer.take_timing(0);
  for (std::size_t k = 1; k < std::min(slots, listed); ++k)
    result.replicas.push_back({static_cast<int>(k), timer.take_timing(k)});
  for (std::size_t v = 0; v < n; ++v)
    if (dag::collective_of(graph.task(v)) != dag::Collective::none)
      result.durations.emplace_back(v, result.timing[v].end_s - result.timing[v].start_s);
  result.links = link_usage(plan, sim.platform, window ? window(result.timing) : makespan_of(result.timing));
  result.flows = run.flows();
  result.events = run.events() + slots * n; // SimGrid's activities, and every task copy timed
  return result;
}

// Rows of tasks.csv the default flow.report_replicas aims at (a copy's tasks each).
constexpr std::size_t kReportedRows = 500'000;

namespace {
// The plan's DAG timed once on the platform; the links' mean utilisation is taken over the plan's window.
Timings time_flow(const Scenario& s, const Plan& plan, std::size_t listed) {
  auto run = simulate_graph_flow(
      s, plan.graph, [&](const std::vector<TaskTiming>& timing) { return window_time_s(plan, timing); }, listed);
  Timings t;
  t.timing = std::move(run.timing);
  t.durations = std::move(run.durations);
  t.notes.push_back(std::move(run.note));
  const std::size_t simulated = run.simulated_replicas;
  const auto reported = std::min(simulated, listed);
  t.replicas = std::move(run.replicas);
  if (reported < simulated)
    t.notes.push_back(reported_replicas_note(plan.graph, reported, simulated));
  t.links = std::move(run.links);
  t.sim.flows = run.flows;
  t.sim.events = run.events;
  return t;
}
} // namespace

void check_flow(const Scenario& scenario) {
  const Scenario s = with_measured_links(scenario);
  const Plan plan = prepare(s, Engine::flow);
  if (s.variability)
    check_flow_sampling(s, plan.graph);
}

RunResult run_flow(const Scenario& scenario) {
  // A measured allreduce over the whole cluster sets the links the algorithm is simulated on (measured_links.hpp).
  const Scenario s = with_measured_links(scenario);
  if (s.strategy.asynchronous())
    throw std::logic_error("flow engine: ps-async is simulated by the analytic engine's queue model (run_scenario)");
  const auto wall_start = std::chrono::steady_clock::now();
  Plan plan = prepare(s, Engine::flow);
  const std::size_t listed =
      s.flow_report_replicas
          ? static_cast<std::size_t>(*s.flow_report_replicas)
          : std::clamp<std::size_t>(kReportedRows / std::max<std::size_t>(plan.graph.size(), 1), 1, 64);
  Timings t = s.variability ? time_flow_sampled(s, plan, listed) : time_flow(s, plan, listed);
  auto r = finalize(s, std::move(plan), std::move(t));
  r.sim.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  return r;
}

namespace {
const char* maestro_list_name(flow::MaestroActivities::State state) {
  switch (state) {
  case flow::MaestroActivities::State::off:
    return "off";
  case flow::MaestroActivities::State::found:
    return "kept empty";
  case flow::MaestroActivities::State::unknown:
    return "unused"; // built in, but no activity was created: nothing was looked for
  case flow::MaestroActivities::State::unusable:
    break;
  }
  return "not found";
}
} // namespace

FlowCollectivesResult run_collectives_flow(const ClusterSpec& cluster, const std::vector<CollectiveJob>& jobs,
                                           bool per_message, bool use_symmetry) {
  const auto wall_start = std::chrono::steady_clock::now();
  std::vector<CollectivePlan::Job> planned;
  for (const auto& job : jobs) {
    const auto* lowering = find_lowering(job.kind, job.algorithm);
    if (lowering == nullptr)
      throw std::invalid_argument(fmt::format("no lowering of {} '{}'", collective_name(job.kind), job.algorithm));
    planned.push_back({lowering, job.bytes, job.shape.value_or(cluster.network().shape())});
  }
  CollectivePlan plan(cluster, std::move(planned), per_message, use_symmetry);
  Simulation sim(plan.platform_cluster());
  FlowRun run(sim.platform, sim.clock);
  std::vector<sg4::ExecPtr> start(jobs.size()), done(jobs.size()); // alive until the run ends
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    start[i] = run.timed(jobs[i].start_s);
    done[i] = run.timed(0);
    run.on_done(start[i].get(), [&run, &plan, i, d = done[i]] { run.start_collective(plan.phases(i), d); });
    start[i]->start();
  }
  sim.engine.run();
  FlowCollectivesResult result;
  double makespan = 0;
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    if (done[i]->get_state() != sg4::Activity::State::FINISHED)
      throw std::logic_error(fmt::format("flow engine: collective {} never finished", i));
    result.jobs.push_back({jobs[i].start_s, done[i]->get_finish_time()});
    makespan = std::max(makespan, done[i]->get_finish_time());
  }
  result.links = link_usage(plan, sim.platform, makespan);
  result.flows = run.flows();
  result.symmetry = std::string(flow::symmetry_name(plan.symmetry()));
  result.maestro_list = maestro_list_name(run.maestro_state());
  result.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  return result;
}

} // namespace ddlsim::sim
