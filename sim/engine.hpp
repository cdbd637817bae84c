// Engines execute a scenario's iteration DAG and produce one result for the reports. `analytic`: closed-form
// collectives, no contention, workers symmetric (worker 0 is simulated and stands for all).
#pragma once

#include "dag/graph.hpp"
#include "dag/strategy.hpp"
#include "sim/scenario.hpp"

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
  SimStats sim;
};

/// Runs the scenario with its engine. Throws InputError for what only shows when running (e.g. an engine that
/// this build does not have).
[[nodiscard]] RunResult run_scenario(const Scenario& s);

/// Non-preemptive list scheduling: each resource runs one task at a time, tasks start in order of readiness
/// (ties by task id); Resource::none runs everything at once. Durations are taken from the graph.
[[nodiscard]] std::vector<TaskTiming> schedule(const dag::IterationGraph& g);

/// Splits [0, makespan] into the summary's breakdown.
[[nodiscard]] Breakdown breakdown_of(const dag::IterationGraph& g, const std::vector<TaskTiming>& timing,
                                     double makespan);

} // namespace ddlsim::sim
