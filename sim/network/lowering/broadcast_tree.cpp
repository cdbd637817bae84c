// Binomial-tree broadcast from rank 0 (Thakur, Rabenseifner, Gropp, IJHPCA 2005, Sec. 4.1, as MPICH's
// MPIR_Bcast_binomial): ceil(log2 p) store-and-forward steps; at distance d = 2^(ceil(log2 p)-1), ..., 2, 1 every
// rank r that is a multiple of 2d sends the whole buffer to r + d when it exists.
#include "sim/network/lowering/detail.hpp"

#include <bit>

namespace ddlsim::sim::detail {

// Both granularities: ceil(log2 p) phases, each rank but 0 receives n exactly once (p-1 flows in all). No pair is
// used twice and each step must finish before its receivers forward, so there is nothing to fold.
std::vector<Phase> lower_broadcast_tree(const LoweringShape& shape, double bytes, Granularity /*granularity*/) {
  check_arguments(shape, bytes);
  const int p = shape.workers();
  std::vector<Phase> phases;
  if (p <= 1)
    return phases;
  const int steps = static_cast<int>(std::bit_width(static_cast<unsigned>(p - 1))); // ceil(log2 p)
  phases.reserve(static_cast<std::size_t>(steps));
  for (int d = 1 << (steps - 1); d >= 1; d /= 2) {
    Phase& phase = phases.emplace_back();
    for (int r = 0; r + d < p; r += 2 * d)
      phase.flows.push_back({r, r + d, bytes, 1});
  }
  return phases;
}

} // namespace ddlsim::sim::detail
