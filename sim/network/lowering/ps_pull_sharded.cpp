// Parameter-server pull of one key (Li et al., OSDI 2014): once the servers have aggregated every worker's push
// and applied the update, each server sends its shard of the key's new parameters to every worker: one phase of
// p x c flows of n/c bytes, the push reversed; a server's NIC sends p n / c, a worker's receives n.
#include "sim/network/lowering/detail.hpp"

namespace ddlsim::sim::detail {

// Both granularities: one message per (server, worker) pair.
std::vector<Phase> lower_ps_pull_sharded(const LoweringShape& shape, double bytes, Granularity /*granularity*/) {
  return ps_shard_phases(shape, bytes, false);
}

} // namespace ddlsim::sim::detail
