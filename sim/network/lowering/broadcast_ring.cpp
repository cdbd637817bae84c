// Pipelined chain (ring) broadcast from rank 0, as NCCL's ring broadcast: rank i forwards each chunk to i + 1 as
// soon as it has it: k chunks take (k + p - 2)(a + n/(kB)), (p-1) a + n/B for fine chunks (Patarasuk, Faraj, Yuan,
// "Pipelined broadcast on Ethernet switched clusters", JPDC 2008).
#include "sim/network/lowering/detail.hpp"

namespace ddlsim::sim::detail {

// per_message: the buffer moves in k = pipeline_chunks(n) chunks (detail.hpp: 512 KiB each, 1 to 64); chunk c
// crosses edge i -> i+1 in step c + i, so k + p - 2 phases of at most min(k, p-1) flows of n/k. aggregated: one
// phase of p-1 flows of n, one per edge; edge i -> i+1 has latency_repeats i+1, the number of hops the pipeline has
// crossed when its last byte arrives, so the phase takes (p-1) a + n/B without contention (the flow engine pays the
// repeats after the transfer, so all edges still stream concurrently).
std::vector<Phase> lower_broadcast_ring(const LoweringShape& shape, double bytes, Granularity granularity) {
  check_arguments(shape, bytes);
  const int p = shape.workers();
  std::vector<Phase> phases;
  if (p <= 1)
    return phases;
  if (granularity == Granularity::aggregated) {
    Phase& phase = phases.emplace_back();
    phase.flows.reserve(static_cast<std::size_t>(p - 1));
    for (int i = 0; i + 1 < p; ++i)
      phase.flows.push_back({i, i + 1, bytes, i + 1});
    return phases;
  }
  const int chunks = pipeline_chunks(bytes);
  const double chunk = bytes / chunks;
  const int steps = chunks + p - 2;
  phases.reserve(static_cast<std::size_t>(steps));
  for (int s = 0; s < steps; ++s) {
    Phase& phase = phases.emplace_back();
    // Edges i with 0 <= s - i < chunks, i.e. max(0, s - chunks + 1) <= i <= min(s, p - 2).
    const int first = s - chunks + 1 > 0 ? s - chunks + 1 : 0;
    const int last = s < p - 2 ? s : p - 2;
    phase.flows.reserve(static_cast<std::size_t>(last - first + 1));
    for (int i = first; i <= last; ++i)
      phase.flows.push_back({i, i + 1, chunk, 1});
  }
  return phases;
}

} // namespace ddlsim::sim::detail
