// Planning: what both engines share before simulating. Compute costs, the collective cost model (also the one
// MG-WFBP and OMGS plan with), the strategy's gradient groups and the iteration DAG, whose communication tasks carry
// their closed-form durations; and the figures derived once an engine has timed the DAG.
#pragma once

#include "dag/graph.hpp"
#include "dag/strategy.hpp"
#include "sim/network/collectives.hpp"
#include "sim/network/communicator.hpp"
#include "sim/plan/compute.hpp"
#include "sim/plan/result.hpp"
#include "sim/spec/scenario.hpp"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace ddlsim::sim {

/// Tensor collectives folded into the passes of one virtual stage (the analytic engine): their time per pass.
struct FoldedTensor {
  double forward_s = 0;
  double backward_s = 0;
  double recompute_s = 0;     ///< in a backward that recomputes
  bool recompute_last = true; ///< whether the last micro-batch's backward recomputes
};

/// A plan: what both engines share, and what can be known before timing. prepare() gives the costs, the collective
/// cost model (also the one MG-WFBP plans with), the strategy's groups and the DAG, whose communication tasks carry
/// their closed-form durations; the window an iteration is read over; the figures that do not depend on the timing
/// (traffic, memory, the single-GPU reference) and the notes. No engine changes a plan: an engine times its DAG and
/// returns Timings, and finalize(plan, timings) builds the result once.
struct Plan {
  Engine engine = Engine::analytic;
  int workers = 1;
  int data_parallel = 1; ///< data-parallel replicas (workers / GPUs per replica)
  ComputeCosts costs;
  std::unique_ptr<CollectiveModel> allreduce;
  std::vector<dag::GradientGroup> groups;
  dag::IterationGraph graph;
  std::vector<FoldedTensor> folded_tensor; ///< pipelines, analytic engine: by virtual stage; empty: not folded
  IterationWindow window;                  ///< how the iteration is read off the timeline
  double communication_bytes_per_worker = 0;
  double peak_memory_bytes_per_gpu = 0; ///< memory.total_bytes()
  MemoryPerGpu memory;                  ///< of the GPU at the peak (sim/plan/memory.hpp)
  double single_gpu_iteration_s = 0;    ///< the same model on one GPU, no communication
  std::string compute_source;
  std::vector<std::string> notes;
  std::optional<ParameterServerReport> parameter_server; ///< placement and traffic
  std::optional<PipelineReport> pipeline;                ///< layout, closed form and memory; finalize adds the timing's
  std::optional<ShardingReport> sharding;                ///< schedule, traffic, memory; finalize adds the exposure
};
[[nodiscard]] Plan prepare(const Scenario& s, Engine engine);

/// `variability` sampled by an engine on a synchronous strategy: finalize averages the samples into the figures.
struct SampledIterations {
  VariabilityReport report; ///< iterations, seed, copies and each sample (finalize: deterministic_s, percentiles)
  Breakdown breakdown_sum;  ///< copy 0's breakdown in each sample's window, summed
  std::string timed;        ///< what a sample timed, for the note
  std::size_t events = 0;   ///< task copies timed
};

/// What an engine measured of a plan.
struct Timings {
  std::vector<TaskTiming> timing; ///< by task id: the plan's DAG on its own devices (replica 0)
  /// Tasks the engine timed at other than their planned duration, (task id, seconds): the flow engine's collectives
  /// as their flows took, ps-async's push and pull at the queue model's means.
  std::vector<std::pair<std::size_t, double>> durations;
  std::vector<ReplicaTiming> replicas; ///< flow engine: the other replicas it reports
  std::vector<LinkUsage> links;        ///< flow engine
  SimStats sim;
  std::vector<std::string> notes;                     ///< how the engine timed the plan
  std::optional<AsyncWorkersReport> async_workers;    ///< ps-async, ps-ssp
  std::optional<SampledIterations> samples;           ///< `variability` on a synchronous strategy
  std::optional<VariabilityReport> async_variability; ///< ps-ssp's replay with `variability`, reported as drawn
};

/// The iteration time the plan's window reads off `timing` (the deterministic iteration: before backup workers,
/// samples or an asynchronous aggregate).
[[nodiscard]] double window_time_s(const Plan& p, const std::vector<TaskTiming>& timing);

/// The result: the plan's DAG with the durations the engine timed, the iteration time, breakdown and critical path
/// read over the plan's window, throughput, efficiency and the notes (the plan's, those on the figures, then the
/// engine's).
[[nodiscard]] RunResult finalize(const Scenario& s, Plan&& p, Timings&& t);

