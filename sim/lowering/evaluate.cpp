// Phase-synchronous evaluation of a lowering (evaluate.hpp).
#include "sim/lowering/evaluate.hpp"

#include <algorithm>

namespace ddlsim::sim {

double phase_synchronous_time(const std::vector<Phase>& phases, const Network& net) {
  const int g = net.gpus_per_node, p = net.workers(), ranks = p + net.server_hosts;
  const int base = net.nic_per_gpu ? p : net.nodes; // dedicated server s is endpoint base + s
  const auto endpoint = [&](int rank) {
    return static_cast<std::size_t>(rank >= p ? base + rank - p : net.nic_per_gpu ? rank : rank / g);
  };
  const auto same_node = [&](const Flow& f) { return f.src < p && f.dst < p && f.src / g == f.dst / g; };
  const std::size_t endpoints = static_cast<std::size_t>(base + net.server_hosts);
  double total = 0;
  std::vector<int> out(static_cast<std::size_t>(ranks)), in(static_cast<std::size_t>(ranks));
  std::vector<int> nic_out(endpoints), nic_in(endpoints);
  for (const auto& ph : phases) {
    std::fill(out.begin(), out.end(), 0);
    std::fill(in.begin(), in.end(), 0);
    std::fill(nic_out.begin(), nic_out.end(), 0);
    std::fill(nic_in.begin(), nic_in.end(), 0);
    for (const auto& f : ph.flows) {
      if (same_node(f)) {
        ++out[static_cast<std::size_t>(f.src)];
        ++in[static_cast<std::size_t>(f.dst)];
      } else {
        ++nic_out[endpoint(f.src)];
        ++nic_in[endpoint(f.dst)];
      }
    }
    double slowest = 0;
    for (const auto& f : ph.flows) {
      const bool intra = same_node(f);
      const int sharers = intra ? std::max(out[static_cast<std::size_t>(f.src)], in[static_cast<std::size_t>(f.dst)])
                                : std::max(nic_out[endpoint(f.src)], nic_in[endpoint(f.dst)]);
      const LinkSpec& link = intra ? net.intra : net.inter;
      slowest = std::max(slowest, f.latency_repeats * 2 * link.latency_s + f.bytes * sharers / link.bandwidth);
    }
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
