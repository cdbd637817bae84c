// Parameter-server push and pull lowerings (sim/network/lowering/ps_push_sharded.cpp, ps_pull_sharded.cpp): who sends
// what to whom for co-located and dedicated servers and for keys split over all servers or held by one, and their
// phase-synchronous cost against the closed form max(m, p m / c) / B on an alpha-beta star.
#include "sim/network/lowering/evaluate.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>

using namespace ddlsim::sim;
using namespace ddlsim::sim::test;
using Catch::Matchers::WithinRel;

namespace {

LoweringShape ps_shape(int nodes, int g, int servers, bool dedicated, int first = 0, int count = 0) {
  return {nodes, g, servers, dedicated, first, count};
}

} // namespace

TEST_CASE("lowering::ps push sends every worker's shard to each server, pull sends it back", "[lowering][ps]") {
  const double n = 12e6;
  SECTION("dedicated servers are the ranks after the workers; every worker sends n / S to each") {
    const auto shape = ps_shape(4, 2, 3, true);
    CHECK(shape.ranks() == 11);
    const auto push = lower(Collective::ps_push, "sharded", shape, n, Granularity::aggregated);
    REQUIRE(push.size() == 1);
    CHECK(push[0].flows.size() == 8 * 3);
    const auto b = rank_bytes(push, shape.ranks());
    for (int w = 0; w < 8; ++w)
      CHECK_THAT(b.sent[static_cast<std::size_t>(w)], WithinRel(n, 1e-12));
    for (int s = 8; s < 11; ++s)
      CHECK_THAT(b.received[static_cast<std::size_t>(s)], WithinRel(8 * n / 3, 1e-12));
    const auto pull = lower(Collective::ps_pull, "sharded", shape, n, Granularity::per_message);
    const auto c = rank_bytes(pull, shape.ranks());
    CHECK(c.sent == b.received);
    CHECK(c.received == b.sent);
  }
  SECTION("co-located server s is GPU 0 of node s mod nodes; its own worker's shard stays local") {
    const auto shape = ps_shape(4, 2, 6, false);
    CHECK(shape.ranks() == 8);
    CHECK(shape.server_rank(1) == 2);
    CHECK(shape.server_rank(5) == 2); // servers 1 and 5 share node 1
    const auto push = lower(Collective::ps_push, "sharded", shape, n, Granularity::aggregated);
    REQUIRE(push.size() == 1);
    for (const auto& f : push[0].flows) {
      CHECK(f.dst % 2 == 0);
      CHECK(f.src != f.dst);
      CHECK_THAT(f.bytes, WithinRel(n / 6, 1e-12));
    }
    // Rank 0 hosts server 0 and 4: it sends to the 4 others; rank 1 sends to all 6.
    const auto b = rank_bytes(push, 8);
    CHECK_THAT(b.sent[0], WithinRel(4 * n / 6, 1e-12));
    CHECK_THAT(b.sent[1], WithinRel(n, 1e-12));
    CHECK_THAT(b.received[2], WithinRel(2 * 7 * n / 6, 1e-12)); // two servers, 7 remote workers each
  }
  SECTION("a small key lives on one server: every other worker sends it whole") {
    const auto shape = ps_shape(4, 1, 4, false, 2, 1);
    const auto push = lower(Collective::ps_push, "sharded", shape, n, Granularity::aggregated);
    REQUIRE(push.size() == 1);
    REQUIRE(push[0].flows.size() == 3);
    for (const auto& f : push[0].flows) {
      CAPTURE(f.src);
      CHECK(f.dst == 2);
      CHECK(f.bytes == n);
    }
  }
  SECTION("one worker with its co-located server sends nothing: no phase") {
    CHECK(lower(Collective::ps_push, "sharded", ps_shape(1, 1, 1, false), n, Granularity::aggregated).empty());
    CHECK(lower(Collective::ps_push, "sharded", ps_shape(1, 1, 1, true), n, Granularity::aggregated).size() == 1);
  }
}

TEST_CASE("lowering::ps push costs max(m, p m / c) / B plus two latencies on a star", "[lowering][ps]") {
  auto [nodes, servers] = GENERATE(table<int, int>({{2, 1}, {4, 2}, {8, 8}, {16, 4}, {5, 3}, {3, 7}}));
  CAPTURE(nodes, servers);
  const double m = 8e6, B = 1.25e9, l = 25e-6;
  Network net{nodes, 1, {12e9, 5e-6}, {B, l}, false, servers};
  const auto push =
      lower(Collective::ps_push, "sharded", ps_shape(nodes, 1, servers, true), m, Granularity::aggregated);
  CHECK_THAT(phase_synchronous_time(push, net), WithinRel(2 * l + std::max(m, nodes * m / servers) / B, 1e-12));
  const auto pull =
      lower(Collective::ps_pull, "sharded", ps_shape(nodes, 1, servers, true), m, Granularity::aggregated);
  CHECK_THAT(phase_synchronous_time(pull, net), WithinRel(2 * l + std::max(m, nodes * m / servers) / B, 1e-12));
  CHECK_THAT(busiest_sender_bytes(push, nodes), WithinRel(m, 1e-12)); // server ranks are not workers
}