/// ps-sync's DAG of one worker (as prepare builds it for ps-sync and ps-ssp) unrolled over `iterations`: placed,
/// its transfers costed, its host tasks added (ps-ssp's replay, sim/analytic/ps_ssp.hpp).
[[nodiscard]] dag::IterationGraph unrolled_ps_sync(const Scenario& s, const Plan& p, int iterations);

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

/// The whole cluster's shape with the scenario's parameter servers (how many, dedicated or co-located).
[[nodiscard]] LoweringShape server_shape(const Scenario& s, LoweringShape communicator);

/// The shape a task's collective is lowered on: its communicator's (communicator.hpp), and for ps_push / ps_pull the
/// scenario's servers and the key's shard.
[[nodiscard]] LoweringShape task_shape(const Scenario& s, const dag::Task& task, const LoweringShape& communicator);

/// A task's communicator laid out on the scenario's cluster, cached per communicator index.
[[nodiscard]] const CommunicatorLayout& task_layout(const Scenario& s, const dag::IterationGraph& graph,
                                                    const dag::Task& task,
                                                    std::vector<std::optional<CommunicatorLayout>>& cache);

/// The data-parallel group of pure data parallelism: every GPU of the cluster, in rank order.
[[nodiscard]] dag::Communicator data_parallel_group(const Scenario& s);

/// The closed-form cost of a DAG collective over its communicator's layout (the scenario's allreduce model when the
/// communicator is the whole cluster, else the algorithm's closed form on the group; other collectives: the
/// phase-synchronous time of their lowering), cached by what it depends on.
///
/// A calibration's measured collectives (dag/calibration.hpp, version 2) replace the algorithm for the communicators
/// they measured (same collective, ranks and nodes): the table interpolated inside its sizes, its α-β segments
/// outside them (dag/measured.hpp); notes() says which were used and where they were extrapolated.
class CollectiveCoster {
public:
  CollectiveCoster(const Scenario& s, const CollectiveModel& whole_cluster);
  ~CollectiveCoster();
  CollectiveCoster(const CollectiveCoster&) = delete;
  CollectiveCoster& operator=(const CollectiveCoster&) = delete;
  [[nodiscard]] CollectiveCost operator()(const dag::Task& task, const CommunicatorLayout& layout);
  /// One line per measured collective used: how many collectives it timed, how many of them outside its sizes.
  [[nodiscard]] std::vector<std::string> notes() const;

private:
  using Key = std::tuple<dag::Collective, bool, int, int, int, int, bool, double>; // bool: a parameter gather
  struct Measured; // a calibration's measured collective, its model and its use
  const Scenario& s_;
  const CollectiveModel& whole_cluster_;
  std::map<std::pair<int, int>, std::unique_ptr<CollectiveModel>> other_groups_; ///< by (nodes, GPUs per node)
  std::map<Key, CollectiveCost> memo_;
  std::vector<std::unique_ptr<Measured>> measured_;
};

/// Where cost_communication should put its notes on measured collectives for the plan's engine: p.notes for the
/// analytic engine; nullptr (with a note that they are not used) for the flow engine, or when the scenario measures
/// none.
[[nodiscard]] std::vector<std::string>* measured_collectives_notes(const Scenario& s, Plan& p);

/// Sets the duration of every communication task of `graph` from its communicator's closed form (allreduce;
/// `whole_cluster` when it spans the cluster) or its lowering's phase-synchronous time, and returns the bytes the
/// busiest worker sends in iteration 0; `sent_by_task`, when given, receives what each task's sender sends.
double cost_communication(const Scenario& s, const CollectiveModel& whole_cluster, dag::IterationGraph& graph,
                          std::vector<double>* sent_by_task = nullptr, std::vector<std::string>* notes = nullptr);

/// The allreduce's alpha and beta for the strategies' planners when its model is affine (CollectiveModel::affine).
[[nodiscard]] inline std::optional<dag::AffineCost> affine_cost(const CollectiveModel& allreduce) {
  if (const auto ab = allreduce.affine())
    return dag::AffineCost{ab->alpha_s, ab->beta_s_per_byte};
  return std::nullopt;
}

using dag::kPsSyncIterations;
/// Iterations a data-parallel DAG is unrolled to when its host times were given (HostTimes::steady_state): the
/// iteration is the period between the ends of the last two.
inline constexpr int kSteadyStateIterations = 2;

/// Bytes of one worker's push to each server: its shards of every key (dag/strategies/ps.cpp).
[[nodiscard]] std::vector<double> server_shard_bytes(const std::vector<dag::GradientGroup>& groups, int servers);

/// Where the parameter servers are and how keys are placed on them, as the notes say it.
[[nodiscard]] std::string parameter_server_placement(const Scenario& s);

} // namespace ddlsim::sim
