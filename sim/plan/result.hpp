// What an engine hands the reports: the DAG it ran, each task's timing, and the figures derived from them
// (iteration time, breakdown, traffic, memory, notes). Both engines fill the same struct.
#pragma once

#include "dag/graph.hpp"
#include "dag/strategy.hpp"
#include "sim/spec/engine.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ddlsim::sim {

struct TaskTiming {
  double start_s = 0;
  double end_s = 0;
};

/// The tasks of one data-parallel replica other than the DAG's own (dag::IterationGraph::replicas): the flow engine
/// simulates each GPU's copy of the worker's tasks; they run on graph.replica_device(replica, task.device).
struct ReplicaTiming {
  int replica = 0;
  std::vector<TaskTiming> timing; ///< by task id
};

struct Breakdown {
  double compute_s = 0;               ///< forward, backward and update on the GPU
  double compression_s = 0;           ///< gradient compression kernels
  double exposed_communication_s = 0; ///< communication not hidden behind compute or compression
  double idle_s = 0;                  ///< the rest: waiting for data, copies, launch delays
};

struct SimStats {
  double wall_s = 0;
  std::size_t events = 0;
  std::size_t flows = 0;
};

/// Traffic through one link of the simulated network (flow engine).
struct LinkUsage {
  std::string name;
  std::string role; ///< "intra", "nic", "switch"
  double bytes = 0;
  double busy_s = 0;
  double peak_utilisation = 0; ///< highest instantaneous load / bandwidth
  double mean_utilisation = 0; ///< bytes / (bandwidth x iteration time)
};

/// ps-async and ps-ssp: what the asynchronous workers achieved, as the analytic engine simulated them
/// (sim/analytic/ps_async.hpp, ps_ssp.hpp).
struct AsyncWorkersReport {
  int iterations_simulated = 0; ///< per slowest worker (ps-async), or unrolled (ps-ssp)
  int warmup_iterations = 0;    ///< excluded from the figures
  std::vector<double> worker_throughput_samples_per_s;
  std::vector<double> worker_compute_s; ///< one iteration's compute per worker (speed spread applied)
  std::map<int, long> staleness_histogram;
  double staleness_mean = 0;
  int staleness_max = 0;
  double aggregate_throughput_samples_per_s = 0;
  // ps-ssp
  int staleness_bound = -1;
  int clock_lead_max = 0; ///< the largest lead in iterations of a reading worker over the slowest (<= the bound)
};

/// Parameter-server strategies (ps-sync, ps-async, ps-ssp): placement and traffic, planned; for the asynchronous
/// ones what the workers achieved.
struct ParameterServerReport {
  int servers = 0;
  bool dedicated = false;
  int iterations_simulated = 0;           ///< ps-sync: iterations unrolled in the DAG
  int warmup_iterations = 0;              ///< excluded from the figures
  std::vector<std::size_t> iteration_end; ///< ps-sync: task id of each unrolled iteration's last backward
  double push_bytes_per_worker = 0;       ///< per iteration
  double pull_bytes_per_worker = 0;
  double server_bytes_received = 0; ///< per iteration, busiest server
  double server_bytes_sent = 0;
  std::optional<AsyncWorkersReport> async; ///< ps-async, ps-ssp
};

/// Memory of one GPU by part (summary.memory_per_gpu: docs/memory.md): the tensors as the strategy's model counts
/// them, then what the framework holds beside them (sim/plan/memory.hpp). With a pipeline, the stage at the peak.
struct MemoryPerGpu {
  double weights_bytes = 0, gradients_bytes = 0, optimizer_bytes = 0;
  double activation_bytes = 0;
  double buffer_bytes = 0;        ///< gradient buckets, reduce buffers, gathered parameters, stashed weight versions
  double logits_bytes = 0;        ///< the loss's fp32 logits and softmax, on the GPU that computes the loss
  double fragmentation_bytes = 0; ///< held by the caching allocator beyond the tensors
  double reserve_bytes = 0;       ///< CUDA context, NCCL buffers, cuBLAS workspaces
  std::optional<bool> fits;       ///< total within the GPU's memory; unset when the GPU's memory is unknown
  /// What the caching allocator hands out: weights to logits.
  [[nodiscard]] double tensor_bytes() const {
    return weights_bytes + gradients_bytes + optimizer_bytes + activation_bytes + buffer_bytes + logits_bytes;
  }
  [[nodiscard]] double total_bytes() const { return tensor_bytes() + fragmentation_bytes + reserve_bytes; }
};

