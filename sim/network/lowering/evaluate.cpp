// Phase-synchronous evaluation of a lowering, and the cost models built on it or on a measured fit (evaluate.hpp).
#include "sim/network/lowering/evaluate.hpp"

#include "sim/network/lowering/detail.hpp"

#include <algorithm>

namespace ddlsim::sim {

namespace {

/// The sharing of a cluster's links by the flows of one phase (or of several collectives' phases that run together):
/// a GPU link shared by the flows leaving or entering that GPU, a NIC by its endpoint's, and with two sockets the host
/// link, each way, by the node's flows between its halves that way (a flow runs at the slower of its GPU links' and the
/// host link's shares, and pays the host link's latency too).
class LinkSharing {
public:
  explicit LinkSharing(const Network& net)
      : net_(net), g_(net.gpus_per_node), p_(net.workers()), base_(net.nic_per_gpu ? p_ : net.nodes),
        out_(static_cast<std::size_t>(p_ + net.server_hosts)), in_(out_.size()),
        nic_out_(static_cast<std::size_t>(base_ + net.server_hosts)), nic_in_(nic_out_.size()),
        host_(net.two_sockets ? static_cast<std::size_t>(2 * net.nodes) : 0) {}
  void clear() {
    for (auto* v : {&out_, &in_, &nic_out_, &nic_in_, &host_})
      std::fill(v->begin(), v->end(), 0);
  }
  void add(const Phase& ph) {
    for (const auto& f : ph.flows) {
      if (same_node(f)) {
        ++out_[static_cast<std::size_t>(f.src)];
        ++in_[static_cast<std::size_t>(f.dst)];
        if (const int h = net_.host_link(f.src, f.dst); h >= 0)
          ++host_[static_cast<std::size_t>(h)];
      } else {
        ++nic_out_[endpoint(f.src)];
        ++nic_in_[endpoint(f.dst)];
      }
    }
  }
  /// Seconds per byte of flow f with the links shared as counted.
  [[nodiscard]] double per_byte_s(const Flow& f) const {
    const bool intra = same_node(f);
    const int sharers = intra ? std::max(out_[static_cast<std::size_t>(f.src)], in_[static_cast<std::size_t>(f.dst)])
                              : std::max(nic_out_[endpoint(f.src)], nic_in_[endpoint(f.dst)]);
    double per_byte = sharers / (intra ? net_.intra : net_.inter).bandwidth;
    if (const int h = intra ? net_.host_link(f.src, f.dst) : -1; h >= 0)
      per_byte = std::max(per_byte, host_[static_cast<std::size_t>(h)] / net_.host.bandwidth);
    return per_byte;
  }
  /// The latency of one hop of flow f: two GPU links (and the host link) inside a node, two NIC links between nodes.
  [[nodiscard]] double hop_latency_s(const Flow& f) const {
    if (!same_node(f))
      return 2 * net_.inter.latency_s;
    return 2 * net_.intra.latency_s + (net_.host_link(f.src, f.dst) >= 0 ? net_.host.latency_s : 0.0);
  }

private:
  [[nodiscard]] bool same_node(const Flow& f) const { return f.src < p_ && f.dst < p_ && f.src / g_ == f.dst / g_; }
  /// Dedicated server s is endpoint base + s.
  [[nodiscard]] std::size_t endpoint(int rank) const {
    return static_cast<std::size_t>(rank >= p_ ? base_ + rank - p_ : net_.nic_per_gpu ? rank : rank / g_);
  }
  const Network& net_;
  int g_, p_, base_;
  std::vector<int> out_, in_, nic_out_, nic_in_, host_;
};

/// Calls visit(flow, latency s, seconds per flow byte) for every flow of `ph`, its links shared as `links` counts;
/// `hops` is scratch space kept between calls.
template <class Visit>
void visit_phase(const Phase& ph, const LinkSharing& links, std::vector<double>& hops, Visit visit) {
  // A step of a pipelined ring: every flow pays the latency of the critical chunk's walk (lowering.hpp).
  double chain_latency_s = 0;
  if (ph.chain_hops > 0) {
    hops.clear();
    const std::size_t period = ph.flows.size() / static_cast<std::size_t>(std::max(1, ph.rings));
    for (std::size_t i = 0; i < period; ++i) // the first ring's edges (the others repeat its latencies)
      hops.push_back(links.hop_latency_s(ph.flows[i]));
    const auto walk = critical_walk(hops, ph.chain_hops);
    chain_latency_s = ph.chain_hop < 0 ? walk.latency_s : walk_hop_latency(hops, walk, ph.chain_hop);
  }
  for (const auto& f : ph.flows) {
    const double latency_s =
        ph.extra_latency_s + (ph.chain_hops > 0 ? chain_latency_s : f.latency_repeats * links.hop_latency_s(f));
    visit(f, latency_s, links.per_byte_s(f));
  }
}

/// Calls visit(phase index, flow, latency s, seconds per flow byte) for every flow, each phase's links shared by its
/// own flows.
template <class Visit> void visit_flows(const std::vector<Phase>& phases, const Network& net, Visit visit) {
  LinkSharing links(net);
  std::vector<double> hops;
  for (std::size_t k = 0; k < phases.size(); ++k) {
    links.clear();
    links.add(phases[k]);
    visit_phase(phases[k], links, hops,
                [&](const Flow& f, double latency_s, double per_byte_s) { visit(k, f, latency_s, per_byte_s); });
  }
}

class Lowered final : public CollectiveModel {
public:
  Lowered(const CollectiveLowering& algorithm, const Network& net) : algorithm_(algorithm), net_(net) {}
  CollectiveCost cost(double bytes) const override {
    const auto phases = algorithm_.lower(net_.shape(), bytes, Granularity::aggregated);
    return {phase_synchronous_time(phases, net_), busiest_sender_bytes(phases, net_.workers())};
  }
  [[nodiscard]] double evaluation_flows() const override {
    double flows = 0;
    for (const auto& phase : algorithm_.lower(net_.shape(), 1048576.0, Granularity::aggregated))
      flows += static_cast<double>(phase.flows.size());
    return flows;
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

std::optional<AlphaBeta> LinearLoweringCost::affine() const {
  AlphaBeta sum{0, 0};
  for (const auto& terms : phases_) {
    if (terms.empty())
      continue;
    const auto by_latency = std::max_element(terms.begin(), terms.end(),
                                             [](const Term& a, const Term& b) { return a.latency_s < b.latency_s; });
    const auto by_rate = std::max_element(terms.begin(), terms.end(),
                                          [](const Term& a, const Term& b) { return a.per_byte_s < b.per_byte_s; });
    if (by_latency->per_byte_s < by_rate->per_byte_s) // no term is the slowest at every payload
      return std::nullopt;
    sum.alpha_s += by_latency->latency_s;
    sum.beta_s_per_byte += by_latency->per_byte_s;
  }
  return sum;
}

std::size_t LinearLoweringCost::terms() const {
  std::size_t n = 0;
  for (const auto& phase : phases_)
    n += phase.size();
  return n;
}

double concurrent_phase_time(const std::vector<std::vector<Phase>>& collectives, const Network& net) {
  std::size_t phases = 0;
  for (const auto& c : collectives)
    phases = std::max(phases, c.size());
  LinkSharing links(net);
  std::vector<double> hops;
  double total = 0;
  for (std::size_t k = 0; k < phases; ++k) {
    links.clear();
    for (const auto& c : collectives)
      if (k < c.size())
        links.add(c[k]);
    double slowest = 0;
    for (const auto& c : collectives)
      if (k < c.size())
        visit_phase(c[k], links, hops, [&](const Flow& f, double latency_s, double per_byte_s) {
          slowest = std::max(slowest, latency_s + f.bytes * per_byte_s);
        });
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
