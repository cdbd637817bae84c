// Two sockets in a node (cluster.hpp, Fabric::two_sockets): GPUs 0 .. g/2-1 behind socket 0, the others behind socket
// 1, the sockets joined by a host link each way. The analytic engine times every algorithm from its lowering there:
// checked against hand computations for the ring (its two crossing edges each carry one flow, and the critical
// chunk's walk crosses the host link four times on 8 GPUs) and halving-doubling (its distance-g/2 step sends every
// flow across), and against a single switch when the host link is as fast as the GPU links and free of latency.
#include "sim/network/collectives.hpp"
#include "sim/network/lowering/evaluate.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

using namespace ddlsim::sim;
using namespace ddlsim::sim::test;
using Catch::Matchers::WithinRel;

namespace {

// PCIe gen3 x16 GPU links at NCCL's 12 GB/s (src/graph/topo.h PCI_BW), 1 us; a host link of `host_bw`, 2 us.
Network two_sockets(int nodes, int g, double host_bw, double host_latency = 2e-6) {
  Network net{nodes, g, {12e9, 1e-6}, {12.5e9, 5e-6}};
  net.two_sockets = true;
  net.host = {host_bw, host_latency};
  return net;
}

double cost(std::string_view algorithm, const Network& net, double bytes) {
  return make_cost_model(*find_lowering(Collective::allreduce, algorithm), net)->cost(bytes).time_s;
}

} // namespace

TEST_CASE("sockets: a flow between a node's halves crosses the host link, one way each", "[sockets]") {
  const auto net = two_sockets(1, 8, 10e9);
  CHECK(net.host_direction(0, 3) == -1);
  CHECK(net.host_direction(4, 7) == -1);
  CHECK(net.host_direction(3, 4) == 0);
  CHECK(net.host_direction(7, 0) == 1);
  Network star = net;
  star.two_sockets = false;
  CHECK(star.host_direction(3, 4) == -1);
  // by rank: node x 2 + direction (node 1 of 2: ranks 8 .. 15)
  const auto two = two_sockets(2, 8, 10e9);
  CHECK(two.host_link(11, 12) == 2);
  CHECK(two.host_link(15, 8) == 3);
  CHECK(two.host_link(8, 11) == -1);
  CHECK(two.host_link(3, 4) == 0);
}

TEST_CASE("sockets: the ring on one node of 8 runs at the slower of GPU and host link and walks the host link 4 times",
          "[sockets]") {
  const double n = GENERATE(0.0, 4096.0, 256e6);
  const double host_bw = GENERATE(6e9, 10e9, 40e9);
  CAPTURE(n, host_bw);
  const auto net = two_sockets(1, 8, host_bw);
  // 14 hops of 2 x 1 us, four of them across the host link (2 us); 2 x 7/8 n at min(12, host) GB/s
  const double expected = 14 * 2e-6 + 4 * 2e-6 + 2.0 * 7 / 8 * n / std::min(12e9, host_bw);
  CHECK_THAT(cost("ring", net, n), WithinRel(expected, 1e-9));
}

TEST_CASE("sockets: halving-doubling's distance-4 step sends all 8 GPUs across, 4 flows each way", "[sockets]") {
  const double n = 256e6, host_bw = 10e9;
  const auto net = two_sockets(1, 8, host_bw);
  const double a = 2e-6;
  // reduce-scatter and allgather: the distance-4 step twice (n/2 each way, 4 flows on each host direction), the
  // distance-2 and -1 steps inside a socket (n/4, n/8)
  const double across = a + 2e-6 + n / 2 * std::max(1 / 12e9, 4 / host_bw);
  const double expected = 2 * (across + (a + n / 4 / 12e9) + (a + n / 8 / 12e9));
  CHECK_THAT(cost("halving-doubling", net, n), WithinRel(expected, 1e-9));
}

TEST_CASE("sockets: a host link fast enough for every crossing flow and without latency changes nothing", "[sockets]") {
  const auto algorithm = GENERATE(as<std::string>{}, "ring", "halving-doubling", "hierarchical", "tree");
  const int nodes = GENERATE(1, 2, 4);
  const int g = GENERATE(2, 4, 8);
  CAPTURE(algorithm, nodes, g);
  // at most g/2 flows cross each way at once (halving-doubling's distance-g/2 step): a host link of g/2 times the
  // GPU links' rate never slows them
  auto net = two_sockets(nodes, g, 12e9 * g / 2, 0);
  Network star = net;
  star.two_sockets = false;
  // (against the star's lowering timed phase by phase: the tree's closed form is NCCL's pipelined bound instead)
  for (const double n : {0.0, 1e6, 256e6})
    CHECK_THAT(cost(algorithm, net, n),
               WithinRel(phase_synchronous_time(
                             lower(Collective::allreduce, algorithm, {nodes, g}, n, Granularity::aggregated), star),
                         1e-9));
}
