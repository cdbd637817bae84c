// flow platform: the SimGrid platform built from a ClusterSpec (sim/flow/platform.hpp). Routes per topology, flow
// times against their closed forms (alpha-beta with max-min sharing: docs/engines.md, "Link semantics"), link
// statistics, and the build cost at 8,192 GPUs. Every simulation runs in a forked child (SimGrid's Engine is one per
// process).
#include "sim/flow/platform.hpp"

#include "support/run_in_child.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <simgrid/s4u/Actor.hpp>
#include <simgrid/s4u/Comm.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Host.hpp>
#include <simgrid/s4u/Link.hpp>

#include <sys/resource.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace sg4 = simgrid::s4u;
using namespace ddlsim::sim;
using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;
using ddlsim::test::ChildReport;
using ddlsim::test::run_in_child;

namespace {

constexpr double intra_bw = 100e9; // B/s
constexpr double intra_lat = 1e-6;
constexpr double inter_bw = 12.5e9;
constexpr double inter_lat = 5e-6;
constexpr double topo_bw = 25e9;
constexpr double topo_lat = 2e-6;
constexpr double rel = 1e-9;

ClusterSpec cluster(int nodes, int gpus_per_node, bool nic_per_gpu = false) {
  ClusterSpec c;
  c.nodes = nodes;
  c.gpus_per_node = gpus_per_node;
  c.intra = {intra_bw, intra_lat};
  c.inter = {inter_bw, inter_lat};
  c.nic_per_gpu = nic_per_gpu;
  return c;
}

ClusterSpec fat_tree(ClusterSpec c, std::vector<unsigned> down, std::vector<unsigned> up) {
  c.topology.kind = TopologyKind::fat_tree;
  c.topology.parallel.assign(down.size(), 1);
  c.topology.down = std::move(down);
  c.topology.up = std::move(up);
  c.topology.link = {topo_bw, topo_lat};
  return c;
}

ClusterSpec torus(ClusterSpec c, std::vector<unsigned> dimensions) {
  c.topology.kind = dimensions.size() == 1 ? TopologyKind::ring : TopologyKind::torus;
  c.topology.dimensions = std::move(dimensions);
  c.topology.link = {topo_bw, topo_lat};
  return c;
}

struct Route {
  std::string names; ///< LinkInfo names, space separated
  std::string roles; ///< LinkInfo roles, space separated
  double latency_s;
};

// Builds the platform in a child and resolves the routes between the given ranks with Host::route_to.
std::vector<Route> routes(const ClusterSpec& c, const std::vector<std::pair<int, int>>& pairs) {
  const ChildReport r = run_in_child([&](ChildReport& out) {
    sg4::Engine engine("test");
    flow::configure_closed_form(engine);
    const auto p = flow::build_platform(c);
    std::map<const sg4::Link*, const flow::LinkInfo*> info;
    for (const auto& l : p.links)
      info[l.link] = &l;
    for (auto [a, b] : pairs) {
      std::vector<sg4::Link*> links;
      double latency = 0;
      p.gpus.at(static_cast<size_t>(a))->route_to(p.gpus.at(static_cast<size_t>(b)), links, &latency);
      std::string names;
      std::string roles;
      for (const sg4::Link* l : links) {
        names += (names.empty() ? "" : " ") + info.at(l)->name;
        roles += (roles.empty() ? "" : " ") + info.at(l)->role;
      }
      out.texts.push_back(names);
      out.texts.push_back(roles);
      out.values.push_back(latency);
    }
  });
  REQUIRE(r.error.empty());
  REQUIRE(r.values.size() == pairs.size());
  std::vector<Route> out;
  for (size_t i = 0; i < pairs.size(); ++i)
    out.push_back({r.texts[2 * i], r.texts[2 * i + 1], r.values[i]});
  return out;
}

struct Transfer {
  int src;
  int dst;
  double bytes;
  double start_s = 0;
};

struct Run {
  std::vector<double> done_s;                       ///< completion time of each transfer
  std::map<std::string, std::vector<double>> stats; ///< by link name: bytes, busy_s, peak, mean utilisation
};

// Starts each transfer at its start time (one actor each, Comm::sendto) and reports when each completes. With
// LinkVisits::noted_links, each transfer's route is noted just before it starts.
Run transfers(const ClusterSpec& c, const std::vector<Transfer>& flows, bool stats = false,
              flow::LinkVisits visits = flow::LinkVisits::every_link) {
  const ChildReport r = run_in_child([&](ChildReport& out) {
    sg4::Engine engine("test");
    flow::configure_closed_form(engine);
    if (stats)
      flow::enable_link_stats(visits);
    const auto p = flow::build_platform(c);
    std::vector<double> done(flows.size(), -1);
    for (size_t i = 0; i < flows.size(); ++i) {
      sg4::Host* src = p.gpus.at(static_cast<size_t>(flows[i].src));
      sg4::Host* dst = p.gpus.at(static_cast<size_t>(flows[i].dst));
      const auto bytes = static_cast<std::uint64_t>(flows[i].bytes);
      const double start = flows[i].start_s;
      sg4::Actor::create("flow" + std::to_string(i), src, [&done, i, src, dst, bytes, start] {
        if (start > 0)
          sg4::this_actor::sleep_for(start);
        std::vector<sg4::Link*> route;
        double latency = 0;
        src->route_to(dst, route, &latency);
        flow::note_links_in_use(route); // ignored unless LinkVisits::noted_links
        sg4::Comm::sendto(src, dst, bytes);
        done[i] = sg4::Engine::get_clock();
      });
    }
    engine.run();
    out.values = done;
    if (stats)
      for (const auto& s : flow::collect_link_stats(p, sg4::Engine::get_clock())) {
        out.texts.push_back(s.name);
        out.values.insert(out.values.end(), {s.bytes, s.busy_s, s.peak_utilisation, s.mean_utilisation});
      }
  });
  REQUIRE(r.error.empty());
  Run run;
  run.done_s.assign(r.values.begin(), r.values.begin() + static_cast<long>(flows.size()));
  for (size_t i = 0; i < r.texts.size(); ++i) {
    const auto at = r.values.begin() + static_cast<long>(flows.size() + 4 * i);
    run.stats[r.texts[i]] = {at, at + 4};
  }
  return run;
}

} // namespace

