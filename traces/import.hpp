// `ddlsim import-trace`'s library side (docs/traces.md): a trace's analysis (analysis.hpp) as the files of a runnable
// scenario of the traced run: the workload (layers named after a zoo model when the weight shapes match one), the
// calibration (per-layer GPU and host times, host costs, the optimizer), the scenario (batch, GPU, cluster, the
// collectives as traced under strategy "traced", the measured step) and the median step's events.
#pragma once

#include "dag/calibration.hpp"
#include "dag/model.hpp"
#include "traces/analysis.hpp"

#include <functional>
#include <string>
#include <vector>

namespace ddlsim::traces {

struct ImportOptions {
  double host_scale = 1; ///< multiplies every host time (profiler overhead correction)
  /// Whether ddlsim has a GPU preset of this name (the simulator's list; the trace module does not know it). Unset:
  /// every name gpu_preset_candidate derives is taken as a preset.
  std::function<bool(const std::string&)> is_gpu_preset;
};

struct Imported {
  TraceAnalysis analysis;
  std::string zoo;  ///< the zoo model whose weight shapes the layers match ("" if none)
  dag::Model model; ///< the workload
  dag::Calibration calibration;
  OrderedJson scenario;             ///< DIR/scenario.json
  OrderedJson traced_step;          ///< DIR/traced_step.json
  std::string gpu_candidate;        ///< preset name derived from the device name ("" if none)
  bool gpu_is_preset = false;       ///< the scenario names gpu_candidate as its preset
  std::vector<std::string> summary; ///< lines for the user: figures, checks, what the trace does not contain
};

/// Reads and analyses `path`; errors are InputErrors naming the file.
[[nodiscard]] Imported import_trace(const std::string& path, const ImportOptions& options);

/// The calibration content of a trace (layers by their final names, host, optimizer), times of host work multiplied
/// by `host_scale`. `names` are the workload's layer names, one per traced layer ("" for a layer folded into the one
/// before it).
[[nodiscard]] dag::Calibration trace_calibration(const TraceAnalysis& a, const std::vector<std::string>& names,
                                                 double host_scale);

/// A GPU preset name for a CUDA device name ("Tesla V100-SXM2-32GB" -> "V100-SXM2-32GB"; the DGX Station's
/// V100-DGXS as V100-SXM2), or "" when the name says too little.
[[nodiscard]] std::string gpu_preset_candidate(const std::string& device_name);

/// The files write_import writes.
inline constexpr const char* kImportFiles[] = {"workload.json", "calibration.json", "scenario.json",
                                               "traced_step.json"};

/// Writes workload.json, calibration.json, scenario.json and traced_step.json into `dir`, each atomically.
void write_import(const Imported& imported, const std::string& dir);

} // namespace ddlsim::traces
