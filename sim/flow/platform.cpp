// Builds the flow engine's SimGrid platform (platform.hpp) with SimGrid 3.32's S4U platform API: NetZone.hpp
// (create_star_zone, StarZone::add_route(src, nullptr, ...) for a netpoint's links to the centre, add_bypass_route,
// create_fatTree_zone / create_torus_zone with ClusterCallbacks) and the hierarchical-zone pattern of
// examples/cpp/clusters-multicpu/s4u-clusters-multicpu.cpp (a node as a sub-zone whose gateway is a router).
//
// Names: GPU hosts `node<n>-gpu<k>`, dedicated parameter-server hosts `server<s>` (star only, after the workers,
// each behind its NIC `server<s>-nic`); links (split-duplex, directions `_UP` towards the network and `_DOWN` back)
// `node<n>-gpu<k>-intra` (GPU into its node's fabric), `node<n>-host` (two sockets: the host link between them, `_UP`
// from socket 0 to 1), `node<n>-nic` (NIC per node) or `node<n>-gpu<k>-nic` (NIC per GPU). "Endpoints" are the
// network's leaves: the nodes, or the GPUs with a NIC per GPU. A single node has no network (no NIC, no topology); a
// node with one GPU has no intra link.
//
// Routes (links crossed, in order; the route latency is the sum of their latencies):
// - same node, GPU a -> GPU b: a-intra_UP, b-intra_DOWN (a rule of NodeStarZone, or a bypass route in SimGrid's
//   zones; the NIC is not crossed); with two sockets, between GPUs of different halves, the node's host link between
//   them (node<n>-host_UP from socket 0 to 1, _DOWN back).
// - star, other node: nic(a)_UP, nic(b)_DOWN, where nic(x) is x's node NIC or x's own NIC. The intra links are not on
//   inter-node routes (GPUDirect RDMA). One flat NodeStarZone holds every GPU: each GPU's star route is its NIC.
// - fat-tree (SimGrid's FatTreeZone, d-mod-k routing): the leaves are the endpoints and a leaf's links to its parent
//   switches ARE its NIC links: created by create_fatTree_zone with `topology.link`, then retuned to `inter_node`
//   bandwidth and latency (SimGrid gives every tree link the same characteristics, and its limiter callback would
//   add one link shared by both directions and by forwarding, which is not a NIC). Route: nic(a)_UP, up links
//   (`topology.link`) to the lowest common ancestor switch, down links, nic(b)_DOWN. With up[0] x parallel[0] > 1
//   a leaf has that many NIC ports (multi-rail), chosen per destination by d-mod-k. A one-level tree is the star.
//   Endpoint netpoints are node sub-zones (NIC per node, several GPUs; gateway router `node<n>-gw`, reached from
//   the GPUs over no link) or GPU hosts (NIC per GPU, or one GPU per node).
// - ring / torus (SimGrid's TorusZone, dimension-order routing, shortest direction per dimension): every endpoint is
//   a sub-zone whose gateway router sits behind the endpoint's NIC. Route: nic(a)_UP, the neighbour links
//   (`topology.link`) of each hop, nic(b)_DOWN. With a NIC per GPU and several GPUs per node, each GPU is its own
//   sub-zone `node<n>-gpu<k>-port` (GPU, gateway `-gw` behind the NIC, router `-ip` reached over no link) and
//   same-node routes are zone-level bypass routes between the `-ip` routers over the intra links.
// Zones: root "platform" (a StarZone that routes nothing, holds ddlsim's links, left unsealed) > "network" (the
// topology's zone) > node or port sub-zones where listed above (node zones are NodeStarZones). Memory is linear in
// the number of GPUs (no full routing table; g(g-1) bypass routes per node only with a NIC per GPU on a fat-tree or
// torus); building is linear too, except that SimGrid 3.32 checks every new host and link name against every zone,
// so with one sub-zone per endpoint (fat-tree with NIC per node, torus) it grows with endpoints x (hosts + links):
// ~0.5 s for 1,024 nodes x 8 GPUs, ~5 s for a torus of 8,192 GPUs with a NIC each (8,192 sub-zones).
#include "sim/flow/platform.hpp"