TEST_CASE("flow::build_platform routes inside a node over two intra links, across a star over two NICs",
          "[flow][platform]") {
  SECTION("NIC per node: GPUs of a node share it") {
    // ranks 0..5 = node0-gpu0, node0-gpu1, node1-gpu0, ...
    const auto r = routes(cluster(3, 2), {{0, 1}, {1, 0}, {0, 2}, {1, 5}});
    // same node: sender's intra link up, receiver's down; alpha = 2 x intra latency
    CHECK(r[0].names == "node0-gpu0-intra_UP node0-gpu1-intra_DOWN");
    CHECK_THAT(r[0].latency_s, WithinRel(2 * intra_lat, rel));
    CHECK(r[1].names == "node0-gpu1-intra_UP node0-gpu0-intra_DOWN");
    // other node: exactly the two NICs, no intra link (GPUDirect RDMA); alpha = 2 x inter latency
    CHECK(r[2].names == "node0-nic_UP node1-nic_DOWN");
    CHECK_THAT(r[2].latency_s, WithinRel(2 * inter_lat, rel));
    CHECK(r[3].names == "node0-nic_UP node2-nic_DOWN");
  }
  SECTION("NIC per GPU: each GPU crosses its own") {
    const auto r = routes(cluster(3, 2, true), {{0, 1}, {1, 4}, {5, 0}});
    CHECK(r[0].names == "node0-gpu0-intra_UP node0-gpu1-intra_DOWN");
    CHECK(r[1].names == "node0-gpu1-nic_UP node2-gpu0-nic_DOWN");
    CHECK_THAT(r[1].latency_s, WithinRel(2 * inter_lat, rel));
    CHECK(r[2].names == "node2-gpu1-nic_UP node0-gpu0-nic_DOWN");
  }
  SECTION("a single node has no network: no NIC, intra links only") {
    const auto r = routes(cluster(1, 4), {{0, 3}, {3, 1}});
    CHECK(r[0].names == "node0-gpu0-intra_UP node0-gpu3-intra_DOWN");
    CHECK(r[1].names == "node0-gpu3-intra_UP node0-gpu1-intra_DOWN");
  }
}

