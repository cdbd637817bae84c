// The cluster every layer describes the same way: nodes of GPUs, each GPU's link into its node's fabric (`intra`),
// each network endpoint's NIC link (`inter`, per node or per GPU), and how the NICs connect (docs/engines.md, "Link
// semantics"). Closed forms, lowerings, the flow engine's platform and the scenario parser all take it from here.
#pragma once

#include "sim/network/lowering/lowering.hpp"

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ddlsim::sim {

struct LinkSpec {
  LinkSpec() = default;
  LinkSpec(double bandwidth_Bps, double latency) : bandwidth(bandwidth_Bps), latency_s(latency) {}
  double bandwidth = 0; ///< B/s that NCCL achieves: the scenario's rate x `efficiency`
  double latency_s = 0;
  std::string transport; ///< "rdma", "tcp", or empty: the bandwidth as the scenario gives it
  double efficiency = 1; ///< applied to the scenario's rate (the transport's default, or the scenario's own)
};

/// The share of a link's rate that NCCL's collectives achieve over a transport (`cluster.*.transport`):
///  - rdma (InfiniBand, RoCE): 12.2 GB/s of allreduce bus bandwidth on a 100 Gb/s card, "as good as you can get"
///    (NVIDIA's NCCL maintainer, NVIDIA/nccl-tests issue #29): 12.2 / 12.5.
///  - tcp (NCCL's socket transport): 9.45 GB/s of allreduce bus bandwidth at 1 GiB over 2 nodes x 4 A100 whose nodes
///    have two 200 Gb/s Slingshot-11 ports each, used through plain TCP sockets (tests/data/shared/nccl-tests/
///    a100_2x4_tcp_allreduce.txt, ALCF Polaris; ALCF's machine overview for the ports): 9.45 / 50.
///  - nvlink (a node's GPU links): NCCL's rate per NVLink link over the link's rate, which depends on the GPU
///    (sim/spec/gpus.cpp: 20.6 / 25 GB/s on Hopper, 20 / 25 on Volta and Ampere, NVIDIA/nccl src/graph/topo.h); the
///    scenario parser resolves it from the GPU preset (nvlink_efficiency). On 8 H100 NCCL's sendrecv reaches 367 GB/s
///    of 450 (tests/data/shared/nccl-tests/h100_1x8_sweep_32MiB-16GiB.log), 20.6 / 25 of it 370.8.
inline constexpr double kRdmaEfficiency = 12.2 / 12.5;
inline constexpr double kTcpEfficiency = 9.45 / 50;
inline constexpr std::array<std::string_view, 3> kTransportNames{"rdma", "tcp", "nvlink"};
/// The transport's share of the rate; nvlink's is the GPU's (nvlink_efficiency), 1 here.
[[nodiscard]] constexpr double transport_efficiency(std::string_view transport) {
  return transport == "rdma" ? kRdmaEfficiency : transport == "tcp" ? kTcpEfficiency : 1.0;
}
/// NCCL's share of an NVLink link's rate for a GPU whose links run at `link_Bps` and that NCCL rates at `nccl_Bps`.
[[nodiscard]] constexpr double nvlink_efficiency(double link_Bps, double nccl_Bps) {
  return nccl_Bps / link_Bps;
}

/// What joins a node's GPUs (`cluster.intra_node.fabric`): a non-blocking switch every GPU link goes into
/// ("switch", as one PCIe switch and an NVSwitch both are for point-to-point traffic), an NVSwitch, which with Hopper
/// GPUs can also reduce (NVLink SHARP: the `nvls` allreduce), or two sockets ("two-sockets"): GPUs 0 .. g/2-1 behind
/// socket 0 and g/2 .. g-1 behind socket 1, each half on its own switch, the sockets joined by a host link (QPI / UPI /
/// Infinity Fabric, `intra_node.host_link`) that every GPU-to-GPU flow between the halves crosses, one direction each
/// way. NICs are reached without crossing it (a NIC per socket or per GPU).
enum class Fabric { switch_, nvswitch, two_sockets };

struct Network {
  int nodes = 1;
  int gpus_per_node = 1;
  LinkSpec intra;
  LinkSpec inter;
  bool nic_per_gpu = false; ///< every GPU has its own NIC: off-node flows of one node do not share it
  int server_hosts = 0;     ///< dedicated parameter-server hosts (ranks workers() ..), each with an `inter` NIC
  bool two_sockets = false; ///< Fabric::two_sockets: flows between a node's halves also cross `host`
  LinkSpec host{};          ///< the host link between the sockets (two_sockets)
  [[nodiscard]] int workers() const { return nodes * gpus_per_node; }
  /// Whether a flow between GPUs `a` and `b` of one node (local indices) crosses the host link, and which way
  /// (0: socket 0 -> 1, 1: socket 1 -> 0); -1 when it does not.
  [[nodiscard]] int host_direction(int a, int b) const {
    if (!two_sockets)
      return -1;
    const int half = gpus_per_node / 2, sa = a < half ? 0 : 1, sb = b < half ? 0 : 1;
    return sa == sb ? -1 : sa;
  }
  /// The host link a flow between ranks `src` and `dst` of one node crosses, as node x 2 + direction
  /// (host_direction), or -1 when it crosses none.
  [[nodiscard]] int host_link(int src, int dst) const {
    const int d = host_direction(src % gpus_per_node, dst % gpus_per_node);
    return d < 0 ? -1 : src / gpus_per_node * 2 + d;
  }
  /// The shape its collectives are lowered on: its nodes and GPUs per node, and whether a ring algorithm runs one ring
  /// per NIC (rails): the one place a lowering's shape is taken from a network.
  [[nodiscard]] LoweringShape shape() const {
    return {.nodes = nodes, .gpus_per_node = gpus_per_node, .rails = nic_per_gpu};
  }
  /// The rings (pairs of trees) NCCL's channels spread over a node's NICs: g with a NIC per GPU over several nodes of
  /// several GPUs, else 1 (LoweringShape::rings).
  [[nodiscard]] int rails() const { return shape().rings(); }
  /// How many flows leaving one node at once share one NIC link.
  [[nodiscard]] int nic_sharers(int crossing_flows) const { return nic_per_gpu ? 1 : crossing_flows; }
};

/// A measured whole-collective cost model T(n) = alpha + beta * n (n in bytes), e.g. fitted to nccl-tests.
struct AlphaBeta {
  double alpha_s = 0;
  double beta_s_per_byte = 0;
};

/// The kinds of `cluster.topology`, named as in the scenario by kTopologyNames.
enum class TopologyKind { star, fat_tree, ring, torus };
inline constexpr std::array<std::string_view, 4> kTopologyNames{"star", "fat-tree", "ring", "torus"}; ///< by kind
[[nodiscard]] constexpr std::string_view topology_name(TopologyKind k) {
  return kTopologyNames[static_cast<std::size_t>(k)];
}
[[nodiscard]] constexpr std::optional<TopologyKind> find_topology(std::string_view name) {
  for (std::size_t k = 0; k < kTopologyNames.size(); ++k)
    if (kTopologyNames[k] == name)
      return static_cast<TopologyKind>(k);
  return std::nullopt;
}

/// How the NIC links connect. The endpoints of the network are the nodes (one NIC per node) or the GPUs (a NIC
/// per GPU); every endpoint has its `inter_node` link into the network.
struct TopologySpec {
  TopologyKind kind = TopologyKind::star;
  std::vector<unsigned> down, up, parallel; ///< fat-tree, per level from the leaves (SimGrid's FatTreeParams)
  std::vector<unsigned> dimensions;         ///< torus; a ring is the torus {endpoints}
  LinkSpec link;                            ///< switch-to-switch (fat-tree) or neighbour (ring, torus) links
};

struct ClusterSpec {
  int nodes = 1;
  int gpus_per_node = 1;
  LinkSpec intra;
  LinkSpec inter;
  bool nic_per_gpu = false;        ///< `nic`: "per-node" (default, shared by the node's GPUs) or "per-gpu"
  Fabric fabric = Fabric::switch_; ///< `intra_node.fabric`
  LinkSpec host_link;              ///< `intra_node.host_link`, for Fabric::two_sockets
  bool nvls = false;               ///< NVLink SHARP available: an NVSwitch fabric of Hopper (or later) GPUs
  TopologySpec topology;
  /// Dedicated parameter-server hosts (strategy.placement "dedicated"): one host per server after the workers,
  /// each with its own `inter_node` NIC on the star; set by the scenario parser from the strategy.
  int server_hosts = 0;
  [[nodiscard]] int workers() const { return nodes * gpus_per_node; }
  [[nodiscard]] int endpoints() const { return nic_per_gpu ? workers() : nodes; }
  [[nodiscard]] Network network() const {
    return {nodes, gpus_per_node, intra, inter, nic_per_gpu, server_hosts, fabric == Fabric::two_sockets, host_link};
  }
};

} // namespace ddlsim::sim