#include <simgrid/kernel/routing/NetPoint.hpp>
#include <simgrid/kernel/routing/NetZoneImpl.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Host.hpp>
#include <simgrid/s4u/Link.hpp>
#include <simgrid/s4u/NetZone.hpp>
#include <xbt/log.h>

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string_view>
#include <utility>

namespace ddlsim::sim::flow {
namespace {

namespace sg4 = simgrid::s4u;
using simgrid::kernel::routing::NetPoint;
using Direction = sg4::LinkInRoute::Direction;

void require(bool ok, const std::string& what) {
  if (!ok)
    throw std::logic_error("flow platform: " + what);
}

void check_link(const LinkSpec& l, const char* what) {
  require(l.bandwidth > 0, fmt::format("{} bandwidth must be positive (got {} B/s)", what, l.bandwidth));
  require(l.latency_s >= 0, fmt::format("{} latency must not be negative (got {} s)", what, l.latency_s));
}

// Parses SimGrid 3.32's fat-tree link names, "link_from_<child>_<parent>_<serial>_UP|_DOWN" (FatTreeZone::add_link).
struct TreeLinkName {
  long child = 0;
  long serial = 0;
  bool up = false;
};
bool parse_tree_link(std::string_view name, TreeLinkName& out) {
  constexpr std::string_view prefix = "link_from_";
  if (!name.starts_with(prefix))
    return false;
  name.remove_prefix(prefix.size());
  long fields[3] = {0, 0, 0};
  for (long& f : fields) {
    auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), f);
    if (ec != std::errc{} || end == name.data() + name.size() || *end != '_')
      return false;
    name.remove_prefix(static_cast<size_t>(end - name.data()) + 1);
  }
  if (name != "UP" && name != "DOWN")
    return false;
  out = {fields[0], fields[2], name == "UP"};
  return true;
}

// The star of GPU hosts (the star network, and each node's sub-zone in a fat-tree or torus): SimGrid's StarZone
// routing (a route is the source's links up, then the destination's links down) with the same-node routes over the
// intra links given by a rule instead of g(g-1) bypass routes per node. SimGrid 3.32 looks every route's bypass up
// in one std::map of the zone's bypass routes (NetZoneImpl::get_bypass_route), 57,000 of them for 8,192 GPUs, and
// StarZone::get_local_route builds an unordered_set per route: with a route lookup per flow that was ~5 % of the
// instructions of a 1,024-GPU run without node symmetry, and ~40 % of the wall time at 8,192 GPUs (cache misses).
// The routes (links, order, latencies) are the same.
class NodeStarZone final : public simgrid::kernel::routing::NetZoneImpl {
public:
  explicit NodeStarZone(const std::string& name) : NetZoneImpl(name) {}

  /// As StarZone::add_route(point, nullptr, gateway, nullptr, {up}, true): `point` reaches the centre over `up` and
  /// is reached over `down`.
  void set_links(const NetPoint* point, sg4::Link* up, sg4::Link* down, NetPoint* gateway = nullptr) {
    auto& v = vertex(point);
    v.up = Hop(up);
    v.down = Hop(down);
    v.gateway = gateway;
  }
  /// A GPU of `node`: another GPU of the same node is reached over this GPU's intra link up, then the other's down;
  /// with two sockets (`host` not null, `socket` 0 or 1), a GPU of the other socket over the node's host link between
  /// them (its UP direction from socket 0 to 1, DOWN from 1 to 0).
  void set_intra(const NetPoint* point, int node, const sg4::SplitDuplexLink* intra,
                 const sg4::SplitDuplexLink* host = nullptr, int socket = 0) {
    auto& v = vertex(point);
    v.node = node;
    v.socket = socket;
    v.intra_up = Hop(intra->get_link_up());
    v.intra_down = Hop(intra->get_link_down());
    if (host != nullptr)
      v.host_out = Hop(socket == 0 ? host->get_link_up() : host->get_link_down());
  }

protected:
  void get_local_route(const NetPoint* src, const NetPoint* dst, simgrid::kernel::routing::Route* into,
                       double* latency) override {
    const Vertex& a = points_[src->id()];
    const Vertex& b = points_[dst->id()];
    if (src != dst && a.node >= 0 && a.node == b.node) {
      a.intra_up.add_to(into, latency);
      if (a.socket != b.socket)
        a.host_out.add_to(into, latency);
      b.intra_down.add_to(into, latency);
      return;
    }
    a.up.add_to(into, latency);
    if (b.down.impl != a.up.impl)
      b.down.add_to(into, latency);
    into->gw_src_ = a.gateway;
    into->gw_dst_ = b.gateway;
  }

private:
  void do_seal() override { points_.resize(get_table_size()); } // every point without links: empty star routes

