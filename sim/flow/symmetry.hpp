// Node symmetry for the flow engine: simulating one node's flows stands for all nodes when both the platform and
// the traffic are invariant under a group of node translations.
//
// Why it is exact. Let a group G act freely and transitively on the nodes, mapping a node's GPU k to GPU k of the
// image node, and suppose every platform automorphism it induces preserves links (true for a star of identical
// nodes: any node permutation is an automorphism) and every phase of every collective in flight maps onto itself
// (checked flow by flow, `invariant`). The max-min fair allocation is unique, so it is G-invariant: flows in one
// orbit get the same rate, links in one orbit the same load, and all of it evolves identically through time.
// Each flow orbit has exactly one member whose source is on node 0 (G is free and transitive on nodes); on a star a
// flow crosses at most one link of each link orbit (its source's intra or NIC up-link, its destination's NIC
// down-link or intra down-link), so the number of orbit members on any one link of an orbit is 1 and the reduced
// max-min problem is the full one restricted to the representatives. The reduced problem is itself a platform:
// the 2-node star of the same nodes, where node 0 holds the sources and the representative up-links and intra
// links, and node 1 stands for every other node, its NIC down-links representing every node's. A flow from node 0
// to node d != 0 is simulated as the flow to the same GPU of node 1, whose route (NIC up of node 0, NIC down of
// node 1) has the same links' characteristics and the same latency.
//
// Scope: star topologies (or any cluster whose nodes all hang off one non-blocking switch) with at least two
// nodes, and collectives over all workers whose lowering is invariant under the cyclic node shift (ring,
// hierarchical) or the XOR node group (recursive halving-doubling on power-of-two node counts). Trees, fat-trees,
// rings and tori fall back to simulating every flow. tests/flow compares both against each other.
#pragma once

#include "sim/flow/platform.hpp"
#include "sim/network/lowering/lowering.hpp"

#include <span>
#include <string_view>
#include <vector>

namespace ddlsim::sim::flow {

/// Node translation groups; `cyclic`: node n -> n + 1 mod N; `xor_nodes`: node n -> n XOR 2^j (N a power of two).
enum class NodeSymmetry { none, cyclic, xor_nodes };

[[nodiscard]] std::string_view symmetry_name(NodeSymmetry s);

/// Groups worth trying for `shape`, in order of preference (none when there is one node).
[[nodiscard]] std::vector<NodeSymmetry> candidate_symmetries(const LoweringShape& shape);

/// Whether every phase of `phases` maps onto itself (same flows: source, destination, bytes, latency repeats)
/// under each generator of `group`. Never for a flow to or from a rank beyond the workers (a dedicated parameter
/// server): it belongs to no node.
[[nodiscard]] bool invariant(std::span<const Phase> phases, const LoweringShape& shape, NodeSymmetry group);

/// Why the cluster's platform does not admit the 2-node quotient, or empty when it does (star, >= 2 nodes, no
/// dedicated server hosts).
[[nodiscard]] std::string_view quotient_obstacle(const ClusterSpec& cluster);

/// The quotient platform's cluster: the same nodes, two of them, on a star.
[[nodiscard]] ClusterSpec quotient_cluster(const ClusterSpec& cluster);

/// The representatives of `phases`: flows whose source is on node 0, destinations on other nodes moved to the
/// same GPU of node 1 (ranks of the quotient platform). Phases keep their order; a phase may become empty.
[[nodiscard]] std::vector<Phase> quotient_phases(const std::vector<Phase>& phases, const LoweringShape& shape);

/// The statistics of every link of the full cluster's star platform (build_platform's order and names) from those
/// of its quotient: each link takes its representative's figures (node 0's intra and NIC up-links, node 1's NIC
/// down-links).
[[nodiscard]] std::vector<LinkStats> expand_link_stats(const std::vector<LinkStats>& quotient,
                                                       const ClusterSpec& cluster);

} // namespace ddlsim::sim::flow
