// Parameter-server push of one key (Li et al., OSDI 2014; MXNet KVStore dist_sync, src/kvstore/kvstore_dist.h): every
// worker sends its gradient of the key, split evenly over the servers that own it (dag/strategies/ps.cpp), to each of
// them, all at once: one phase of p x c flows of n/c bytes. Without contention the busiest endpoint bounds it: a
// worker's NIC sends n, a server's NIC receives p n / c, so on a star of NICs of bandwidth B the push takes
// 2 latency + max(n, p n / c) / B (co-located servers also send their own node's shards through the same NIC).
#include "sim/network/lowering/detail.hpp"

namespace ddlsim::sim::detail {

// Both granularities: one message per (worker, server) pair.
std::vector<Phase> lower_ps_push_sharded(const LoweringShape& shape, double bytes, Granularity /*granularity*/) {
  return ps_shard_phases(shape, bytes, true);
}

} // namespace ddlsim::sim::detail
