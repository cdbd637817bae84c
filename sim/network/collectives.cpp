// Closed forms of allreduce algorithms in the alpha-beta model (Thakur, Rabenseifner, Gropp: "Optimization of
// Collective Communication Operations in MPICH", IJHPCA 2005; Patarasuk & Yuan, JPDC 2009 for the ring;
// Sanders, Speck, Traeff, Parallel Computing 2009 and NCCL 2.4 for the double binary tree). Reduction
// arithmetic is not costed (GPU reductions run at memory bandwidth, far above network bandwidth).
#include "sim/network/collectives.hpp"

#include "sim/network/lowering/lowering.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>

namespace ddlsim::sim {
namespace {

struct Hop {
  double alpha_s;
  double bandwidth;
};
Hop intra_hop(const Network& n) {
  return {2 * n.intra.latency_s, n.intra.bandwidth};
}
Hop inter_hop(const Network& n) {
  return {2 * n.inter.latency_s, n.inter.bandwidth};
}

// Ring (Patarasuk & Yuan): reduce-scatter then allgather, 2(p-1) steps of n/p bytes. Ranks are node-major, so
// one ring edge leaves each node per direction and no NIC is shared; every step lasts as long as its slowest
// hop. On one node, or with one GPU per node: 2(p-1)a + 2(p-1)/p n/B exactly.
class Ring final : public AllreduceModel {
public:
  explicit Ring(const Network& n) : net_(n) {}
  CollectiveCost cost(double bytes) const override {
    const int p = net_.workers();
    if (p <= 1)
      return {};
    const double chunk = bytes / p;
    double step = 0;
    if (net_.gpus_per_node > 1)
      step = std::max(step, intra_hop(net_).alpha_s + chunk / intra_hop(net_).bandwidth);
    if (net_.nodes > 1)
      step = std::max(step, inter_hop(net_).alpha_s + chunk / inter_hop(net_).bandwidth);
    return {2.0 * (p - 1) * step, 2.0 * (p - 1) * chunk};
  }

private:
  Network net_;
};

// Recursive halving (reduce-scatter) then recursive doubling (allgather), Rabenseifner's algorithm as in
// Thakur et al. 2005, Sec. 4.4: with p' = 2^floor(log2 p) and r = p - p', the first 2r ranks pair up before
// (send n) and after (send n) the core; the core has log2 p' steps of n/2^s bytes each way. A step whose
// partners sit on different nodes uses the NIC, shared by all ranks of a node that cross in that step.
class HalvingDoubling final : public AllreduceModel {
public:
  explicit HalvingDoubling(const Network& n) : net_(n) {
    const int p = n.workers();
    if (p <= 1)
      return;
    const PowerOfTwoCore core_map(p);
    core_ = core_map.core;
    extra_ = core_map.extra;
    auto real = [&core_map](int v) { return core_map.real(v); };
    auto node = [&](int rank) { return rank / n.gpus_per_node; };
    for (int d = core_ / 2; d >= 1; d /= 2) {
      std::vector<int> crossing(static_cast<std::size_t>(n.nodes), 0);
      for (int v = 0; v < core_; ++v)
        if (node(real(v)) != node(real(v ^ d)))
          ++crossing[static_cast<std::size_t>(node(real(v)))];
      steps_.push_back(*std::max_element(crossing.begin(), crossing.end()));
    }
    for (int i = 0; i < extra_; ++i)
      if (node(2 * i) != node(2 * i + 1))
        pair_crosses_ = true;
  }
  CollectiveCost cost(double bytes) const override {
    if (core_ == 0)
      return {};
    CollectiveCost c;
    double share = bytes;
    for (int sharers : steps_) {
      share /= 2;
      const Hop h = sharers > 0 ? inter_hop(net_) : intra_hop(net_);
      const double bw = sharers > 0 ? h.bandwidth / net_.nic_sharers(sharers) : h.bandwidth;
      c.time_s += 2 * (h.alpha_s + share / bw); // once halving, once doubling
    }
    c.bytes_sent = 2 * bytes * (core_ - 1) / core_;
    if (extra_ > 0) {
      const Hop h = pair_crosses_ ? inter_hop(net_) : intra_hop(net_);
      c.time_s += 2 * (h.alpha_s + bytes / h.bandwidth);
      c.bytes_sent += bytes;
    }
    return c;
  }

private:
  Network net_;
  int core_ = 0;
  int extra_ = 0;
  bool pair_crosses_ = false;
  std::vector<int> steps_; ///< per core step (far to near): most ranks of one node crossing to other nodes
};

// Double binary tree as NCCL builds it (NCCL 2.4): a chain through the GPUs of each node and two complementary
// binary trees across nodes, each carrying half the data, pipelined. Latency: up and down the tree,
// 2(ceil(log2 N) a_inter + (g-1) a_intra); bandwidth: every node sends and receives n per direction in the
// reduce and again in the broadcast, so 2n/B on the bottleneck link.
class DoubleBinaryTree final : public AllreduceModel {
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

private:
  Network net_;
};

// Hierarchical 2-level allreduce (as Horovod's hierarchical allreduce and 2D-torus schemes): ring
// reduce-scatter inside each node, g concurrent ring allreduces of n/g across nodes sharing the node's NIC,
// ring allgather inside each node: 2(g-1)(a_i + n/(g B_i)) + 2(N-1) a_e + 2(N-1)/N n/B_e.
class Hierarchical final : public AllreduceModel {
public:
  explicit Hierarchical(const Network& n) : net_(n) {}
  CollectiveCost cost(double bytes) const override {
    const int g = net_.gpus_per_node, nodes = net_.nodes;
    if (g * nodes <= 1)
      return {};
    CollectiveCost c;
    if (g > 1) {
      const Hop h = intra_hop(net_);
      c.time_s += 2.0 * (g - 1) * (h.alpha_s + bytes / g / h.bandwidth);
      c.bytes_sent += 2.0 * (g - 1) * bytes / g;
    }
    if (nodes > 1) {
      const Hop h = inter_hop(net_);
      const double slice = bytes / g;
      c.time_s += 2.0 * (nodes - 1) * (h.alpha_s + slice / nodes / (h.bandwidth / net_.nic_sharers(g)));
      c.bytes_sent += 2.0 * (nodes - 1) * slice / nodes;
    }
    return c;
  }

private:
  Network net_;
};

class Measured final : public AllreduceModel {
public:
  Measured(const Network& n, AlphaBeta fit) : ring_(n), fit_(fit), workers_(n.workers()) {}
  CollectiveCost cost(double bytes) const override {
    if (workers_ <= 1)
      return {};
    return {fit_.alpha_s + fit_.beta_s_per_byte * bytes, ring_.cost(bytes).bytes_sent};
  }

private:
  Ring ring_;
  AlphaBeta fit_;
  int workers_;
};

template <class Model> std::unique_ptr<AllreduceModel> make(const Network& n) {
  return std::make_unique<Model>(n);
}

constexpr std::array<AllreduceAlgorithm, 4> kAlgorithms{{
    {"halving-doubling", "recursive halving reduce-scatter + recursive doubling allgather (Rabenseifner)",
     &make<HalvingDoubling>},
    {"hierarchical", "intra-node reduce-scatter, inter-node ring allreduce, intra-node allgather", &make<Hierarchical>},
    {"ring", "ring reduce-scatter + allgather, 2(p-1) steps (bandwidth-optimal)", &make<Ring>},
    {"tree", "double binary tree across nodes, chain inside a node, pipelined (NCCL)", &make<DoubleBinaryTree>},
}};

} // namespace

std::span<const AllreduceAlgorithm> allreduce_algorithms() {
  return kAlgorithms;
}

const AllreduceAlgorithm* find_allreduce_algorithm(std::string_view name) {
  for (const auto& a : kAlgorithms)
    if (a.name == name)
      return &a;
  return nullptr;
}

std::unique_ptr<AllreduceModel> make_measured_allreduce(const Network& net, const AlphaBeta& fit) {
  return std::make_unique<Measured>(net, fit);
}

} // namespace ddlsim::sim