TEST_CASE("flow::build_platform fat-tree: the leaf links are the NICs, switch links use topology.link",
          "[flow][platform][fat-tree]") {
  SECTION("NIC per node, 8 nodes of 2 GPUs under 2 leaf switches and a root") {
    // down {4, 2}, up {1, 1}: leaves 0-3 under switch A, 4-7 under switch B, A and B under the root
    const auto r = routes(fat_tree(cluster(8, 2), {4, 2}, {1, 1}), {{0, 1}, {0, 2}, {0, 15}, {9, 6}});
    CHECK(r[0].names == "node0-gpu0-intra_UP node0-gpu1-intra_DOWN");
    // same leaf switch: NIC up, NIC down; alpha = 2 x inter latency (a one-level tree is the star)
    CHECK(r[1].names == "node0-nic_UP node1-nic_DOWN");
    CHECK_THAT(r[1].latency_s, WithinRel(2 * inter_lat, rel));
    // across the root: NIC, A -> root, root -> B, NIC; alpha = 2 x inter + 2 x switch-link latency
    CHECK(r[2].roles == "nic switch switch nic");
    CHECK_THAT(r[2].names, Contains("node0-nic_UP") && Contains("node7-nic_DOWN"));
    CHECK_THAT(r[2].latency_s, WithinRel(2 * inter_lat + 2 * topo_lat, rel));
    CHECK(r[3].roles == "nic switch switch nic");
    CHECK_THAT(r[3].names, Contains("node4-nic_UP") && Contains("node3-nic_DOWN"));
  }
  SECTION("NIC per GPU with two ports per leaf (up[0] = 2), chosen by d-mod-k") {
    // 8 nodes x 2 GPUs = 16 leaves, down {4, 4}, up {2, 1}: every leaf has 2 NIC ports to 2 of 8 switches
    const auto r = routes(fat_tree(cluster(8, 2, true), {4, 4}, {2, 1}), {{0, 1}, {0, 2}, {0, 3}, {0, 15}});
    CHECK(r[0].names == "node0-gpu0-intra_UP node0-gpu1-intra_DOWN");
    // destination position 2: port 2 mod 2 = 0 up, and down the destination's link to that switch, its port 0
    CHECK(r[1].names == "node0-gpu0-nic0_UP node1-gpu0-nic0_DOWN");
    CHECK(r[2].names == "node0-gpu0-nic1_UP node1-gpu1-nic1_DOWN");
    CHECK(r[3].roles == "nic switch switch nic");
    CHECK_THAT(r[3].latency_s, WithinRel(2 * inter_lat + 2 * topo_lat, rel));
  }
}

TEST_CASE("flow::build_platform fat-tree routes climb to the lowest common ancestor and back",
          "[flow][platform][fat-tree]") {
  // 16 one-GPU nodes, down {2, 4, 2}, up {2, 2, 2}, parallel {1, 2, 1}: two NIC ports per leaf, parallel cables
  // between levels 1 and 2. Leaves a, b meet at level 1 when a/2 == b/2, level 2 when a/8 == b/8, else at the top;
  // a route meeting at level l crosses 2 l links: NIC up, l - 1 switch links up, as many down, NIC down, and its
  // latency is 2 alpha_nic + 2 (l - 1) alpha_switch.
  auto c = fat_tree(cluster(16, 1), {2, 4, 2}, {2, 2, 2});
  c.topology.parallel = {1, 2, 1};
  std::vector<std::pair<int, int>> pairs;
  for (int a = 0; a < 16; ++a)
    for (int b = 0; b < 16; ++b)
      if (a != b)
        pairs.emplace_back(a, b);
  const auto r = routes(c, pairs);
  for (size_t i = 0; i < pairs.size(); ++i) {
    const auto [a, b] = pairs[i];
    const int level = a / 2 == b / 2 ? 1 : a / 8 == b / 8 ? 2 : 3;
    std::string roles = "nic";
    for (int s = 0; s < 2 * (level - 1); ++s)
      roles += " switch";
    roles += " nic";
    CAPTURE(a, b, r[i].names);
    CHECK(r[i].roles == roles);
    CHECK(r[i].names.rfind(fmt::format("node{}-nic", a), 0) == 0);
    CHECK_THAT(r[i].names, EndsWith("_DOWN") && Contains(fmt::format("node{}-nic", b)));
    CHECK_THAT(r[i].latency_s, WithinRel(2 * inter_lat + 2 * (level - 1) * topo_lat, rel));
  }
}

