// The flow-level engine: the iteration DAG runs on SimGrid 3.32 as S4U activities with dependencies (as in
// examples/cpp/dag-comm/s4u-dag-comm.cpp), collectives are lowered into phases of point-to-point flows
// (sim/network/lowering) that share the platform's links by max-min fairness (CM02 with unit factors, DESIGN.md).
// Compute tasks of the representative worker are timed activities; data-parallel workers are symmetric, so only
// the network traffic of all ranks is simulated, or, when nodes are symmetric (flow/symmetry.hpp), node 0's traffic on
// a 2-node quotient platform, exactly. A collective's next phase is started from the completion callback of its
// previous one, so only the flows in flight exist at any time.
#include "sim/flow/flow_engine.hpp"

#include "core/error.hpp"
#include "sim/flow/platform.hpp"
#include "sim/flow/symmetry.hpp"
#include "sim/network/collectives.hpp"
#include "sim/network/communicator.hpp"
#include "sim/plan/prepare.hpp"
#include "sim/plan/schedule.hpp"

#include <simgrid/s4u/Activity.hpp>
#include <simgrid/s4u/Actor.hpp>
#include <simgrid/s4u/Comm.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Exec.hpp>
#include <simgrid/s4u/Host.hpp>
#include <simgrid/s4u/NetZone.hpp>
#include <simgrid/version.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <unordered_map>

namespace sg4 = simgrid::s4u;

namespace ddlsim::sim {
namespace {

// Control activities (a collective's start and end, latency waits) run on one "clock" host; tasks run on their
// device's host. Both compute at flow::kHostSpeedFlops with a core per concurrent activity (platform.hpp).
constexpr double kClockSpeed = flow::kHostSpeedFlops;
constexpr int kClockCores = flow::kHostCores;

// SimGrid 3.32 keeps every activity created outside an actor in one std::list of the maestro actor
// (kernel::actor::ActorImpl::activities_): Comm::sendto_init detaches its comm there (CommImpl::detach), and an Exec
// created by maestro registers there (ExecImpl::ExecImpl). Each one is removed when it finishes with std::list::remove,
// which scans the whole list: with every pending task and every flow in flight in it, that scan was 60 % of a
// 1,024-GPU run with symmetry off and made wall time quadratic in the GPU count (issue #10). Actors would not help:
// sendto comms always go to maestro's list. The list serves only to cancel those activities when the maestro exits;
// our activities are kept alive by FlowRun and all finish before Engine::run returns (checked by the callers). So
// each activity is unlinked from the list as soon as it is created, and every later removal scans an empty list.
// ActorImpl is not in SimGrid's installed headers, but its list's type is (forward.h): the list is located once, as
// the only std::list<ActivityImplPtr> inside the maestro's ActorImpl that grows by one element, the new activity,
// when one is created; every later unlink checks that the list's last element is the activity just created. When
// the list is not found (another SimGrid release, another layout) nothing is unlinked: correct, only slower.
class MaestroActivities {
public:
  /// Calls `create` (which must create exactly one activity in maestro's context and return it) and unlinks that
  /// activity from the maestro's list.
  template <class Create> auto adopt(Create&& create) {
#if SIMGRID_VERSION_MAJOR == 3 && SIMGRID_VERSION_MINOR == 32
    if (state_ == State::unknown) {
      const auto* maestro = maestro_bytes();
      if (maestro == nullptr) {
        state_ = State::unusable;
        return create();
      }
      std::array<Word, kWindow> before;
      std::memcpy(before.data(), maestro, sizeof before);
      auto activity = create();
      locate(maestro, before, activity->get_impl());
      unlink(activity->get_impl());
      return activity;
    }
    auto activity = create();
    unlink(activity->get_impl());
    return activity;
#else
    return create();
#endif
  }

private:
  using Word = std::uintptr_t;
  using ActivityList = std::list<simgrid::kernel::activity::ActivityImplPtr>;
  // Words of the maestro ActorImpl searched: activities_ is at byte 192 in 3.32 and the object is larger than 256 bytes
  // (its simcall, timers and s4u::Actor interface follow the list), so the search stays inside it.
  static constexpr std::size_t kWindow = 32;
  enum class State { unknown, found, unusable };

