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
// Every NIC (shape.rails: cluster.nic "per-gpu", several nodes of several GPUs): NCCL runs its trees on every channel,
// each channel's trees entering a node through another GPU's NIC. Here g pairs of trees each carry n/(2g); pair c is
// the pair above with every node's local GPUs rotated by c: its tree 0 enters node m at GPU c (chain c-1 -> ... ->
// c+1 -> c, mod g), its tree 1 at GPU c-1 (chain c -> ... -> c-1). NIC c carries tree 0 of pair c and tree 1 of pair
// c+1: 1/g of what a node's one NIC carries without rails; a GPU link carries 2n(g-1)/g each way (a GPU heads two
// trees, ends the chains of two, and is inside the other 2g-4).
//
// per_message: each tree's n/2 (n/(2g) with rails) moves in k = pipeline_chunks of it chunks (detail.hpp). With H the
// tree's height in GPU hops (ceil(log2 N) + g - 1), a GPU at depth d sends chunk c up in step c + H - d (as late as its
// parent needs it) and down to its children in step c + H + d: k + 2H - 1 phases, one flow per chunk and edge.
// Synchronous steps make it slower than the closed form: (k + 2H - 1) steps of a + 2n/(kB) on the busiest link.
//
// aggregated: pipelining overlaps everything, so one data phase holds every edge with its total bytes (n/2, or
// n/(2g), per tree and direction; the two trees' flows stay separate, as NCCL's channels, even where they share a
// pair). A pipelined tree takes the latency of its longest path up and down plus the busiest link's bytes / B. A flow
// repeats only its own path's latency, so no single flow can carry both the inter-node part 2D a_e (D = the trees'
// depth in nodes, ceil(log2 N)) and the intra-node part 2(g-1) a_i:
//  - N > 1, g > 1: inter-node flows have latency_repeats 2D, intra-node flows 1 (hidden under the inter-node
//    ones), and a zero-byte phase before the data phase (one flow GPU 1 -> GPU 0 per node, latency_repeats
//    2(g-1)) adds the chains' fill and drain: 2(D a_e + (g-1) a_i) + 2n/B_e, the closed form whenever the NIC is
//    the bottleneck (B_e <= B_i, 2D a_e >= a_i). With slower intra-node links it takes max(2D a_e + 2n/B_e,
//    a_i + 2n/B_i) + 2(g-1) a_i, short of the closed form by at most 2D a_e.
//  - N = 1: one phase, chain flows with latency_repeats 2(g-1): 2(g-1) a_i + 2n/B_i.
//  - g = 1: one phase, latency_repeats 2D: 2D a_e + 2n/B_e.
// The closed form takes each link's bytes from the trees themselves: a node's NIC carries n/2 per tree edge it
// sends on (its children in the broadcast, its parent in the reduce), at most 2n from four nodes on, n on two
// nodes (each tree one edge) and 1.5n on three; a chain GPU carries 2n (n in a 2-GPU chain).
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

// Tree `tree` (0, 1) over the nodes: each node's parent (-1 for the root) and depth. Every pair of trees shares it.
struct NodeTree {
  std::vector<int> parent;
  std::vector<int> depth;
};
NodeTree node_tree(int nodes, int tree) {
  NodeTree t{std::vector<int>(static_cast<std::size_t>(nodes)), std::vector<int>(static_cast<std::size_t>(nodes), 0)};
  for (int m = 0; m < nodes; ++m)
    t.parent[static_cast<std::size_t>(m)] = dtree_parent(nodes, m, tree);
  for (int m = 0; m < nodes; ++m) // a binary tree is ceil(log2 N) deep: walking up is cheap
    for (int u = t.parent[static_cast<std::size_t>(m)]; u >= 0; u = t.parent[static_cast<std::size_t>(u)])
      ++t.depth[static_cast<std::size_t>(m)];
  return t;
}

// Tree `tree` (0, 1) of pair `pair` over the GPUs, on the node tree `nodes_tree`: the node's local GPUs rotated by
// `pair` (only pair 0 without rails).
GpuTree gpu_tree(const LoweringShape& shape, const NodeTree& nodes_tree, int tree, int pair) {
  const int g = shape.gpus_per_node, p = shape.workers();
  const auto& node_parent = nodes_tree.parent;
  const auto& node_depth = nodes_tree.depth;
  GpuTree t;
  t.parent.resize(static_cast<std::size_t>(p));
  t.depth.resize(static_cast<std::size_t>(p));
  const int head = ((tree == 0 ? 0 : g - 1) + pair) % g;
  for (int r = 0; r < p; ++r) {
    const int m = r / g, local = (r % g - pair + g) % g; // position in pair 0's order
    const int chain = tree == 0 ? local : g - 1 - local; // hops from the node's head
    const int up_node = node_parent[static_cast<std::size_t>(m)];
    int parent = -1;
    if (chain > 0)
      parent = m * g + (r % g + (tree == 0 ? g - 1 : 1)) % g;
    else if (up_node >= 0)
      parent = up_node * g + head;
    t.parent[static_cast<std::size_t>(r)] = parent;
    t.depth[static_cast<std::size_t>(r)] = node_depth[static_cast<std::size_t>(m)] + chain;
  }
  t.node_height = *std::max_element(node_depth.begin(), node_depth.end());
  t.height = *std::max_element(t.depth.begin(), t.depth.end());
  return t;
}

