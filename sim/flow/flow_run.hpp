// FlowRun: the SimGrid side of a flow-engine run (sim/flow only): collectives lowered into phases of point-to-point
// flows started as comms on the platform, timed activities on a clock host, completion handlers, and the collectives
// that run on links of their own timed without the platform.
#pragma once

#include "sim/flow/maestro_activities.hpp"
#include "sim/flow/platform.hpp"
#include "sim/network/lowering/lowering.hpp"

#include <simgrid/s4u/Activity.hpp>
#include <simgrid/s4u/Comm.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Exec.hpp>
#include <simgrid/s4u/Host.hpp>
#include <simgrid/s4u/Link.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace ddlsim::sim::flow {

namespace sg4 = simgrid::s4u;

// Timers (a collective's delayed start and its end, latency waits) run on one "clock" host at flow::kHostSpeedFlops
// with a core per concurrent activity (platform.hpp); tasks other than collectives are timed by ReplicaTimer.
constexpr double kClockSpeed = flow::kHostSpeedFlops;
constexpr int kClockCores = flow::kHostCores;

class FlowRun {
public:
  FlowRun(const flow::Platform& platform, sg4::Host* clock) : platform_(platform), clock_(clock) {
    sg4::Activity::on_completion_cb([this](const sg4::Activity& a) { completed(a); });
  }

  /// A timed activity on the clock host, not started. Exec::init + set_host (not Host::exec_init, which needs an
  /// issuing actor), as in examples/cpp/dag-tuto: activities are started from main or from completion callbacks,
  /// no actor runs.
  sg4::ExecPtr timed(double seconds) {
    auto exec = maestro_.adopt([] { return sg4::Exec::init(); });
    exec->set_flops_amount(seconds * kClockSpeed);
    exec->set_host(clock_);
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

  /// A collective whose links no other flow uses while it runs, timed without SimGrid: each phase ends when its
  /// slowest flow does, a flow taking its latencies and its bytes at its route's bandwidth (what SimGrid gives a flow
  /// alone under configure_closed_form); its links' statistics are added (flow::add_unshared_flow). nullopt, and
  /// nothing added, when two flows of a phase would share a link (a source or a destination twice, or a flow
  /// between two ranks that have no link between them): the caller starts it on the platform then.
  [[nodiscard]] std::optional<double> unshared_time(const std::vector<Phase>& phases) {
    std::vector<int> sources, destinations;
    for (const auto& phase : phases) {
      sources.clear();
      destinations.clear();
      for (const auto& f : phase.flows) {
        if (f.src == f.dst || route(f.src, f.dst).links.empty())
          return std::nullopt;
        sources.push_back(f.src);
        destinations.push_back(f.dst);
      }
      std::sort(sources.begin(), sources.end());
      std::sort(destinations.begin(), destinations.end());
      if (std::adjacent_find(sources.begin(), sources.end()) != sources.end() ||
          std::adjacent_find(destinations.begin(), destinations.end()) != destinations.end())
        return std::nullopt;
    }
    double total = 0;
    for (const auto& phase : phases) {
      double slowest = 0;
      const auto& latency = latencies(phase);
      for (std::size_t i = 0; i < phase.flows.size(); ++i) {
        const auto& f = phase.flows[i];
        const Route& path = route(f.src, f.dst);
        slowest = std::max(slowest, latency[i] + f.bytes / path.bandwidth);
        flow::add_unshared_flow(path.notes, f.bytes, path.bandwidth);
        ++unshared_flows_;
      }
      total += slowest;
    }
    return total;
  }
  /// Flows timed by unshared_time.
  [[nodiscard]] std::size_t unshared_flows() const { return unshared_flows_; }

  /// Declares that no two collectives will ever be in flight together (one GPU's stream issues every collective of
  /// the run, each over all the copies): a flow then sends all its segments as one comm from the start, since no
  /// other traffic can use the links during its latencies. The same times as segment by segment, up to rounding;
  /// half the comms.
  void set_one_at_a_time(bool one) { one_at_a_time_ = one; }

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
    double bandwidth = 0; ///< the slowest link's, B/s
  };

