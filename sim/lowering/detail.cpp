// Shared pieces of the collective lowerings: the ring step used by the ring allreduce, allgather and
// reduce-scatter (Patarasuk & Yuan, JPDC 2009), and the chunk count of pipelined per-message lowerings.
#include "sim/lowering/detail.hpp"

#include <algorithm>
#include <cmath>

namespace ddlsim::sim::detail {

int pipeline_chunks(double payload_bytes) {
  const double chunks = std::ceil(payload_bytes / kPipelineChunkBytes);
  return static_cast<int>(std::clamp(chunks, 1.0, static_cast<double>(kMaxPipelineChunks)));
}

Phase ring_phase(int p, double bytes, int latency_repeats) {
  Phase phase;
  phase.flows.reserve(static_cast<std::size_t>(p));
  for (int r = 0; r < p; ++r)
    phase.flows.push_back({r, (r + 1) % p, bytes, latency_repeats});
  return phase;
}

std::vector<Phase> ring_steps(int p, int steps, double chunk_bytes, Granularity granularity) {
  if (p <= 1 || steps <= 0)
    return {};
  if (granularity == Granularity::aggregated)
    return {ring_phase(p, steps * chunk_bytes, steps)};
  return std::vector<Phase>(static_cast<std::size_t>(steps), ring_phase(p, chunk_bytes, 1));
}

} // namespace ddlsim::sim::detail
