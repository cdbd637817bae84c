// NVLink SHARP allreduce (NCCL's NVLS and NVLS-tree algorithms, Hopper GPUs on an NVSwitch fabric): the switch
// reduces. Every GPU owns 1/g of the buffer; for its share it issues a multicast load-reduce, for which the switch
// reads that share from all g GPUs and returns the sum, then a multicast store, which the switch copies to all g GPUs.
// Each GPU's link so carries n + n/g bytes each way (n out for the g load-reduces of its data, n/g of its own sums
// out; n/g of sums in, n of every owner's stores in), against 2(g-1)/g n for a ring. Across N nodes (NVLS-tree), GPU
// i of each node takes part, for the buffer's share i it owns, in an allreduce of n/g between the nodes (here a ring
// over GPU i of every node, as `hierarchical` runs it: 2(N-1)/N n/g through the NICs), and NCCL pipelines the two legs,
// so the inside of the node and the network run at the same time and the slower one sets the pace.
//
// Rates and latency from NCCL (NVIDIA/nccl): its NVLS kernels reach nvlsEfficiency = 0.85 of the NVLink rate on Hopper
// (src/graph/tuning.cc) on 15 of their 16 channels (NVLS_NCHANNELS_SM90 = 16, src/transport/nvls.cc; tuning.cc
// scales by (nChannels - 1) / nChannels), and its tuner charges NVLS 25 us on NVLink (hwLatencies[NVLINK][NVLS]
// [SIMPLE]). One node of 8 H100 (tests/data/shared/nccl-tests/h100_1x8_sweep_32MiB-16GiB.log): 482 GB/s of bus
// bandwidth at 16 GiB, where a ring cannot exceed the link's 370.8 (tests/network/test_nvls.cpp).
#include "sim/network/lowering/detail.hpp"

#include <algorithm>

namespace ddlsim::sim::detail {
namespace {

// The intra-node flows (GPU i -> GPU i+1 of its node: one flow out of and into every GPU link, carrying the link time
// of n(1 + 1/g) at NVLS's share of the rate) and, across nodes, the inter-node ring of GPU i of every node at the same
// time (pipelined legs): one phase when aggregated; per message, the ring's 2(N-1) steps of n/(gN) each in a phase
// of its own, the first beside the intra-node flows.
std::vector<Phase> nvls_phases(const LoweringShape& shape, double bytes, Granularity granularity) {
  const int g = shape.gpus_per_node, nodes = shape.nodes;
  const bool aggregated = granularity == Granularity::aggregated;
  const int steps = nodes > 1 ? 2 * (nodes - 1) : 0;
  std::vector<Phase> phases;
  if (nodes > 1) { // the inter-node rings' steps (hierarchical's): one phase folding them, or one per step
    const int folded = aggregated ? steps : 1;
    phases.assign(static_cast<std::size_t>(steps / folded),
                  node_ring_step(shape, true, folded * bytes / g / nodes, folded));
  } else {
    phases.emplace_back();
  }
  phases.front().extra_latency_s = kNvlsLatency;
  if (g > 1) { // the switch's traffic beside the first
    auto& flows = phases.front().flows;
    const auto intra = node_ring_step(shape, false, nvls_link_bytes(g, bytes), 1).flows;
    flows.insert(flows.begin(), intra.begin(), intra.end());
  }
  return phases;
}

// Closed form: 25 us + max(a_i + n(1 + 1/g) / (0.85 x 15/16 x B_i), 2(N-1) a_e + 2(N-1)/N n/g / (B_e / sharers)).
class Nvls final : public CollectiveModel {
public:
  explicit Nvls(const Network& n) : net_(n) {}
  CollectiveCost cost(double bytes) const override {
    const int g = net_.gpus_per_node, nodes = net_.nodes;
    if (g * nodes <= 1)
      return {};
    double time_s = 0, sent = 0;
    if (g > 1) {
      const Hop intra = intra_hop(net_);
      time_s = intra.alpha_s + nvls_link_bytes(g, bytes) / intra.bandwidth;
      sent = (1.0 + 1.0 / g) * bytes;
    }
    if (nodes > 1) {
      time_s = std::max(time_s, node_rings_time(net_, bytes / g));
      sent += 2.0 * (nodes - 1) / nodes * bytes / g;
    }
    return {kNvlsLatency + time_s, sent};
  }

protected:
  // Across nodes the slower of the two legs (inside the node, between nodes) sets the time: the maximum of two affine
  // costs is not affine.
  [[nodiscard]] bool affine_in_bytes() const override { return net_.nodes == 1; }

private:
  Network net_;
};

} // namespace

std::vector<Phase> lower_allreduce_nvls(const LoweringShape& shape, double bytes, Granularity granularity) {
  check_arguments(shape, bytes);
  if (shape.workers() <= 1)
    return {};
  return nvls_phases(shape, bytes, granularity);
}

std::unique_ptr<CollectiveModel> closed_form_allreduce_nvls(const Network& net) {
  return std::make_unique<Nvls>(net);
}

} // namespace ddlsim::sim::detail
