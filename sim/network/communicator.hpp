// A communicator (an ordered set of global GPU ranks) seen by the collectives: its ranks must come in blocks of
// equal size, one block per node, so that it is a smaller cluster of the same kind — the shape its lowering and its
// closed form take (a data-parallel group of one GPU per node is nodes x 1, a tensor-parallel group inside a node
// 1 x t, a point-to-point pair 1 x 2 or 2 x 1). The lowering's rank v is the communicator's ranks[v].
#pragma once

#include "sim/network/cluster.hpp"
#include "sim/network/lowering/lowering.hpp"

#include <vector>

namespace ddlsim::sim {

struct CommunicatorLayout {
  LoweringShape shape;        ///< nodes and GPUs per node of the communicator
  std::vector<int> ranks;     ///< the lowering's rank v is global GPU rank ranks[v]
  bool whole_cluster = false; ///< ranks are exactly 0 .. workers-1 in order: no mapping needed
};

/// The layout of `ranks` on `cluster`. Throws std::invalid_argument naming the problem when a rank is out of range
/// or repeated, or the ranks are not equal blocks of one node each.
[[nodiscard]] CommunicatorLayout layout_of(const std::vector<int>& ranks, const ClusterSpec& cluster);

/// The links the communicator's closed forms see: the cluster's, with the communicator's nodes and GPUs per node.
[[nodiscard]] Network network_of(const CommunicatorLayout& layout, const ClusterSpec& cluster);

/// `phases` lowered on layout.shape, in the cluster's global ranks: a worker rank v becomes ranks[v], a dedicated
/// server (rank >= shape.workers()) the cluster's server host of the same index.
[[nodiscard]] std::vector<Phase> to_global_ranks(std::vector<Phase> phases, const CommunicatorLayout& layout,
                                                 const ClusterSpec& cluster);

} // namespace ddlsim::sim
