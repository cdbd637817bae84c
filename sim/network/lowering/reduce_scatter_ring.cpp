// Ring reduce-scatter (Patarasuk & Yuan, JPDC 2009; the first half of the ring allreduce): p-1 steps in which
// every rank r sends a partially reduced block of n/p bytes of its n-byte input to r + 1 mod p, which adds its own.
#include "sim/network/lowering/detail.hpp"

namespace ddlsim::sim::detail {

// per_message: p-1 phases of p flows of n/p. aggregated: one phase of p flows of (p-1)/p n, latency_repeats p-1.
std::vector<Phase> lower_reduce_scatter_ring(const LoweringShape& shape, double bytes, Granularity granularity) {
  check_arguments(shape, bytes);
  const int p = shape.workers();
  return ring_steps(shape, p - 1, bytes / p, granularity);
}

} // namespace ddlsim::sim::detail
