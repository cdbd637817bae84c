// Collective lowering: one implementation per (collective, algorithm) behind one interface (LowerFn, registered in
// sim/network/collectives.hpp), turning a collective over the cluster's workers into phases of point-to-point flows
// between ranks (ranks are node-major: rank r is GPU r % g of node r / g). The flow engine runs the phases on the
// simulated network; a phase starts when the previous one has finished everywhere.
//
// Granularity: `per_message` emits every message of the algorithm (the reference, e.g. 2(p-1) phases of p
// messages for a ring); `aggregated` folds steps that reuse the same links into one flow per link pair carrying
// the steps' bytes, paying the path latency `latency_repeats` times (a ring becomes one phase of p flows of
// 2(p-1)/p n bytes with latency_repeats 2(p-1)). Without contention both take the closed-form time.
#pragma once

#include <bit>
#include <cstddef>
#include <span>
#include <vector>

namespace ddlsim::sim {

struct Flow {
  int src = 0;
  int dst = 0;
  double bytes = 0;
  int latency_repeats = 1; ///< the path latency is paid this many times (aggregated steps)
};

/// A phase's flows start together; the phase ends when its last flow has arrived. A flow pays its own path's
/// latency `latency_repeats` times, unless the phase is a step of a pipelined ring (`chain_hops` > 0): its flows, in
/// order, are the ring's edges (flow i's destination is flow i+1's source, the last one's the first one's; a
/// phase may hold one period of a ring that repeats, as the flow engine's node quotient does), and the collective's
/// critical chunk is forwarded along `chain_hops` consecutive edges of it, each forward waiting for the chunk's
/// arrival (Patarasuk & Yuan's ring; NCCL's tuning model, src/graph/tuning.cc, charges a ring intra-node latency
/// per step inside a node and inter-node latency per step between nodes). Every flow then pays that walk's
/// latency (critical_walk) in place of its own: the whole walk's (`chain_hop` < 0, a phase that folds all steps)
/// or its hop number `chain_hop` (a phase that is one step). A ring's latency is thus the sum of its hops' along
/// the chain, while its bandwidth term is that of its slowest edge (a pipelined ring runs at its bottleneck).
/// `extra_latency_s`: a latency every flow of the phase pays on top of its links' (NVLS's switch synchronisation).
/// `rings` > 1: the flows are that many rings of equal length one after the other, each with the same latencies
/// along its edges (rotations of one ring), and the critical walk is the first ring's.
struct Phase {
  std::vector<Flow> flows;
  int chain_hops = 0;
  int chain_hop = -1;
  double extra_latency_s = 0;
  int rings = 1;
};

/// The walk of `hops` consecutive edges of a ring whose edge j has latency edge_latency[j mod m] (m edges, one
/// period) with the largest latency sum: its first edge (the smallest such) and that sum. O(m).
struct CriticalWalk {
  std::size_t first = 0;
  double latency_s = 0;
};
[[nodiscard]] CriticalWalk critical_walk(std::span<const double> edge_latency, int hops);
/// Latency of hop `hop` of the walk (edge (first + hop) mod m).
[[nodiscard]] inline double walk_hop_latency(std::span<const double> edge_latency, const CriticalWalk& walk, int hop) {
  return edge_latency[(walk.first + static_cast<std::size_t>(hop)) % edge_latency.size()];
}

/// The cluster's ranks: workers, node-major, then (parameter server, `dedicated_servers`) one rank per dedicated
/// server host. Co-located server s runs on GPU 0 of node s mod nodes (BytePS's co-located mode, Jiang et al.,
/// OSDI 2020, Sec. 3); a dedicated one on host `workers() + s` with its own NIC. `shard_first` / `shard_count` name
/// the servers a ps_push / ps_pull key is split over (count 0: all of them).
struct LoweringShape {
  int nodes = 1;
  int gpus_per_node = 1;
  int servers = 0; ///< parameter servers; 0 = one per node, co-located
  bool dedicated_servers = false;
  int shard_first = 0;
  int shard_count = 0;
  /// BytePS (ps push / pull): a node's GPUs reduce the key onto its GPU 0, which alone pushes it to the servers (and
  /// pulls it, then broadcasts it to the node's GPUs); one node uses no server.
  bool node_aggregation = false;
  /// NICs per GPU (cluster.nic "per-gpu"): a ring algorithm over several nodes of several GPUs runs one ring per local
  /// GPU, rotated so that each leaves a node through another GPU's NIC (NCCL's channels over every NIC, detail.hpp
  /// ring_steps); false: one ring, leaving each node through its last GPU.
  bool rails = false;
  [[nodiscard]] int workers() const { return nodes * gpus_per_node; }
  /// The rings a ring algorithm runs (rails).
  [[nodiscard]] int rings() const { return rails && nodes > 1 && gpus_per_node > 1 ? gpus_per_node : 1; }
  [[nodiscard]] int server_count() const { return servers > 0 ? servers : nodes; }
  /// Every rank: the workers, then the dedicated servers.
  [[nodiscard]] int ranks() const { return workers() + (dedicated_servers ? server_count() : 0); }
  [[nodiscard]] int server_rank(int s) const { return dedicated_servers ? workers() + s : (s % nodes) * gpus_per_node; }
};

enum class Granularity { aggregated, per_message };

/// Non-powers of two in recursive halving/doubling (Thakur, Rabenseifner, Gropp, IJHPCA 2005, Sec. 4.4): the
/// p' = 2^floor(log2 p) core runs over virtual ranks; the first 2r ranks (r = p - p') pair up as (2i, 2i+1) and
/// virtual rank v stands for real rank v < r ? 2v+1 : v+r.
struct PowerOfTwoCore {
  int core = 0;  ///< p'
  int extra = 0; ///< r
  explicit PowerOfTwoCore(int p)
      : core(p >= 1 ? static_cast<int>(std::bit_floor(static_cast<unsigned>(p))) : 0), extra(p - core) {}
  [[nodiscard]] int real(int v) const { return v < extra ? 2 * v + 1 : v + extra; }
  /// Before the core: each rank 2i sends `bytes` to its partner 2i+1 (i < r).
  [[nodiscard]] Phase fold_in(double bytes) const { return pairs(bytes, true); }
  /// After the core: each rank 2i+1 sends `bytes` back to 2i.
  [[nodiscard]] Phase fold_out(double bytes) const { return pairs(bytes, false); }

private:
  [[nodiscard]] Phase pairs(double bytes, bool in) const {
    Phase phase;
    phase.flows.reserve(static_cast<std::size_t>(extra));
    for (int i = 0; i < extra; ++i)
      phase.flows.push_back(in ? Flow{2 * i, 2 * i + 1, bytes, 1} : Flow{2 * i + 1, 2 * i, bytes, 1});
    return phase;
  }
};

/// `bytes`: the collective's payload per rank (allreduce: the buffer; allgather: the gathered result;
/// reduce-scatter: the input buffer; broadcast: the buffer, root rank 0; point-to-point: rank 0 -> rank p-1;
/// global top-k: one rank's k pairs, the size of every message; ps push / pull: the key's bytes per worker).
using LowerFn = std::vector<Phase> (*)(const LoweringShape& shape, double bytes, Granularity granularity);

} // namespace ddlsim::sim
