// Ring allreduce (Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms for clusters of workstations",
// JPDC 2009): a reduce-scatter then an allgather around the ring of ranks, 2(p-1) steps in which every rank r
// sends n/p bytes to r + 1 mod p. Node-major ranks put exactly one ring edge out of and into each node.
#include "sim/network/lowering/detail.hpp"

#include <algorithm>
#include <vector>

namespace ddlsim::sim::detail {
namespace {

// Closed form: 2(p-1) steps of n/p. One ring edge leaves each node per direction, so no NIC is shared; the ring
// runs at its slowest edge's bandwidth, and its latency is that of the critical chunk's walk of 2(p-1) consecutive
// edges (lowering.hpp), hop by hop: with N nodes of g GPUs the ring's edges repeat g-1 intra-node hops and one
// inter-node hop, so the walk crosses 2N inter-node hops for g >= 3 (2N-1 for g = 2; every hop for g = 1) and
// 2(p-1) minus those intra-node ones. NCCL's tuning model (src/graph/tuning.cc) counts 2N inter-node steps in
// releases 2.8-2.11 and 2(N-1) since; the dependency chain of a node-major ring crosses a node boundary 2N-1 or 2N
// times whichever chunk it follows (a chunk skips one edge in the reduce-scatter and the one before it in the
// allgather), which is what this model takes. On one node, or with one GPU per node: 2(p-1)a + 2(p-1)/p n/B.
// With a NIC per GPU (cluster.nic "per-gpu") over several nodes of several GPUs, NCCL runs a ring per channel over
// every NIC; here g rings rotated by one GPU each carry n/g (ring_steps, detail.hpp): each NIC carries one ring's
// inter-node edge each way and each GPU link g - 1 rings' intra-node edges, so the bandwidth term is
// 2(p-1)/p n max((g-1)/(g B_i), 1/(g B_e)), with the same walk (each ring repeats the same hops).
class Ring final : public CollectiveModel {
public:
  explicit Ring(const Network& n) : net_(n) {
    // One period of the ring's edges (g of them: g-1 inside node 0, then the one to node 1), or the g edges of a
    // ring inside one node.
    const int g = net_.gpus_per_node;
    edges_.assign(static_cast<std::size_t>(g), intra_hop(net_).alpha_s);
    if (net_.nodes > 1)
      edges_.back() = inter_hop(net_).alpha_s;
    latency_s_ = critical_walk(edges_, 2 * (net_.workers() - 1)).latency_s;
    // With NICs per GPU, g rotated rings of n/g (ring_steps): a GPU link carries g - 1 of them, a NIC one.
    const double rings = net_.rails();
    if (g > 1)
      seconds_per_byte_ = (rings > 1 ? (rings - 1) / rings : 1.0) / intra_hop(net_).bandwidth;
    if (net_.nodes > 1)
      seconds_per_byte_ = std::max(seconds_per_byte_, 1 / (rings * inter_hop(net_).bandwidth));
  }
  CollectiveCost cost(double bytes) const override {
    const int p = net_.workers();
    if (p <= 1)
      return {};
    const double sent = 2.0 * (p - 1) * (bytes / p);
    return {latency_s_ + sent * seconds_per_byte_, sent};
  }

protected:
  [[nodiscard]] bool affine_in_bytes() const override { return true; }

private:
  Network net_;
  std::vector<double> edges_;
  double latency_s_ = 0;
  double seconds_per_byte_ = 0;
};

} // namespace

// per_message: 2(p-1) phases of p flows of n/p, phase k paying hop k of the critical walk. aggregated: every step
// reuses the same p pairs, so one phase of p flows of 2(p-1)/p n paying the whole walk: the closed form without
// contention either way.
std::vector<Phase> lower_allreduce_ring(const LoweringShape& shape, double bytes, Granularity granularity) {
  check_arguments(shape, bytes);
  const int p = shape.workers();
  return ring_steps(shape, 2 * (p - 1), bytes / p, granularity);
}

std::unique_ptr<CollectiveModel> closed_form_allreduce_ring(const Network& net) {
  return std::make_unique<Ring>(net);
}

} // namespace ddlsim::sim::detail
