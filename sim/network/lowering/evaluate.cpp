// Phase-synchronous evaluation of a lowering, and the cost models built on it or on a measured fit (evaluate.hpp).
#include "sim/network/lowering/evaluate.hpp"

#include "sim/network/lowering/detail.hpp"

#include <algorithm>

namespace ddlsim::sim {

namespace {

/// Calls visit(phase index, flow, latency s, seconds per flow byte) for every flow, with the sharing of its links: a
/// GPU link shared by the flows leaving or entering that GPU in the phase, a NIC by its endpoint's, and with two
/// sockets the host link, each way, by the node's flows between its halves that way (the flow runs at the slower of
/// its GPU links' and the host link's shares, and pays the host link's latency too).
template <class Visit> void visit_flows(const std::vector<Phase>& phases, const Network& net, Visit visit) {
  const int g = net.gpus_per_node, p = net.workers(), ranks = p + net.server_hosts;
  const int base = net.nic_per_gpu ? p : net.nodes; // dedicated server s is endpoint base + s
  const auto endpoint = [&](int rank) {
    return static_cast<std::size_t>(rank >= p ? base + rank - p : net.nic_per_gpu ? rank : rank / g);
  };
  const auto same_node = [&](const Flow& f) { return f.src < p && f.dst < p && f.src / g == f.dst / g; };
  // the host link a same-node flow crosses: node x 2 + direction, or -1
  const auto host_link = [&](const Flow& f) { return net.host_link(f.src, f.dst); };
  const std::size_t endpoints = static_cast<std::size_t>(base + net.server_hosts);
  std::vector<int> out(static_cast<std::size_t>(ranks)), in(static_cast<std::size_t>(ranks));
  std::vector<int> nic_out(endpoints), nic_in(endpoints);
  std::vector<int> host(net.two_sockets ? static_cast<std::size_t>(2 * net.nodes) : 0);
  std::vector<double> hops;
  const auto hop_latency = [&](const Flow& f) {
    if (!same_node(f))
      return 2 * net.inter.latency_s;
    return 2 * net.intra.latency_s + (host_link(f) >= 0 ? net.host.latency_s : 0.0);
  };
  std::size_t phase = 0;
  for (const auto& ph : phases) {
    std::fill(out.begin(), out.end(), 0);
    std::fill(in.begin(), in.end(), 0);
    std::fill(nic_out.begin(), nic_out.end(), 0);
    std::fill(nic_in.begin(), nic_in.end(), 0);
    std::fill(host.begin(), host.end(), 0);
    for (const auto& f : ph.flows) {
      if (same_node(f)) {
        ++out[static_cast<std::size_t>(f.src)];
        ++in[static_cast<std::size_t>(f.dst)];
        if (const int h = host_link(f); h >= 0)
          ++host[static_cast<std::size_t>(h)];
      } else {
        ++nic_out[endpoint(f.src)];
        ++nic_in[endpoint(f.dst)];
      }
    }
    // A step of a pipelined ring: every flow pays the latency of the critical chunk's walk (lowering.hpp).
    double chain_latency_s = 0;
    if (ph.chain_hops > 0) {
      hops.clear();
      const std::size_t period = ph.flows.size() / static_cast<std::size_t>(std::max(1, ph.rings));
      for (std::size_t i = 0; i < period; ++i) // the first ring's edges (the others repeat its latencies)
        hops.push_back(hop_latency(ph.flows[i]));
      const auto walk = critical_walk(hops, ph.chain_hops);
      chain_latency_s = ph.chain_hop < 0 ? walk.latency_s : walk_hop_latency(hops, walk, ph.chain_hop);
    }
    for (const auto& f : ph.flows) {
      const bool intra = same_node(f);
      const int sharers = intra ? std::max(out[static_cast<std::size_t>(f.src)], in[static_cast<std::size_t>(f.dst)])
                                : std::max(nic_out[endpoint(f.src)], nic_in[endpoint(f.dst)]);
      const LinkSpec& link = intra ? net.intra : net.inter;
      double per_byte_s = sharers / link.bandwidth;
      if (const int h = intra ? host_link(f) : -1; h >= 0)
        per_byte_s = std::max(per_byte_s, host[static_cast<std::size_t>(h)] / net.host.bandwidth);
      const double latency_s =
          ph.extra_latency_s + (ph.chain_hops > 0 ? chain_latency_s : f.latency_repeats * hop_latency(f));
      visit(phase, f, latency_s, per_byte_s);
    }
    ++phase;
  }
}

class Lowered final : public CollectiveModel {
public:
  Lowered(const CollectiveLowering& algorithm, const Network& net) : algorithm_(algorithm), net_(net) {}
  CollectiveCost cost(double bytes) const override {
    const auto phases = algorithm_.lower(net_.shape(), bytes, Granularity::aggregated);
    return {phase_synchronous_time(phases, net_), busiest_sender_bytes(phases, net_.workers())};
  }

private:
  CollectiveLowering algorithm_;
  Network net_;
};

class Measured final : public CollectiveModel {
public:
  Measured(const Network& n, AlphaBeta fit)
      : ring_(detail::closed_form_allreduce_ring(n)), fit_(fit), workers_(n.workers()) {}
  CollectiveCost cost(double bytes) const override {
    if (workers_ <= 1)
      return {};
    return {fit_.alpha_s + fit_.beta_s_per_byte * bytes, ring_->cost(bytes).bytes_sent};
  }

protected:
  [[nodiscard]] bool affine_in_bytes() const override { return true; }

private:
  std::unique_ptr<CollectiveModel> ring_;
  AlphaBeta fit_;
  int workers_;
};

} // namespace

std::unique_ptr<CollectiveModel> make_cost_model(const CollectiveLowering& algorithm, const Network& net) {
  // The closed forms take the node's fabric for a star; two sockets are timed from the lowering.
  if (algorithm.closed_form != nullptr && !net.two_sockets)
    return algorithm.closed_form(net);
  return std::make_unique<Lowered>(algorithm, net);
}

std::unique_ptr<CollectiveModel> make_measured_allreduce(const Network& net, const AlphaBeta& fit) {
  return std::make_unique<Measured>(net, fit);
}

double phase_synchronous_time(const std::vector<Phase>& phases, const Network& net) {
  std::vector<double> slowest(phases.size(), 0.0);
  visit_flows(phases, net, [&](std::size_t phase, const Flow& f, double latency_s, double per_byte_s) {
    slowest[phase] = std::max(slowest[phase], latency_s + f.bytes * per_byte_s);
  });
  double total = 0;
  for (const double t : slowest)
    total += t;
  return total;
}

LinearLoweringCost::LinearLoweringCost(const CollectiveLowering& lowering, const LoweringShape& shape,
                                       const Network& net) {
  constexpr double kReference = 1048576.0; // any payload: flows are fractions of it
  const auto phases = lowering.lower(shape, kReference, Granularity::aggregated);
  phases_.resize(phases.size());
  visit_flows(phases, net, [&](std::size_t phase, const Flow& f, double latency_s, double per_byte_s) {
    phases_[phase].push_back({latency_s, f.bytes / kReference * per_byte_s});
  });
  for (auto& terms : phases_) {
    std::sort(terms.begin(), terms.end());
    terms.erase(std::unique(terms.begin(), terms.end()), terms.end());
  }
}

double LinearLoweringCost::operator()(double bytes) const {
  double total = 0;
  for (const auto& terms : phases_) {
    double slowest = 0;
    for (const auto& t : terms)
      slowest = std::max(slowest, t.latency_s + bytes * t.per_byte_s);
    total += slowest;
  }
  return total;
}

double busiest_sender_bytes(const std::vector<Phase>& phases, int workers) {
  std::vector<double> sent(static_cast<std::size_t>(workers), 0.0);
  for (const auto& ph : phases)
    for (const auto& f : ph.flows)
      if (f.src < workers)
        sent[static_cast<std::size_t>(f.src)] += f.bytes;
  return sent.empty() ? 0.0 : *std::max_element(sent.begin(), sent.end());
}

} // namespace ddlsim::sim