TEST_CASE("flow::build_platform ring and torus: NIC, one neighbour link per hop, NIC", "[flow][platform][torus]") {
  SECTION("ring of 4 nodes of 2 GPUs, NIC per node") {
    const auto r = routes(torus(cluster(4, 2), {4}), {{0, 1}, {0, 2}, {1, 4}, {0, 6}});
    CHECK(r[0].names == "node0-gpu0-intra_UP node0-gpu1-intra_DOWN");
    // one hop: alpha = 2 x inter + 1 x neighbour latency
    CHECK(r[1].names == "node0-nic_UP network_link_from_0_to_1_UP node1-nic_DOWN");
    CHECK_THAT(r[1].latency_s, WithinRel(2 * inter_lat + topo_lat, rel));
    // two hops, shortest direction (to the right on a tie)
    CHECK(r[2].names == "node0-nic_UP network_link_from_0_to_1_UP network_link_from_1_to_2_UP node2-nic_DOWN");
    CHECK_THAT(r[2].latency_s, WithinRel(2 * inter_lat + 2 * topo_lat, rel));
    // node0 -> node3: one hop to the left, over the wrap-around link 3 -> 0 in its DOWN direction
    CHECK(r[3].names == "node0-nic_UP network_link_from_3_to_0_DOWN node3-nic_DOWN");
  }
  SECTION("2-D torus of GPUs (NIC per GPU): same-node pairs still use the intra links") {
    // 4 nodes x 2 GPUs on a 2 x 4 torus: rank r at coordinates (r % 2, r / 2)
    const auto r = routes(torus(cluster(4, 2, true), {2, 4}), {{0, 1}, {1, 0}, {0, 2}, {1, 6}});
    CHECK(r[0].names == "node0-gpu0-intra_UP node0-gpu1-intra_DOWN");
    CHECK_THAT(r[0].latency_s, WithinRel(2 * intra_lat, rel));
    CHECK(r[1].names == "node0-gpu1-intra_UP node0-gpu0-intra_DOWN");
    CHECK(r[2].names == "node0-gpu0-nic_UP network_link_from_0_to_2_UP node1-gpu0-nic_DOWN");
    CHECK_THAT(r[2].latency_s, WithinRel(2 * inter_lat + topo_lat, rel));
    // (1,0) -> (0,3): x one hop, y one hop to the left over the wrap-around link
    CHECK(r[3].roles == "nic switch switch nic");
    CHECK_THAT(r[3].names, Contains("node0-gpu1-nic_UP") && Contains("node3-gpu0-nic_DOWN"));
  }
}

TEST_CASE("flow::build_platform rejects impossible input with std::logic_error", "[flow][platform]") {
  const ChildReport r = run_in_child([](ChildReport&) {
    sg4::Engine engine("test");
    flow::configure_closed_form(engine);
    (void)flow::build_platform(fat_tree(cluster(8, 1), {4, 4}, {1, 1}));
  });
  CHECK_THAT(r.error, Contains("the fat-tree has 16 leaves for 8 endpoints"));
}

