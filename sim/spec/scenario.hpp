// A what-if scenario: model, GPU, cluster, collectives, strategy, engine — parsed and validated as a whole
// into plain structs before anything runs (docs/scenario.md, "Keys"). Every error names file and JSON path
// (docs/contracts.md, "Exit status").
#pragma once

#include "core/json.hpp"
#include "dag/calibration.hpp"
#include "dag/memory.hpp"
#include "dag/model.hpp"
#include "dag/strategy.hpp"
#include "sim/network/cluster.hpp"
#include "sim/network/collectives.hpp"
#include "sim/spec/engine.hpp"
#include "sim/spec/gpus.hpp"
#include "sim/spec/overrides.hpp"
#include "sim/spec/parallelism.hpp"
#include "sim/spec/sharding.hpp"
#include "sim/spec/variability.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ddlsim::sim {

using dag::DType; // the DAG layer's memory model needs it too (dag/model.hpp)
using dag::dtype_bytes;

/// `memory`: what the framework holds on each GPU besides model state and activations (docs/memory.md).
struct MemorySpec {
  double reserve_bytes = dag::kDefaultReserveBytes;  ///< `memory.reserve`: CUDA context, NCCL, cuBLAS
  double fragmentation = dag::kDefaultFragmentation; ///< `memory.fragmentation`: the allocator's share beyond tensors
};

struct GpuSpec {
  std::optional<GpuPreset> preset;
  double peak_flops = 0;       ///< FLOP/s used by the roofline (preset by dtype, or `peak_flops`); 0 = unknown
  double memory_bandwidth = 0; ///< B/s; 0 = unknown
  double memory_bytes = 0;     ///< B; 0 = unknown
  double host_link = 0;        ///< B/s; 0 = host-to-device copy not modelled
  double efficiency = 1.0;     ///< achieved fraction of the roofline
  /// Layers costed by their kernels' shapes (sim/plan/layer_costs.hpp) rather than the roofline at `efficiency`: a
  /// preset and neither `efficiency` nor `peak_flops` nor `memory_bandwidth` given.
  bool shape_aware = false;
  double fp8_flops = 0; ///< the preset's FP8 peak, FLOP/s, for model.compute_dtype fp8
  std::optional<double> single_gpu_iteration_s;
  std::optional<dag::Calibration> calibration;
  double speedup = 1.0; ///< `gpu.speedup`: every GPU kernel time divided by it (host times and copies unchanged)
  /// `gpu.comm_slowdown`: compute runs 1 + this times slower while a collective runs on its GPU (schedule.hpp); unset:
  /// the calibration's `overlap.compute_slowdown`, else 0.
  std::optional<double> comm_slowdown;
};

struct AllreduceSpec {
  /// The registry's entry (sim/network/collectives.hpp), used unless `measured` is set; never null.
  const CollectiveLowering* algorithm = default_lowering(Collective::allreduce);
  std::optional<AlphaBeta> measured;
};

struct DataSpec {
  double loading_per_sample_s = 0;
  bool prefetch = true;
};

/// `host`: the CPU thread that issues each GPU's work (sim/plan/host.hpp).
struct HostSpec {
  std::optional<double> launch_s; ///< host time per GPU task without a measured one (0: no host tasks)
};

/// `measured`: what was measured on the real run the scenario describes (written by `ddlsim import-trace`).
struct MeasuredSpec {
  std::optional<double> iteration_s; ///< the measured step, reported beside the prediction
  std::string timeline;              ///< a Chrome trace of the measured step (resolved path), "" when none
  std::string source;                ///< where it was measured
  std::vector<double> steps_s;       ///< `steps`: each measured step (import-trace writes the steps it used)
  /// The keys that `--set` changed in what the measured run was (not how it is simulated): this run is a what-if of
  /// the measured one, and its prediction is not compared with the measurement. Empty: the run measured.
  std::vector<std::string> what_if_keys;
};

/// One sweep axis: a dotted scenario key and its values; axes in one zip group vary together.
struct SweepAxis {
  std::string key;
  std::vector<Json> values;
  int zip_group = -1; ///< -1: a cartesian axis of its own
};

struct Scenario {
  std::string name;
  std::string file; ///< path it was loaded from (for messages and relative paths)
  dag::Model model;
  std::string model_pointer; ///< the key that gave the model (messages about its size)
  int batch_per_gpu = 1;
  DType gradient_dtype = DType::fp32;
  /// `model.compute_dtype`: the format of the GEMMs (absent: the gradient format's); `peak_flops` is its peak, or
  /// the 16-bit one under fp8, which runs only the transformer blocks' linear layers in FP8 (sim/plan/layer_costs.hpp)
  ComputeDtype compute_dtype = ComputeDtype::fp32;
  GpuSpec gpu;
  ClusterSpec cluster;
  AllreduceSpec allreduce;
  /// `collectives.allgather`, `collectives.reduce_scatter`, `collectives.broadcast`: the registry's entry chosen for
  /// that collective (absent: the registry's default; see collective_lowering in sim/plan/prepare.hpp).
  std::map<Collective, const CollectiveLowering*> algorithms;
  dag::Strategy strategy;
  Engine engine = Engine::analytic;
  bool flow_per_message = false; ///< `flow.granularity`: "aggregated" (default) or "per-message" (reference)
  bool flow_symmetry = true;     ///< `flow.symmetry`: "auto" (default: use node symmetry when exact) or "off"
  /// `flow.own_links`: "auto" (default: time tensor-group collectives on intra-node links no other traffic uses
  /// without simulating their flows, exact) or "off"
  bool flow_own_links = true;
  /// `flow.report_replicas`: the most copies of the DAG (data-parallel replicas, or GPUs per stage with tensor
  /// parallelism) whose tasks the flow engine's tasks.csv and timeline.json list, in rank order; it simulates them all
  /// either way. Absent: 64, or fewer so that about 500,000 tasks are listed.
  std::optional<int> flow_report_replicas;
  DataSpec data;
  HostSpec host;
  MeasuredSpec measured;
  /// `optimizer`: the optimizer state per parameter in the pipeline memory model (dag/memory.hpp)
  dag::Optimizer optimizer = dag::Optimizer::sgd_momentum;
  Parallelism parallelism;              ///< `parallelism`: data x pipeline x tensor GPUs
  std::optional<PipelineSpec> pipeline; ///< `pipeline`: absent = pure data parallelism
  /// `sharding`: sharded data parallelism (absent: every rank holds the whole model state, as stage 0)
  std::optional<ShardingSpec> sharding;
  /// `variability`: task times drawn around their modelled values, sampled over iterations (absent: deterministic)
  std::optional<VariabilitySpec> variability;
  MemorySpec memory; ///< `memory`
  /// `strategy.backup_workers` b: of the d data-parallel replicas, each data-parallel collective takes the first
  /// d - b to be ready and drops the rest (Chen et al., arXiv:1604.00981); samples count d - b replicas' batches.
  int backup_workers = 0;
  std::vector<SweepAxis> sweep;
  Json raw; ///< the document after overrides, for sweeps and reports
};

