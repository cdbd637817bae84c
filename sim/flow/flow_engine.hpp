// The flow-level engine on SimGrid (sim/flow/flow_engine.cpp): the only code that includes SimGrid's headers.
#pragma once

#include "dag/graph.hpp"
#include "sim/network/cluster.hpp"
#include "sim/network/collectives.hpp"
#include "sim/plan/result.hpp"
#include "sim/spec/scenario.hpp"

#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace ddlsim::sim {

/// The flow-level engine on SimGrid (sim/flow/flow_engine.cpp). One per process: SimGrid's engine is a singleton.
[[nodiscard]] RunResult run_flow(const Scenario& s);

/// Throws the InputError that run_flow would throw before simulating (its plan's, its sampler's limits), without
/// simulating: what `ddlsim check` asks.
void check_flow(const Scenario& scenario);

/// What the flow engine measured of one DAG.
struct FlowGraphRun {
  std::vector<TaskTiming> timing;                        ///< by task id: the DAG's own devices (replica 0)
  std::vector<std::pair<std::size_t, double>> durations; ///< (task id, seconds): each collective as simulated
  std::vector<ReplicaTiming>
      replicas;                 ///< other replicas simulated (all, or node 0's under node symmetry), up to `listed`
  std::vector<LinkUsage> links; ///< every link of the cluster
  std::string note;             ///< how the flows were simulated (node symmetry or not)
  std::size_t simulated_replicas = 1; ///< copies of the DAG timed (replica 0 and the others)
  std::size_t flows = 0;
  std::size_t events = 0;
};
/// Simulates `graph` on the scenario's cluster: every data-parallel replica's copy of it (dag::IterationGraph::
/// replicas; node 0's under node symmetry), each device's streams in the analytic schedule's order, each collective
/// lowered on its communicator and started when every replica that takes part is ready; `durations` of the result
/// gives the collectives' simulated durations. `window(timing)` is the time the links' mean
/// utilisation is taken over (default: the makespan). `replicas` of the result lists the timing of the first
/// `listed` - 1 replicas after replica 0 (every one simulated is timed either way). `copy_durations`: each replica's
/// time of each task that is not a collective (replica-major, replicas x graph.size(); sampled iterations), which
/// simulates every replica (no node symmetry); nullptr: the graph's. `barriers`: tasks (no collective, no duration)
/// whose copies all end when every replica's copy is ready. One simulation per process.
[[nodiscard]] FlowGraphRun simulate_graph_flow(const Scenario& s, const dag::IterationGraph& graph,
                                               const std::function<double(const std::vector<TaskTiming>&)>& window = {},
                                               std::size_t listed = std::numeric_limits<std::size_t>::max(),
                                               const std::vector<double>* copy_durations = nullptr,
                                               const std::vector<std::size_t>& barriers = {});

/// Collectives run by themselves on the flow engine's platform (tests, benchmarks, calibration what-ifs): each
/// job starts at `start_s` over all of the cluster's workers; they share the network.
struct CollectiveJob {
  Collective kind = Collective::allreduce;
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
  /// SimGrid's maestro activity list (flow/maestro_activities.hpp): "kept empty", "off" (not built in), "unused" (no
  /// activity created), or "not found" (built in, but SimGrid's private layout changed: every activity's end scans
  /// the list, slower).
  std::string maestro_list;
};
/// One SimGrid simulation per process (its engine is a singleton). `use_symmetry`: simulate node 0's flows on the
/// 2-node quotient when the cluster and the collectives are node-symmetric (exact; flow/symmetry.hpp).
[[nodiscard]] FlowCollectivesResult run_collectives_flow(const ClusterSpec& cluster,
                                                         const std::vector<CollectiveJob>& jobs, bool per_message,
                                                         bool use_symmetry = true);

} // namespace ddlsim::sim