TEST_CASE("flow transfers take their closed-form times (CM02, bandwidth factor 1, no TCP window)",
          "[flow][platform][time]") {
  // SimGrid's latency is off (latency factor 0): FlowRun pays each flow's route latency as a wait before its transfer
  // (flow_run.hpp; tests/flow/test_flow_engine.cpp times whole collectives with it), so a bare comm takes n / B.
  const double n = 100e6; // bytes
  SECTION("one flow between nodes: n / B") {
    const auto run = transfers(cluster(2, 2), {{0, 3, n}});
    CHECK_THAT(run.done_s[0], WithinRel(n / inter_bw, rel));
  }
  SECTION("one flow inside a node: n / B_intra") {
    const auto run = transfers(cluster(2, 2), {{1, 0, n}});
    CHECK_THAT(run.done_s[0], WithinRel(n / intra_bw, rel));
  }
  SECTION("a long latency does not bound the rate (TCP-gamma disabled)") {
    // SimGrid's default gamma = 4 MiB would cap the rate at 4 MiB / (2 x 2 ms) ~ 1 GB/s << 12.5 GB/s
    auto c = cluster(2, 1);
    c.inter.latency_s = 1e-3;
    const auto run = transfers(c, {{0, 1, n}});
    CHECK_THAT(run.done_s[0], WithinRel(n / inter_bw, rel));
  }
  SECTION("two GPUs of a node sending off-node share its NIC: each 2n / B") {
    const auto run = transfers(cluster(2, 2), {{0, 2, n}, {1, 3, n}});
    CHECK_THAT(run.done_s[0], WithinRel(2 * n / inter_bw, rel));
    CHECK_THAT(run.done_s[1], WithinRel(2 * n / inter_bw, rel));
  }
  SECTION("with a NIC per GPU they do not: each n / B") {
    const auto run = transfers(cluster(2, 2, true), {{0, 2, n}, {1, 3, n}});
    CHECK_THAT(run.done_s[0], WithinRel(n / inter_bw, rel));
    CHECK_THAT(run.done_s[1], WithinRel(n / inter_bw, rel));
  }
  SECTION("disjoint pairs on the (non-blocking) star do not interfere: each n / B") {
    const auto run = transfers(cluster(4, 1), {{0, 1, n}, {2, 3, n}, {3, 0, n}});
    for (double t : run.done_s)
      CHECK_THAT(t, WithinRel(n / inter_bw, rel));
  }
  SECTION("a NIC sends and receives at full rate at once (split-duplex): each n / B") {
    const auto run = transfers(cluster(2, 1), {{0, 1, n}, {1, 0, n}});
    for (double t : run.done_s)
      CHECK_THAT(t, WithinRel(n / inter_bw, rel));
  }
  SECTION("fat-tree with oversubscribed leaf switches: 4 flows share one uplink") {
    // down {4, 2}, up {1, 1}: 8 leaves, 2 leaf switches with one uplink each (4:1). Leaves 0-3 -> 4-7: every flow
    // crosses switch A's uplink and switch B's downlink (B_t = 25 GB/s, shared 4 ways = 6.25 GB/s < NIC 12.5 GB/s):
    // each takes 4n / B_t
    const auto run = transfers(fat_tree(cluster(8, 1), {4, 2}, {1, 1}), {{0, 4, n}, {1, 5, n}, {2, 6, n}, {3, 7, n}});
    for (double t : run.done_s)
      CHECK_THAT(t, WithinRel(4 * n / topo_bw, rel));
  }
  SECTION("fat-tree: flows under one leaf switch only cross NICs: n / B") {
    const auto run = transfers(fat_tree(cluster(8, 1), {4, 2}, {1, 1}), {{0, 1, n}, {2, 3, n}});
    for (double t : run.done_s)
      CHECK_THAT(t, WithinRel(n / inter_bw, rel));
  }
  SECTION("ring: two hops, the NIC is the bottleneck: n / B") {
    const auto run = transfers(torus(cluster(4, 1), {4}), {{0, 2, n}});
    CHECK_THAT(run.done_s[0], WithinRel(n / inter_bw, rel));
  }
}