  // A link of a route; its implementation looked up once (Link::get_impl is a dynamic_cast).
  struct Hop {
    sg4::Link* link = nullptr;
    simgrid::kernel::resource::StandardLinkImpl* impl = nullptr;
    Hop() = default;
    explicit Hop(sg4::Link* l) : link(l), impl(l != nullptr ? l->get_impl() : nullptr) {}
    void add_to(simgrid::kernel::routing::Route* into, double* latency) const {
      if (link == nullptr)
        return;
      into->link_list_.push_back(impl);
      if (latency != nullptr)
        *latency += link->get_latency();
    }
  };
  struct Vertex {
    Hop up, down;
    NetPoint* gateway = nullptr;
    int node = -1;
    int socket = 0;
    Hop intra_up, intra_down, host_out;
  };

  Vertex& vertex(const NetPoint* point) {
    require(point->get_englobing_zone() == this, "a route's end point is not in its zone");
    if (point->id() >= points_.size())
      points_.resize(point->id() + 1);
    return points_[point->id()];
  }

  std::vector<Vertex> points_;
};

NodeStarZone* create_node_star_zone(const std::string& name, sg4::NetZone* parent) {
  auto* zone = new NodeStarZone(name); // owned by its parent zone
  zone->get_iface()->set_parent(parent);
  return zone;
}

class Builder {
public:
  explicit Builder(const ClusterSpec& c)
      : c_(c), g_(c.gpus_per_node), per_gpu_(c.nic_per_gpu), network_(c.nodes > 1 || c.server_hosts > 0) {
    require(c.nodes >= 1 && g_ >= 1,
            fmt::format("needs at least one node and one GPU per node (got {} x {})", c.nodes, g_));
    if (g_ > 1)
      check_link(c.intra, "intra_node");
    if (c.fabric == Fabric::two_sockets)
      check_link(c.host_link, "intra_node.host_link");
    if (network_)
      check_link(c.inter, "inter_node");
    require(c.server_hosts >= 0, "the number of server hosts must not be negative");
    p_.gpus.resize(static_cast<size_t>(c.workers() + c.server_hosts));
    intra_.resize(p_.gpus.size(), nullptr);
  }

  Platform build() {
    require(sg4::Engine::get_instance()->get_netzone_root() == nullptr,
            "the engine already has a platform (one platform per engine, one engine per process)");
    const TopologyKind kind = c_.topology.kind;
    const bool star = !network_ || kind == TopologyKind::star;
    require(star || c_.server_hosts == 0, "dedicated server hosts need a star topology");
    // The root zone routes nothing: it holds ddlsim's links and the network zone, and stays unsealed so that the
    // caller may add zones beside the network (Engine::run seals the platform).
    root_ = sg4::create_star_zone("platform");
    make_links(root_, star || kind != TopologyKind::fat_tree); // a fat-tree's NICs are its leaf links
    if (star)
      build_star();
    else if (kind == TopologyKind::fat_tree)
      build_fat_tree();
    else
      build_torus();
    return std::move(p_);
  }

private:
  [[nodiscard]] size_t rank(int node, int k) const { return static_cast<size_t>(node) * g_ + k; }
  [[nodiscard]] size_t endpoint(int node, int k) const { return per_gpu_ ? rank(node, k) : static_cast<size_t>(node); }

