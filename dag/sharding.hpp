// Sharded data parallelism (scenario `sharding`, docs/sharding.md): ZeRO stages 1-3 (Rajbhandari et al., SC'20),
// PyTorch FSDP2's `fully_shard` units, Megatron-Core's distributed optimizer and HSDP, as a data-parallel schedule of
// reduce-scatters, parameter all-gathers and an optimizer step on the shard; and ZeRO's memory accounting (SC'20, Figure 1).
#pragma once

#include "dag/graph.hpp"
#include "dag/memory.hpp"
#include "dag/model.hpp"
#include "dag/strategy.hpp"

#include <cstdint>
#include <vector>

namespace ddlsim::dag {

/// What stage 3 gathers and reduces together (`sharding.unit`).
enum class UnitKind : std::uint8_t {
  layer, ///< each layer with parameters
  block, ///< each transformer block (Layer::block); a run of layers outside blocks is a unit of its own
  size,  ///< consecutive layers up to a size in bytes of `param_dtype` (ZeRO-3's prefetch bucket)
};

/// Consecutive layers [first_layer, end_layer) gathered and reduced together; `params` their parameters.
struct ShardUnit {
  int first_layer = 0;
  int end_layer = 0;
  std::int64_t params = 0;
};

/// The model's units in forward order. `size`: layers are added to a unit while it holds fewer than `cap_params`
/// parameters (a layer larger than the cap is a unit alone). Units without parameters are left out. `block` on a model
/// without blocks gives one unit per layer with parameters.
[[nodiscard]] std::vector<ShardUnit> shard_units(const Model& model, UnitKind kind, double cap_params = 0);

/// The gradient group of each unit (its tensors, in gradient-ready order; ready when its first layer's backward
/// ends), in launch order (last unit first), at `bytes_per_element`.
[[nodiscard]] std::vector<GradientGroup> unit_groups(const Model& model, const std::vector<ShardUnit>& units,
                                                     double bytes_per_element);

/// Model state per parameter, in bytes, by ZeRO's accounting (SC'20, Figure 1): weights and gradients in the training
/// format (2 bytes for fp16/bf16, 4 for fp32), and K bytes of optimizer state (fp32 master weights when training in
/// 16 bits, plus Adam's two fp32 moments, SGD-momentum's one, SGD's none: K = 12 for mixed-precision Adam). Stage 1
/// divides K by the shards N, stage 2 the gradients too, stage 3 the weights too: mixed-precision Adam gives
/// (2 + 2 + 12), 4 + 12/N, 2 + 14/N and 16/N. (ModelStateBytes: dag/memory.hpp.)
[[nodiscard]] ModelStateBytes zero_state_per_parameter(Optimizer optimizer, DType dtype, int stage, int shards);

/// The schedule build_sharded_iteration lays out (sim/plan/sharding.cpp fills it from the scenario).
struct ShardedSchedule {
  int stage = 1;
  /// Reduce groups in launch order: each a chain of a reduce-scatter over the shard group (and, with HSDP, an allreduce
  /// of its shard across the replicas), as GradientGroup::steps say. Stages 1-2 also gather each group's parameters
  /// before its first layer's forward.
  std::vector<GradientGroup> groups;
  std::vector<ShardUnit> units; ///< stage 3: gathered before their forward (and backward, resharded)
  int prefetch = 1;             ///< stage 3: units gathered ahead of the one computing
  bool reshard_after_forward = true;
  double param_bytes_per_element = 2; ///< of the all-gathers
  double update_s = 0;                ///< the optimizer step on this rank's shard (on the host with offload)
  /// Offloaded state (ZeRO-Offload, FSDP's CPUOffloadPolicy), on the GPU's copy stream: per group, the copy of its
  /// gradient shard to the host after its chain (empty: no offload; the step then runs on the host, on no GPU
  /// stream, after every copy); the copy of the updated parameter shard back to the GPU after the step (0: none,
  /// the parameters live on the host); stage 3 with offloaded parameters, per unit, the copy of its shard to the GPU
  /// before each of its all-gathers (empty: none).
  std::vector<double> offload_gradient_s{};
  double upload_s = 0;
  std::vector<double> fetch_unit_s{};
};

/// One worker's iteration with sharded data parallelism: data loading, copy, forward, backward as build_iteration
/// builds them, and on the communication stream, one collective at a time, the reduce groups' chains in launch order
/// (each after its gradients) and the parameter all-gathers: FSDP2 issues them on two CUDA streams, but over one
/// process group, whose NCCL communicator runs them one after the other (pytorch/pytorch#186335).
/// - Stages 1-2: each group's all-gather of its updated parameters (bytes: its elements at param_bytes_per_element,
///   the gathered size) before the forward of its first layer, in forward order from the start of the iteration: the
///   steady state of Megatron-Core's `overlap_param_gather` (the previous step's gathers dispatched as the forward
///   reaches each bucket).
/// - Stage 3: unit u's all-gather before its first forward; it waits for the forward of unit u - prefetch - 1 to end
///   (at most prefetch + 1 units gathered). With resharding, a second all-gather before its first backward, waiting
///   for the end of forward and for the backward of unit u + prefetch + 1; except the last unit, which keeps its
///   parameters for the backward that starts with it (FSDP2 does not reshard its root after forward; torchtitan
///   leaves its last unit, the final norm and output projection, unsharded: pytorch/torchtitan#1094).
/// The optimizer step on the shard (update_s) follows every chain. Collectives over communicator -1 (set by place()).
[[nodiscard]] IterationGraph build_sharded_iteration(const Model& model, const WorkerCosts& costs,
                                                     const ShardedSchedule& schedule);

} // namespace ddlsim::dag
