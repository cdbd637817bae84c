// Point-to-point transfer: rank 0 sends the n-byte buffer directly to rank p-1 (one message, one phase), e.g.
// an activation between the first and last pipeline stage; the route is the network's.
#include "sim/network/lowering/detail.hpp"

namespace ddlsim::sim::detail {

// Both granularities: one phase of one flow 0 -> p-1 of n bytes; no phase for p = 1 (a rank never sends to itself).
std::vector<Phase> lower_point_to_point_direct(const LoweringShape& shape, double bytes, Granularity /*granularity*/) {
  check_arguments(shape, bytes);
  const int p = shape.workers();
  if (p <= 1)
    return {};
  return {Phase{{Flow{0, p - 1, bytes, 1}}}};
}

} // namespace ddlsim::sim::detail
