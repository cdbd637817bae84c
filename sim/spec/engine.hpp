// The simulation engines and what each one supports: the one place that names them. The parser, the CLI, the plan
// and the engines ask an engine's capability record, never its name (docs/engines.md, "Choosing an engine").
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace ddlsim::sim {

enum class Engine : std::uint8_t { analytic, flow };

struct EngineCapabilities {
  Engine engine = Engine::analytic;
  std::string_view name;        ///< `engine` in a scenario, --engine on the command line
  std::string_view description; ///< one line for --help and the docs
  /// A pass's tensor-parallel collectives are timed inside the pass by their closed forms (the plan folds them,
  /// PipelinePlan::fold_tensor_parts); otherwise each is a task lowered on its tensor group.
  bool folds_tensor_collectives = false;
  /// A calibration's measured collectives time the collectives they measured; otherwise the engine derives its links
  /// from a measured allreduce over the whole cluster (sim/plan/measured_links.hpp) and simulates the algorithms.
  bool replays_measured_collectives = false;
  /// variability.communication: collective times drawn per iteration (otherwise they take what their flows take).
  bool draws_communication = false;
  /// strategy.backup_workers with variability: sampled (otherwise a collective waits for all its members).
  bool samples_backup_workers = false;
  /// ps-async's workers simulated by the engine itself; otherwise by the analytic engine's link-queue model, which
  /// the run's notes say.
  bool simulates_asynchronous_workers = false;
  /// SimGrid's engine is one per process: every run of this engine needs a process of its own (sweeps fork one).
  bool one_run_per_process = false;
  /// The most GPUs and servers one run simulates (0: only the cluster's own limit, kMaxGpus), and each one's
  /// memory, B (issue #15 D13; docs/scenario.md, "Limits").
  std::int64_t max_hosts = 0;
  double bytes_per_host = 0;
  /// The most parameter-server pairs (servers x workers) one run simulates; `bytes_per_server_pair` > 0: memory
  /// limits it (each pair's state), 0: time does (every push and pull timed).
  std::int64_t max_server_pairs = 0;
  double bytes_per_server_pair = 0;
};

/// Every engine, the default (analytic) first.
[[nodiscard]] std::span<const EngineCapabilities> engines();
[[nodiscard]] const EngineCapabilities& capabilities(Engine e);
/// The engine of that name; nullopt if none.
[[nodiscard]] std::optional<Engine> find_engine(std::string_view name);
[[nodiscard]] std::string_view engine_name(Engine e);

} // namespace ddlsim::sim
