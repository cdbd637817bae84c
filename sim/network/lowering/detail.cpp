// Shared pieces of the collective lowerings: the ring step used by the ring allreduce, allgather and
// reduce-scatter (Patarasuk & Yuan, JPDC 2009), the chunk count of pipelined per-message lowerings, and the
// parameter server's shard traffic (ps_push_sharded.cpp, ps_pull_sharded.cpp).
#include "sim/network/lowering/detail.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

namespace ddlsim::sim {

CriticalWalk critical_walk(std::span<const double> edge_latency, int hops) {
  const std::size_t m = edge_latency.size();
  if (m == 0 || hops <= 0)
    return {};
  const auto h = static_cast<std::size_t>(hops);
  // Whole turns of the ring, then a partial window of r edges: prefix sums over two periods give every window.
  std::vector<double> prefix(2 * m + 1, 0.0);
  for (std::size_t j = 0; j < 2 * m; ++j)
    prefix[j + 1] = prefix[j] + edge_latency[j % m];
  const double turns = static_cast<double>(h / m) * prefix[m];
  const std::size_t r = h % m;
  CriticalWalk best{0, turns + prefix[r]};
  for (std::size_t s = 1; s < m; ++s)
    if (const double sum = turns + (prefix[s + r] - prefix[s]); sum > best.latency_s)
      best = {s, sum};
  return best;
}

} // namespace ddlsim::sim

namespace ddlsim::sim::detail {

int pipeline_chunks(double payload_bytes) {
  const double chunks = std::ceil(payload_bytes / kPipelineChunkBytes);
  return static_cast<int>(std::clamp(chunks, 1.0, static_cast<double>(kMaxPipelineChunks)));
}

Phase node_ring_step(const LoweringShape& shape, bool inter, double bytes, int latency_repeats) {
  const int g = shape.gpus_per_node, nodes = shape.nodes;
  Phase phase;
  phase.flows.reserve(static_cast<std::size_t>(shape.workers()));
  for (int r = 0; r < shape.workers(); ++r) {
    const int node = r / g, local = r % g;
    const int dst = inter ? (node + 1) % nodes * g + local : node * g + (local + 1) % g;
    phase.flows.push_back({r, dst, bytes, latency_repeats});
  }
  return phase;
}

double node_rings_time(const Network& net, double slice) {
  const Hop h = inter_hop(net);
  const int nodes = net.nodes;
  return 2.0 * (nodes - 1) * (h.alpha_s + slice / nodes / (h.bandwidth / net.nic_sharers(net.gpus_per_node)));
}

namespace {

// The rings of a ring algorithm, one after the other: ring c visits node m's GPUs from c round to c - 1 (mod g), so it
// enters each node at GPU c and leaves it from GPU c - 1, over that GPU's NIC; every rank sends `bytes` to the next.
Phase rings_phase(const LoweringShape& shape, double bytes, int latency_repeats) {
  const int p = shape.workers(), g = shape.gpus_per_node, rings = shape.rings();
  Phase phase;
  phase.rings = rings;
  phase.flows.reserve(static_cast<std::size_t>(p * rings));
  const auto rank = [g](int c, int j) { return j / g * g + (c + j % g) % g; };
  for (int c = 0; c < rings; ++c)
    for (int j = 0; j < p; ++j)
      phase.flows.push_back({rank(c, j), rank(c, (j + 1) % p), bytes, latency_repeats});
  return phase;
}

} // namespace

std::vector<Phase> ring_steps(const LoweringShape& shape, int steps, double chunk_bytes, Granularity granularity) {
  const int p = shape.workers();
  if (p <= 1 || steps <= 0)
    return {};
  const double share = chunk_bytes / shape.rings(); // each ring carries 1/rings of every chunk
  if (granularity == Granularity::aggregated) {
    auto phase = rings_phase(shape, steps * share, steps);
    phase.chain_hops = steps;
    return {std::move(phase)};
  }
  std::vector<Phase> phases(static_cast<std::size_t>(steps), rings_phase(shape, share, 1));
  for (int k = 0; k < steps; ++k) {
    phases[static_cast<std::size_t>(k)].chain_hops = steps;
    phases[static_cast<std::size_t>(k)].chain_hop = k;
  }
  return phases;
}

namespace {

// BytePS (Jiang et al., OSDI 2020, Sec. 4.2 on NVLink machines: reduce to one GPU, which copies to the host and
// pushes): the node's chain GPU g-1 -> .. -> 0 reduces the key onto GPU 0 (a pipelined NCCL reduce: each link carries
// the key, g-1 latencies), GPU 0 pushes it once to each of the key's servers but its own node's; the pull mirrors it,
// then the chain 0 -> .. -> g-1 broadcasts it. With one node there is no server: the reduce and the broadcast are all.
std::vector<Phase> node_aggregated_phases(const LoweringShape& shape, double bytes, bool push, int first, int count) {
  const int g = shape.gpus_per_node;
  Phase chain;
  for (int node = 0; node < shape.nodes; ++node)
    for (int i = 1; i < g; ++i) {
      const int a = node * g + i, b = node * g + i - 1; // toward GPU 0 for the reduce
      chain.flows.push_back(push ? Flow{a, b, bytes, g - 1} : Flow{b, a, bytes, g - 1});
    }
  Phase wire;
  if (shape.nodes > 1)
    for (int node = 0; node < shape.nodes; ++node)
      for (int j = 0; j < count; ++j) {
        const int root = node * g, server = shape.server_rank(first + j);
        if (server == root)
          continue; // the node's own server
        wire.flows.push_back(push ? Flow{root, server, bytes / count, 1} : Flow{server, root, bytes / count, 1});
      }
  std::vector<Phase> out;
  for (Phase* ph : push ? std::array{&chain, &wire} : std::array{&wire, &chain})
    if (!ph->flows.empty())
      out.push_back(std::move(*ph));
  return out;
}

} // namespace

std::vector<Phase> ps_shard_phases(const LoweringShape& shape, double bytes, bool push) {
  check_arguments(shape, bytes);
  const int servers = shape.server_count();
  const int count = shape.shard_count > 0 ? shape.shard_count : servers;
  assert(shape.shard_first >= 0 && shape.shard_first + count <= servers && "lowering: the key's servers must exist");
  if (shape.node_aggregation)
    return node_aggregated_phases(shape, bytes, push, shape.shard_first, count);
  const int p = shape.workers();
  Phase phase;
  phase.flows.reserve(static_cast<std::size_t>(p) * static_cast<std::size_t>(count));
  for (int w = 0; w < p; ++w)
    for (int j = 0; j < count; ++j) {
      const int server = shape.server_rank(shape.shard_first + j);
      if (server == w)
        continue; // the worker's own shard stays in its memory
      phase.flows.push_back(push ? Flow{w, server, bytes / count, 1} : Flow{server, w, bytes / count, 1});
    }
  if (phase.flows.empty())
    return {};
  return {std::move(phase)};
}

} // namespace ddlsim::sim::detail
