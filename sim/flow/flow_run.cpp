// FlowRun (flow_run.hpp): collectives as phases of SimGrid comms, timed activities on the clock host, completion
// handlers, and the collectives timed without the platform.
#include "sim/flow/flow_run.hpp"

#include <simgrid/s4u/Comm.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Exec.hpp>
#include <simgrid/s4u/Host.hpp>
#include <simgrid/s4u/Link.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>

namespace ddlsim::sim::flow {

FlowRun::FlowRun(const flow::Platform& platform, sg4::Host* clock) : platform_(platform), clock_(clock) {
  sg4::Activity::on_completion_cb([this](const sg4::Activity& a) { completed(a); });
}

sg4::ExecPtr FlowRun::timed(double seconds) {
  auto exec = maestro_.adopt([] { return sg4::Exec::init(); });
  exec->set_flops_amount(seconds * kClockSpeed);
  exec->set_host(clock_);
  return exec;
}

void FlowRun::start_collective(std::vector<Phase> phases, sg4::ExecPtr done) {
  auto& run = collectives_.emplace_back(std::make_unique<Collective>());
  run->phases = std::move(phases);
  run->done = std::move(done);
  ++active_;
  next_phase(*run);
}

std::optional<double> FlowRun::unshared_time(const std::vector<Phase>& phases) {
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

void FlowRun::completed(const sg4::Activity& a) {
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

const FlowRun::Route& FlowRun::route(int src, int dst) {
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

const std::vector<double>& FlowRun::latencies(const Phase& phase) {
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

void FlowRun::next_phase(Collective& run) {
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

void FlowRun::send_segment(Flow& flow) {
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

void FlowRun::start_transfer(Flow& flow) {
  flow.waiting = false;
  flow::note_links_in_use(flow.path->notes);
  ++flows_;
  flow.comm->start();
}

void FlowRun::segment_done(Flow& flow) {
  if (flow.sent < flow.segments)
    send_segment(flow);
  else if (--flow.run->outstanding == 0)
    next_phase(*flow.run);
}

void FlowRun::after(double delay, Flow* flow) {
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

} // namespace ddlsim::sim::flow