TEST_CASE("flow::collect_link_stats integrates bytes, busy time and utilisation exactly", "[flow][platform][stats]") {
  const double n = 100e6;
  SECTION("one flow: both NICs carry n bytes, busy n / B, peak utilisation 1") {
    const auto run = transfers(cluster(2, 2), {{0, 3, n}}, true);
    const double makespan = n / inter_bw;
    for (const char* nic : {"node0-nic_UP", "node1-nic_DOWN"}) {
      CAPTURE(nic);
      const auto& s = run.stats.at(nic);
      CHECK_THAT(s[0], WithinRel(n, rel));                       // bytes
      CHECK_THAT(s[1], WithinRel(n / inter_bw, rel));            // busy: the transfer
      CHECK_THAT(s[2], WithinRel(1.0, rel));                     // peak: the flow alone at the NIC's bandwidth
      CHECK_THAT(s[3], WithinRel(n / inter_bw / makespan, rel)); // mean = bytes / (B x makespan)
    }
    for (const auto& [name, s] : run.stats)
      if (name != "node0-nic_UP" && name != "node1-nic_DOWN") {
        CAPTURE(name);
        CHECK(s[0] == 0);
        CHECK(s[1] == 0);
      }
  }
  SECTION("two flows of n and n/2 sharing a NIC, one of them alone on the far NIC") {
    // node0-gpu0 -> node1 (n) and node0-gpu1 -> node2 (n/2) share node0-nic_UP at B/2 each until the short one
    // ends at n/B; the long one then runs alone at B for its last n/2 (n/(2B)).
    const auto run = transfers(cluster(3, 2), {{0, 2, n}, {1, 4, n / 2}}, true);
    CHECK_THAT(run.done_s[1], WithinRel(n / inter_bw, rel));
    CHECK_THAT(run.done_s[0], WithinRel(1.5 * n / inter_bw, rel));
    const auto& up = run.stats.at("node0-nic_UP");
    CHECK_THAT(up[0], WithinRel(1.5 * n, rel));
    CHECK_THAT(up[1], WithinRel(1.5 * n / inter_bw, rel));
    CHECK_THAT(up[2], WithinRel(1.0, rel));
    // node1's NIC sees the long flow at B/2, then at B when the short one ends elsewhere
    const auto& far = run.stats.at("node1-nic_DOWN");
    CHECK_THAT(far[0], WithinRel(n, rel));
    CHECK_THAT(far[1], WithinRel(1.5 * n / inter_bw, rel));
    CHECK_THAT(far[2], WithinRel(1.0, rel));
    const auto& other = run.stats.at("node2-nic_DOWN");
    CHECK_THAT(other[0], WithinRel(n / 2, rel));
    CHECK_THAT(other[2], WithinRel(0.5, rel));
  }
}

TEST_CASE("flow::collect_link_stats follows flows that start later and idle gaps", "[flow][platform][stats]") {
  // node0 -> node1 of n bytes at t = 0, then of n/2 at t1 = 1 s (the link idles in between): node0-nic_UP carries
  // 1.5 n, is busy 1.5 n / B, and the mean utilisation is bytes / (B x makespan) with makespan t1 + n/(2B)
  const double n = 100e6;
  const auto run = transfers(cluster(2, 1), {{0, 1, n}, {0, 1, n / 2, 1.0}}, true);
  const double makespan = 1.0 + n / 2 / inter_bw;
  CHECK_THAT(run.done_s[1], WithinRel(makespan, rel));
  const auto& up = run.stats.at("node0-nic_UP");
  CHECK_THAT(up[0], WithinRel(1.5 * n, rel));
  CHECK_THAT(up[1], WithinRel(1.5 * n / inter_bw, rel));
  CHECK_THAT(up[2], WithinRel(1.0, rel));
  CHECK_THAT(up[3], WithinRel(1.5 * n / inter_bw / makespan, rel));
}

TEST_CASE("flow::enable_link_stats visiting only the noted links gives every link's figures",
          "[flow][platform][stats]") {
  // Flows that overlap, share NICs, end at different times and leave idle gaps (links found unused, then noted
  // again): the figures are the same whether each time step visits every link or only those noted in use.
  const double n = 100e6;
  const std::vector<Transfer> flows{{0, 2, n},          {1, 4, n / 2},      {3, 0, n / 4, 0.004},
                                    {0, 1, n / 8, 0.5}, {0, 2, n / 2, 1.0}, {5, 1, n, 1.0}};
  const auto every = transfers(cluster(3, 2), flows, true, flow::LinkVisits::every_link);
  const auto noted = transfers(cluster(3, 2), flows, true, flow::LinkVisits::noted_links);
  CHECK(noted.done_s == every.done_s);
  REQUIRE(noted.stats.size() == every.stats.size());
  for (const auto& [name, s] : every.stats) {
    CAPTURE(name);
    CHECK(noted.stats.at(name) == s); // bytes, busy_s, peak and mean utilisation, bit for bit
  }
  CHECK(every.stats.at("node0-nic_UP")[0] > 0);
}