namespace {

// Bytes that leave each node over its NIC (flows whose ends are on different nodes, or to a dedicated host).
std::vector<double> nic_up_bytes(const std::vector<Phase>& phases, const LoweringShape& shape) {
  const int g = shape.gpus_per_node, p = shape.workers();
  std::vector<double> up(static_cast<std::size_t>(shape.nodes), 0.0);
  for (const auto& ph : phases)
    for (const auto& f : ph.flows)
      if (f.src < p && (f.dst >= p || f.src / g != f.dst / g))
        up[static_cast<std::size_t>(f.src / g)] += f.bytes;
  return up;
}

std::vector<Phase> push_then_pull(LoweringShape shape, double bytes) {
  auto phases = lower(Collective::ps_push, "sharded", shape, bytes, Granularity::aggregated);
  const auto pull = lower(Collective::ps_pull, "sharded", shape, bytes, Granularity::aggregated);
  phases.insert(phases.end(), pull.begin(), pull.end());
  return phases;
}

} // namespace

TEST_CASE("lowering::BytePS: one node has no network traffic, N nodes carry 2(N-1)/N m per NIC with N servers",
          "[lowering][ps][byteps]") {
  SECTION("one node of 4 GPUs: the key is reduced onto GPU 0 and broadcast back, nothing else, servers or not") {
    for (const bool dedicated : {false, true}) {
      auto shape = ps_shape(1, 4, dedicated ? 2 : 1, dedicated);
      shape.node_aggregation = true;
      const auto push = lower(Collective::ps_push, "sharded", shape, 8e6, Granularity::aggregated);
      REQUIRE(push.size() == 1); // the chain 3 -> 2 -> 1 -> 0, each link carrying the key
      CHECK(push[0].flows.size() == 3);
      for (const auto& f : push[0].flows) {
        CHECK(f.dst == f.src - 1);
        CHECK(f.bytes == 8e6);
        CHECK(f.latency_repeats == 3);
      }
      const auto pull = lower(Collective::ps_pull, "sharded", shape, 8e6, Granularity::aggregated);
      REQUIRE(pull.size() == 1);
      for (const auto& f : pull[0].flows)
        CHECK(f.dst == f.src + 1);
      CHECK(nic_up_bytes(push_then_pull(shape, 8e6), shape) == std::vector<double>{0.0});
    }
  }
  SECTION("N nodes, N co-located servers, one key of m / N on each: every NIC sends 2(N-1)/N m") {
    const double m = 96e6;
    for (int nodes : {2, 3, 4, 8}) {
      CAPTURE(nodes);
      std::vector<double> up(static_cast<std::size_t>(nodes), 0.0);
      for (int server = 0; server < nodes; ++server) {
        auto shape = ps_shape(nodes, 4, nodes, false, server, 1);
        shape.node_aggregation = true;
        const auto key = push_then_pull(shape, m / nodes);
        // only GPU 0 of each node crosses the network, once per key and direction
        for (const auto& ph : key)
          for (const auto& f : ph.flows)
            if (f.src / 4 != f.dst / 4)
              CHECK((f.src % 4 == 0 && f.dst % 4 == 0));
        const auto b = nic_up_bytes(key, shape);
        for (int n = 0; n < nodes; ++n)
          up[static_cast<std::size_t>(n)] += b[static_cast<std::size_t>(n)];
      }
      for (const double bytes : up)
        CHECK_THAT(bytes, WithinRel(2.0 * (nodes - 1) / nodes * m, 1e-12));
    }
  }
  SECTION("the worker-level push of the same key sends g times as much through each NIC") {
    auto shape = ps_shape(4, 4, 4, false, 1, 1);
    const double byteps = [&] {
      auto s = shape;
      s.node_aggregation = true;
      return nic_up_bytes(lower(Collective::ps_push, "sharded", s, 4e6, Granularity::aggregated), s)[0];
    }();
    const double kvstore =
        nic_up_bytes(lower(Collective::ps_push, "sharded", shape, 4e6, Granularity::aggregated), shape)[0];
    CHECK(byteps == 4e6);
    CHECK(kvstore == 4 * 4e6);
  }
}
