// A measured allreduce on the flow engine's platform (issue #12): the flow engine simulates the collective algorithm
// on links, so a calibration that measures the allreduce over the whole cluster is turned into the effective link
// bandwidth and latency that make the simulated ring reproduce the measurement's two regimes: its small-message
// start-up (the first α-β segment's α) and its large-message slope (the last segment's β). A ring allreduce over p
// ranks takes 2(p-1) steps of n/p bytes at its slowest hop's bandwidth, T = L + 2(p-1)/p n / B (Patarasuk & Yuan,
// JPDC 2009), so B = 2(p-1) / (p β); its start-up L is the sum of the hop latencies along its critical chunk's walk
// (sim/network/lowering/allreduce_ring.cpp): 2(p-1) α_hop on one node or with one GPU per node, else k inter-node
// hops and 2(p-1) - k intra-node ones, which keep the scenario's GPU links, so α_hop = (α - (2(p-1) - k) α_intra) / k.
// A hop between two nodes crosses two NIC links on a star (docs/engines.md, "Link semantics"), each taking half of it.
#pragma once

#include "sim/network/cluster.hpp"
#include "sim/spec/scenario.hpp"

#include <optional>
#include <string>

namespace ddlsim::sim {

struct MeasuredLinks {
  LinkSpec link;    ///< the effective link
  bool inter_node;  ///< it replaces cluster.inter_node (the cluster has several nodes), else cluster.intra_node
  std::string note; ///< for summary.notes
};

/// The links for `s` when its calibration measures the allreduce over every GPU of the cluster (same ranks and
/// nodes) and the scenario simulates a ring allreduce on a star with a NIC per node; nullopt otherwise.
[[nodiscard]] std::optional<MeasuredLinks> measured_links(const Scenario& s);

/// `s` with measured_links(s) applied (a copy of `s` when there are none).
[[nodiscard]] Scenario with_measured_links(const Scenario& s);

} // namespace ddlsim::sim
