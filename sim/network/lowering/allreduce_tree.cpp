// Double binary tree allreduce as NCCL builds it (NCCL 2.4, src/graph/trees.cc; Sanders, Speck, Traeff, Parallel
// Computing 2009): two complementary binary trees over the nodes, each reducing then broadcasting half of the
// buffer, pipelined in chunks, with a chain through the GPUs of each node hanging off each tree's node.
//
// GPU-level trees. Tree 0 over the N nodes is NCCL's btree (ncclGetBtree: root 0, parent from the lowest set bit);
// tree 1 is its mirror (N even) or its shift by one (N odd), as ncclGetDtree. Tree 0 enters node m at its GPU 0
// and the chain runs g-1 -> ... -> 1 -> 0 upward; tree 1 enters at GPU g-1 and the chain runs 0 -> 1 -> ... -> g-1,
// so the two trees use each intra-node link in opposite directions. Each tree carries n/2: every GPU edge carries
// n/2 up (reduce) and n/2 down (broadcast). A GPU inside a chain, and a node that is inner in one tree and not the
// root of the other, send and receive 2n: the 2n/B of the closed form (DoubleBinaryTree below).
//
// per_message: each tree's n/2 moves in k = pipeline_chunks(n/2) chunks (detail.hpp). With H the tree's height in
// GPU hops (ceil(log2 N) + g - 1), a GPU at depth d sends chunk c up in step c + H - d (as late as its parent needs
// it) and down to its children in step c + H + d: k + 2H - 1 phases, one flow per chunk and edge. Synchronous steps
// make it slower than the closed form: (k + 2H - 1) steps of a + 2n/(kB) on the busiest link.
//
// aggregated: pipelining overlaps everything, so one data phase holds every edge with its total bytes (n/2 per
// tree and direction; the two trees' flows stay separate, as NCCL's channels, even where they share a pair).
// A pipelined tree takes the latency of its longest path up and down plus the busiest link's bytes / B. A flow
// repeats only its own path's latency, so no single flow can carry both the inter-node part 2D a_e (D = the trees'
// depth in nodes, ceil(log2 N)) and the intra-node part 2(g-1) a_i:
//  - N > 1, g > 1: inter-node flows have latency_repeats 2D, intra-node flows 1 (hidden under the inter-node
//    ones), and a zero-byte phase before the data phase (one flow GPU 1 -> GPU 0 per node, latency_repeats
//    2(g-1)) adds the chains' fill and drain: 2(D a_e + (g-1) a_i) + 2n/B_e, the closed form whenever the NIC is
//    the bottleneck (B_e <= B_i, 2D a_e >= a_i). With slower intra-node links it takes max(2D a_e + 2n/B_e,
//    a_i + 2n/B_i) + 2(g-1) a_i, short of the closed form by at most 2D a_e.
//  - N = 1: one phase, chain flows with latency_repeats 2(g-1): 2(g-1) a_i + 2n/B_i.
//  - g = 1: one phase, latency_repeats 2D: 2D a_e + 2n/B_e.
// The 2n/B term needs a link that carries 2n. Two or three nodes have none (each NIC carries at most n resp. 1.5n,
// three flows of n/2), nor does a 2-GPU chain (each GPU sends n): there the lowering is faster than the closed
// form, as the real trees are.
#include "sim/network/lowering/detail.hpp"

#include <algorithm>
#include <cmath>

