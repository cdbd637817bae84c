// A communicator (an ordered set of global GPU ranks) seen by the collectives: its ranks must come in blocks of
// equal size, one block per node, so that it is a smaller cluster of the same kind — the shape its lowering and its
// closed form take (a data-parallel group of one GPU per node is nodes x 1, a tensor-parallel group inside a node
// 1 x t, a point-to-point pair 1 x 2 or 2 x 1). The lowering's rank v is the communicator's ranks[v].
#pragma once

#include "sim/network/cluster.hpp"
#include "sim/network/lowering/lowering.hpp"

#include <vector>

namespace ddlsim::sim {

/// A communicator placed on a cluster: the one description every lowering, closed form, engine and report takes
/// (layout_of builds it; nothing else assembles a shape or a network from a cluster's fields).
struct CommunicatorLayout {
  LoweringShape shape;        ///< nodes, GPUs per node and rails of the communicator (net.shape())
  std::vector<int> ranks;     ///< the lowering's rank v is global GPU rank ranks[v]
  bool whole_cluster = false; ///< ranks are exactly 0 .. workers-1 in order: no mapping needed
  Network net;                ///< the links its closed forms see: the cluster's, on its nodes and GPUs per node
};

/// The layout of `ranks` on `cluster`. Throws std::invalid_argument naming the problem when a rank is out of range
/// or repeated, the ranks are not equal blocks of one node each, or (two sockets) a node's block is split between
/// the sockets otherwise than half and half.
[[nodiscard]] CommunicatorLayout layout_of(const std::vector<int>& ranks, const ClusterSpec& cluster);

/// The layout of every GPU of the cluster in rank order (pure data parallelism).
[[nodiscard]] CommunicatorLayout whole_cluster_layout(const ClusterSpec& cluster);

/// `phases` lowered on `shape` over the GPUs `ranks`, in the cluster's global ranks: a worker rank v becomes ranks[v],
/// a dedicated server (rank >= shape.workers()) the cluster's server host of the same index.
[[nodiscard]] std::vector<Phase> to_global_ranks(std::vector<Phase> phases, const LoweringShape& shape,
                                                 const std::vector<int>& ranks, const ClusterSpec& cluster);

} // namespace ddlsim::sim