  static const unsigned char* maestro_bytes() {
    const auto* self = sg4::Actor::self();
    return self == nullptr ? nullptr : reinterpret_cast<const unsigned char*>(self->get_impl());
  }

  // A std::list header is {next, prev, size} (libstdc++): the list that received `impl` has a size one larger and
  // a new last node, whose element (after the node's two links) is `impl`.
  void locate(const unsigned char* maestro, const std::array<Word, kWindow>& before,
              const simgrid::kernel::activity::ActivityImpl* impl) {
    state_ = State::unusable;
    std::array<Word, kWindow> after;
    std::memcpy(after.data(), maestro, sizeof after);
    for (std::size_t w = 0; w + 2 < kWindow; ++w) {
      if (after[w + 2] != before[w + 2] + 1 || after[w + 1] == before[w + 1] || after[w + 1] % alignof(Word) != 0 ||
          after[w + 1] == 0)
        continue;
      Word element = 0;
      std::memcpy(&element, reinterpret_cast<const unsigned char*>(after[w + 1]) + 2 * sizeof(Word), sizeof element);
      if (element != reinterpret_cast<Word>(impl))
        continue;
      if (list_ != nullptr) { // two candidates: ambiguous, leave the list alone
        list_ = nullptr;
        return;
      }
      list_ = reinterpret_cast<ActivityList*>(const_cast<unsigned char*>(maestro) + w * sizeof(Word));
    }
    if (list_ != nullptr)
      state_ = State::found;
  }

  void unlink(const simgrid::kernel::activity::ActivityImpl* impl) {
    if (state_ != State::found)
      return;
    if (list_->empty() || list_->back().get() != impl) {
      state_ = State::unusable; // not the list we took it for: stop touching it
      return;
    }
    list_->pop_back();
  }

  State state_ = State::unknown;
  ActivityList* list_ = nullptr;
};

class FlowRun {
public:
  FlowRun(const flow::Platform& platform, sg4::Host* clock) : platform_(platform), clock_(clock) {
    sg4::Activity::on_completion_cb([this](const sg4::Activity& a) { completed(a); });
  }

  /// A timed activity, not started. Exec::init + set_host (not Host::exec_init, which needs an issuing actor),
  /// as in examples/cpp/dag-tuto: activities are started from main or from completion callbacks, no actor runs.
  sg4::ExecPtr timed(double seconds, sg4::Host* host = nullptr) {
    auto exec = maestro_.adopt([] { return sg4::Exec::init(); });
    exec->set_flops_amount(seconds * kClockSpeed);
    exec->set_host(host != nullptr ? host : clock_);
    return exec;
  }

  /// Starts a collective lowered into `phases` (ranks of this platform); `done` is started when its last phase has
  /// finished.
  void start_collective(std::vector<Phase> phases, sg4::ExecPtr done) {
    auto& run = collectives_.emplace_back(std::make_unique<Collective>());
    run->phases = std::move(phases);
    run->done = std::move(done);
    ++active_;
    next_phase(*run);
  }

  /// Calls `fn` when the timed activity `activity` completes (once).
  void on_done(const sg4::Activity* activity, std::function<void()> fn) { handlers_.emplace(activity, std::move(fn)); }

  [[nodiscard]] std::size_t flows() const { return flows_; }
  [[nodiscard]] std::size_t events() const { return events_; }

private:
  struct Collective;

  // A route between two ranks, looked up once.
  struct Route {
    std::vector<sg4::Link*> links;
    std::vector<flow::LinkNote*> notes; ///< the links' statistics (flow::link_notes)
    double latency_s = 0;
  };

