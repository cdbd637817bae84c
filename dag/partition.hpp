// Pipeline stage partitioning: which contiguous run of the model's forward-order layers each pipeline stage runs.
// Equal layer or transformer-block counts (DeepSpeed's partition_uniform, Megatron's embedding-first / head-last
// placement), the exact min-max split of per-layer costs, PipeDream's dynamic programme over layer prefixes with
// activation transfers (Narayanan et al., "PipeDream", SOSP 2019, §3.1), and explicit per-stage layer counts.
#pragma once

#include "dag/model.hpp"

#include <vector>

namespace ddlsim::dag {

/// Layers [first, end) of the model's forward order run on one pipeline stage.
struct StageSpan {
  int first = 0; ///< the stage's first layer
  int end = 0;   ///< one past its last layer

  /// The number of layers on the stage.
  [[nodiscard]] int layers() const { return end - first; }
  /// Same layers.
  friend bool operator==(const StageSpan&, const StageSpan&) = default;
};

/// Equal numbers of layers per stage; for a model of repeated blocks (Layer::block, e.g. transformer layers) equal
/// numbers of blocks, with the layers before the first block (embeddings) on the first stage and those after the
/// last block (final norm, LM head, loss) on the last, as Megatron places them (its pre_process / post_process
/// stages), and any layer outside a block between two blocks with the block before it.
/// Remainder: with q = units / stages and r = units mod stages (units = layers, or blocks), the first r stages get
/// q + 1 units and the others q (DeepSpeed's `partition_uniform`, deepspeed/runtime/utils.py; numpy.array_split).
/// Throws std::invalid_argument if stages < 1, stages > layers, stages > blocks for a model of blocks, or the blocks
/// are not numbered 0, 1, ... in forward order.
[[nodiscard]] std::vector<StageSpan> partition_uniform(const Model& model, int stages);

/// Where a stage may begin (the units the min-max partitions cut between): at a layer for most models, at a block for
/// a model of repeated blocks (a transformer's layers; Megatron cuts between them), the layers before the first block
/// going with it and a layer outside a block with the block before it (as partition_uniform places them).
[[nodiscard]] std::vector<int> unit_starts(const Model& model);

/// The exact min-max contiguous partition of per-layer costs (e.g. forward + backward seconds per micro-batch) into
/// `stages` non-empty stages: no other split has a smaller largest stage cost. Ties: among the optimal splits, the one
/// whose every cut is as early as in any optimal split (the later stages take as many layers as the optimum allows,
/// the earlier ones, which hold the most in-flight activations under 1F1B, the fewest). O(stages * layers * log
/// layers). Throws std::invalid_argument if stages < 1 or > layers, or a cost is negative or not finite.
[[nodiscard]] std::vector<StageSpan> partition_balanced(const std::vector<double>& layer_cost_s, int stages);

/// PipeDream's partitioning (SOSP 2019, §3.1) for a straight pipeline (no stage replication), exactly `stages`
/// stages: A(j, s) = min over i < j of max(A(i, s - 1), 2 * cut_bytes[i - 1] / bandwidth, cost of layers [i, j)),
/// the slowest of the stages' compute and of the transfers between consecutive stages, which overlap with compute.
/// `cut_bytes[c]` is what the forward sends across a cut between layers c and c + 1 (one entry per cut, layers - 1
/// in all; see cut_activation_bytes); the backward returns as many bytes of gradient, hence the 2 (PipeDream's
/// planner, optimizer/optimizer_graph_hierarchical.py: `2.0 * output_activation_sizes[k] / bandwidth`). An
/// infinite bandwidth gives partition_balanced's split. Ties: the last cut as early as possible, then the one before
/// it, and so on. O(stages * layers^2). Throws std::invalid_argument if stages < 1 or > layers, a cost or a size is
/// negative or not finite, cut_bytes has the wrong length, or the bandwidth is not positive.
[[nodiscard]] std::vector<StageSpan> partition_pipedream(const std::vector<double>& layer_cost_s,
                                                         const std::vector<double>& cut_bytes,
                                                         double bandwidth_bytes_per_s, int stages);

/// An explicit list of layer counts, one per stage in pipeline order. Throws std::invalid_argument if the list is
/// empty, a count is below 1, or the counts do not add up to `layers`; the message names the offending stage.
[[nodiscard]] std::vector<StageSpan> partition_explicit(const std::vector<int>& layers_per_stage, int layers);

/// Bytes per sample (fp32 activation_bytes) that cross each cut between consecutive layers: entry c counts every
/// output of layers 0..c that a layer after c reads (Layer::inputs, so skip connections too), as PipeDream sums the
/// activations of the antichain at a cut. layers - 1 entries (none for fewer than two layers). Throws
/// std::invalid_argument if a layer reads one that does not precede it.
[[nodiscard]] std::vector<double> cut_activation_bytes(const Model& model);

} // namespace ddlsim::dag
