// Ring allreduce (Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms for clusters of workstations",
// JPDC 2009): a reduce-scatter then an allgather around the ring of ranks, 2(p-1) steps in which every rank r
// sends n/p bytes to r + 1 mod p. Node-major ranks put exactly one ring edge out of and into each node.
#include "sim/network/lowering/detail.hpp"

namespace ddlsim::sim::detail {

// per_message: 2(p-1) phases of p flows of n/p. aggregated: every step reuses the same p pairs, so one phase of
// p flows of 2(p-1)/p n with latency_repeats 2(p-1): 2(p-1) a + 2(p-1)/p n / B without contention.
std::vector<Phase> lower_allreduce_ring(const LoweringShape& shape, double bytes, Granularity granularity) {
  check_arguments(shape, bytes);
  const int p = shape.workers();
  return ring_steps(p, 2 * (p - 1), bytes / p, granularity);
}

} // namespace ddlsim::sim::detail
