// Pipeline model parallelism: the exact per-stage order of forward and backward passes of each schedule, and the
// iteration DAG of one data-parallel replica of a pipeline (its stages on their GPUs, the transfers of activations
// and gradients between them, each stage's gradient reduction over its data-parallel group and its update).
//
// Schedules, as the frameworks order them:
//   - GPipe (Huang et al., NeurIPS 2019; torchgpipe's clock cycles): every micro-batch's forward, then every
//     backward in reverse order.
//   - 1F1B (PipeDream-Flush; Megatron-LM's non-interleaved schedule, megatron/core/pipeline_parallel/schedules.py,
//     forward_backward_pipelining_without_interleaving): rank r runs min(p - r - 1, m) warm-up forwards, then
//     alternates one forward and one backward, then the remaining backwards.
//   - Interleaved 1F1B (Narayanan et al., SC 2021; forward_backward_pipelining_with_interleaving): v model chunks per
//     GPU, virtual stage c p + r on rank r; (p - r - 1) 2 + (v - 1) p warm-up forwards (at most m v); the k-th
//     forward runs chunk (k mod p v) div p on micro-batch (k div p v) p + k mod p, the k-th backward the chunks in
//     reverse.
// The flushing schedules end with every stage's gradients reduced over its data-parallel group, then its update.
// The asynchronous ones run 1F1B's steady state without a flush:
//   - PipeDream (Narayanan et al., SOSP 2019): each backward is followed by the stage's update (weight stashing: stage
//     r keeps p - r weight versions for the micro-batches in flight).
//   - PipeDream-2BW (Narayanan et al., ICML 2021): the gradients of m micro-batches are accumulated and applied once
//     (2 weight versions, double-buffered).
//   - SpecTrain (Chen, Yang, Cheng, arXiv:1809.02839): PipeDream's order without stashing; before a pass the stage
//     predicts the weights s steps ahead, W' = W - s lr v (v the momentum), and restores W after it. GPU k of N: v1
//     predicts s = floor(k/2) + N - k - 1 steps for the forward and floor(k/2) for the backward; v2 s = N - k - 1 for
//     both (the forward's s reused).
#pragma once