  // One flow of a phase. An aggregated flow folds r steps (lowering.hpp). It is sent as S = min(r, segments)
  // consecutive segments, each carrying 1/S of the bytes and paying its share of the r path latencies after its
  // transfer: the latencies stay interleaved with the transfer as in per-message simulation, so under contention
  // other traffic uses the link during them (tests/flow_engine: within 0.5 % of per-message). The comm of the
  // segment in flight carries a pointer to its Flow as its data.
  struct Flow {
    Collective* run;
    const Route* path; ///< src to dst (an element of routes_, whose addresses are stable)
    int src, dst;
    double bytes_per_segment;
    int repeats, segments, sent;
    double extra_s = 0; ///< latency paid after the segment in flight
    sg4::CommPtr comm;  ///< the segment in flight
  };

  struct Collective {
    std::vector<Phase> phases;
    std::size_t next = 0;
    std::size_t outstanding = 0;
    std::vector<Flow> flows; ///< the current phase's (never resized while it runs: Flow addresses are stable)
    sg4::ExecPtr done;
  };

  void completed(const sg4::Activity& a) {
    ++events_;
    // SimGrid still uses an activity after its completion callbacks: the last references (and what they point to)
    // are released one time step later.
    if (sg4::Engine::get_clock() > graveyard_time_) {
      graveyard_.clear();
      handler_graveyard_.clear();
      retired_flows_.clear();
      graveyard_time_ = sg4::Engine::get_clock();
    }
    if (auto* flow = a.get_data<Flow>(); flow != nullptr) {
      graveyard_.push_back(std::move(flow->comm));
      if (flow->extra_s > 0)
        after(flow->extra_s, flow);
      else
        segment_done(*flow);
      return;
    }
    const auto it = handlers_.find(&a);
    if (it == handlers_.end())
      return;
    auto fn = std::move(it->second);
    handlers_.erase(it);
    fn();
    handler_graveyard_.push_back(std::move(fn));
  }

  const Route& route(int src, int dst) {
    const auto key = (static_cast<std::uint64_t>(src) << 32) | static_cast<std::uint32_t>(dst);
    auto [it, fresh] = routes_.try_emplace(key);
    if (fresh) {
      platform_.gpus[static_cast<std::size_t>(src)]->route_to(platform_.gpus[static_cast<std::size_t>(dst)],
                                                              it->second.links, &it->second.latency_s);
      it->second.notes = flow::link_notes(it->second.links);
    }
    return it->second;
  }

  void next_phase(Collective& run) {
    // Skip empty phases; when none is left the collective is done.
    while (run.next < run.phases.size() && run.phases[run.next].flows.empty())
      ++run.next;
    if (!run.flows.empty()) // the previous phase's flows: one may be the caller's
      retired_flows_.push_back(std::move(run.flows));
    if (run.next == run.phases.size()) {
      --active_;
      run.done->start();
      run.done = nullptr;
      std::vector<Phase>().swap(run.phases);
      return;
    }
    const auto& phase = run.phases[run.next++];
    run.outstanding = phase.flows.size();
    run.flows.clear();
    run.flows.reserve(phase.flows.size());
    for (const auto& f : phase.flows) {
      const int repeats = std::max(1, f.latency_repeats);
      const int segments = std::min(repeats, segments_);
      run.flows.push_back(
          Flow{&run, &route(f.src, f.dst), f.src, f.dst, f.bytes / segments, repeats, segments, 0, 0, nullptr});
    }
    for (auto& flow : run.flows)
      send_segment(flow);
  }

