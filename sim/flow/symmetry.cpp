// Node symmetry and the 2-node quotient (symmetry.hpp).
#include "sim/flow/symmetry.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <stdexcept>
#include <tuple>
#include <unordered_map>

namespace ddlsim::sim::flow {
namespace {

using Key = std::tuple<int, int, double, int>;

Key key(const Flow& f) {
  return {f.src, f.dst, f.bytes, f.latency_repeats};
}

// Applies the node map to both ends of every flow of `phase`, sorted, against the sorted phase itself.
template <class NodeMap>
bool maps_onto_itself(const std::vector<Key>& sorted, const Phase& phase, int g, NodeMap node_map) {
  std::vector<Key> mapped;
  mapped.reserve(phase.flows.size());
  for (const auto& f : phase.flows)
    mapped.emplace_back(node_map(f.src / g) * g + f.src % g, node_map(f.dst / g) * g + f.dst % g, f.bytes,
                        f.latency_repeats);
  std::sort(mapped.begin(), mapped.end());
  return mapped == sorted;
}

} // namespace

std::string_view symmetry_name(NodeSymmetry s) {
  switch (s) {
  case NodeSymmetry::none:
    return "none";
  case NodeSymmetry::cyclic:
    return "cyclic node shift";
  case NodeSymmetry::xor_nodes:
    return "XOR node group";
  }
  return "?";
}

std::vector<NodeSymmetry> candidate_symmetries(const LoweringShape& shape) {
  std::vector<NodeSymmetry> out;
  if (shape.nodes < 2)
    return out;
  out.push_back(NodeSymmetry::cyclic);
  if (std::has_single_bit(static_cast<unsigned>(shape.nodes)))
    out.push_back(NodeSymmetry::xor_nodes);
  return out;
}

bool invariant(std::span<const Phase> phases, const LoweringShape& shape, NodeSymmetry group) {
  const int nodes = shape.nodes;
  const int g = shape.gpus_per_node;
  if (group == NodeSymmetry::none || nodes < 2)
    return false;
  for (const auto& phase : phases) {
    // A flow to or from a rank beyond the workers (a dedicated parameter server) has no node to map.
    for (const auto& f : phase.flows)
      if (f.src >= shape.workers() || f.dst >= shape.workers())
        return false;
    std::vector<Key> sorted;
    sorted.reserve(phase.flows.size());
    for (const auto& f : phase.flows)
      sorted.push_back(key(f));
    std::sort(sorted.begin(), sorted.end());
    if (group == NodeSymmetry::cyclic) {
      if (!maps_onto_itself(sorted, phase, g, [nodes](int n) { return (n + 1) % nodes; }))
        return false;
      continue;
    }
    for (int bit = 1; bit < nodes; bit <<= 1)
      if (!maps_onto_itself(sorted, phase, g, [bit](int n) { return n ^ bit; }))
        return false;
  }
  return true;
}

std::string_view quotient_obstacle(const ClusterSpec& cluster) {
  if (cluster.nodes < 2)
    return "a single node";
  if (cluster.topology.kind != TopologyKind::star)
    return "the topology is not a star";
  if (cluster.server_hosts > 0)
    return "dedicated parameter-server hosts";
  return {};
}

ClusterSpec quotient_cluster(const ClusterSpec& cluster) {
  ClusterSpec q = cluster;
  q.nodes = 2;
  return q;
}

std::vector<Phase> quotient_phases(const std::vector<Phase>& phases, const LoweringShape& shape) {
  const int g = shape.gpus_per_node;
  std::vector<Phase> out(phases.size());
  for (std::size_t i = 0; i < phases.size(); ++i) {
    // A ring step keeps its chain: node 0's flows are one period of the ring's edges (lowering.hpp).
    out[i].chain_hops = phases[i].chain_hops;
    out[i].chain_hop = phases[i].chain_hop;
    out[i].extra_latency_s = phases[i].extra_latency_s;
    out[i].rings = phases[i].rings;
    for (const auto& f : phases[i].flows)
      if (f.src / g == 0) {
        Flow r = f;
        if (f.dst / g != 0)
          r.dst = g + f.dst % g;
        out[i].flows.push_back(r);
      }
  }
  return out;
}

std::vector<LinkStats> expand_link_stats(const std::vector<LinkStats>& quotient, const ClusterSpec& cluster) {
  std::unordered_map<std::string, const LinkStats*> by_name;
  for (const auto& l : quotient)
    by_name.emplace(l.name, &l);
  std::vector<LinkStats> out;
  // build_platform's order for a star: per node its NIC (NIC per node), then per GPU its NIC (NIC per GPU) and
  // its intra link (more than one GPU per node); each split-duplex link as _UP then _DOWN.
  const auto add = [&](const std::string& name, const std::string& up_representative,
                       const std::string& down_representative) {
    for (const auto& [dir, rep] : {std::pair{"_UP", up_representative}, std::pair{"_DOWN", down_representative}}) {
      const auto it = by_name.find(rep + dir);
      if (it == by_name.end())
        throw std::logic_error(fmt::format("flow symmetry: the quotient has no link {}{}", rep, dir));
      LinkStats s = *it->second;
      s.name = name + dir;
      out.push_back(std::move(s));
    }
  };
  const int g = cluster.gpus_per_node;
  for (int node = 0; node < cluster.nodes; ++node) {
    if (!cluster.nic_per_gpu)
      add(fmt::format("node{}-nic", node), "node0-nic", "node1-nic");
    for (int k = 0; k < g; ++k) {
      if (cluster.nic_per_gpu)
        add(fmt::format("node{}-gpu{}-nic", node, k), fmt::format("node0-gpu{}-nic", k),
            fmt::format("node1-gpu{}-nic", k));
      if (g > 1) {
        const auto rep = fmt::format("node0-gpu{}-intra", k);
        add(fmt::format("node{}-gpu{}-intra", node, k), rep, rep);
      }
    }
  }
  return out;
}

} // namespace ddlsim::sim::flow