#include "dag/graph.hpp"

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace ddlsim::dag {

struct PipelineOp;

/// When the stages of a pipeline update their weights.
enum class WeightUpdates : std::uint8_t {
  after_flush,       ///< once per iteration, after the flush (the flushing schedules)
  every_micro_batch, ///< after every backward, without a flush (PipeDream, SpecTrain)
  every_iteration,   ///< after every m-th backward, without a flush (PipeDream-2BW)
};

/// A pipeline schedule's registry entry: one constant-initialised `extern const PipelineScheduleInfo` per schedule,
/// defined in a file of dag/schedules/ (namespace ddlsim::dag::builtin, one file per schedule family) and registered
/// by its `ddlsim_pipeline_schedule` line in dag/CMakeLists.txt. What a schedule is lives there: its name, its
/// properties, its op order and its closed forms; the rest of ddlsim asks it, and no code compares schedule names.
struct PipelineScheduleInfo {
  std::string_view name;         ///< pipeline.schedule
  std::string_view description;  ///< one line for the docs and messages
  bool asynchronous = false;     ///< no flush: an iteration is m micro-batches of the steady state
  bool interleaved = false;      ///< v model chunks per rank (pipeline.virtual_stages; m divisible by p)
  bool predicts_weights = false; ///< passes run on predicted weights (pipeline.weight_prediction; SpecTrain)
  WeightUpdates updates = WeightUpdates::after_flush;
  /// Appends rank `rank`'s passes in order (p stages, m micro-batches, v chunks: checked positive, and v = 1 unless
  /// interleaved); throws std::invalid_argument on sizes the schedule does not admit.
  void (*order)(int stages, int micro_batches, int chunks, int rank, std::vector<PipelineOp>& ops) = nullptr;
  /// Weight copies rank `rank` of `stages` holds at its peak; `predicts`: the rank predicts for some pass.
  int (*weight_versions)(int stages, int rank, bool predicts) = nullptr;
  /// The bubble of the ideal schedule (equal stages, free transfers) as a share of the stages' compute time.
  double (*bubble)(int stages, int micro_batches, int chunks) = nullptr;
};

/// Every registered schedule in registration order (the `ddlsim_pipeline_schedule` lines of dag/CMakeLists.txt;
/// generated).
[[nodiscard]] std::span<const PipelineScheduleInfo* const> pipeline_schedules();
/// The registered schedule of that name, nullptr if none.
[[nodiscard]] const PipelineScheduleInfo* find_pipeline_schedule(std::string_view name);
/// The registered schedule of that name; std::logic_error if none (for the names code and tests use).
[[nodiscard]] const PipelineScheduleInfo& pipeline_schedule(std::string_view name);

// Closed forms the schedules share.
/// (p - 1) / (v m + p - 1): GPipe and 1F1B (v = 1), interleaved (Narayanan et al. 2021, §2.2).
[[nodiscard]] double flushing_bubble(int stages, int micro_batches, int chunks);
/// 0: an asynchronous schedule's steady state has no bubble.
[[nodiscard]] double no_bubble(int stages, int micro_batches, int chunks);
/// 1: one weight version (nothing stashed).
[[nodiscard]] int one_weight_version(int stages, int rank, bool predicts);

/// SpecTrain's version difference s for GPU k of N (k = rank, N = stages): {forward, backward}.
enum class WeightPrediction : std::uint8_t { v1, v2 };
struct PredictionSteps {
  int forward = 0;
  int backward = 0;
};
[[nodiscard]] PredictionSteps prediction_steps(WeightPrediction version, int stages, int rank);

/// One pass of one micro-batch through one model chunk of a pipeline rank.
struct PipelineOp {
  bool forward = true;
  int micro_batch = 0;
  int chunk = 0; ///< 0 .. v-1: the rank's virtual stage chunk x p + rank
  bool operator==(const PipelineOp&) const = default;
};

/// The order in which pipeline rank `rank` (of `stages`) runs its passes over `micro_batches` micro-batches and
/// `chunks` model chunks (1 unless interleaved; interleaved needs micro_batches divisible by stages, as Megatron).
/// Throws std::invalid_argument on sizes the schedule does not admit.
[[nodiscard]] std::vector<PipelineOp> pipeline_ops(const PipelineScheduleInfo& schedule, int stages, int micro_batches,
                                                   int chunks, int rank);

/// The most (micro-batch, chunk) passes whose forward has run and whose backward has not, over the order: the
/// activations a rank holds at its peak (in chunk-micro-batches).
[[nodiscard]] int in_flight_passes(const std::vector<PipelineOp>& ops);

/// The bubble of the ideal schedule (equal stages, free transfers): the idle share of the stages' compute time
/// (PipelineScheduleInfo::bubble, v = 1 unless the schedule is interleaved).
[[nodiscard]] double bubble_fraction_closed_form(const PipelineScheduleInfo& schedule, int stages, int micro_batches,
                                                 int chunks);

/// Part of a pass under tensor parallelism: compute (on the compute stream), then a collective over the rank's tensor
/// group of `bytes` per GPU on the same stream, which the next part waits for (Megatron's tensor-parallel collectives
/// block the computation that reads their result). `Collective::none`: compute only.
struct PassPart {
  double compute_s = 0;
  Collective collective = Collective::none;
  double bytes = 0;
  double collective_s = 0; ///< its cost, where the plan folds the parts (PipelinePlan::fold_tensor_parts)
  /// Sharding: the rank's parameter all-gather (PipelineRank::gathers) that this part's compute waits for, and with it
  /// every gather before it; -1: none. A part that names one starts a task of its own, folded or not.
  int gather = -1;
  bool operator==(const PassPart&) const = default;
};

/// One virtual stage: consecutive layers, their cost per micro-batch, and what crosses to the next virtual stage.
struct VirtualStage {
  int first_layer = 0;
  int end_layer = 0; ///< exclusive
  double forward_s = 0;
  double backward_s = 0;
  double activation_bytes = 0; ///< per micro-batch, sent to the next virtual stage (its gradient comes back)
  double recompute_s = 0;      ///< forward work the backward repeats (activation recomputation)
  bool recompute_last = true;  ///< false: the last micro-batch keeps its activations (torchgpipe's except_last)
  /// Tensor parallelism: the passes as parts (each the compute up to one of the rank's tensor-group collectives);
  /// empty: one task of forward_s / backward_s. `recompute_parts` run at the start of a backward that recomputes
  /// (empty: recompute_s is added to the backward's task, or to its first part).
  std::vector<PassPart> forward_parts{};
  std::vector<PassPart> backward_parts{};
  std::vector<PassPart> recompute_parts{};
  /// Sharding: micro-batch 0's forward as parts cut before each layer whose parameters a gather brings (PassPart::
  /// gather); empty: as the other micro-batches'.
  std::vector<PassPart> first_forward_parts{};
};

/// Sharding (Megatron-Core's distributed optimizer): the all-gather of one gradient group's updated parameters over
/// the rank's data-parallel group, before micro-batch 0's forward reaches the group's first layer.
struct ParamGather {
  int group = 0;       ///< its index in PipelineRank::groups
  double bytes = 0;    ///< the gathered parameters, in the gathers' format
  int first_layer = 0; ///< the layer whose forward waits for it (the group's lowest)
};

/// One pipeline rank (a GPU of the replica): its gradient groups (built as for data parallelism, dag/strategy.hpp,
/// over its own layers), the optimizer step of its parameters, and its data-parallel group.
struct PipelineRank {
  int gpu = 0;                       ///< global GPU rank
  std::vector<GradientGroup> groups; ///< reduced before each update, in order, over `data_parallel`
  double update_s = 0;
  Communicator data_parallel; ///< the GPUs that hold the same stage in the other replicas
  Communicator tensor{};      ///< its tensor-parallel group (the passes' parts' collectives); empty: none
  /// SpecTrain's kernels around a pass (0: none): predict the weights before it, restore them after it.
  double predict_forward_s = 0;
  double predict_backward_s = 0;
  double restore_s = 0;
  /// Sharding: the parameter all-gathers, in forward order (by first layer), issued one after the other on the
  /// communication stream from the start of the iteration.
  std::vector<ParamGather> gathers{};
};

/// Everything build_pipeline needs: the schedule, the virtual stages (p x v of them; virtual stage c p + r runs on
/// rank r), the ranks, and the first stage's input pipeline (data loading on its node's host, one load and one
/// host-to-device copy per micro-batch, as build_iteration does for a batch).
struct PipelinePlan {
  const PipelineScheduleInfo* schedule = &pipeline_schedule("1f1b");
  int micro_batches = 1;
  int chunks = 1;
  /// The virtual stages, p x v, not the p pipeline stages (the ranks). Not `virtual_stages`: the scenario's
  /// `pipeline.virtual_stages` is v.
  std::vector<VirtualStage> stages;
  std::vector<PipelineRank> ranks;
  int host_node = 0; ///< the node of rank 0's GPU
  int gpus_per_node = 1;
  double data_load_s = 0;
  double h2d_s = 0;
  bool prefetch = true;
  /// Asynchronous schedules: a stage updates after every `update_every`-th backward (1: PipeDream and SpecTrain; m:
  /// 2BW) instead of once after the flush; `micro_batches` is then the number unrolled.
  int update_every = 0;
  /// Each pass one task of its parts' compute and collective times, as the analytic engine times them anyway: they
  /// run one after the other on the compute stream with nothing else between them (the flow engine lowers each
  /// collective).
  bool fold_tensor_parts = false;
  /// A language model whose output layer is tied to its word embeddings: the bytes of their gradient that the first
  /// and the last rank allreduce between them before each update, after their data-parallel reduction (Megatron-LM's
  /// embedding group: finalize_model_grads, _allreduce_word_embedding_grads); 0: none.
  double tied_embedding_bytes = 0;
};

/// The DAG of one replica: on each rank's GPU its passes in pipeline_ops' order on the compute stream (SpecTrain's
/// prediction and restore kernels around them; under tensor parallelism each pass a chain of its parts); a
/// point-to-point transfer (stream p2p of the sender) after each forward whose next virtual stage is on another rank
/// and after each backward whose previous one is; the loads on the host and the copies before each micro-batch's first
/// forward; after a rank's last pass its gradient groups (their kernels and collectives over its data-parallel
/// group, in order), on the first and the last rank the tied embeddings' allreduce, and then its update (asynchronous
/// schedules: after every update_every-th backward, in the pass order); with sharding, the rank's parameter all-gathers
/// on its communication stream, in order from the start of the iteration, each before the part of micro-batch 0's
/// forward it gates (VirtualStage::first_forward_parts). The DAG is replicated (IterationGraph::replicate) over the
/// ranks' data-parallel and tensor groups: it holds tensor rank 0 of each stage, whose peers run the same tasks.
[[nodiscard]] IterationGraph build_pipeline(const PipelinePlan& plan);

} // namespace ddlsim::dag
