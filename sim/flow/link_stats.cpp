// Per-link statistics of a flow-engine run (platform.hpp: enable_link_stats, collect_link_stats).
//
// Why not SimGrid's sg_link_load plugin (src/plugins/link_load.cpp, plugins/load.h) as is: it integrates a link's
// usage only when a flow crossing that link starts or ends, multiplying the usage at that instant by the whole time
// since the previous update. A flow of n bytes over a path of latency L at bandwidth B is counted as B (L + n/B)
// = n + B L bytes (its latency phase is billed at full rate), and a link whose flows are slowed down by contention
// elsewhere keeps its stale rate until its own next event. Instead this tracker uses the same signals as the
// plugin but integrates every link that carries flows at every simulated time step (s4u::Engine::on_time_advance):
// SimGrid's rates are constant between steps, so bytes = sum(usage x step) is exact. Flows that complete at the end of
// a step are already detached from their links when on_time_advance fires, so the usages are snapshot at the first
// completion of a step (s4u::Link::on_communication_state_change fires before the flow's max-min variable is freed).
// Cost, only when enabled: O(links) per time step (see Tracker).
#include "sim/flow/platform.hpp"

#include <simgrid/kernel/resource/Action.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Link.hpp>
#include <xbt/Extendable.hpp>

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <utility>

namespace ddlsim::sim::flow {

namespace sg4 = simgrid::s4u;

namespace {
struct Tracker;
} // namespace

// A tracked link's figures, owned by the link (an extension).
struct LinkNote {
  sg4::Link* link = nullptr;
  double bytes = 0;
  double busy_s = 0;
  double peak = 0;     ///< B/s
  double snapshot = 0; ///< usage (B/s) during the current step, taken before completing flows detach
  Tracker* tracker = nullptr;
  bool visited = false; ///< LinkVisits::noted_links: in Tracker::visited
};

namespace {

// The slot of our LinkNote in every s4u::Link: SimGrid's own plugins keep this id in a static too, as the
// Engine is one per process.
simgrid::xbt::Extension<sg4::Link, LinkNote>& accumulator_slot() {
  static simgrid::xbt::Extension<sg4::Link, LinkNote> slot;
  return slot;
}

// Integrates, at every time step, the links that carry flows. SimGrid 3.32 offers no exported signal when a
// communication starts (s4u::Comm::on_start is declared but not exported by libsimgrid, and Comm::on_send does not
// fire for Comm::sendto), so each step visits every tracked link and skips the unused ones (Link::is_used), or, with
// LinkVisits::noted_links, only the links noted in use since they were last found unused: a link is used exactly
// while a flow's max-min variable crosses it (lmm: its constraint is active), and every flow's links are noted before
// it starts, so the links left out carry nothing. Each link's figures are integrated alone: the visiting order does
// not matter.
struct Tracker {
  std::vector<LinkNote*> links; ///< every tracked link
  bool noted_only = false;      ///< LinkVisits::noted_links
  std::vector<LinkNote*> noted; ///< noted_only: the links that may carry flows
  bool snapshot_valid = false;
  double snapshot_clock = -1;

  std::vector<LinkNote*>& visited() { return noted_only ? noted : links; }

  void note(LinkNote* acc) {
    if (acc->visited)
      return;
    acc->visited = true;
    acc->snapshot = 0; // unused until now: no usage at the last snapshot
    noted.push_back(acc);
  }

  void snapshot() {
    const double now = sg4::Engine::get_clock();
    if (snapshot_valid && snapshot_clock == now)
      return;
    for (LinkNote* acc : visited())
      acc->snapshot = acc->link->is_used() ? acc->link->get_usage() : 0.0;
    snapshot_valid = true;
    snapshot_clock = now;
  }

