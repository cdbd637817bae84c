// The analytic cost of a lowered collective: its phases run one after another, each as long as its slowest flow,
// with the links shared as in the analytic engine's closed forms (sim/network/collectives.hpp). Collectives without a
// hand-derived closed form (e.g. gTop-k) are costed this way, so that the analytic engine and the flow engine
// run the same lowering; the lowering tests check it against every closed form that exists. Also the cost models the
// analytic engine takes for a scenario's allreduce: an algorithm's (closed form or lowering) or a measured fit.
#pragma once

#include "sim/network/collectives.hpp"
#include "sim/network/lowering/lowering.hpp"

#include <memory>
#include <optional>
#include <vector>

namespace ddlsim::sim {

/// Contention-free evaluation of `phases` on `net`. A flow between GPUs of one node crosses two GPU links (alpha
/// 2 l_i, bandwidth B_i) shared by the phase's intra-node flows leaving its source GPU or entering its
/// destination GPU; a flow between nodes crosses two NIC links (alpha 2 l_e, bandwidth B_e) shared likewise by
/// the off-node flows of its NIC's endpoint (the node, or the GPU with a NIC per GPU). A flow takes
/// latency_repeats alpha (a ring step: its critical walk's latency, lowering.hpp) + bytes / (B / max(sharers at
/// source, sharers at destination)); a phase takes its
/// slowest flow; the collective the sum of its phases. Ranks from net.workers() on are dedicated server hosts, each
/// its own endpoint with an inter-node NIC.
[[nodiscard]] double phase_synchronous_time(const std::vector<Phase>& phases, const Network& net);

/// Several collectives run at the same time, each lowered in the cluster's global ranks on `net` (the whole
/// cluster's): phase k of every one of them together, a link shared by every flow of those phases that crosses it
/// (as phase_synchronous_time shares it among one phase's flows), each flow paying its own collective's latencies; the
/// phases one after another. With one collective, its phase_synchronous_time.
[[nodiscard]] double concurrent_phase_time(const std::vector<std::vector<Phase>>& collectives, const Network& net);

/// phase_synchronous_time of a lowering whose flows all scale linearly with the payload (every lowering does:
/// its flows carry fractions of the payload), as a function of the payload, evaluated without lowering again:
/// each phase keeps the distinct (latency, seconds per payload byte) of its flows. For planners that cost many
/// candidate groups (OMGS).
class LinearLoweringCost {
public:
  LinearLoweringCost(const CollectiveLowering& lowering, const LoweringShape& shape, const Network& net);
  [[nodiscard]] double operator()(double bytes) const;
  /// The (latency, seconds per byte) terms an evaluation visits: its cost.
  [[nodiscard]] std::size_t terms() const;
  /// alpha + n beta for every payload n >= 0 when, in each phase, one flow is the slowest whatever the payload (the
  /// largest latency and the largest seconds per byte): a ring's every phase, for example; nullopt otherwise.
  [[nodiscard]] std::optional<AlphaBeta> affine() const;

private:
  struct Term {
    double latency_s;
    double per_byte_s;
    auto operator<=>(const Term&) const = default;
  };
  std::vector<std::vector<Term>> phases_;
};

/// The cost of `algorithm` over all of `net`'s workers: its closed form (a star inside each node), or else (no closed
/// form, or two sockets) the phase-synchronous time of its
/// aggregated lowering with the busiest worker's bytes.
[[nodiscard]] std::unique_ptr<CollectiveModel> make_cost_model(const CollectiveLowering& algorithm, const Network& net);

/// A model that replays a measured alpha-beta fit; bytes_sent follows the ring algorithm.
[[nodiscard]] std::unique_ptr<CollectiveModel> make_measured_allreduce(const Network& net, const AlphaBeta& fit);

/// Bytes the busiest of ranks 0 .. workers-1 sends over all phases (ranks beyond, dedicated servers, not counted).
[[nodiscard]] double busiest_sender_bytes(const std::vector<Phase>& phases, int workers);

} // namespace ddlsim::sim