  void send_segment(Flow& flow) {
    // A collective alone on the network has nothing to share its latencies with: after the first segment, it
    // sends the rest as one flow (the segmentation only matters when other traffic is in flight).
    int count = 1;
    if (flow.sent > 0 && active_ == 1)
      count = flow.segments - flow.sent;
    const int i = flow.sent;
    flow.sent += count;
    // Segment i pays repeats / segments latencies (the first repeats % segments pay one more): one in its flow,
    // the others after it.
    int share = 0;
    for (int k = i; k < i + count; ++k)
      share += flow.repeats / flow.segments + (k < flow.repeats % flow.segments ? 1 : 0);
    const Route& path = *flow.path;
    flow.extra_s = share > 1 ? (share - 1) * path.latency_s : 0.0;
    flow.comm = maestro_.adopt([&] {
      return sg4::Comm::sendto_init(platform_.gpus[static_cast<std::size_t>(flow.src)],
                                    platform_.gpus[static_cast<std::size_t>(flow.dst)]);
    });
    flow.comm->set_payload_size(static_cast<std::uint64_t>(flow.bytes_per_segment * count + 0.5));
    flow.comm->set_data(&flow);
    flow::note_links_in_use(path.notes);
    ++flows_;
    flow.comm->start();
  }

  // The segment in flight and the latencies after it are over.
  void segment_done(Flow& flow) {
    if (flow.sent < flow.segments)
      send_segment(flow);
    else if (--flow.run->outstanding == 0)
      next_phase(*flow.run);
  }

  /// Calls segment_done(flow) `delay` seconds from now. Waits that end at the same instant share one timed
  /// activity: the flows of a phase end together, so fewer activities are in flight.
  void after(double delay, Flow* flow) {
    const double at = sg4::Engine::get_clock() + delay;
    auto [it, fresh] = timers_.try_emplace(at);
    it->second.push_back(flow);
    if (!fresh)
      return;
    auto wait = timed(delay);
    on_done(wait.get(), [this, at, wait] {
      auto node = timers_.extract(at);
      for (Flow* f : node.mapped())
        segment_done(*f);
    });
    wait->start();
  }

  const flow::Platform& platform_;
  sg4::Host* clock_;
  MaestroActivities maestro_;
  int segments_ = 4;
  int active_ = 0;                              ///< collectives in flight
  std::map<double, std::vector<Flow*>> timers_; ///< flows waiting for latencies, by the instant the wait ends
  std::unordered_map<const sg4::Activity*, std::function<void()>> handlers_; ///< of timed activities
  std::unordered_map<std::uint64_t, Route> routes_;                          ///< by (source, destination) rank
  std::vector<std::unique_ptr<Collective>> collectives_;
  // Released at the next time step (see completed).
  std::vector<sg4::CommPtr> graveyard_;
  std::vector<std::function<void()>> handler_graveyard_;
  std::vector<std::vector<Flow>> retired_flows_;
  double graveyard_time_ = -1;
  std::size_t flows_ = 0;
  std::size_t events_ = 0;
};

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
      : cluster_(cluster), shape_{cluster.nodes, cluster.gpus_per_node}, jobs_(std::move(jobs)),
        granularity_(per_message ? Granularity::per_message : Granularity::aggregated) {
    if (!use_symmetry) {
      obstacle_ = "switched off (flow.symmetry: off)";
      return;
    }
    obstacle_ = flow::quotient_obstacle(cluster);
    if (!obstacle_.empty() || jobs_.empty())
      return;
    if (std::any_of(jobs_.begin(), jobs_.end(), [](const Job& j) { return !j.ranks.empty(); })) {
      obstacle_ = "a collective runs over a part of the cluster";
      return;
    }
    auto candidates = flow::candidate_symmetries(shape_);
    for (const auto& job : jobs_) {
      const auto phases = job.lowering->lower(job.shape, job.bytes, granularity_);
      std::erase_if(candidates, [&](flow::NodeSymmetry g) { return !flow::invariant(phases, shape_, g); });
      if (candidates.empty()) {
        obstacle_ = fmt::format("{} {} is not node-symmetric", collective_name(job.lowering->collective),
                                job.lowering->algorithm);
        quotient_.clear();
        return;
      }
      quotient_.push_back(flow::quotient_phases(phases, shape_));
    }
    symmetry_ = candidates.front();
  }

