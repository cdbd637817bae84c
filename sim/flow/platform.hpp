// The flow engine's SimGrid platform, built from a ClusterSpec: one host per GPU, a split-duplex link per GPU into
// its node's fabric, NIC links into the network (per node or per GPU), and the network (star, fat-tree, ring, torus).
// Link semantics match the analytic engine (sim/network/collectives.hpp; docs/engines.md, "Link semantics"); routes per
// topology are described in platform.cpp. Built with SimGrid 3.32's S4U platform API (NetZone.hpp: create_star_zone,
// create_fatTree_zone, create_torus_zone with ClusterCallbacks; examples/cpp/clusters-multicpu).
#pragma once

#include "sim/network/cluster.hpp"

#include <string>
#include <vector>

namespace simgrid::s4u {
class Engine;
class Host;
class Link;
} // namespace simgrid::s4u

namespace ddlsim::sim::flow {

/// One direction of a physical link (SimGrid split-duplex links are two links, `_UP` and `_DOWN`).
struct LinkInfo {
  std::string name;         ///< ddlsim's label, e.g. "node12-nic_UP"; for links SimGrid's fat-tree and torus
                            ///< builders create, `link->get_name()` is SimGrid's own name (see platform.cpp)
  simgrid::s4u::Link* link; ///< owned by the engine
  std::string role;         ///< "intra" (GPU to its node's fabric), "host" (between a node's sockets), "nic"
                            ///< (endpoint to the network), "switch"
  double bandwidth;         ///< B/s
  double latency_s;
};

/// A host runs a timer of t seconds as an Exec of t x kHostSpeedFlops flops (well above SimGrid's work-amount
/// precision, 1e-5), each on a core of its own: timers never share a CPU. The flow engine's timers run on a clock
/// host; GPU and server hosts are the flows' endpoints.
inline constexpr double kHostSpeedFlops = 1e9;
inline constexpr int kHostCores = 1 << 24;

struct Platform {
  std::vector<simgrid::s4u::Host*> gpus; ///< by rank: workers node-major (rank r = GPU r % g of node r / g), then
                                         ///< the dedicated parameter-server hosts
  std::vector<LinkInfo> links;           ///< every link of the platform, deterministic order (see build_platform)
};

/// SimGrid settings that make flows follow the closed forms exactly (docs/engines.md, "The flow engine"):
/// network/model:CM02, network/latency-factor:0 (FlowRun pays each flow's latencies as waits around its transfer,
/// flow_run.hpp, so that a ring step can pay its critical walk's), network/bandwidth-factor:1, network/weight-S:0,
/// network/crosstraffic:0 and network/TCP-gamma:0 (SimGrid 3.32 applies the gamma/(2 latency) window bound only when
/// gamma > 0). Silences SimGrid's logging (threshold critical) so runs print nothing. Call with the engine created,
/// before the platform is built.
void configure_closed_form(simgrid::s4u::Engine& engine);

/// Builds the platform. There must be no zone yet (one platform per engine; SimGrid's Engine is one per process).
/// The root zone "platform" holds ddlsim's links and the sealed network zone "network" with every GPU; the root
/// routes nothing and is left unsealed, so the caller may add zones beside the network (e.g. a host for control
/// actors); Engine::run seals it. GPU hosts compute at kHostSpeedFlops with kHostCores cores (below).
/// Links are listed in creation order: per node its NIC (NIC per node), its host link (two sockets), then per GPU its
/// NIC (NIC per GPU) and its intra link; then the links SimGrid's fat-tree or torus builder created (fat-tree leaf
/// links, which are the NICs, in endpoint order, then the switch links; torus neighbour links per position and
/// dimension). Routes per topology are described in platform.cpp. Throws std::logic_error on impossible input (the
/// scenario parser has already validated shapes and values).
[[nodiscard]] Platform build_platform(const ClusterSpec& cluster);

/// Which links the statistics visit at each simulated time step: every link, or only the links reported in use with
/// note_links_in_use (for a caller that reports the links of every flow it starts). The figures are the same, since a
/// link that carries no flow has no usage; the second costs O(links in use) per time step instead of O(links).
enum class LinkVisits { every_link, noted_links };

/// Starts recording per-link statistics. Call after the engine is created and before build_platform(); at most once
/// per process. Bytes and busy time are integrated exactly from the link's usage over every simulated time step
/// (see link_stats.cpp for why not SimGrid's sg_link_load plugin alone).
void enable_link_stats(LinkVisits visits = LinkVisits::every_link);

/// With LinkVisits::noted_links: a flow over `links` (a route, Host::route_to) is about to start. Every flow's links
/// must be noted before it starts, or its links' figures are missed. Untracked links are ignored.
void note_links_in_use(const std::vector<simgrid::s4u::Link*>& links);

/// A tracked link's statistics (link_stats.cpp), as note_links_in_use needs them.
struct LinkNote;
/// The notes of a route's tracked links, looked up once: a caller that starts many flows over the same route notes
/// them with the overload below without finding each link's statistics again (empty when stats are not enabled).
[[nodiscard]] std::vector<LinkNote*> link_notes(const std::vector<simgrid::s4u::Link*>& links);
/// note_links_in_use(links) with link_notes(links).
void note_links_in_use(const std::vector<LinkNote*>& notes);

/// A flow of `bytes` at `rate` B/s that no other flow shared a link with, timed without SimGrid (the flow engine's
/// collectives on links of their own): its links' figures as the integration would have counted them (bytes, busy
/// for bytes / rate, peak at least rate).
void add_unshared_flow(const std::vector<LinkNote*>& notes, double bytes, double rate);

struct LinkStats {
  std::string name;
  std::string role;
  double bytes;            ///< bytes that crossed this link direction
  double busy_s;           ///< time during which at least one flow was transmitting on it
  double peak_utilisation; ///< highest usage / bandwidth over the run, in [0, 1]
  double mean_utilisation; ///< bytes / (bandwidth x makespan)
};

/// Statistics of every link of `p` (same order as p.links) after the run. Throws std::logic_error when
/// enable_link_stats() was not called before build_platform().
[[nodiscard]] std::vector<LinkStats> collect_link_stats(const Platform& p, double makespan_s);

} // namespace ddlsim::sim::flow