// Every tree carries bytes / trees.size().
std::vector<Phase> per_message(const LoweringShape& shape, const std::vector<GpuTree>& trees, double bytes) {
  const int p = shape.workers();
  const double share = bytes / static_cast<double>(trees.size());
  const int chunks = pipeline_chunks(share);
  const double chunk = share / chunks;
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

std::vector<Phase> aggregated(const LoweringShape& shape, const std::vector<GpuTree>& trees, double bytes) {
  const int nodes = shape.nodes, g = shape.gpus_per_node, p = shape.workers();
  const double share = bytes / static_cast<double>(trees.size());
  int depth = 0;
  for (const auto& t : trees)
    depth = std::max(depth, t.node_height);
  std::vector<Phase> phases;
  if (nodes > 1 && g > 1) {
    Phase& fill = phases.emplace_back();
    fill.flows.reserve(static_cast<std::size_t>(nodes));
    for (int m = 0; m < nodes; ++m)
      fill.flows.push_back({m * g + 1, m * g, 0.0, 2 * (g - 1)});
  }
  Phase& data = phases.emplace_back();
  data.flows.reserve(2 * trees.size() * static_cast<std::size_t>(p - 1));
  const int intra_repeats = nodes > 1 ? 1 : 2 * (g - 1);
  for (const auto& t : trees) {
    for (int v = 0; v < p; ++v) {
      const int parent = t.parent[static_cast<std::size_t>(v)];
      if (parent < 0)
        continue;
      const int repeats = v / g != parent / g ? 2 * depth : intra_repeats;
      data.flows.push_back({v, parent, share, repeats});
      data.flows.push_back({parent, v, share, repeats});
    }
  }
  return phases;
}

// Closed form: latency up and down the tree, 2(ceil(log2 N) a_inter + (g-1) a_intra); bandwidth: the busiest NIC's
// and the busiest GPU link's bytes, each way, at their rates. A node's NIC sends n/2 per tree on each of its edges
// (to its children in the broadcast, to its parent in the reduce): the most over the nodes, from the trees (2n from
// four nodes on, n on two, 1.5n on three), over g NICs with rails. A GPU inside a chain sends n/2 up and n/2 down
// in each tree: 2n, n in a 2-GPU chain, 2n(g-1)/g with rails (header).
class DoubleBinaryTree final : public CollectiveModel {
public:
  explicit DoubleBinaryTree(const Network& n) : net_(n) {
    const int nodes = n.nodes, g = n.gpus_per_node;
    std::vector<int> edges(static_cast<std::size_t>(nodes), 0); // tree edges (both trees) at each node
    for (int t = 0; nodes > 1 && t < 2; ++t)
      for (int v = 0; v < nodes; ++v)
        if (const int up = dtree_parent(nodes, v, t); up >= 0) {
          ++edges[static_cast<std::size_t>(v)];
          ++edges[static_cast<std::size_t>(up)];
        }
    nic_share_ = *std::max_element(edges.begin(), edges.end()) / 2.0 / n.rails();
    chain_share_ = n.rails() > 1 ? 2.0 * (g - 1) / g : g >= 3 ? 2.0 : g == 2 ? 1.0 : 0.0;
  }
  CollectiveCost cost(double bytes) const override {
    if (net_.workers() <= 1)
      return {};
    const double depth = net_.nodes > 1 ? std::ceil(std::log2(static_cast<double>(net_.nodes))) : 0;
    const double latency = 2 * (net_.gpus_per_node - 1) * intra_hop(net_).alpha_s + 2 * depth * inter_hop(net_).alpha_s;
    // (a term with no bytes is not asked for its link's rate: one node has no NIC traffic, one GPU per node no chain)
    const double nic = nic_share_ > 0 ? nic_share_ * bytes / inter_hop(net_).bandwidth : 0.0;
    const double chain = chain_share_ > 0 ? chain_share_ * bytes / intra_hop(net_).bandwidth : 0.0;
    const double transfer = std::max(nic, chain);
    return {latency + transfer, 2 * bytes};
  }

protected:
  [[nodiscard]] bool affine_in_bytes() const override { return true; }

private:
  Network net_;
  double nic_share_ = 0;   ///< the busiest NIC's bytes each way per byte of the buffer
  double chain_share_ = 0; ///< the busiest GPU link's
};

} // namespace

std::vector<Phase> lower_allreduce_tree(const LoweringShape& shape, double bytes, Granularity granularity) {
  check_arguments(shape, bytes);
  if (shape.workers() <= 1)
    return {};
  const int pairs = shape.rings(); // g with rails over several nodes of several GPUs, else 1
  std::vector<GpuTree> trees;
  trees.reserve(2 * static_cast<std::size_t>(pairs));
  const NodeTree node_trees[2] = {node_tree(shape.nodes, 0), node_tree(shape.nodes, 1)};
  for (int c = 0; c < pairs; ++c)
    for (int t = 0; t < 2; ++t)
      trees.push_back(gpu_tree(shape, node_trees[t], t, c));
  return granularity == Granularity::per_message ? per_message(shape, trees, bytes) : aggregated(shape, trees, bytes);
}

std::unique_ptr<CollectiveModel> closed_form_allreduce_tree(const Network& net) {
  return std::make_unique<DoubleBinaryTree>(net);
}

} // namespace ddlsim::sim::detail
