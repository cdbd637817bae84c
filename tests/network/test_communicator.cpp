// Communicator layouts (sim/network/communicator.hpp), the one description of a communicator's placement: its shape
// (nodes, GPUs per node, rails) and links come from the cluster the same way whether it is the whole cluster (the fast
// path) or a part of it, and its errors name the problem; communicators whose collectives run at once share links
// (concurrent_phase_time, against the closed form).
#include "sim/network/collectives.hpp"
#include "sim/network/communicator.hpp"
#include "sim/network/lowering/evaluate.hpp"
#include "support/cluster.hpp"

#include <catch2/catch.hpp>

#include <vector>

using namespace ddlsim::sim;
using Catch::Matchers::WithinRel;

namespace {
ClusterSpec cluster(int nodes, int g, bool nic_per_gpu) {
  return ddlsim::test::star_cluster(nodes, g, {100e9, 1e-6}, {25e9, 2e-6}, nic_per_gpu);
}
std::vector<int> iota(int n, int first = 0, int step = 1) {
  std::vector<int> r(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i)
    r[static_cast<std::size_t>(i)] = first + i * step;
  return r;
}
} // namespace

TEST_CASE("communicator: the whole cluster and a part of it take NICs per GPU from the cluster", "[communicator]") {
  const auto per_gpu = GENERATE(false, true);
  CAPTURE(per_gpu);
  const auto c = cluster(4, 8, per_gpu);
  const auto whole = layout_of(iota(32), c);
  CHECK(whole.whole_cluster);
  CHECK(whole.shape.nodes == 4);
  CHECK(whole.shape.gpus_per_node == 8);
  CHECK(whole.shape.rails == per_gpu);
  CHECK(whole.shape.rings() == (per_gpu ? 8 : 1)); // NCCL's ring per NIC over every node's 8 NICs
  CHECK(whole.net.nic_per_gpu == per_gpu);
  CHECK(whole.net.rails() == (per_gpu ? 8 : 1));
  CHECK(whole.ranks == iota(32));
  // Half of every node (GPUs 0..3 of each): a smaller cluster of the same kind, 4 x 4.
  std::vector<int> half;
  for (int node = 0; node < 4; ++node)
    for (int j = 0; j < 4; ++j)
      half.push_back(8 * node + j);
  const auto part = layout_of(half, c);
  CHECK_FALSE(part.whole_cluster);
  CHECK(part.shape.nodes == 4);
  CHECK(part.shape.gpus_per_node == 4);
  CHECK(part.shape.rails == per_gpu);
  CHECK(part.net.workers() == 16);
  CHECK(part.net.inter.bandwidth == c.inter.bandwidth);
  // One GPU per node (a data-parallel group of a tensor-parallel layout): a ring of 4 single-GPU nodes, one ring.
  const auto column = layout_of(iota(4, 3, 8), c);
  CHECK(column.shape.nodes == 4);
  CHECK(column.shape.gpus_per_node == 1);
  CHECK(column.shape.rings() == 1);
}

TEST_CASE("communicator: ranks that are not equal blocks of one node each are refused", "[communicator]") {
  const auto c = cluster(2, 4, false);
  CHECK_THROWS_WITH(layout_of({}, c), "a communicator needs at least one rank");
  CHECK_THROWS_WITH(layout_of({0, 8}, c), "communicator rank 8 is not a GPU of the cluster (0..7)");
  CHECK_THROWS_WITH(layout_of({1, 1}, c), "communicator rank 1 appears twice");
  CHECK_THROWS_WITH(layout_of({0, 4, 1}, c), "communicator ranks on node 0 are not consecutive");
  CHECK_THROWS_WITH(layout_of({0, 1, 4}, c),
                    "communicator has 2 GPU(s) on node 0 but not on node 1: every node needs the same number");
}

TEST_CASE("communicator: data-parallel groups run together share a node's NIC", "[communicator][concurrent]") {
  // The 8 data-parallel groups {j, 8 + j} of a t = 8, d = 2 layout on 2 nodes of 8, each a ring allreduce of n over 2
  // ranks (one phase, every rank sending n, a walk of 2 hops of 2 NIC latencies): alone 4 l_e + n / B_e; all 8 at
  // once over one NIC per node 4 l_e + 8 n / B_e; over a NIC per GPU they share nothing.
  const auto per_gpu = GENERATE(false, true);
  CAPTURE(per_gpu);
  const auto c = cluster(2, 8, per_gpu);
  const double n = 64e6, alone = 4 * c.inter.latency_s + n / c.inter.bandwidth;
  const auto* ring = find_lowering(Collective::allreduce, "ring");
  REQUIRE(ring != nullptr);
  std::vector<std::vector<Phase>> groups;
  for (int j = 0; j < 8; ++j) {
    const auto layout = layout_of({j, 8 + j}, c);
    groups.push_back(
        to_global_ranks(ring->lower(layout.shape, n, Granularity::aggregated), layout.shape, layout.ranks, c));
  }
  const double together = concurrent_phase_time(groups, c.network());
  CHECK_THAT(together, WithinRel(per_gpu ? alone : 4 * c.inter.latency_s + 8 * n / c.inter.bandwidth, 1e-12));
  groups.resize(1);
  CHECK_THAT(concurrent_phase_time(groups, c.network()), WithinRel(alone, 1e-12));
  CHECK_THAT(concurrent_phase_time(groups, c.network()),
             WithinRel(phase_synchronous_time(groups[0], c.network()), 1e-12));
}
