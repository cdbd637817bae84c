// Communicator layouts (sim/network/communicator.hpp).
#include "sim/network/communicator.hpp"

#include <fmt/format.h>

#include <set>
#include <stdexcept>
#include <utility>

namespace ddlsim::sim {

namespace {

// The ranks' blocks, one per node, all of one size: their nodes and that size. Throws when they are not.
std::pair<int, int> node_blocks(const std::vector<int>& ranks, const ClusterSpec& cluster) {
  const int workers = cluster.workers(), g = cluster.gpus_per_node;
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
  return {static_cast<int>(nodes.size()), static_cast<int>(block)};
}

// Whether a communicator's block of GPUs on each node (the same on every node, in its order) crosses the host link of
// two sockets: inside one socket it never does; with the first half of its block on one socket and the rest on the
// other it crosses as a whole node does (Network::host_direction); another split is not described (throws).
bool crosses_sockets(const std::vector<int>& ranks, int block, const ClusterSpec& cluster) {
  const int half = cluster.gpus_per_node / 2;
  const auto socket = [&](int k) { return ranks[static_cast<std::size_t>(k)] % cluster.gpus_per_node < half; };
  int on_first = 0;
  bool halves = true;
  for (int k = 0; k < block; ++k) {
    on_first += socket(k) ? 1 : 0;
    halves = halves && socket(k) == socket(k < block / 2 ? 0 : block - 1);
  }
  if (on_first == 0 || on_first == block)
    return false;
  if (!halves || 2 * on_first != block)
    throw std::invalid_argument(fmt::format("communicator's {} GPUs per node are not one socket's, nor its first "
                                            "half on one socket and the rest on the other",
                                            block));
  return true;
}

} // namespace

CommunicatorLayout whole_cluster_layout(const ClusterSpec& cluster) {
  CommunicatorLayout layout{.shape = {}, .ranks = {}, .whole_cluster = true, .net = cluster.network()};
  layout.shape = layout.net.shape();
  layout.ranks.resize(static_cast<std::size_t>(cluster.workers()));
  for (std::size_t i = 0; i < layout.ranks.size(); ++i)
    layout.ranks[i] = static_cast<int>(i);
  return layout;
}

CommunicatorLayout layout_of(const std::vector<int>& ranks, const ClusterSpec& cluster) {
  if (ranks.empty())
    throw std::invalid_argument("a communicator needs at least one rank");
  // The whole cluster in rank order (pure data parallelism, every run): one pass, no set over the ranks.
  bool identity = static_cast<int>(ranks.size()) == cluster.workers();
  for (std::size_t i = 0; identity && i < ranks.size(); ++i)
    identity = ranks[i] == static_cast<int>(i);
  if (identity)
    return whole_cluster_layout(cluster);
  const auto [nodes, block] = node_blocks(ranks, cluster);
  CommunicatorLayout layout{.shape = {}, .ranks = ranks, .whole_cluster = false, .net = cluster.network()};
  layout.net.nodes = nodes;
  layout.net.gpus_per_node = block;
  layout.net.two_sockets = layout.net.two_sockets && crosses_sockets(ranks, block, cluster);
  layout.shape = layout.net.shape();
  return layout;
}

std::vector<Phase> to_global_ranks(std::vector<Phase> phases, const LoweringShape& shape, const std::vector<int>& ranks,
                                   const ClusterSpec& cluster) {
  const int workers = shape.workers();
  const auto global = [&](int r) {
    return r < workers ? ranks[static_cast<std::size_t>(r)] : cluster.workers() + (r - workers);
  };
  for (auto& phase : phases)
    for (auto& f : phase.flows) {
      f.src = global(f.src);
      f.dst = global(f.dst);
    }
  return phases;
}

} // namespace ddlsim::sim
