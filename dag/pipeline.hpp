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
#pragma once

#include "dag/graph.hpp"

#include <cstdint>
#include <string_view>
#include <vector>

namespace ddlsim::dag {

enum class PipelineSchedule : std::uint8_t { gpipe, one_f_one_b, interleaved_1f1b };
[[nodiscard]] std::string_view pipeline_schedule_name(PipelineSchedule s);

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
[[nodiscard]] std::vector<PipelineOp> pipeline_ops(PipelineSchedule schedule, int stages, int micro_batches, int chunks,
                                                   int rank);

/// The most (micro-batch, chunk) passes whose forward has run and whose backward has not, over the order: the
/// activations a rank holds at its peak (in chunk-micro-batches).
[[nodiscard]] int in_flight_passes(const std::vector<PipelineOp>& ops);

/// The bubble of the ideal schedule (equal stages, free transfers): the idle share of the stages' compute time,
/// (p - 1) / (m + p - 1) for GPipe and 1F1B, (p - 1) / (v m + p - 1) interleaved (Narayanan et al. 2021, §2.2).
[[nodiscard]] double bubble_fraction_closed_form(PipelineSchedule schedule, int stages, int micro_batches, int chunks);

/// One virtual stage: consecutive layers, their cost per micro-batch, and what crosses to the next virtual stage.
struct VirtualStage {
  int first_layer = 0;
  int end_layer = 0; ///< exclusive
  double forward_s = 0;
  double backward_s = 0;
  double activation_bytes = 0; ///< per micro-batch, sent to the next virtual stage (its gradient comes back)
  double recompute_s = 0;      ///< forward work the backward repeats (activation recomputation)
  bool recompute_last = true;  ///< false: the last micro-batch keeps its activations (torchgpipe's except_last)
};

/// One pipeline rank (a GPU of the replica): its gradient groups (built as for data parallelism, dag/strategy.hpp,
/// over its own layers), the optimizer step of its parameters, and its data-parallel group.
struct PipelineRank {
  int gpu = 0;                       ///< global GPU rank
  std::vector<GradientGroup> groups; ///< reduced after the flush, in order, over `data_parallel`
  double update_s = 0;
  Communicator data_parallel; ///< the GPUs that hold the same stage in the other replicas
};

/// Everything build_pipeline needs: the schedule, the virtual stages (p x v of them; virtual stage c p + r runs on
/// rank r), the ranks, and the first stage's input pipeline (data loading on its node's host, one load and one
/// host-to-device copy per micro-batch, as build_iteration does for a batch).
struct PipelinePlan {
  PipelineSchedule schedule = PipelineSchedule::one_f_one_b;
  int micro_batches = 1;
  int chunks = 1;
  std::vector<VirtualStage> stages;
  std::vector<PipelineRank> ranks;
  int host_node = 0; ///< the node of rank 0's GPU
  int gpus_per_node = 1;
  double data_load_s = 0;
  double h2d_s = 0;
  bool prefetch = true;
};

/// The DAG of one replica: on each rank's GPU its passes in pipeline_ops' order on the compute stream; a
/// point-to-point transfer (stream p2p of the sender) after each forward whose next virtual stage is on another rank
/// and after each backward whose previous one is; the loads on the host and the copies before each micro-batch's first
/// forward; after a rank's last pass its gradient groups (their kernels and collectives over its data-parallel
/// group, in order) and then its update. The DAG is replicated (IterationGraph::replicate) over the ranks'
/// data-parallel groups.
[[nodiscard]] IterationGraph build_pipeline(const PipelinePlan& plan);

} // namespace ddlsim::dag
