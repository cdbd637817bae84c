// Rabenseifner's allreduce as in Thakur, Rabenseifner, Gropp, "Optimization of Collective Communication
// Operations in MPICH", IJHPCA 2005, Sec. 4.4: recursive-halving reduce-scatter then recursive-doubling allgather
// over p' = 2^floor(log2 p) ranks, with the r = p - p' extra ranks folded in by pairing before and after.
#include "sim/network/lowering/detail.hpp"

#include <algorithm>
#include <bit>

namespace ddlsim::sim::detail {
namespace {

// Closed form: the pairings cost 2(a + n/B) (once in, once out), the core log2 p' steps of n/2^s bytes each way. A
// step whose partners sit on different nodes uses the NIC, shared by all ranks of a node that cross in that step.
class HalvingDoubling final : public CollectiveModel {
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

protected:
  [[nodiscard]] bool affine_in_bytes() const override { return true; }

private:
  Network net_;
  int core_ = 0;
  int extra_ = 0;
  bool pair_crosses_ = false;
  std::vector<int> steps_; ///< per core step (far to near): most ranks of one node crossing to other nodes
};

} // namespace

// Ranks 2i and 2i+1 (i < r) pair: 2i sends its whole buffer (n) to 2i+1 first and receives the result (n) last.
// The core runs over virtual ranks v -> real rank (v < r ? 2v+1 : v+r); at distance d (p'/2, p'/4, ..., 1 while
// halving, then 1, 2, ..., p'/2 while doubling) v and v ^ d exchange d/p' n bytes each way.
// per_message: [pre] + 2 log2 p' phases of p' flows + [post]. aggregated: the halving and doubling steps of one
// distance use the same pairs, folded into one phase of p' flows of 2 d/p' n with latency_repeats 2 (log2 p'
// phases, far to near), between the unfolded pre and post phases. Core ranks send 2(p'-1)/p' n, paired core ranks
// n more, ranks 2i send n.
std::vector<Phase> lower_allreduce_halving_doubling(const LoweringShape& shape, double bytes, Granularity granularity) {
  check_arguments(shape, bytes);
  const int p = shape.workers();
  if (p <= 1)
    return {};
  const PowerOfTwoCore core_map(p);
  const int core = core_map.core;
  const int extra = core_map.extra;
  const auto real = [&core_map](int v) { return core_map.real(v); };
  const int core_steps = std::countr_zero(static_cast<unsigned>(core));
  const bool per_message = granularity == Granularity::per_message;

  std::vector<Phase> phases;
  phases.reserve(static_cast<std::size_t>((per_message ? 2 : 1) * core_steps + 2));
  const auto pairing = [&](bool before) {
    phases.push_back(before ? core_map.fold_in(bytes) : core_map.fold_out(bytes));
  };
  const auto exchange = [&](int distance, int folded_steps) {
    Phase phase;
    phase.flows.reserve(static_cast<std::size_t>(core));
    const double share = bytes * distance / core;
    for (int v = 0; v < core; ++v)
      phase.flows.push_back({real(v), real(v ^ distance), folded_steps * share, folded_steps});
    phases.push_back(std::move(phase));
  };

  if (extra > 0)
    pairing(true);
  for (int d = core / 2; d >= 1; d /= 2)
    exchange(d, per_message ? 1 : 2);
  if (per_message)
    for (int d = 1; d < core; d *= 2)
      exchange(d, 1);
  if (extra > 0)
    pairing(false);
  return phases;
}

std::unique_ptr<CollectiveModel> closed_form_allreduce_halving_doubling(const Network& net) {
  return std::make_unique<HalvingDoubling>(net);
}

} // namespace ddlsim::sim::detail