  [[nodiscard]] bool symmetric() const { return symmetry_ != flow::NodeSymmetry::none; }
  /// The cluster to build: the quotient when symmetric.
  [[nodiscard]] ClusterSpec platform_cluster() const {
    return symmetric() ? flow::quotient_cluster(cluster_) : cluster_;
  }
  /// Job i's phases in the built platform's ranks (once per job).
  [[nodiscard]] std::vector<Phase> phases(std::size_t i) {
    if (symmetric())
      return std::move(quotient_[i]);
    auto phases = jobs_[i].lowering->lower(jobs_[i].shape, jobs_[i].bytes, granularity_);
    if (jobs_[i].ranks.empty())
      return phases;
    return to_global_ranks(std::move(phases), {jobs_[i].shape, jobs_[i].ranks, false}, cluster_);
  }
  /// Every link of the full cluster from the simulated platform's statistics.
  [[nodiscard]] std::vector<flow::LinkStats> link_stats(const flow::Platform& p, double makespan_s) const {
    auto stats = flow::collect_link_stats(p, makespan_s);
    return symmetric() ? flow::expand_link_stats(stats, cluster_) : stats;
  }
  /// What the report says about it.
  [[nodiscard]] std::string note() const {
    if (symmetric())
      return fmt::format("flow engine: the {} nodes are symmetric ({}); node 0's flows were simulated on a 2-node "
                         "quotient of the star, which is exact for max-min sharing, and every node's links report "
                         "their representative's figures (flow.symmetry: off simulates every flow)",
                         cluster_.nodes, flow::symmetry_name(symmetry_));
    return fmt::format("flow engine: every flow simulated (node symmetry not used: {})", obstacle_);
  }
  [[nodiscard]] flow::NodeSymmetry symmetry() const { return symmetry_; }

private:
  ClusterSpec cluster_;
  LoweringShape shape_;
  std::vector<Job> jobs_;
  Granularity granularity_;
  flow::NodeSymmetry symmetry_ = flow::NodeSymmetry::none;
  std::string obstacle_;
  std::vector<std::vector<Phase>> quotient_;
};

// SimGrid engine, settings, platform and the clock host, in that order (the engine must exist first).
struct Simulation {
  int argc = 1;
  char program[7] = "ddlsim";
  char* argv[2] = {program, nullptr};
  sg4::Engine engine{&argc, argv};
  flow::Platform platform;
  sg4::Host* clock = nullptr;
  std::map<int, sg4::Host*> node_hosts; ///< the host CPU of each node that runs a task (data loading), by node

  /// `host_nodes`: the nodes whose host CPU runs tasks; each gets a host of its own beside the clock.
  explicit Simulation(const ClusterSpec& cluster, const std::vector<int>& host_nodes = {}) {
    flow::configure_closed_form(engine);
    flow::enable_link_stats(flow::LinkVisits::noted_links); // FlowRun notes every flow's links
    platform = flow::build_platform(cluster);
    auto* zone = sg4::create_star_zone("ddlsim-clock");
    zone->set_parent(engine.get_netzone_root());
    clock = zone->create_host("ddlsim-clock", kClockSpeed)->set_core_count(kClockCores);
    for (int node : host_nodes)
      node_hosts[node] = zone->create_host(fmt::format("node{}-host", node), kClockSpeed)->set_core_count(kClockCores);
    zone->seal();
  }
};

std::vector<LinkUsage> link_usage(const CollectivePlan& plan, const flow::Platform& platform, double makespan_s) {
  std::vector<LinkUsage> out;
  for (const auto& l : plan.link_stats(platform, makespan_s))
    out.push_back({l.name, l.role, l.bytes, l.busy_s, l.peak_utilisation, l.mean_utilisation});
  return out;
}

const CollectiveLowering& lowering_for(const Scenario& s) {
  if (s.allreduce.measured)
    throw InputError(s.file, "/collectives/allreduce",
                     "a measured alpha-beta fit has no network lowering: the flow engine needs an algorithm "
                     "(ring, tree, halving-doubling, hierarchical); use the analytic engine to replay a fit");
  return *s.allreduce.algorithm;
}

} // namespace

