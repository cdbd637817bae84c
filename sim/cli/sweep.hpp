// What-if sweeps (`ddlsim sweep`: docs/sweeps.md, "The sweep block"): the scenario's "sweep" block expands into points
// (the cartesian product of its axes, zip groups advancing together), each point is the scenario with its keys
// overridden, and the points run on -j worker processes. Analytic points run inside a worker; flow points each in a
// child of it (SimGrid's engine is one per process).
//
// Durability: every finished point is appended as one JSON line to DIR/points.jsonl (one write per point), and
// DIR/results.csv and DIR/results.json are rewritten from it atomically as points finish (at most every 0.25 s and
// at the end). Killing the sweep therefore loses no finished point: `--resume` reads the journal, skips the points
// in it and runs the rest. The journal's first line identifies the sweep (scenario after overrides, shard), so a
// resume against a changed scenario is refused instead of mixing results.
//
// Scale-out: `--shard I/N` runs the points whose index is I modulo N, into its own DIR; `ddlsim merge` combines
// the shards' journals into one results table (scripts/slurm-sweep.sbatch).
#pragma once

#include "core/json.hpp"
#include "sim/spec/scenario.hpp"

#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace ddlsim::sim {

struct SweepPoint {
  std::size_t index = 0;
  std::vector<std::pair<std::string, Json>> assignments; ///< dotted key -> value, in axis order
};

/// The points of `axes`: the first axis varies slowest; a zip group is one axis, at the place of its first key.
[[nodiscard]] std::vector<SweepPoint> expand_sweep(const std::vector<SweepAxis>& axes);

/// The swept keys, in column order.
[[nodiscard]] std::vector<std::string> swept_keys(const std::vector<SweepAxis>& axes);

struct Shard {
  int index = 0;
  int count = 1;
  [[nodiscard]] bool owns(std::size_t point) const {
    return point % static_cast<std::size_t>(count) == static_cast<std::size_t>(index);
  }
};

/// Parses "I/N" (0 <= I < N). Throws InputError naming `--shard`.
[[nodiscard]] Shard parse_shard(const std::string& text);

/// One finished point.
struct PointResult {
  std::size_t index = 0;
  OrderedJson params; ///< swept key -> value
  bool ok = false;
  std::string error;   ///< why it failed (the message `ddlsim run` would print)
  OrderedJson summary; ///< summary.json without per-link statistics, when ok
};

/// The results table (results.csv): `point`, the swept keys, `status`, the summary fields, `error`. When some point
/// ran a pipeline, the summary fields continue with `parallelism.*`, `pipeline.*` (schedule, stages, micro-batches,
/// virtual stages, partition, measured and closed-form bubble), `model_flops_utilisation`, `fits_memory` and
/// `pipeline.per_stage.<i>.peak_memory_bytes`. Every column name appears once: a summary field that is also a swept
/// key is left out (the swept value stands; results.json keeps the summary's).
[[nodiscard]] std::string results_csv(const std::vector<std::string>& keys, const std::vector<PointResult>& results);
/// results.json: {"scenario", "swept_keys", "points": [{"point", "params", "status", "error"?, "summary"?}]}.
[[nodiscard]] OrderedJson results_json(const std::string& scenario, const std::vector<std::string>& keys,
                                       const std::vector<PointResult>& results);

struct SweepOptions {
  std::string out_dir;
  int jobs = 1;
  bool resume = false;
  Shard shard;
  bool plots = true;    ///< make the standard plots at the end (not for a shard: its points are a sample)
  bool progress = true; ///< report progress on stderr (a bar on a terminal, plain lines otherwise)
  /// Files the scenario and its swept values read besides the scenario (calibrations, workloads, timelines), path ->
  /// fingerprint (core/io.hpp, ReadLog): the journal records them and --resume refuses when one changed.
  std::map<std::string, std::string> inputs;
};

struct SweepOutcome {
  std::size_t points = 0;  ///< in this shard
  std::size_t ran = 0;     ///< run now
  std::size_t resumed = 0; ///< found done in the journal
  std::size_t failed = 0;  ///< of all points in this shard, run now or before
  std::vector<std::string> plots;
  std::vector<std::string> notes; ///< what the user should know (plots not drawn without gnuplot)
};

/// Runs the sweep of `s` (loaded with its --set overrides, so the sweep is validated; s.raw is what each point
/// overrides).
[[nodiscard]] SweepOutcome run_sweep(const Scenario& s, const SweepOptions& options);

/// Combines the journals of shard directories into `out_dir` (results.csv, results.json, plots). Throws
/// InputError when the shards come from different sweeps or overlap inconsistently.
[[nodiscard]] SweepOutcome merge_sweeps(const std::vector<std::string>& shard_dirs, const std::string& out_dir,
                                        bool plots);

} // namespace ddlsim::sim