/// Data-parallel replicas: the cluster's GPUs over pipeline x tensor (`parallelism.data` is set only with a
/// `parallelism` or `pipeline` key).
[[nodiscard]] inline int data_parallel_degree(const Scenario& s) {
  return s.cluster.workers() / (s.parallelism.pipeline * s.parallelism.tensor);
}

/// The format of the GEMMs that do not run in FP8: model.compute_dtype, or under fp8 the 16-bit format of the
/// gradients (bf16 unless they are fp16).
[[nodiscard]] ComputeDtype sixteen_bit_format(const Scenario& s);

/// The compute slowdown beside communication the scenario runs with (`gpu.comm_slowdown`, else its calibration's
/// `overlap.compute_slowdown`, else 0) and where it comes from.
struct CommSlowdown {
  double factor = 0;
  std::string source; ///< "gpu.comm_slowdown" or the calibration's file; empty when 0 by default
};
[[nodiscard]] CommSlowdown comm_slowdown(const Scenario& s);

/// Limits on what one run simulates (issue #15 D13), from measurements on the release build (docs/scenario.md,
/// "Limits"): GPUs in a cluster (Top-k's allgather keeps ~520 B per GPU: 1,048,576 GPUs, 4 s and 0.5 GiB); each
/// engine's own (hosts, parameter-server pairs) are in its capability record (sim/spec/engine.hpp).
inline constexpr std::int64_t kMaxGpus = std::int64_t{1} << 20;
inline constexpr double kPerGpuBytes = 520;

/// The most points a sweep may have (each runs a whole simulation: at 0.1 s a point, a million take a day on 32
/// cores); a larger one is refused when the scenario is read.
inline constexpr std::size_t kMaxSweepPoints = 1'000'000;

/// The order in which a scenario file writes its sweep's keys (a Json object forgets it): the axes run in this
/// order, the first varying slowest (docs/sweeps.md). `keys` lists `sweep`'s keys, `zip[g]` the keys of zip group g.
struct SweepKeyOrder {
  std::vector<std::string> keys;
  std::vector<std::vector<std::string>> zip;
};
/// The sweep key order of a scenario's JSON text (already validated by parse_json_text); empty without a sweep.
[[nodiscard]] SweepKeyOrder sweep_key_order(std::string_view text);

/// What parsing does with a scenario's `sweep` block: validate every swept value (check, sweep), or leave it unread
/// (run, probe-plan: they run the scenario without its sweep, and do not validate what they ignore).
enum class SweepBlock : std::uint8_t { validated, ignored };

/// Parses a whole scenario document. `file` is used in messages and to resolve relative paths. The sweep's axes run
/// in `order` (keys not in it, e.g. added by --set, follow in alphabetical order).
[[nodiscard]] Scenario parse_scenario(const Json& doc, const std::string& file, const SweepKeyOrder& order = {},
                                      SweepBlock sweep = SweepBlock::validated);

/// Loads a scenario file, applies overrides in order, parses and validates it.
[[nodiscard]] Scenario load_scenario(const std::string& path, const std::vector<std::string>& overrides = {},
                                     SweepBlock sweep = SweepBlock::validated);

/// The lowering that carries a DAG collective other than the scenario's allreduce: the scenario's choice
/// (`collectives.allgather`, `reduce_scatter`, `broadcast`), else the registry's default for it
/// (sim/network/lowering/registry.cpp: the allgather by recursive doubling, gTop-k's tree, the parameter server's
/// sharded push and pull, the ring reduce-scatter).
[[nodiscard]] const CollectiveLowering& collective_lowering(const Scenario& s, dag::Collective c);
/// The lowering that carries a DAG task's collective other than an allreduce: a sharded schedule's parameter
/// all-gathers take `sharding`'s gather algorithm (dag::gathers_parameters), every other task collective_lowering's.
[[nodiscard]] const CollectiveLowering& task_lowering(const Scenario& s, const dag::Task& task);

/// The cost model of the scenario's allreduce over `net` (the whole cluster): its measured fit, else its algorithm's.
[[nodiscard]] std::unique_ptr<CollectiveModel> allreduce_model(const Scenario& s, const Network& net);

} // namespace ddlsim::sim
