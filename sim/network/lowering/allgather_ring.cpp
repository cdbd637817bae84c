// Ring allgather (Thakur, Rabenseifner, Gropp, IJHPCA 2005, Sec. 4.1; Patarasuk & Yuan, JPDC 2009): p-1 steps
// in which every rank r forwards the block it received last (n/p bytes of the n-byte result) to r + 1 mod p.
#include "sim/network/lowering/detail.hpp"

namespace ddlsim::sim::detail {

// per_message: p-1 phases of p flows of n/p. aggregated: one phase of p flows of (p-1)/p n, latency_repeats p-1.
std::vector<Phase> lower_allgather_ring(const LoweringShape& shape, double bytes, Granularity granularity) {
  check_arguments(shape, bytes);
  const int p = shape.workers();
  return ring_steps(shape, p - 1, bytes / p, granularity);
}

} // namespace ddlsim::sim::detail