  sg4::SplitDuplexLink* make_link(sg4::NetZone* zone, const std::string& name, const LinkSpec& spec, const char* role) {
    auto* link = zone->create_split_duplex_link(name, spec.bandwidth);
    link->set_latency(spec.latency_s);
    link->seal();
    p_.links.push_back({name + "_UP", link->get_link_up(), role, spec.bandwidth, spec.latency_s});
    p_.links.push_back({name + "_DOWN", link->get_link_down(), role, spec.bandwidth, spec.latency_s});
    return link;
  }

  // Creates ddlsim's links, all in `zone`, before any sub-zone exists: SimGrid 3.32 checks a new link's or host's
  // name against every zone (NetZoneImpl::get_link_by_name_or_null recurses), which is quadratic once there are
  // thousands of sub-zones. Per node: its NIC (NIC per node), its host link (two sockets), then per GPU its NIC (NIC
  // per GPU) and intra link.
  void make_links(sg4::NetZone* zone, bool nics) {
    nics &= network_;
    if (nics)
      nics_.resize(static_cast<size_t>(c_.endpoints()), nullptr);
    for (int node = 0; node < c_.nodes; ++node) {
      if (nics && !per_gpu_)
        nics_[endpoint(node, 0)] = make_link(zone, fmt::format("node{}-nic", node), c_.inter, "nic");
      if (c_.fabric == Fabric::two_sockets)
        hosts_.push_back(make_link(zone, fmt::format("node{}-host", node), c_.host_link, "host"));
      for (int k = 0; k < g_; ++k) {
        if (nics && per_gpu_)
          nics_[endpoint(node, k)] = make_link(zone, fmt::format("node{}-gpu{}-nic", node, k), c_.inter, "nic");
        if (g_ > 1)
          intra_[rank(node, k)] = make_link(zone, fmt::format("node{}-gpu{}-intra", node, k), c_.intra, "intra");
      }
    }
    for (int sv = 0; sv < c_.server_hosts; ++sv) // star only (checked in build)
      server_nics_.push_back(make_link(zone, fmt::format("server{}-nic", sv), c_.inter, "nic"));
  }

  sg4::Host* make_gpu(sg4::NetZone* zone, int node, int k) {
    auto* host = zone->create_host(fmt::format("node{}-gpu{}", node, k), kHostSpeedFlops)->set_core_count(kHostCores);
    p_.gpus[rank(node, k)] = host;
    return host;
  }

  [[nodiscard]] int socket(int k) const { return c_.fabric == Fabric::two_sockets && k >= g_ / 2 ? 1 : 0; }

  // GPU a -> GPU b of one node: a's intra link up, the host link between the sockets where they differ (UP from
  // socket 0 to 1), b's intra link down.
  [[nodiscard]] std::vector<sg4::LinkInRoute> intra_route(size_t a, size_t b) const {
    std::vector<sg4::LinkInRoute> route{sg4::LinkInRoute(intra_[a], Direction::UP)};
    const int sa = socket(static_cast<int>(a % static_cast<size_t>(g_)));
    if (sa != socket(static_cast<int>(b % static_cast<size_t>(g_))))
      route.emplace_back(hosts_[a / static_cast<size_t>(g_)], sa == 0 ? Direction::UP : Direction::DOWN);
    route.emplace_back(intra_[b], Direction::DOWN);
    return route;
  }

  // Same-node routes between GPU hosts that are direct members of `zone` (SimGrid's zones: the fat-tree with a NIC per
  // GPU).
  void add_host_bypasses(sg4::NetZone* zone, int node) const {
    for (int a = 0; a < g_; ++a)
      for (int b = 0; b < g_; ++b)
        if (a != b)
          zone->add_bypass_route(p_.gpus[rank(node, a)]->get_netpoint(), p_.gpus[rank(node, b)]->get_netpoint(),
                                 nullptr, nullptr, intra_route(rank(node, a), rank(node, b)));
  }

