// Hierarchical two-level allreduce (Horovod's hierarchical allreduce; Jia et al., "Highly Scalable Deep Learning
// Training System with Mixed-Precision", arXiv:1807.11205): ring reduce-scatter among the g GPUs of each node, g
// concurrent ring allreduces of n/g across the N nodes (one per local GPU index, sharing the node's NIC), then ring
// allgather among the GPUs of each node.
#include "sim/network/lowering/detail.hpp"

namespace ddlsim::sim::detail {
namespace {

// Closed form: 2(g-1)(a_i + n/(g B_i)) + 2(N-1) a_e + 2(N-1)/N n/B_e, the g inter-node rings sharing the NIC.
class Hierarchical final : public CollectiveModel {
public:
  explicit Hierarchical(const Network& n) : net_(n) {}
  CollectiveCost cost(double bytes) const override {
    const int g = net_.gpus_per_node, nodes = net_.nodes;
    if (g * nodes <= 1)
      return {};
    CollectiveCost c;
    if (g > 1) {
      const Hop h = intra_hop(net_);
      c.time_s += 2.0 * (g - 1) * (h.alpha_s + bytes / g / h.bandwidth);
      c.bytes_sent += 2.0 * (g - 1) * bytes / g;
    }
    if (nodes > 1) {
      c.time_s += node_rings_time(net_, bytes / g);
      c.bytes_sent += 2.0 * (nodes - 1) * bytes / g / nodes;
    }
    return c;
  }

protected:
  [[nodiscard]] bool affine_in_bytes() const override { return true; }

private:
  Network net_;
};

} // namespace

// per_message: g-1 intra phases of n/g, 2(N-1) inter phases of n/(gN), g-1 intra phases of n/g (p flows each;
// the intra phases are absent for g = 1, the inter ones for N = 1). aggregated: the intra reduce-scatter and
// allgather use the same pairs, folded into one phase of 2(g-1)/g n with latency_repeats 2(g-1), followed by one
// inter phase of 2(N-1)/N n/g with latency_repeats 2(N-1): 2(g-1)(a_i + n/(g B_i)) + 2(N-1)(a_e + n/(gN)/(B_e/g)).
std::vector<Phase> lower_allreduce_hierarchical(const LoweringShape& shape, double bytes, Granularity granularity) {
  check_arguments(shape, bytes);
  const int g = shape.gpus_per_node, nodes = shape.nodes;
  std::vector<Phase> phases;
  if (shape.workers() <= 1)
    return phases;
  const double slice = bytes / g;
  if (granularity == Granularity::aggregated) {
    if (g > 1)
      phases.push_back(node_ring_step(shape, false, 2.0 * (g - 1) * slice, 2 * (g - 1)));
    if (nodes > 1)
      phases.push_back(node_ring_step(shape, true, 2.0 * (nodes - 1) * slice / nodes, 2 * (nodes - 1)));
    return phases;
  }
  phases.reserve(static_cast<std::size_t>(2 * (g - 1) + 2 * (nodes - 1)));
  for (int s = 0; s < g - 1; ++s)
    phases.push_back(node_ring_step(shape, false, slice, 1));
  for (int s = 0; s < 2 * (nodes - 1); ++s)
    phases.push_back(node_ring_step(shape, true, slice / nodes, 1));
  for (int s = 0; s < g - 1; ++s)
    phases.push_back(node_ring_step(shape, false, slice, 1));
  return phases;
}

std::unique_ptr<CollectiveModel> closed_form_allreduce_hierarchical(const Network& net) {
  return std::make_unique<Hierarchical>(net);
}

} // namespace ddlsim::sim::detail