TEST_CASE("flow::configure_closed_form keeps SimGrid silent", "[flow][platform]") {
  const ChildReport r = run_in_child([](ChildReport& out) {
    std::FILE* sink = std::tmpfile();
    ::dup2(::fileno(sink), 1);
    ::dup2(::fileno(sink), 2);
    {
      sg4::Engine engine("test");
      flow::configure_closed_form(engine);
      const auto p = flow::build_platform(fat_tree(cluster(4, 2), {2, 2}, {1, 1}));
      sg4::Actor::create("flow", p.gpus[0], [&p] { sg4::Comm::sendto(p.gpus[0], p.gpus[7], 1000); });
      engine.run();
    }
    std::fflush(nullptr);
    // Count what SimGrid wrote; lines from AddressSanitizer's runtime (its warning about SimGrid's stack
    // switching in the asan preset) are not SimGrid's and are left out.
    std::rewind(sink);
    std::string text;
    char buffer[4096];
    for (std::size_t got; (got = std::fread(buffer, 1, sizeof buffer, sink)) > 0;)
      text.append(buffer, got);
    std::size_t simgrid_bytes = 0;
    std::size_t start = 0;
    while (start < text.size()) {
      std::size_t end = text.find('\n', start);
      if (end == std::string::npos)
        end = text.size();
      const std::string line = text.substr(start, end - start);
      const bool sanitizer = line.find("ASan") != std::string::npos ||
                             line.find("False positive error reports may follow") != std::string::npos ||
                             line.find("github.com/google/sanitizers") != std::string::npos;
      if (!sanitizer)
        simgrid_bytes += line.size() + 1;
      start = end + 1;
    }
    out.values.push_back(static_cast<double>(simgrid_bytes));
  });
  REQUIRE(r.error.empty());
  CHECK(r.values.at(0) == 0); // bytes SimGrid wrote to stdout and stderr
}

TEST_CASE("flow::build_platform builds 1,024 nodes x 8 GPUs in well under a second", "[flow][platform][scale]") {
  struct Case {
    const char* what;
    ClusterSpec cluster;
    size_t links; // link directions
  };
  const ClusterSpec base = cluster(1024, 8);
  // intra 8192 x 2 + NIC 1024 x 2
  const size_t endpoint_links = 8192 * 2 + 1024 * 2;
  const Case cases[] = {
      {"star", base, endpoint_links},
      // L1: 32 switches (up[0] x down[1]), each with 32 uplinks to 32 roots: 1024 switch links x 2
      {"fat-tree {32,32}/{1,32}", fat_tree(base, {32, 32}, {1, 32}), endpoint_links + 1024 * 2},
      // 1024 positions x 3 dimensions x 2 directions
      {"torus {16,8,8}", torus(base, {16, 8, 8}), endpoint_links + 1024 * 3 * 2},
  };
  for (const auto& c : cases) {
    const ChildReport r = run_in_child([&c](ChildReport& out) {
      const auto start = std::chrono::steady_clock::now();
      sg4::Engine engine("test");
      flow::configure_closed_form(engine);
      const auto p = flow::build_platform(c.cluster);
      const double build_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      rusage usage{};
      ::getrusage(RUSAGE_SELF, &usage);
      std::set<std::string> names;
      for (const auto& l : p.links)
        names.insert(l.name);
      out.values = {static_cast<double>(p.gpus.size()),
                    static_cast<double>(p.links.size()),
                    static_cast<double>(engine.get_host_count()),
                    build_s,
                    static_cast<double>(usage.ru_maxrss) / 1024.0,
                    static_cast<double>(names.size())};
    });
    CAPTURE(c.what);
    REQUIRE(r.error.empty());
    CHECK(r.values[0] == 8192);
    CHECK(r.values[2] == 8192);
    CHECK(r.values[1] == static_cast<double>(c.links));
    CHECK(r.values[5] == r.values[1]); // distinct link names
    CHECK(r.values[4] < 1024);         // peak resident MiB of the child, test process included
    WARN(c.what << ": 8192 GPUs, " << r.values[1] << " link directions built in " << r.values[3] << " s, peak RSS "
                << r.values[4] << " MiB");
  }
}