  // The same in a NodeStarZone: a rule per GPU.
  void add_intra_routes(NodeStarZone* zone, int node) const {
    if (g_ > 1)
      for (int k = 0; k < g_; ++k)
        zone->set_intra(p_.gpus[rank(node, k)]->get_netpoint(), node, intra_[rank(node, k)],
                        hosts_.empty() ? nullptr : hosts_[static_cast<size_t>(node)], socket(k));
  }

  // In a StarZone a route is src's links up + dst's links down. Giving a gateway router the NIC reversed makes
  // GPU -> gateway cross nic_UP and gateway -> GPU cross nic_DOWN, while GPU -> GPU crosses no NIC.
  static void put_behind(sg4::NetZone* zone, NetPoint* gw, const sg4::SplitDuplexLink* nic) {
    zone->add_route(gw, nullptr, nullptr, nullptr, {sg4::LinkInRoute(nic, Direction::DOWN)}, true);
  }
  static void put_behind(NodeStarZone* zone, NetPoint* gw, const sg4::SplitDuplexLink* nic) {
    zone->set_links(gw, nic->get_link_down(), nic->get_link_up());
  }

  // A node's sub-zone: its GPUs reach the gateway router `node<n>-gw` over no link (their star routes are empty),
  // or over the node's NIC when `nic` is given; same-node pairs go over the intra links.
  std::pair<NetPoint*, NetPoint*> make_node_zone(sg4::NetZone* parent, int node, const sg4::SplitDuplexLink* nic) {
    auto* impl = create_node_star_zone(fmt::format("node{}", node), parent);
    auto* zone = impl->get_iface();
    NetPoint* gw = zone->create_router(fmt::format("node{}-gw", node));
    if (nic != nullptr)
      put_behind(impl, gw, nic);
    for (int k = 0; k < g_; ++k)
      make_gpu(zone, node, k);
    add_intra_routes(impl, node);
    zone->seal();
    return {zone->get_netpoint(), gw};
  }

  // One flat star: every GPU's route to the centre is its NIC (its node's, or its own).
  void build_star() {
    auto* impl = create_node_star_zone("network", root_);
    auto* net = impl->get_iface();
    for (int node = 0; node < c_.nodes; ++node) {
      for (int k = 0; k < g_; ++k) {
        auto* host = make_gpu(net, node, k);
        if (!nics_.empty()) {
          const auto* nic = nics_[endpoint(node, k)];
          impl->set_links(host->get_netpoint(), nic->get_link_up(), nic->get_link_down());
        }
      }
      add_intra_routes(impl, node);
    }
    // Dedicated parameter servers: one host each, behind its own NIC, ranks after the workers.
    for (int sv = 0; sv < c_.server_hosts; ++sv) {
      auto* host = net->create_host(fmt::format("server{}", sv), kHostSpeedFlops)->set_core_count(kHostCores);
      p_.gpus[static_cast<size_t>(c_.workers() + sv)] = host;
      const auto* nic = server_nics_[static_cast<size_t>(sv)];
      impl->set_links(host->get_netpoint(), nic->get_link_up(), nic->get_link_down());
    }
    net->seal();
  }

  void build_fat_tree() {
    const auto& t = c_.topology;
    check_link(t.link, "topology link");
    const size_t levels = t.down.size();
    require(levels >= 1 && t.up.size() == levels && t.parallel.size() == levels,
            "a fat-tree needs down, up and parallel of the same length >= 1");
    const long endpoints = c_.endpoints();
    long leaves = 1;
    for (unsigned d : t.down)
      leaves *= d;
    require(leaves == endpoints, fmt::format("the fat-tree has {} leaves for {} endpoints", leaves, endpoints));

    const bool node_zones = !per_gpu_ && g_ > 1;
    sg4::ClusterCallbacks callbacks([this, node_zones](sg4::NetZone* zone, const std::vector<unsigned long>& /*coord*/,
                                                       unsigned long id) -> std::pair<NetPoint*, NetPoint*> {
      const int e = static_cast<int>(id);
      if (node_zones)
        return make_node_zone(zone, e, nullptr);
      return {make_gpu(zone, per_gpu_ ? e / g_ : e, per_gpu_ ? e % g_ : 0)->get_netpoint(), nullptr};
    });
    sg4::NetZone* net = nullptr;
    try {
      net = sg4::create_fatTree_zone(
          "network", root_, sg4::FatTreeParams(static_cast<unsigned>(levels), t.down, t.up, t.parallel), callbacks,
          t.link.bandwidth, t.link.latency_s, sg4::Link::SharingPolicy::SPLITDUPLEX);
    } catch (const std::invalid_argument& e) {
      throw std::logic_error(std::string("flow platform: ") + e.what());
    }
    if (per_gpu_)
      for (int node = 0; node < c_.nodes; ++node)
        add_host_bypasses(net, node);
    adopt_fat_tree_links(static_cast<size_t>(endpoints) * t.up[0] * t.parallel[0]);
    net->seal();
  }

