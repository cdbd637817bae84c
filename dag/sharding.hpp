// Sharded data parallelism (scenario `sharding`, docs/sharding.md): ZeRO stages 1-3 (Rajbhandari et al., SC'20),
// PyTorch FSDP2's `fully_shard` units, Megatron-Core's distributed optimizer and HSDP, as a data-parallel schedule of
// reduce-scatters, parameter all-gathers and an optimizer step on the shard; and ZeRO's memory accounting (SC'20,
// Figure 1).
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

/// Stage 3's gather group: consecutive units [first_unit, end_unit) all-gathered as one collective. The planner below
/// also uses it for a range of positions in a sequence of units.
struct GatherGroup {
  int first_unit = 0;
  int end_unit = 0;
  bool operator==(const GatherGroup&) const = default;
};

/// The model stage 3's gather groups are planned with (MG-WFBP's idea, Shi et al., INFOCOM 2019, applied to the
/// all-gathers): a sequence of units whose gathers are issued in order, unit i computing compute_s[i] once gathered
/// and gathering bytes[i]; `split` cuts it into consecutive groups j = 1, 2, ... (positions in the sequence). The
/// gathers run back to back on one stream from time 0 (the prefetch never binds), group j's taking
/// alpha + beta B_j (B_j: its bytes); its compute F_j (its units' sum) starts when its gather and the previous group's
/// compute have ended: A_j = A_{j-1} + alpha + beta B_j, C_j = max(C_{j-1}, A_j) + F_j, C_0 = busy_s (compute queued
/// before the first group, e.g. the backward of units that keep their parameters). Returns C_last (busy_s when the
/// sequence is empty).
[[nodiscard]] double gather_sequence_end(const std::vector<GatherGroup>& split, const std::vector<double>& compute_s,
                                         const std::vector<double>& bytes, const AffineCost& cost, double busy_s = 0);

/// The split of the sequence that minimises gather_sequence_end. A_j = j alpha + beta (the bytes of the first groups)
/// depends only on how many groups precede and how many units they cover, and C_last grows with C_j, so a dynamic
/// programme over (units covered, groups used) that keeps the least C is exact: O(n^3) for n units, pruned by bounds
/// that keep the optimum (measured on the release build, both directions of plan_gather_groups: up to 0.17 s for
/// 1,024 units, 1.5 s for 2,048). Ties (within 1e-12, relative) keep the most groups, the least gathered at once.
[[nodiscard]] std::vector<GatherGroup> optimal_gather_split(const std::vector<double>& compute_s,
                                                            const std::vector<double>& bytes, const AffineCost& cost,
                                                            double busy_s = 0);

/// Stage 3's gather groups in both directions, as ShardedSchedule holds them (unit ranges in issue order).
struct GatherGroups {
  std::vector<GatherGroup> forward;
  std::vector<GatherGroup> backward;
};

/// Plans stage 3's gather groups with optimal_gather_split, per unit: its forward and backward times and its gathered
/// bytes. The forward: the units in forward order from the start of the iteration. The backward (with resharding):
/// the last forward group keeps its parameters (as the last unit does with one group per unit) and its backward runs
/// first (busy_s); the units before it are regathered in backward order from the end of the forward, split on their
/// own, since backward times differ from forward ones (a backward group may straddle forward groups).
[[nodiscard]] GatherGroups plan_gather_groups(const std::vector<double>& forward_s,
                                              const std::vector<double>& backward_s, const std::vector<double>& bytes,
                                              const AffineCost& cost, bool reshard_after_forward);

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
  /// With resharding, the last forward group is freed and regathered too (FSDP2's `reshard_after_forward=True` given
  /// to every module, the root's last unit included); false: it keeps its parameters for the backward.
  bool reshard_last = false;
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
  /// Stage 3's gather groups in issue order: `forward_gathers` in forward order, covering every unit;
  /// `backward_gathers` (with resharding) in backward order, covering the units before the last forward group, which
  /// keeps its parameters for the backward that starts with it. Empty: one group per unit (gather_groups).
  std::vector<GatherGroup> forward_gathers{};
  std::vector<GatherGroup> backward_gathers{};
};

/// The gather groups build_sharded_iteration issues at stage 3: the schedule's, or one per unit where it gives none;
/// a logic error when they do not cover the units as ShardedSchedule says.
[[nodiscard]] GatherGroups gather_groups(const ShardedSchedule& schedule);

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
///   leaves its last unit, the final norm and output projection, unsharded: pytorch/torchtitan#1094). With gather
///   groups, read "gather group" for "unit": each group is one all-gather (its units' parameters, their offload
///   fetches summed into one copy) before the forward of its first layer (before the backward of its last), the
///   prefetch counts groups, and the last forward group is the one that keeps its parameters.
/// The optimizer step on the shard (update_s) follows every chain. Collectives over communicator -1 (set by place()).
[[nodiscard]] IterationGraph build_sharded_iteration(const Model& model, const WorkerCosts& costs,
                                                     const ShardedSchedule& schedule);

} // namespace ddlsim::dag