  void advance(double delta) {
    const bool use_snapshot = snapshot_valid && snapshot_clock == sg4::Engine::get_clock();
    snapshot_valid = false;
    // One pass: integrate each link and, with noted_only, forget the links no flow crosses any more (noted again
    // when one starts).
    auto& visiting = visited();
    std::size_t kept = 0;
    for (LinkNote* acc : visiting) {
      const bool used = acc->link->is_used();
      const double usage = use_snapshot ? acc->snapshot : used ? acc->link->get_usage() : 0.0;
      if (usage > 0) {
        acc->bytes += usage * delta;
        if (delta > 0)
          acc->busy_s += delta;
        acc->peak = std::max(acc->peak, usage);
      }
      if (noted_only && !used)
        acc->visited = false;
      else
        visiting[kept++] = acc;
    }
    visiting.resize(kept);
  }
};

} // namespace

void enable_link_stats(LinkVisits visits) {
  auto& slot = accumulator_slot();
  if (slot.valid())
    throw std::logic_error("flow link stats: enable_link_stats() called twice in this process");
  if (sg4::Engine::get_instance()->get_link_count() > 0)
    throw std::logic_error("flow link stats: enable_link_stats() must be called before build_platform()");
  slot = sg4::Link::extension_create<LinkNote>();
  auto tracker = std::make_shared<Tracker>();
  tracker->noted_only = visits == LinkVisits::noted_links;
  sg4::Link::on_creation_cb([tracker](sg4::Link& link) {
    auto id = accumulator_slot();
    // A split-duplex link is a pair of links with no constraint of its own; its two halves are created too.
    if (link.get_sharing_policy() == sg4::Link::SharingPolicy::SPLITDUPLEX || link.get_name() == "__loopback__" ||
        link.extension(id) != nullptr)
      return;
    auto* acc = new LinkNote; // owned by the link (extension deleter)
    acc->link = &link;
    acc->tracker = tracker.get();
    link.extension_set(id, acc);
    tracker->links.push_back(acc);
  });
  sg4::Link::on_communication_state_change_cb([tracker](simgrid::kernel::resource::NetworkAction& /*action*/,
                                                        simgrid::kernel::resource::Action::State previous) {
    if (previous == simgrid::kernel::resource::Action::State::STARTED)
      tracker->snapshot();
  });
  sg4::Engine::on_time_advance_cb([tracker](double delta) { tracker->advance(delta); });
}

void note_links_in_use(const std::vector<sg4::Link*>& links) {
  note_links_in_use(link_notes(links));
}

std::vector<LinkNote*> link_notes(const std::vector<sg4::Link*>& links) {
  std::vector<LinkNote*> notes;
  const auto& slot = accumulator_slot();
  if (!slot.valid())
    return notes;
  for (sg4::Link* link : links)
    if (auto* acc = link->extension(slot); acc != nullptr)
      notes.push_back(acc);
  return notes;
}

void note_links_in_use(const std::vector<LinkNote*>& notes) {
  for (LinkNote* acc : notes)
    if (acc->tracker->noted_only)
      acc->tracker->note(acc);
}

void add_unshared_flow(const std::vector<LinkNote*>& notes, double bytes, double rate) {
  for (LinkNote* acc : notes) {
    acc->bytes += bytes;
    acc->busy_s += bytes / rate;
    acc->peak = std::max(acc->peak, rate);
  }
}

std::vector<LinkStats> collect_link_stats(const Platform& p, double makespan_s) {
  const auto& slot = accumulator_slot();
  if (!slot.valid())
    throw std::logic_error("flow link stats: call enable_link_stats() before build_platform()");
  std::vector<LinkStats> out;
  out.reserve(p.links.size());
  for (const LinkInfo& l : p.links) {
    const LinkNote* acc = l.link->extension(slot);
    if (acc == nullptr)
      throw std::logic_error("flow link stats: link " + l.name + " is not tracked (built before enable_link_stats?)");
    const double bandwidth = l.link->get_bandwidth();
    out.push_back({l.name, l.role, acc->bytes, acc->busy_s, acc->peak / bandwidth,
                   makespan_s > 0 ? acc->bytes / (bandwidth * makespan_s) : 0.0});
  }
  return out;
}

} // namespace ddlsim::sim::flow