  // FatTreeZone::add_link numbers links in creation order, leaves first: the first `leaf_links` serials are the
  // leaves' links to their parents, the NICs. Retune them to inter_node and label them; the rest are switch links.
  void adopt_fat_tree_links(size_t leaf_links) {
    struct Found {
      TreeLinkName name;
      sg4::Link* link;
    };
    std::vector<Found> found;
    for (sg4::Link* l : sg4::Engine::get_instance()->get_all_links()) {
      TreeLinkName n;
      if (parse_tree_link(l->get_name(), n))
        found.push_back({n, l});
    }
    std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) {
      return a.name.serial != b.name.serial ? a.name.serial < b.name.serial : a.name.up > b.name.up;
    });
    require(found.size() % 2 == 0 && found.size() / 2 >= leaf_links,
            fmt::format("found {} fat-tree link directions, expected at least {} leaf links (SimGrid naming changed?)",
                        found.size(), 2 * leaf_links));
    const size_t ports = leaf_links / static_cast<size_t>(c_.endpoints()); // up[0] x parallel[0]
    std::vector<int> next_port(static_cast<size_t>(c_.endpoints()), 0);
    for (size_t i = 0; i < found.size(); ++i) {
      auto& [n, link] = found[i];
      if (i / 2 >= leaf_links) {
        p_.links.push_back({link->get_name(), link, "switch", link->get_bandwidth(), link->get_latency()});
        continue;
      }
      require(n.child >= 0 && n.child < c_.endpoints(),
              fmt::format("fat-tree leaf link {} does not start at a leaf", link->get_name()));
      link->set_bandwidth(c_.inter.bandwidth);
      link->set_latency(c_.inter.latency_s);
      const int e = static_cast<int>(n.child);
      std::string label = per_gpu_ ? fmt::format("node{}-gpu{}-nic", e / g_, e % g_) : fmt::format("node{}-nic", e);
      if (ports > 1)
        label += std::to_string(n.up ? next_port[static_cast<size_t>(e)] : next_port[static_cast<size_t>(e)]++);
      p_.links.push_back({label + (n.up ? "_UP" : "_DOWN"), link, "nic", c_.inter.bandwidth, c_.inter.latency_s});
    }
  }

  void build_torus() {
    const auto& t = c_.topology;
    check_link(t.link, "topology link");
    const long endpoints = c_.endpoints();
    std::vector<unsigned long> dims(t.dimensions.begin(), t.dimensions.end());
    long size = 1;
    for (auto d : dims)
      size *= static_cast<long>(d);
    require(!dims.empty() && size == endpoints,
            fmt::format("the torus has {} positions for {} endpoints", size, endpoints));

    const bool gpu_ports = per_gpu_ && g_ > 1;
    std::vector<std::pair<NetPoint*, NetPoint*>> ports(gpu_ports ? p_.gpus.size() : 0); // port zone, its -ip router
    sg4::ClusterCallbacks callbacks([this, gpu_ports, &ports](sg4::NetZone* zone,
                                                              const std::vector<unsigned long>& /*coord*/,
                                                              unsigned long id) -> std::pair<NetPoint*, NetPoint*> {
      const auto e = static_cast<size_t>(id);
      if (!gpu_ports)
        return make_node_zone(zone, static_cast<int>(e), nics_[e]);
      const int node = static_cast<int>(e) / g_;
      const int k = static_cast<int>(e) % g_;
      const std::string name = fmt::format("node{}-gpu{}", node, k);
      auto* port = sg4::create_star_zone(name + "-port");
      port->set_parent(zone);
      NetPoint* gw = port->create_router(name + "-gw");
      put_behind(port, gw, nics_[e]);
      make_gpu(port, node, k);
      ports[e] = {port->get_netpoint(), port->create_router(name + "-ip")};
      port->seal();
      return {port->get_netpoint(), gw};
    });
    sg4::NetZone* net = nullptr;
    try {
      net = sg4::create_torus_zone("network", root_, dims, callbacks, t.link.bandwidth, t.link.latency_s,
                                   sg4::Link::SharingPolicy::SPLITDUPLEX);
    } catch (const std::invalid_argument& e) {
      throw std::logic_error(std::string("flow platform: ") + e.what());
    }
    if (gpu_ports)
      for (int node = 0; node < c_.nodes; ++node)
        for (int a = 0; a < g_; ++a)
          for (int b = 0; b < g_; ++b)
            if (a != b) {
              const auto& pa = ports[rank(node, a)];
              const auto& pb = ports[rank(node, b)];
              net->add_bypass_route(pa.first, pb.first, pa.second, pb.second,
                                    intra_route(rank(node, a), rank(node, b)));
            }
    adopt_torus_links(net->get_name(), dims);
    net->seal();
  }

  // The neighbour links TorusZone::create_torus_links made, in its order: per position, per dimension, a link to
  // the next position along that dimension (wrapping), named "<zone>_link_from_<i>_to_<next>".
  void adopt_torus_links(const std::string& zone, const std::vector<unsigned long>& dims) {
    const auto* engine = sg4::Engine::get_instance();
    unsigned long total = 1;
    for (auto d : dims)
      total *= d;
    for (unsigned long i = 0; i < total; ++i) {
      unsigned long stride = 1;
      for (unsigned long d : dims) {
        const unsigned long next = (i / stride) % d == d - 1 ? i - (d - 1) * stride : i + stride;
        const std::string name = fmt::format("{}_link_from_{}_to_{}", zone, i, next);
        for (const char* dir : {"_UP", "_DOWN"}) {
          sg4::Link* link = engine->link_by_name_or_null(name + dir);
          require(link != nullptr, "torus link " + name + dir + " not found (SimGrid naming changed?)");
          p_.links.push_back({name + dir, link, "switch", link->get_bandwidth(), link->get_latency()});
        }
        stride *= d;
      }
    }
  }

  const ClusterSpec& c_;
  int g_;
  bool per_gpu_;
  bool network_; // more than one node
  Platform p_;
  sg4::NetZone* root_ = nullptr;
  std::vector<sg4::SplitDuplexLink*> intra_;       // by rank; empty entries with one GPU per node
  std::vector<sg4::SplitDuplexLink*> hosts_;       // by node: the host link between its sockets (two sockets)
  std::vector<sg4::SplitDuplexLink*> nics_;        // by endpoint, when ddlsim creates the NICs (star, torus)
  std::vector<sg4::SplitDuplexLink*> server_nics_; // dedicated parameter-server hosts (star)
};

} // namespace

void configure_closed_form(simgrid::s4u::Engine& engine) {
  xbt_log_control_set("root.thresh:critical");
  engine.set_config("network/model:CM02");
  engine.set_config("network/latency-factor:0"); // FlowRun pays every latency as a wait (flow_run.hpp)
  engine.set_config("network/bandwidth-factor:1");
  engine.set_config("network/weight-S:0");
  engine.set_config("network/crosstraffic:0");
  engine.set_config("network/TCP-gamma:0");
}

Platform build_platform(const ClusterSpec& cluster) {
  return Builder(cluster).build();
}

} // namespace ddlsim::sim::flow