FlowGraphRun simulate_graph_flow(const Scenario& s, dag::IterationGraph& graph,
                                 const std::function<double(const std::vector<TaskTiming>&)>& window) {
  // Per-resource order: the analytic schedule's order (readiness order), enforced with dependencies, since
  // SimGrid activities on a host do not queue.
  const auto analytic_timing = schedule(graph);

  const std::size_t n = graph.size();
  std::vector<CollectivePlan::Job> jobs;
  std::vector<std::size_t> job_of(n, 0);
  std::vector<std::optional<CommunicatorLayout>> layouts(graph.communicators().size());
  for (std::size_t v = 0; v < n; ++v) {
    const auto collective = graph.task(v).collective;
    if (collective == dag::Collective::none)
      continue;
    job_of[v] = jobs.size();
    const auto& layout = task_layout(s, graph, graph.task(v), layouts);
    jobs.push_back({collective == dag::Collective::allreduce ? &lowering_for(s) : &sparse_lowering(collective),
                    graph.task(v).bytes, task_shape(s, graph.task(v), layout.shape),
                    layout.whole_cluster ? std::vector<int>{} : layout.ranks});
  }
  CollectivePlan plan(s.cluster, std::move(jobs), s.flow_per_message, s.flow_symmetry);
  FlowGraphRun result;
  result.note = plan.note();

  // Each task runs on its device's host: a GPU's platform host (under node symmetry, a rank of another node than 0
  // is simulated by the same GPU of node 1), or its node's host CPU.
  const auto devices = graph.devices();
  std::vector<int> host_nodes;
  for (const auto& d : devices)
    if (d.kind == dag::Device::Kind::host)
      host_nodes.push_back(d.index);
  Simulation sim(plan.platform_cluster(), host_nodes);
  FlowRun run(sim.platform, sim.clock);
  const int g = s.cluster.gpus_per_node;
  const auto host_of = [&](dag::Device d) -> sg4::Host* {
    if (d.kind == dag::Device::Kind::host)
      return sim.node_hosts.at(d.index);
    const int rank = plan.symmetric() && d.index >= g ? g + d.index % g : d.index;
    return sim.platform.gpus.at(static_cast<std::size_t>(rank));
  };

  // Two activities per task: `in` waits for the predecessors, `out` releases the successors. For a compute task
  // they are one timed activity; for a collective, `in` starts the lowering and `out` is started by it.
  std::vector<sg4::ExecPtr> in(n), out(n);
  for (std::size_t v = 0; v < n; ++v) {
    const auto& task = graph.task(v);
    if (task.collective != dag::Collective::none) {
      in[v] = run.timed(0);
      out[v] = run.timed(0);
      run.on_done(in[v].get(),
                  [&run, &plan, job = job_of[v], done = out[v]] { run.start_collective(plan.phases(job), done); });
    } else {
      in[v] = out[v] = run.timed(task.duration_s, host_of(task.device));
    }
  }
  // Tasks per (device, resource), each in the analytic schedule's order.
  std::vector<std::vector<std::size_t>> by_resource(devices.size() * dag::kResourceCount);
  for (std::size_t v = 0; v < n; ++v) {
    const auto& t = graph.task(v);
    if (t.resource == dag::Resource::none)
      continue;
    const auto d =
        static_cast<std::size_t>(std::lower_bound(devices.begin(), devices.end(), t.device) - devices.begin());
    by_resource[d * dag::kResourceCount + static_cast<std::size_t>(t.resource)].push_back(v);
  }
  std::set<std::pair<std::size_t, std::size_t>> edges;
  for (std::size_t v = 0; v < n; ++v)
    for (std::size_t w : graph.successors(v))
      edges.emplace(v, w);
  for (auto& tasks : by_resource) {
    std::sort(tasks.begin(), tasks.end(), [&](std::size_t a, std::size_t b) {
      return analytic_timing[a].start_s != analytic_timing[b].start_s
                 ? analytic_timing[a].start_s < analytic_timing[b].start_s
                 : a < b;
    });
    // In that order within a lane; a lane -1 task after every lane's previous task and before every next one.
    std::optional<std::size_t> last_all;
    std::map<int, std::size_t> last_in_lane; // since last_all
    for (std::size_t v : tasks) {
      const int lane = graph.task(v).lane;
      if (lane < 0) {
        if (last_all)
          edges.emplace(*last_all, v);
        for (const auto& [l, u] : last_in_lane)
          edges.emplace(u, v);
        last_in_lane.clear();
        last_all = v;
        continue;
      }
      const auto it = last_in_lane.find(lane);
      if (it != last_in_lane.end())
        edges.emplace(it->second, v);
      else if (last_all)
        edges.emplace(*last_all, v);
      last_in_lane[lane] = v;
    }
  }
  std::vector<bool> has_predecessor(n, false);
  for (const auto& [v, w] : edges) {
    out[v]->add_successor(in[w]);
    has_predecessor[w] = true;
  }
  // Roots start now; every other activity starts when its last dependency completes.
  for (std::size_t v = 0; v < n; ++v)
    if (!has_predecessor[v])
      in[v]->start();

  sim.engine.run();

  result.timing.assign(n, {});
  for (std::size_t v = 0; v < n; ++v) {
    if (out[v]->get_state() != sg4::Activity::State::FINISHED)
      throw std::logic_error(
          fmt::format("flow engine: task {} ({}) never finished", v, dag::task_kind_name(graph.task(v).kind)));
    const bool collective = graph.task(v).collective != dag::Collective::none;
    result.timing[v].start_s = collective ? in[v]->get_finish_time() : in[v]->get_start_time();
    result.timing[v].end_s = out[v]->get_finish_time();
    if (collective)
      graph.task(v).duration_s = result.timing[v].end_s - result.timing[v].start_s;
  }
  result.links = link_usage(plan, sim.platform, window ? window(result.timing) : makespan_of(result.timing));
  result.flows = run.flows();
  result.events = run.events();
  return result;
}

