// The calibration file (`gpu.calibration` or a top-level `calibration` in a scenario; written by `ddlsim calibrate`
// and `ddlsim import-trace`): kernel times measured on one GPU, per layer at a batch size, and cost curves of the
// top-k selection algorithms (docs/calibration.md). Here, below every engine, so that calibrate/ and traces/ use
// the same schema.
#pragma once

#include "core/collective.hpp"
#include "core/json.hpp"
#include "dag/compression.hpp"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ddlsim::dag {

/// A layer's measured times at the calibration's batch: GPU kernel time (scaled linearly to the scenario's batch) and,
/// when measured (version 2), the host time to issue them: the CPU thread's time from the layer's first operator to
/// the next layer's, which does not scale with the batch.
struct LayerTime {
  double forward_s = 0;
  double backward_s = 0;
  std::optional<double> forward_host_s{};
  std::optional<double> backward_host_s{};
  bool operator==(const LayerTime&) const = default;
};

/// Host costs per training process (version 2, `host`; docs/calibration.md): what the CPU thread that issues a
/// GPU's work spends outside the measured layers. Every field is optional.
struct HostCosts {
  std::optional<double> launch_s{};       ///< host time per GPU task without a measured host time
  std::optional<double> iteration_s{};    ///< per iteration before the first launch (Python loop, zero_grad, loss)
  std::optional<double> data_loading_s{}; ///< loading one batch of batch_per_gpu samples
  std::optional<bool> prefetch{};         ///< whether the loader prepares the next batch during the iteration
  std::optional<double> h2d_bandwidth{};  ///< host-to-device copy, B/s
  bool operator==(const HostCosts&) const = default;
};

/// The optimizer step (version 2, `optimizer`): its GPU time and its host time, neither scaled with the batch.
struct OptimizerTime {
  std::optional<double> gpu_s{};
  std::optional<double> host_s{};
  bool operator==(const OptimizerTime&) const = default;
};

/// A collective measured on one communicator (version 2; `ddlsim calibrate --nccl-tests`): its table of sizes and
/// times (the faster of in-place and out-of-place per size) and the piecewise α-β fit that extends it beyond them
/// (calibrate/alpha_beta.hpp fits it, dag/measured.hpp evaluates both).
struct MeasuredCollective {
  struct Point {
    double size_bytes = 0; ///< the message as the lowering counts it (sim/network/lowering/lowering.hpp)
    double time_s = 0;
    bool operator==(const Point&) const = default;
  };
  struct Segment {
    double first_size_bytes = 0;
    double last_size_bytes = 0;
    double alpha_s = 0;
    double beta_s_per_byte = 0;
    int points = 0;
    double mean_relative_error = 0;
    double max_relative_error = 0;
    bool operator==(const Segment&) const = default;
  };
  Collective collective = Collective::allreduce;
  int ranks = 0;
  int nodes = 0;      ///< 0: unknown
  std::string source; ///< what it was read from
  std::vector<Point> table;
  std::vector<Segment> segments;
  bool operator==(const MeasuredCollective&) const = default;
};

/// The shape-aware model's GEMM main-loop ceiling fitted to a GEMM sweep (version 2, `gemm`; `ddlsim calibrate
/// --probe` fits it to the probe's "gemm" group, docs/calibration.md): GEMMs in `dtype` run their main loop at this
/// fraction of the format's peak instead of the preset's measured ceiling.
struct GemmCeilingFit {
  std::string dtype;  ///< the number format the GEMMs ran in: fp32, tf32, bf16, fp16 or fp8
  double ceiling = 0; ///< (0, 1]
  std::string gpu;    ///< the preset whose peak it is a fraction of (empty: not said)
  std::optional<int> points{};
  std::optional<double> mean_relative_error{};
  std::optional<double> max_relative_error{};
  std::string source; ///< what it was fitted to
  bool operator==(const GemmCeilingFit&) const = default;
};

/// The formats a GemmCeilingFit may name (sim/spec/gpus.hpp's kComputeDtypeNames).
inline constexpr const char* kGemmFitDtypes[] = {"fp32", "tf32", "bf16", "fp16", "fp8"};

struct Calibration {
  std::string origin;                      ///< file it came from, or "<inline>"
  int version = 2;                         ///< of the file read (1 or 2); written as 2
  std::string source;                      ///< how it was measured (free text)
  int batch_per_gpu = 0;                   ///< batch the times were measured at; scaled linearly to the scenario's
  std::map<std::string, LayerTime> layers; ///< by layer name
  std::map<std::string, SelectionCurve> selection; ///< by selection name (sort, sampling, threshold)
  std::string selection_pointer;                   ///< JSON pointer of `selection`, for messages
  std::vector<MeasuredCollective> collectives;     ///< version 2
  HostCosts host;                                  ///< version 2
  OptimizerTime optimizer;                         ///< version 2
  /// Version 2, `overlap.compute_slowdown`: compute runs 1 + this times slower beside a collective on its GPU
  /// (measured by ddlsim-probe: a GEMM alone and beside NCCL allreduces).
  std::optional<double> compute_slowdown{};
  std::optional<GemmCeilingFit> gemm{}; ///< version 2
  std::string gemm_pointer;             ///< JSON pointer of `gemm`, for messages
};

/// Parses a calibration document (version 1 or 2); errors are InputErrors naming `file` and the JSON path under
/// `pointer` (an unknown version among them).
[[nodiscard]] Calibration parse_calibration(const Json& doc, const std::string& file, const std::string& pointer);

/// The calibration as a version 2 document (docs/calibration.md): quantities as strings in base units ("0.0001235 s",
/// "8 B", "1.2e-11 s/B") with the shortest digits that read back to the same value, so that writing what was read
/// gives the same bytes.
[[nodiscard]] OrderedJson calibration_json(const Calibration& c);

} // namespace ddlsim::dag
