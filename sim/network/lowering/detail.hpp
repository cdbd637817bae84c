// Shared pieces of the collective algorithms (sim/network/lowering/*.cpp): argument checks, the ring step, the chunking
// of pipelined per-message lowerings, the closed forms' hops, and the lowering function and closed-form factory per
// algorithm that registry.cpp lists.
// Ranks are node-major (lowering.hpp): rank r is GPU r % g of node r / g.
#pragma once

#include "sim/network/collectives.hpp"

#include <cassert>
#include <memory>
#include <vector>

namespace ddlsim::sim::detail {

/// Per-message lowerings of pipelined algorithms (broadcast ring, allreduce tree) cut a payload into chunks of
/// NCCL's Simple-protocol step (4 MiB buffer / 8 steps = 512 KiB), at least 1 and at most kMaxPipelineChunks,
/// so that the message count stays bounded for large buffers (a 1 GiB payload moves in 64 chunks of 16 MiB).
inline constexpr double kPipelineChunkBytes = 512.0 * 1024;
inline constexpr int kMaxPipelineChunks = 64;
[[nodiscard]] int pipeline_chunks(double payload_bytes);

inline void check_arguments(const LoweringShape& shape, double bytes) {
  assert(shape.nodes >= 1 && shape.gpus_per_node >= 1 && "lowering: a shape needs at least one node and one GPU");
  assert(bytes >= 0 && "lowering: the payload must not be negative");
  (void)shape;
  (void)bytes;
}

/// A hop of the closed forms: a message between GPUs of one node crosses two GPU links, one between nodes two NIC
/// links (collectives.hpp).
struct Hop {
  double alpha_s;
  double bandwidth;
};
[[nodiscard]] inline Hop intra_hop(const Network& n) {
  return {2 * n.intra.latency_s, n.intra.bandwidth};
}
[[nodiscard]] inline Hop inter_hop(const Network& n) {
  return {2 * n.inter.latency_s, n.inter.bandwidth};
}

/// NVLS (allreduce_nvls.cpp): the share of the NVLink rate NCCL's NVLS kernels reach on Hopper (nvlsEfficiency 0.85
/// on 15 of 16 channels, NVIDIA/nccl src/graph/tuning.cc and src/transport/nvls.cc), the latency NCCL's tuner charges
/// NVLS on NVLink (25 us), and the link time, in bytes at the link's rate, that a GPU's link needs for an allreduce of
/// n bytes over g GPUs: n(1 + 1/g) at that share.
inline constexpr double kNvlsRateShare = 0.85 * 15.0 / 16.0;
inline constexpr double kNvlsLatency = 25e-6;
[[nodiscard]] inline double nvls_link_bytes(int g, double bytes) {
  return (1.0 + 1.0 / g) * bytes / kNvlsRateShare;
}

/// One step of the g rings inside the nodes (`inter` false: GPU i of node m -> GPU (i+1) mod g of m) or of the g
/// rings between them (GPU i of node m -> GPU i of node (m+1) mod N): p flows of `bytes` in rank order.
[[nodiscard]] Phase node_ring_step(const LoweringShape& shape, bool inter, double bytes, int latency_repeats);
/// The g rings between the nodes (one per local GPU, sharing the node's NIC unless each GPU has its own) allreducing
/// `slice` bytes each: 2(N-1) (a_e + slice/N / (B_e / sharers)).
[[nodiscard]] double node_rings_time(const Network& net, double slice);

/// A ring of `steps` steps in which every rank sends `chunk_bytes` to the next rank: `steps` phases per message,
/// or one phase of p flows of steps x chunk_bytes with latency_repeats = steps when aggregated. No phase for p = 1.
/// With shape.rings() = g > 1 (NICs per GPU), g rotated rings each carry 1/g of every chunk, one after the other in
/// each phase (Phase::rings): ring c enters each node at its GPU c and leaves it from GPU c - 1, so every NIC sends
/// one ring's and receives one ring's inter-node edge, and every GPU link carries g - 1 rings' intra-node edges.
[[nodiscard]] std::vector<Phase> ring_steps(const LoweringShape& shape, int steps, double chunk_bytes,
                                            Granularity granularity);

/// The one phase of a parameter-server push (`push`) or pull of a key of `bytes` per worker split evenly over the
/// servers [shape.shard_first, + shape.shard_count) (count 0: all): a flow per (worker, server) pair of bytes / c,
/// worker to server for a push; none where the worker is the server's own rank. No phase when there is no flow.
[[nodiscard]] std::vector<Phase> ps_shard_phases(const LoweringShape& shape, double bytes, bool push);

// Per (collective, algorithm), in its own file named after it: the lowering, and the closed form where there is one.
std::vector<Phase> lower_allreduce_ring(const LoweringShape& shape, double bytes, Granularity granularity);
std::unique_ptr<CollectiveModel> closed_form_allreduce_ring(const Network& net);
std::vector<Phase> lower_allreduce_halving_doubling(const LoweringShape& shape, double bytes, Granularity granularity);
std::unique_ptr<CollectiveModel> closed_form_allreduce_halving_doubling(const Network& net);
std::vector<Phase> lower_allreduce_tree(const LoweringShape& shape, double bytes, Granularity granularity);
std::unique_ptr<CollectiveModel> closed_form_allreduce_tree(const Network& net);
std::vector<Phase> lower_allreduce_hierarchical(const LoweringShape& shape, double bytes, Granularity granularity);
std::unique_ptr<CollectiveModel> closed_form_allreduce_hierarchical(const Network& net);
std::vector<Phase> lower_allreduce_nvls(const LoweringShape& shape, double bytes, Granularity granularity);
std::unique_ptr<CollectiveModel> closed_form_allreduce_nvls(const Network& net);
std::vector<Phase> lower_allgather_ring(const LoweringShape& shape, double bytes, Granularity granularity);
std::vector<Phase> lower_allgather_recursive_doubling(const LoweringShape& shape, double bytes,
                                                      Granularity granularity);
std::vector<Phase> lower_reduce_scatter_ring(const LoweringShape& shape, double bytes, Granularity granularity);
std::vector<Phase> lower_broadcast_ring(const LoweringShape& shape, double bytes, Granularity granularity);
std::vector<Phase> lower_broadcast_tree(const LoweringShape& shape, double bytes, Granularity granularity);
std::vector<Phase> lower_global_topk_tree(const LoweringShape& shape, double bytes, Granularity granularity);
std::vector<Phase> lower_ps_push_sharded(const LoweringShape& shape, double bytes, Granularity granularity);
std::vector<Phase> lower_ps_pull_sharded(const LoweringShape& shape, double bytes, Granularity granularity);
std::vector<Phase> lower_point_to_point_direct(const LoweringShape& shape, double bytes, Granularity granularity);

} // namespace ddlsim::sim::detail
