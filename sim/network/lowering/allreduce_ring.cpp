// Ring allreduce (Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms for clusters of workstations",
// JPDC 2009): a reduce-scatter then an allgather around the ring of ranks, 2(p-1) steps in which every rank r
// sends n/p bytes to r + 1 mod p. Node-major ranks put exactly one ring edge out of and into each node.
#include "sim/network/lowering/detail.hpp"

#include <algorithm>

namespace ddlsim::sim::detail {
namespace {

// Closed form: 2(p-1) steps of n/p bytes; one ring edge leaves each node per direction, so no NIC is shared, and
// every step lasts as long as its slowest hop. On one node, or with one GPU per node: 2(p-1)a + 2(p-1)/p n/B exactly.
class Ring final : public CollectiveModel {
public:
  explicit Ring(const Network& n) : net_(n) {}
  CollectiveCost cost(double bytes) const override {
    const int p = net_.workers();
    if (p <= 1)
      return {};
    const double chunk = bytes / p;
    double step = 0;
    if (net_.gpus_per_node > 1)
      step = std::max(step, intra_hop(net_).alpha_s + chunk / intra_hop(net_).bandwidth);
    if (net_.nodes > 1)
      step = std::max(step, inter_hop(net_).alpha_s + chunk / inter_hop(net_).bandwidth);
    return {2.0 * (p - 1) * step, 2.0 * (p - 1) * chunk};
  }

private:
  Network net_;
};

} // namespace

// per_message: 2(p-1) phases of p flows of n/p. aggregated: every step reuses the same p pairs, so one phase of
// p flows of 2(p-1)/p n with latency_repeats 2(p-1): 2(p-1) a + 2(p-1)/p n / B without contention.
std::vector<Phase> lower_allreduce_ring(const LoweringShape& shape, double bytes, Granularity granularity) {
  check_arguments(shape, bytes);
  const int p = shape.workers();
  return ring_steps(p, 2 * (p - 1), bytes / p, granularity);
}

std::unique_ptr<CollectiveModel> closed_form_allreduce_ring(const Network& net) {
  return std::make_unique<Ring>(net);
}

} // namespace ddlsim::sim::detail
