// Engines execute a scenario's iteration DAG and produce one result for the reports. `analytic`: closed-form
// collectives, no contention, workers symmetric (worker 0 is simulated and stands for all).
#pragma once

#include "dag/graph.hpp"
#include "dag/strategy.hpp"
#include "sim/compute.hpp"
#include "sim/lowering/lowering.hpp"
#include "sim/scenario.hpp"

#include <map>
#include <memory>
#include <optional>

#include <string>
#include <vector>

namespace ddlsim::sim {

struct TaskTiming {
  double start_s = 0;
  double end_s = 0;
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

/// Parameter-server strategies (ps-sync, ps-async): placement, traffic, and for ps-async what the asynchronous
/// workers achieved (sim/ps_async.hpp).
struct ParameterServerReport {
  int servers = 0;
  bool dedicated = false;
  int iterations_simulated = 0;           ///< ps-sync: iterations unrolled in the DAG; ps-async: per slowest worker
  int warmup_iterations = 0;              ///< excluded from the figures
  std::vector<std::size_t> iteration_end; ///< ps-sync: task id of each unrolled iteration's last backward
  double push_bytes_per_worker = 0;       ///< per iteration
  double pull_bytes_per_worker = 0;
  double server_bytes_received = 0; ///< per iteration, busiest server
  double server_bytes_sent = 0;
  // ps-async
  bool async = false;
  std::vector<double> worker_throughput_samples_per_s;
  std::vector<double> worker_compute_s; ///< one iteration's compute per worker (speed spread applied)
  std::map<int, long> staleness_histogram;
  double staleness_mean = 0;
  int staleness_max = 0;
  double aggregate_throughput_samples_per_s = 0;
};

struct RunResult {
  std::string engine;
  int workers = 1;
  double iteration_time_s = 0;
  double single_gpu_iteration_s = 0; ///< the same model on one GPU, no communication
  double throughput_samples_per_s = 0;
  double scaling_efficiency = 0;
  Breakdown breakdown;
  double communication_bytes_per_worker = 0;
  std::vector<dag::GradientGroup> groups;
  double peak_memory_bytes_per_gpu = 0;
  double critical_path_s = 0; ///< longest dependency chain with unlimited resources: a lower bound
  std::string compute_source;
  std::vector<std::string> notes; ///< what the user should know about how this was predicted
  dag::IterationGraph graph;
  std::vector<TaskTiming> timing; ///< by task id, worker 0
  std::vector<LinkUsage> links;   ///< flow engine only
  SimStats sim;
  std::optional<ParameterServerReport> parameter_server;
};

namespace detail {
/// What both engines share: costs, the collective cost model (also the one MG-WFBP plans with), the strategy's
/// groups and the DAG, whose communication tasks carry their closed-form durations; timing is the engine's job.
struct Prepared {
  ComputeCosts costs;
  std::unique_ptr<AllreduceModel> allreduce;
  RunResult result;
};
[[nodiscard]] Prepared prepare(const Scenario& s, std::string engine);
/// Fills the derived fields from result.graph and result.timing (iteration time, efficiency, breakdown, ...).
void finalize(const Scenario& s, Prepared& p);
} // namespace detail

/// Compressed gradient groups (sparsified or quantised) summed over an iteration.
struct CompressionTotals {
  int groups = 0;
  std::int64_t elements = 0;
  std::int64_t selected = 0; ///< sparsification: pairs sent per worker
  double wire_bits = 0;      ///< quantisation: bits per element
  double compress_s = 0;
  double decompress_s = 0;
};
[[nodiscard]] CompressionTotals compression_totals(const std::vector<dag::GradientGroup>& groups);
/// PowerSGD's figures over all buckets (dag/powersgd.hpp); nullopt when no group was compressed that way.
struct PowerSgdTotals {
  int matrices = 0;          ///< weight matrices sent as low-rank factors
  int dense_tensors = 0;     ///< tensors allreduced uncompressed
  std::int64_t elements = 0; ///< gradient elements
  std::int64_t wire_elements =
      0;                 ///< elements each worker allreduces: (n + m) r per matrix, dense tensors as themselves
  double compress_s = 0; ///< all compression kernels of one iteration
  [[nodiscard]] double compression_ratio() const {
    return wire_elements > 0 ? static_cast<double>(elements) / static_cast<double>(wire_elements) : 0;
  }
};
[[nodiscard]] std::optional<PowerSgdTotals> powersgd_totals(const std::vector<dag::GradientGroup>& groups);

/// The lowering that carries a DAG collective other than the scenario's allreduce: Top-k's allgather by recursive
/// doubling (log2 p rounds, as in the gTop-k paper's comparison), gTop-k's tree, the parameter server's sharded
/// push and pull.
[[nodiscard]] const CollectiveLowering& sparse_lowering(dag::Collective c);

/// The ranks a task's collective runs over: the cluster's workers, and for ps_push / ps_pull the scenario's servers
/// and the key's shard.
[[nodiscard]] LoweringShape task_shape(const Scenario& s, const dag::Task& task);

/// Iterations ps-sync unrolls in its DAG; the iteration time is the period between the last two (steady state).
inline constexpr int kPsSyncIterations = 3;

/// The flow-level engine on SimGrid (sim/flow/flow_engine.cpp). One per process: SimGrid's engine is a singleton.
[[nodiscard]] RunResult run_flow(const Scenario& s);

/// Collectives run by themselves on the flow engine's platform (tests, benchmarks, calibration what-ifs): each
/// job starts at `start_s` over all of the cluster's workers; they share the network.
struct CollectiveJob {
  CollectiveKind kind = CollectiveKind::allreduce;
  std::string algorithm = "ring";
  double bytes = 0;
  double start_s = 0;
  /// The ranks it runs over when not the cluster's workers alone (a parameter server's servers and key shard;
  /// dedicated servers need cluster.server_hosts).
  std::optional<LoweringShape> shape = std::nullopt;
};
struct CollectiveTiming {
  double start_s = 0;
  double end_s = 0;
};
struct FlowCollectivesResult {
  std::vector<CollectiveTiming> jobs;
  std::vector<LinkUsage> links;
  std::size_t flows = 0; ///< flows simulated
  std::string symmetry;  ///< the node symmetry used (flow/symmetry.hpp), "none" when every flow was simulated
  double wall_s = 0;
};
/// One SimGrid simulation per process (its engine is a singleton). `use_symmetry`: simulate node 0's flows on the
/// 2-node quotient when the cluster and the collectives are node-symmetric (exact; flow/symmetry.hpp).
[[nodiscard]] FlowCollectivesResult run_collectives_flow(const ClusterSpec& cluster,
                                                         const std::vector<CollectiveJob>& jobs, bool per_message,
                                                         bool use_symmetry = true);

/// Runs the scenario with its engine. Throws InputError for what only shows when running (e.g. an engine that
/// this build does not have).
[[nodiscard]] RunResult run_scenario(const Scenario& s);

/// Non-preemptive list scheduling: each resource runs one task at a time (one per lane for tasks with a lane; a
/// lane -1 task waits for every lane), tasks start in order of readiness (ties by task id); Resource::none runs
/// everything at once. Durations are taken from the graph.
[[nodiscard]] std::vector<TaskTiming> schedule(const dag::IterationGraph& g);

/// Splits [0, makespan] into the summary's breakdown.
[[nodiscard]] Breakdown breakdown_of(const dag::IterationGraph& g, const std::vector<TaskTiming>& timing,
                                     double makespan);
/// The same over the window [from, to] (tasks clipped to it).
[[nodiscard]] Breakdown breakdown_in(const dag::IterationGraph& g, const std::vector<TaskTiming>& timing, double from,
                                     double to);

} // namespace ddlsim::sim
