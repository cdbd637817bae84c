// Communicator layouts (sim/network/communicator.hpp).
#include "sim/network/communicator.hpp"

#include <fmt/format.h>

#include <set>
#include <stdexcept>

namespace ddlsim::sim {

CommunicatorLayout layout_of(const std::vector<int>& ranks, const ClusterSpec& cluster) {
  if (ranks.empty())
    throw std::invalid_argument("a communicator needs at least one rank");
  const int workers = cluster.workers(), g = cluster.gpus_per_node;
  // The whole cluster in rank order (pure data parallelism, every run): one pass, no set over the ranks.
  bool identity = static_cast<int>(ranks.size()) == workers;
  for (std::size_t i = 0; identity && i < ranks.size(); ++i)
    identity = ranks[i] == static_cast<int>(i);
  if (identity)
    return {.shape = {.nodes = cluster.nodes, .gpus_per_node = g}, .ranks = ranks, .whole_cluster = true};
  std::set<int> seen, nodes;
  for (int r : ranks) {
    if (r < 0 || r >= workers)
      throw std::invalid_argument(
          fmt::format("communicator rank {} is not a GPU of the cluster (0..{})", r, workers - 1));
    if (!seen.insert(r).second)
      throw std::invalid_argument(fmt::format("communicator rank {} appears twice", r));
  }
  // Blocks: consecutive ranks on the same node; every node once, all blocks of one size.
  std::size_t block = 0;
  while (block < ranks.size() && ranks[block] / g == ranks[0] / g)
    ++block;
  for (std::size_t start = 0; start < ranks.size(); start += block) {
    const int node = ranks[start] / g;
    if (!nodes.insert(node).second)
      throw std::invalid_argument(fmt::format("communicator ranks on node {} are not consecutive", node));
    for (std::size_t k = start; k < start + block; ++k)
      if (k >= ranks.size() || ranks[k] / g != node)
        throw std::invalid_argument(
            fmt::format("communicator has {} GPU(s) on node {} but not on node {}: every node needs the same number",
                        block, ranks[0] / g, node));
    if (start + block < ranks.size() && ranks[start + block] / g == node)
      throw std::invalid_argument(
          fmt::format("communicator has more GPUs on node {} than on node {}: every node needs the same number", node,
                      ranks[0] / g));
  }
  CommunicatorLayout layout;
  layout.shape.nodes = static_cast<int>(nodes.size());
  layout.shape.gpus_per_node = static_cast<int>(block);
  layout.shape.rails = cluster.nic_per_gpu;
  layout.ranks = ranks;
  return layout;
}

Network network_of(const CommunicatorLayout& layout, const ClusterSpec& cluster) {
  Network net = cluster.network();
  net.nodes = layout.shape.nodes;
  net.gpus_per_node = layout.shape.gpus_per_node;
  if (net.two_sockets && !layout.whole_cluster) {
    // A communicator's block of GPUs on each node (the same on every node), in its order: inside one socket it never
    // crosses the host link; with the first half of its block on one socket and the rest on the other it crosses as a
    // whole node does (Network::host_direction); another split is not described.
    const int block = layout.shape.gpus_per_node, half = cluster.gpus_per_node / 2;
    const auto socket = [&](int k) { return layout.ranks[static_cast<std::size_t>(k)] % cluster.gpus_per_node < half; };
    int on_first = 0;
    bool halves = true;
    for (int k = 0; k < block; ++k) {
      on_first += socket(k) ? 1 : 0;
      halves = halves && socket(k) == socket(k < block / 2 ? 0 : block - 1);
    }
    if (on_first == 0 || on_first == block)
      net.two_sockets = false;
    else if (!halves || 2 * on_first != block)
      throw std::invalid_argument(fmt::format("communicator's {} GPUs per node are not one socket's, nor its first "
                                              "half on one socket and the rest on the other",
                                              block));
  }
  return net;
}

std::vector<Phase> to_global_ranks(std::vector<Phase> phases, const CommunicatorLayout& layout,
                                   const ClusterSpec& cluster) {
  if (layout.whole_cluster)
    return phases;
  const int workers = layout.shape.workers();
  const auto global = [&](int r) {
    return r < workers ? layout.ranks[static_cast<std::size_t>(r)] : cluster.workers() + (r - workers);
  };
  for (auto& phase : phases)
    for (auto& f : phase.flows) {
      f.src = global(f.src);
      f.dst = global(f.dst);
    }
  return phases;
}

} // namespace ddlsim::sim
