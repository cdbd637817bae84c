// Phase-synchronous evaluation of a lowering (evaluate.hpp).
#include "sim/lowering/evaluate.hpp"

#include <algorithm>

namespace ddlsim::sim {

double phase_synchronous_time(const std::vector<Phase>& phases, const Network& net) {
  const int g = net.gpus_per_node, p = net.workers();
  const auto endpoint = [&](int rank) { return static_cast<std::size_t>(net.nic_per_gpu ? rank : rank / g); };
  const std::size_t endpoints = net.nic_per_gpu ? static_cast<std::size_t>(p) : static_cast<std::size_t>(net.nodes);
  double total = 0;
  std::vector<int> out(static_cast<std::size_t>(p)), in(static_cast<std::size_t>(p));
  std::vector<int> nic_out(endpoints), nic_in(endpoints);
  for (const auto& ph : phases) {
    std::fill(out.begin(), out.end(), 0);
    std::fill(in.begin(), in.end(), 0);
    std::fill(nic_out.begin(), nic_out.end(), 0);
    std::fill(nic_in.begin(), nic_in.end(), 0);
    for (const auto& f : ph.flows) {
      if (f.src / g == f.dst / g) {
        ++out[static_cast<std::size_t>(f.src)];
        ++in[static_cast<std::size_t>(f.dst)];
      } else {
        ++nic_out[endpoint(f.src)];
        ++nic_in[endpoint(f.dst)];
      }
    }
    double slowest = 0;
    for (const auto& f : ph.flows) {
      const bool intra = f.src / g == f.dst / g;
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
      sent[static_cast<std::size_t>(f.src)] += f.bytes;
  return sent.empty() ? 0.0 : *std::max_element(sent.begin(), sent.end());
}

} // namespace ddlsim::sim