  // One flow of a phase. An aggregated flow folds r steps (lowering.hpp). It is sent as S = min(r, segments)
  // consecutive segments, each carrying 1/S of the bytes and paying its share of the r latencies, one before its
  // transfer and the others after it: the latencies stay interleaved with the transfer as in per-message
  // simulation, so under contention other traffic uses the link during them (tests/flow_engine: within 0.5 % of
  // per-message). SimGrid's own latency is off (configure_closed_form: a latency factor of 0): every latency is a
  // wait here, so that a flow can pay another path's latency (a ring step's critical walk, lowering.hpp). The comm
  // of the segment in flight carries a pointer to its Flow as its data.
  struct Flow {
    Collective* run;
    const Route* path; ///< src to dst (an element of routes_, whose addresses are stable)
    int src, dst;
    double bytes_per_segment;
    double latency_per_repeat_s; ///< the flow's latency / repeats
    int repeats, segments, sent;
    double extra_s = 0;   ///< latency paid after the segment in flight
    sg4::CommPtr comm;    ///< the segment in flight
    bool waiting = false; ///< its comm waits for the latency before it
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
      it->second.bandwidth = std::numeric_limits<double>::infinity();
      for (const auto* link : it->second.links)
        it->second.bandwidth = std::min(it->second.bandwidth, link->get_bandwidth());
    }
    return it->second;
  }

  /// Each flow's latency in `phase` (lowering.hpp): its path's, latency_repeats times (at least once), or, in a
  /// step of a pipelined ring, the critical walk's over the flows' paths; plus the phase's extra latency. The returned
  /// buffer is reused.
  const std::vector<double>& latencies(const Phase& phase) {
    latency_.clear();
    for (const auto& f : phase.flows) {
      const double path = route(f.src, f.dst).latency_s;
      latency_.push_back(phase.chain_hops > 0 ? path : std::max(1, f.latency_repeats) * path);
    }
    if (phase.chain_hops > 0) {
      // the first ring's edges (Phase::rings: the others repeat its latencies)
      const std::span<const double> ring(latency_.data(),
                                         latency_.size() / static_cast<std::size_t>(std::max(1, phase.rings)));
      const auto walk = critical_walk(ring, phase.chain_hops);
      const double chain = phase.chain_hop < 0 ? walk.latency_s : walk_hop_latency(ring, walk, phase.chain_hop);
      std::fill(latency_.begin(), latency_.end(), chain);
    }
    for (auto& l : latency_)
      l += phase.extra_latency_s;
    return latency_;
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
    const auto& latency = latencies(phase);
    for (std::size_t i = 0; i < phase.flows.size(); ++i) {
      const auto& f = phase.flows[i];
      const int repeats = std::max(1, f.latency_repeats);
      const int segments = std::min(repeats, segments_);
      run.flows.push_back(Flow{&run, &route(f.src, f.dst), f.src, f.dst, f.bytes / segments, latency[i] / repeats,
                               repeats, segments, 0, 0, nullptr});
    }
    for (auto& flow : run.flows)
      send_segment(flow);
  }

  void send_segment(Flow& flow) {
    // A collective alone on the network has nothing to share its latencies with: after the first segment, it
    // sends the rest as one flow (the segmentation only matters when other traffic is in flight).
    int count = 1;
    if (active_ == 1 && (flow.sent > 0 || one_at_a_time_))
      count = flow.segments - flow.sent;
    const int i = flow.sent;
    flow.sent += count;
    // Segment i pays repeats / segments latencies (the first repeats % segments pay one more): one before its
    // transfer (where SimGrid's own latency would be), the others after it.
    int share = 0;
    for (int k = i; k < i + count; ++k)
      share += flow.repeats / flow.segments + (k < flow.repeats % flow.segments ? 1 : 0);
    flow.extra_s = share > 1 ? (share - 1) * flow.latency_per_repeat_s : 0.0;
    flow.comm = maestro_.adopt([&] {
      return sg4::Comm::sendto_init(platform_.gpus[static_cast<std::size_t>(flow.src)],
                                    platform_.gpus[static_cast<std::size_t>(flow.dst)]);
    });
    flow.comm->set_payload_size(static_cast<std::uint64_t>(flow.bytes_per_segment * count + 0.5));
    flow.comm->set_data(&flow);
    if (share > 0 && flow.latency_per_repeat_s > 0) {
      flow.waiting = true;
      after(flow.latency_per_repeat_s, &flow);
    } else {
      start_transfer(flow);
    }
  }

  void start_transfer(Flow& flow) {
    flow.waiting = false;
    flow::note_links_in_use(flow.path->notes);
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

  /// `delay` seconds from now, starts the transfer of a flow that waits for it, or else calls segment_done(flow).
  /// Waits that end at the same instant share one timed activity: the flows of a phase end together, so fewer
  /// activities are in flight.
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
        if (f->waiting)
          start_transfer(*f);
        else
          segment_done(*f);
    });
    wait->start();
  }

  const flow::Platform& platform_;
  sg4::Host* clock_;
  flow::MaestroActivities maestro_;
  int segments_ = 4;
  bool one_at_a_time_ = false;
  int active_ = 0;                              ///< collectives in flight
  std::map<double, std::vector<Flow*>> timers_; ///< flows waiting for latencies, by the instant the wait ends
  std::unordered_map<const sg4::Activity*, std::function<void()>> handlers_; ///< of timed activities
  std::unordered_map<std::uint64_t, Route> routes_;                          ///< by (source, destination) rank
  std::vector<double> latency_;                                              ///< latencies()'s buffer
  std::vector<std::unique_ptr<Collective>> collectives_;
  // Released at the next time step (see completed).
  std::vector<sg4::CommPtr> graveyard_;
  std::vector<std::function<void()>> handler_graveyard_;
  std::vector<std::vector<Flow>> retired_flows_;
  double graveyard_time_ = -1;
  std::size_t flows_ = 0;
  std::size_t events_ = 0;
  std::size_t unshared_flows_ = 0;
};

} // namespace ddlsim::sim::flow