namespace ddlsim::sim::detail {
namespace {

// NCCL's binary tree over n ranks (ncclGetBtree): the parent of `rank`, -1 for the root 0.
int btree_parent(int n, int rank) {
  if (rank == 0)
    return -1;
  int bit = 1;
  while (bit < n && (bit & rank) == 0)
    bit <<= 1;
  const int up = (rank ^ bit) | (bit << 1);
  return up < n ? up : rank ^ bit;
}

// The two trees of ncclGetDtree: tree 1 mirrors tree 0 (n even) or shifts it by one rank (n odd).
int dtree_parent(int n, int rank, int tree) {
  if (tree == 0)
    return btree_parent(n, rank);
  if (n % 2 == 1) {
    const int up = btree_parent(n, (rank - 1 + n) % n);
    return up < 0 ? -1 : (up + 1) % n;
  }
  const int up = btree_parent(n, n - 1 - rank);
  return up < 0 ? -1 : n - 1 - up;
}

struct GpuTree {
  std::vector<int> parent; ///< per rank, -1 for the root
  std::vector<int> depth;  ///< per rank, GPU hops from the root
  int node_height = 0;     ///< depth of the node tree (inter-node hops)
  int height = 0;          ///< depth of the deepest GPU
};

GpuTree gpu_tree(const LoweringShape& shape, int tree) {
  const int nodes = shape.nodes, g = shape.gpus_per_node, p = shape.workers();
  std::vector<int> node_parent(static_cast<std::size_t>(nodes));
  std::vector<int> node_depth(static_cast<std::size_t>(nodes), 0);
  for (int m = 0; m < nodes; ++m)
    node_parent[static_cast<std::size_t>(m)] = dtree_parent(nodes, m, tree);
  for (int m = 0; m < nodes; ++m) // a binary tree is ceil(log2 N) deep: walking up is cheap
    for (int u = node_parent[static_cast<std::size_t>(m)]; u >= 0; u = node_parent[static_cast<std::size_t>(u)])
      ++node_depth[static_cast<std::size_t>(m)];

  GpuTree t;
  t.parent.resize(static_cast<std::size_t>(p));
  t.depth.resize(static_cast<std::size_t>(p));
  const int head = tree == 0 ? 0 : g - 1;
  for (int r = 0; r < p; ++r) {
    const int m = r / g, local = r % g;
    const int chain = tree == 0 ? local : g - 1 - local; // hops from the node's head
    const int up_node = node_parent[static_cast<std::size_t>(m)];
    int parent = -1;
    if (chain > 0)
      parent = tree == 0 ? r - 1 : r + 1;
    else if (up_node >= 0)
      parent = up_node * g + head;
    t.parent[static_cast<std::size_t>(r)] = parent;
    t.depth[static_cast<std::size_t>(r)] = node_depth[static_cast<std::size_t>(m)] + chain;
  }
  t.node_height = *std::max_element(node_depth.begin(), node_depth.end());
  t.height = *std::max_element(t.depth.begin(), t.depth.end());
  return t;
}

std::vector<Phase> per_message(const LoweringShape& shape, const GpuTree (&trees)[2], double bytes) {
  const int p = shape.workers();
  const int chunks = pipeline_chunks(bytes / 2);
  const double chunk = bytes / 2 / chunks;
  int steps = 0;
  for (const auto& t : trees)
    steps = std::max(steps, chunks + 2 * t.height - 1);
  std::vector<Phase> phases(static_cast<std::size_t>(steps));
  for (int s = 0; s < steps; ++s) {
    auto& flows = phases[static_cast<std::size_t>(s)].flows;
    for (const auto& t : trees) {
      for (int v = 0; v < p; ++v) {
        const int parent = t.parent[static_cast<std::size_t>(v)];
        if (parent < 0)
          continue;
        const int d = t.depth[static_cast<std::size_t>(v)];
        const int up_chunk = s - (t.height - d);       // v sends chunk c up in step c + H - d
        const int down_chunk = s - (t.height + d - 1); // its parent sends chunk c down in step c + H + (d - 1)
        if (up_chunk >= 0 && up_chunk < chunks)
          flows.push_back({v, parent, chunk, 1});
        if (down_chunk >= 0 && down_chunk < chunks)
          flows.push_back({parent, v, chunk, 1});
      }
    }
  }
  return phases;
}

std::vector<Phase> aggregated(const LoweringShape& shape, const GpuTree (&trees)[2], double bytes) {
  const int nodes = shape.nodes, g = shape.gpus_per_node, p = shape.workers();
  const int depth = std::max(trees[0].node_height, trees[1].node_height);
  std::vector<Phase> phases;
  if (nodes > 1 && g > 1) {
    Phase& fill = phases.emplace_back();
    fill.flows.reserve(static_cast<std::size_t>(nodes));
    for (int m = 0; m < nodes; ++m)
      fill.flows.push_back({m * g + 1, m * g, 0.0, 2 * (g - 1)});
  }
  Phase& data = phases.emplace_back();
  data.flows.reserve(static_cast<std::size_t>(4 * (p - 1)));
  const int intra_repeats = nodes > 1 ? 1 : 2 * (g - 1);
  for (const auto& t : trees) {
    for (int v = 0; v < p; ++v) {
      const int parent = t.parent[static_cast<std::size_t>(v)];
      if (parent < 0)
        continue;
      const int repeats = v / g != parent / g ? 2 * depth : intra_repeats;
      data.flows.push_back({v, parent, bytes / 2, repeats});
      data.flows.push_back({parent, v, bytes / 2, repeats});
    }
  }
  return phases;
}

// Closed form: latency up and down the tree, 2(ceil(log2 N) a_inter + (g-1) a_intra); bandwidth: every node sends
// and receives n per direction in the reduce and again in the broadcast, so 2n/B on the bottleneck link.
class DoubleBinaryTree final : public CollectiveModel {
public:
  explicit DoubleBinaryTree(const Network& n) : net_(n) {}
  CollectiveCost cost(double bytes) const override {
    if (net_.workers() <= 1)
      return {};
    const double depth = net_.nodes > 1 ? std::ceil(std::log2(static_cast<double>(net_.nodes))) : 0;
    double latency = 2 * (net_.gpus_per_node - 1) * intra_hop(net_).alpha_s;
    double bandwidth = net_.gpus_per_node > 1 ? intra_hop(net_).bandwidth : inter_hop(net_).bandwidth;
    if (net_.nodes > 1) {
      latency += 2 * depth * inter_hop(net_).alpha_s;
      bandwidth = std::min(bandwidth, inter_hop(net_).bandwidth);
    }
    return {latency + 2 * bytes / bandwidth, 2 * bytes};
  }

protected:
  [[nodiscard]] bool affine_in_bytes() const override { return true; }

private:
  Network net_;
};

} // namespace

std::vector<Phase> lower_allreduce_tree(const LoweringShape& shape, double bytes, Granularity granularity) {
  check_arguments(shape, bytes);
  if (shape.workers() <= 1)
    return {};
  const GpuTree trees[2] = {gpu_tree(shape, 0), gpu_tree(shape, 1)};
  return granularity == Granularity::per_message ? per_message(shape, trees, bytes) : aggregated(shape, trees, bytes);
}

std::unique_ptr<CollectiveModel> closed_form_allreduce_tree(const Network& net) {
  return std::make_unique<DoubleBinaryTree>(net);
}

} // namespace ddlsim::sim::detail
