// sim collectives: closed forms of the allreduce algorithms (Thakur et al. 2005; Patarasuk & Yuan 2009).
#include "sim/network/collectives.hpp"
#include "sim/network/lowering/evaluate.hpp"

#include <catch2/catch.hpp>

#include <cmath>

using namespace ddlsim::sim;
using Catch::Matchers::WithinRel;

namespace {
// p workers of one GPU each on a star: a message crosses two NIC links, alpha = 2 x latency.
Network star(int p, double bandwidth, double latency) {
  return {p, 1, {}, {bandwidth, latency}};
}
double run(std::string_view algorithm, const Network& n, double bytes) {
  return find_lowering(Collective::allreduce, algorithm)->closed_form(n)->cost(bytes).time_s;
}
} // namespace

TEST_CASE("sim::allreduce closed forms on a star of single-GPU nodes", "[sim][collectives]") {
  auto [p, bytes, bandwidth, latency] = GENERATE(table<int, double, double, double>({
      {2, 1024.0, 1.25e9, 25e-6},
      {4, 100e6, 1.25e9, 25e-6},
      {8, 1073741824.0, 12.5e9, 1e-6},
      {16, 4096.0, 1.25e8, 50e-6},
      {64, 25.0 * 1048576, 12.5e9, 2e-6},
  }));
  CAPTURE(p, bytes, bandwidth, latency);
  const auto net = star(p, bandwidth, latency);
  const double alpha = 2 * latency;
  const double lg = std::log2(p);
  // ring: 2(p-1)a + 2(p-1)/p n/B
  CHECK_THAT(run("ring", net, bytes), WithinRel(2 * (p - 1) * alpha + 2.0 * (p - 1) / p * bytes / bandwidth, 1e-12));
  // recursive halving-doubling, p a power of two: 2 log2(p) a + 2(p-1)/p n/B
  CHECK_THAT(run("halving-doubling", net, bytes),
             WithinRel(2 * lg * alpha + 2.0 * (p - 1) / p * bytes / bandwidth, 1e-12));
  // double binary tree, pipelined: 2 ceil(log2 p) a + 2 n/B (a node inner in one tree and not the root of the other
  // sends n/2 on four edges); on two nodes each tree is the one edge, so each NIC carries n
  const double tree_bytes = p == 2 ? bytes : 2 * bytes;
  CHECK_THAT(run("tree", net, bytes), WithinRel(2 * std::ceil(lg) * alpha + tree_bytes / bandwidth, 1e-12));
  // hierarchical with one GPU per node is a ring across nodes
  CHECK_THAT(run("hierarchical", net, bytes), WithinRel(run("ring", net, bytes), 1e-12));
}

TEST_CASE("sim::allreduce on one worker costs nothing", "[sim][collectives]") {
  for (const auto& a : lowerings(Collective::allreduce)) {
    CAPTURE(a.algorithm);
    CHECK(make_cost_model(a, star(1, 1e9, 1e-6))->cost(1e6).time_s == 0);
  }
}

TEST_CASE("sim::halving-doubling handles non-powers of two with pre and post steps", "[sim][collectives]") {
  // p = 6: core of 4 (2 log2 4 steps), two extra ranks: + 2 (a + n/B)
  const auto net = star(6, 1e9, 10e-6);
  const double a = 20e-6, n = 8e6, B = 1e9;
  CHECK_THAT(run("halving-doubling", net, n), WithinRel(4 * a + 2.0 * 3 / 4 * n / B + 2 * (a + n / B), 1e-12));
}

TEST_CASE("sim::allreduce on multi-GPU nodes uses the right links", "[sim][collectives]") {
  // 4 nodes x 8 GPUs, NVLink-class inside (100 GB/s, 1 us), 100 Gbps NIC per node (12.5 GB/s, 5 us).
  const Network net{4, 8, {100e9, 1e-6}, {12.5e9, 5e-6}};
  const double n = 256e6, p = 32, ai = 2e-6, ae = 10e-6, Bi = 100e9, Be = 12.5e9;
  SECTION(
      "ring: its critical chunk crosses the 4 node boundaries twice, the 54 other hops stay inside; the NIC's rate") {
    CHECK_THAT(run("ring", net, n), WithinRel(8 * ae + 54 * ai + 2 * (p - 1) * n / p / Be, 1e-12));
  }
  SECTION("hierarchical: intra reduce-scatter, 8 rings of n/8 across nodes sharing the NIC, intra allgather") {
    const double intra = 2 * 7 * (ai + n / 8 / Bi);
    const double inter = 2 * 3 * (ae + (n / 8) / 4 / (Be / 8));
    CHECK_THAT(run("hierarchical", net, n), WithinRel(intra + inter, 1e-12));
  }
  SECTION("halving-doubling: far steps cross nodes with all 8 GPUs sharing the NIC, near steps stay inside") {
    // distances 16 and 8 cross nodes (n/2, n/4 bytes), distances 4, 2, 1 stay inside (n/8, n/16, n/32)
    const double expected = 2 * ((ae + n / 2 / (Be / 8)) + (ae + n / 4 / (Be / 8)) + (ai + n / 8 / Bi) +
                                 (ai + n / 16 / Bi) + (ai + n / 32 / Bi));
    CHECK_THAT(run("halving-doubling", net, n), WithinRel(expected, 1e-12));
  }
  SECTION("tree: chain inside, double binary tree across nodes, bottleneck bandwidth") {
    CHECK_THAT(run("tree", net, n), WithinRel(2 * (7 * ai + 2 * ae) + 2 * n / Be, 1e-12));
  }
  SECTION("hierarchical beats a flat ring when the NIC is the bottleneck at small sizes") {
    CHECK(run("hierarchical", net, 1e5) < run("ring", net, 1e5));
  }
}

TEST_CASE("sim::measured alpha-beta replays the fit", "[sim][collectives]") {
  const auto m = make_measured_allreduce(star(8, 1e9, 1e-6), {523e-6, 0.857e-9});
  CHECK_THAT(m->cost(100e6).time_s, WithinRel(523e-6 + 0.857e-9 * 100e6, 1e-12));
  CHECK_THAT(m->cost(100e6).bytes_sent, WithinRel(2.0 * 7 / 8 * 100e6, 1e-12));
}