/// A pipeline's figures (summary.pipeline: docs/pipelines.md, "Report"), measured from the simulated replica.
struct PipelineStageReport {
  int layers = 0;
  int first_layer = 0;
  int last_layer = 0;                ///< inclusive
  double compute_s = 0;              ///< forward and backward passes on the stage's GPU
  double tensor_communication_s = 0; ///< tensor parallelism's collectives on its compute stream
  double idle_s = 0;                 ///< the rest of the window from the replica's first pass to its last
  double p2p_bytes = 0;              ///< activations and gradients the stage sends per iteration
  int in_flight_micro_batches = 0;
  int weight_versions = 1;
  double peak_memory_bytes = 0; ///< memory.total_bytes()
  MemoryPerGpu memory;          ///< of the stage's GPU at its peak
  bool exceeds_gpu_memory = false;
};
struct PipelineReport {
  std::string schedule;
  int stages = 0;
  int micro_batches = 0;
  int micro_batches_simulated = 0; ///< asynchronous schedules unroll more than an iteration's m
  int virtual_stages = 1;
  std::string partition;
  double bubble_fraction = 0; ///< idle share of the stages' compute streams in the window of the passes
  double bubble_fraction_closed_form = 0;
  std::vector<PipelineStageReport> per_stage;
};

/// Sharded data parallelism (scenario `sharding`, stage >= 1; summary.sharding: docs/sharding.md, "Report"): the
/// schedule, each collective kind's traffic, the memory per GPU by part (ZeRO's accounting) and, once timed, the time
/// the gathers and the reductions are exposed (not under compute) on GPU 0.
struct ShardingReport {
  int stage = 0;
  int shard_size = 1; ///< GPUs of a shard group
  int replicas = 1;   ///< shard groups per data-parallel group (HSDP when > 1)
  std::string unit;   ///< stage 3: "block", "layer" or the unit size; else ""
  int units = 0;      ///< stage 3: units gathered
  int prefetch = 0;   ///< stage 3
  bool reshard_after_forward = false;
  bool reshard_last_unit = false; ///< stage 3, `reshard_after_forward` "all"
  std::string param_dtype, reduce_dtype;
  int reduce_groups = 0; ///< reduce-scatters per iteration
  /// Stage 3: the all-gathers of parameters in forward and in backward (one per gather group: one per unit, or fewer
  /// where MG-WFBP merges consecutive units' gathers).
  int forward_gather_groups = 0, backward_gather_groups = 0;
  /// Per GPU per iteration: collectives of each kind and the bytes the GPU sends in them.
  int allgathers = 0, reduce_scatters = 0, allreduces = 0;
  double allgather_bytes = 0, reduce_scatter_bytes = 0, allreduce_bytes = 0;
  /// A compressed exchange's collectives other than allreduces (sparse or quantised all-gathers, gTop-k's tree).
  int other_exchanges = 0;
  double other_exchange_bytes = 0;
  /// Memory per GPU (bytes): model state by ZeRO's accounting, the gathered units (stage 3), the largest reduce-scatter
  /// input (a bucket or unit of unsharded gradients), and activations as for data parallelism.
  double weights_bytes = 0, gradients_bytes = 0, optimizer_bytes = 0;
  double gathered_bytes = 0, reduce_buffer_bytes = 0, activation_bytes = 0;
  /// What the framework holds beside (sim/plan/memory.hpp): the loss's logits, fragmentation, the fixed reserve.
  double logits_bytes = 0, fragmentation_bytes = 0, reserve_bytes = 0;
  double unsharded_state_bytes = 0; ///< weights + gradients + optimizer state at stage 0, same accounting
  /// Offload: "none", "optimizer" or "parameters"; the state held in host memory for this GPU (not in total_bytes),
  /// the bytes copied over its host link per iteration (both ways), and the optimizer step on the host.
  std::string offload = "none";
  double host_bytes = 0, host_copy_bytes = 0, host_step_s = 0;
  [[nodiscard]] double total_bytes() const {
    return weights_bytes + gradients_bytes + optimizer_bytes + gathered_bytes + reduce_buffer_bytes + activation_bytes +
           logits_bytes + fragmentation_bytes + reserve_bytes;
  }
  std::optional<bool> fits;       ///< total within the GPU's memory; unset when the GPU's memory is unknown
  double exposed_allgather_s = 0; ///< finalize: parameter all-gathers running while GPU 0 computes nothing
  double exposed_reduce_s = 0;    ///< finalize: the gradients' exchange (reduce-scatters, allreduces, ...) likewise
};

