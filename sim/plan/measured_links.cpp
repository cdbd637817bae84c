// Effective links from a measured allreduce (measured_links.hpp).
#include "sim/plan/measured_links.hpp"

#include "core/units.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace ddlsim::sim {

std::optional<MeasuredLinks> measured_links(const Scenario& s) {
  if (!s.gpu.calibration || s.allreduce.measured || !s.allreduce.algorithm->inverts_to_links ||
      s.cluster.topology.kind != TopologyKind::star || s.cluster.nic_per_gpu)
    return std::nullopt;
  const int p = s.cluster.workers();
  if (p < 2)
    return std::nullopt;
  for (const auto& m : s.gpu.calibration->collectives) {
    if (m.collective != Collective::allreduce || m.ranks != p || (m.nodes != 0 && m.nodes != s.cluster.nodes))
      continue;
    // The small-message start-up and the large-message slope: the fit's first α and last β, or the table's first
    // time and its last two points' slope.
    double alpha = 0, beta = 0;
    if (!m.segments.empty()) {
      alpha = m.segments.front().alpha_s;
      beta = m.segments.back().beta_s_per_byte;
    } else if (m.table.size() >= 2) {
      const auto& a = m.table[m.table.size() - 2];
      const auto& b = m.table.back();
      alpha = m.table.front().time_s;
      beta = (b.time_s - a.time_s) / (b.size_bytes - a.size_bytes);
    }
    if (!(beta > 0) || !(alpha >= 0))
      return std::nullopt;
    const double steps = 2.0 * (p - 1);
    MeasuredLinks out;
    out.inter_node = s.cluster.nodes > 1;
    out.link.bandwidth = steps / p / beta;
    out.link.latency_s = alpha / steps / 2; // a hop crosses two links
    if (out.inter_node && s.cluster.gpus_per_node > 1) {
      // The ring's start-up is its critical walk's (allreduce_ring.cpp): k inter-node hops and steps - k hops of
      // two GPU links, which keep the scenario's latency. k = 2N for g >= 3, 2N - 1 for g = 2 while an inter-node
      // hop is the slower; 2N - 1 when it is not.
      const int g = s.cluster.gpus_per_node, nodes = s.cluster.nodes;
      const double intra_hop = 2 * s.cluster.intra.latency_s;
      const auto inter_hop = [&](int k) { return std::max(0.0, (alpha - (steps - k) * intra_hop) / k); };
      double hop = inter_hop(g >= 3 ? 2 * nodes : 2 * nodes - 1);
      if (hop < intra_hop)
        hop = inter_hop(2 * nodes - 1);
      out.link.latency_s = hop / 2;
    }
    out.note = fmt::format(
        "the flow engine's {} links take {} and {} each, so that its ring allreduce over {} GPUs reproduces the "
        "measured one of {} at both ends (start-up {}, {} per byte beyond its last segment's start); in between, the "
        "analytic engine replays the measured table",
        out.inter_node ? "inter-node" : "intra-node", format_bandwidth(out.link.bandwidth),
        format_time(out.link.latency_s), p, s.gpu.calibration->origin, format_time(alpha), format_time(beta));
    return out;
  }
  return std::nullopt;
}

Scenario with_measured_links(const Scenario& s) {
  Scenario out = s;
  if (const auto m = measured_links(s))
    (m->inter_node ? out.cluster.inter : out.cluster.intra) = m->link;
  return out;
}

} // namespace ddlsim::sim
