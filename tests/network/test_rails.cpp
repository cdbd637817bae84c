// NICs per GPU (LoweringShape::rails, cluster.nic "per-gpu"): a ring algorithm over several nodes of several GPUs runs
// one ring per local GPU, rotated, as NCCL runs a ring per channel over every NIC (detail.hpp ring_steps). Checked:
// the rings' structure (every NIC sends and receives one ring's edge, every GPU link carries g - 1 rings' intra-node
// edges), the allreduce ring's closed form 2(p-1)/p n max((g-1)/(g B_i), 1/(g B_e)) plus the single ring's walk
// against its aggregated and per-message lowerings timed phase by phase (1e-9), and the shapes that keep one ring.
#include "sim/network/collectives.hpp"
#include "sim/network/lowering/evaluate.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>

using namespace ddlsim::sim;
using namespace ddlsim::sim::test;
using Catch::Matchers::WithinRel;

TEST_CASE("rails: g rotated rings, each NIC carrying one ring's edge each way", "[lowering][rails]") {
  const LoweringShape shape{.nodes = 3, .gpus_per_node = 4, .rails = true};
  REQUIRE(shape.rings() == 4);
  const double n = 48e6;
  const auto phases = lower(Collective::allreduce, "ring", shape, n, Granularity::aggregated);
  REQUIRE(phases.size() == 1);
  const auto& ph = phases.front();
  CHECK(ph.rings == 4);
  REQUIRE(ph.flows.size() == 4u * 12);
  std::map<int, int> nic_out, nic_in, intra_out;
  for (const auto& f : ph.flows) {
    CHECK_THAT(f.bytes, WithinRel(2.0 * 11 / 12 * n / 4, 1e-12));
    if (f.src / 4 != f.dst / 4) {
      ++nic_out[f.src];
      ++nic_in[f.dst];
      CHECK(f.dst % 4 == (f.src + 1) % 4); // ring c leaves from GPU c - 1, enters at GPU c
    } else {
      ++intra_out[f.src];
    }
  }
  for (int r = 0; r < 12; ++r) {
    CAPTURE(r);
    CHECK(nic_out[r] == 1);
    CHECK(nic_in[r] == 1);
    CHECK(intra_out[r] == 3);
  }
  SECTION("one node, one GPU per node, or a NIC per node: one ring") {
    CHECK(LoweringShape{.nodes = 1, .gpus_per_node = 8, .rails = true}.rings() == 1);
    CHECK(LoweringShape{.nodes = 8, .gpus_per_node = 1, .rails = true}.rings() == 1);
    CHECK(LoweringShape{.nodes = 8, .gpus_per_node = 8}.rings() == 1);
  }
}

TEST_CASE("rails: the ring allreduce's closed form equals its lowerings", "[lowering][rails][closed-form]") {
  const int nodes = GENERATE(2, 3, 8);
  const int g = GENERATE(2, 4, 8);
  const double n = GENERATE(0.0, 1e6, 1073741824.0);
  // GPU links fast (NICs the bottleneck) or slow (GPU links the bottleneck: (g-1)/g of a single ring's time there)
  const double intra_bw = GENERATE(300e9, 10e9);
  CAPTURE(nodes, g, n, intra_bw);
  Network net{nodes, g, {intra_bw, 1e-6}, {25e9, 5e-6}};
  net.nic_per_gpu = true;
  const int p = nodes * g;
  const double single_walk = find_lowering(Collective::allreduce, "ring")
                                 ->closed_form(Network{nodes, g, {intra_bw, 1e-6}, {25e9, 5e-6}})
                                 ->cost(0)
                                 .time_s;
  const double expected = single_walk + 2.0 * (p - 1) / p * n * std::max((g - 1.0) / (g * intra_bw), 1 / (g * 25e9));
  const auto closed = find_lowering(Collective::allreduce, "ring")->closed_form(net)->cost(n).time_s;
  CHECK_THAT(closed, WithinRel(expected, 1e-12));
  const LoweringShape shape{.nodes = nodes, .gpus_per_node = g, .rails = true};
  for (const auto granularity : {Granularity::aggregated, Granularity::per_message})
    CHECK_THAT(phase_synchronous_time(lower(Collective::allreduce, "ring", shape, n, granularity), net),
               WithinRel(closed, 1e-9));
}