/// How iteration_time_s is read off a timeline (finalize): its makespan, the time between two tasks' ends (a
/// steady-state window: ps-sync's unrolled iterations, an asynchronous pipeline's), or between the ends of the last
/// two iterations (unrolled for host times).
struct IterationWindow {
  enum class Kind : std::uint8_t { makespan, between_tasks, between_iterations };
  Kind kind = Kind::makespan;
  std::size_t from_task = 0;
  std::size_t to_task = 0;
};

/// `variability`: the sampled iterations (sim/analytic/monte_carlo.hpp).
struct VariabilityReport {
  int iterations = 0;
  std::uint64_t seed = 0;
  int copies = 0;                  ///< DAG copies (data x tensor replicas) each sample times, every one its own draws
  double deterministic_s = 0;      ///< the iteration without variability
  std::vector<double> iteration_s; ///< each sampled iteration, in order
  double p50_s = 0, p90_s = 0, p99_s = 0;
};

struct RunResult {
  Engine engine = Engine::analytic;
  int workers = 1;
  double iteration_time_s = 0;
  double single_gpu_iteration_s = 0; ///< the same model on one GPU, no communication
  double throughput_samples_per_s = 0;
  double scaling_efficiency = 0;
  Breakdown breakdown;
  double communication_bytes_per_worker = 0;
  std::vector<dag::GradientGroup> groups;
  double peak_memory_bytes_per_gpu = 0; ///< memory.total_bytes()
  MemoryPerGpu memory;                  ///< of the GPU at the peak
  double critical_path_s = 0;           ///< longest dependency chain with unlimited resources: a lower bound
  /// Transformers on a GPU of known peak: the model's FLOPs per second (Korthikanti et al., arXiv:2205.05198, §6:
  /// 72 B s L h^2 (1 + s/(6h) + V/(12 L h)) per iteration of B samples, recomputation not counted) over the GPUs' peak.
  std::optional<double> model_flops_utilisation;
  std::string compute_source;
  std::vector<std::string> notes; ///< what the user should know about how this was predicted
  dag::IterationGraph graph;
  std::vector<TaskTiming> timing; ///< by task id: the DAG's devices (replica 0)
  /// Flow engine: every other replica it simulated (all of them, or node 0's under node symmetry), by replica.
  /// The analytic engine simulates replica 0 alone, which stands for all.
  std::vector<ReplicaTiming> replicas;
  std::vector<LinkUsage> links; ///< flow engine only
  SimStats sim;
  std::optional<ParameterServerReport> parameter_server;
  std::optional<PipelineReport> pipeline;
  std::optional<ShardingReport> sharding;
  std::optional<VariabilityReport> variability;
  IterationWindow window; ///< how finalize read iteration_time_s off the timeline
  int backup_workers = 0; ///< data-parallel replicas whose gradients each data-parallel collective drops
  int data_parallel = 1;  ///< data-parallel replicas (workers / GPUs per replica)
};

} // namespace ddlsim::sim