RunResult run_flow(const Scenario& s) {
  if (s.strategy.asynchronous())
    throw std::logic_error("flow engine: ps-async is simulated by the analytic engine's queue model (run_scenario)");
  const auto wall_start = std::chrono::steady_clock::now();
  auto prepared = detail::prepare(s, "flow");
  RunResult& r = prepared.result;
  // The links' mean utilisation is taken over the iteration time, which finalize derives from the timing.
  auto run = simulate_graph_flow(s, r.graph, [&](const std::vector<TaskTiming>& timing) {
    r.timing = timing;
    detail::finalize(s, prepared);
    return r.iteration_time_s;
  });
  r.notes.push_back(std::move(run.note));
  r.links = std::move(run.links);
  r.sim.flows = run.flows;
  r.sim.events = run.events;
  r.sim.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  return std::move(r);
}

FlowCollectivesResult run_collectives_flow(const ClusterSpec& cluster, const std::vector<CollectiveJob>& jobs,
                                           bool per_message, bool use_symmetry) {
  const auto wall_start = std::chrono::steady_clock::now();
  std::vector<CollectivePlan::Job> planned;
  for (const auto& job : jobs) {
    const auto* lowering = find_lowering(job.kind, job.algorithm);
    if (lowering == nullptr)
      throw std::invalid_argument(fmt::format("no lowering of {} '{}'", collective_name(job.kind), job.algorithm));
    planned.push_back({lowering, job.bytes, job.shape.value_or(LoweringShape{cluster.nodes, cluster.gpus_per_node})});
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
  result.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  return result;
}

} // namespace ddlsim::sim
