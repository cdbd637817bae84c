// The calibration file (`gpu.calibration` or a top-level `calibration` in a scenario; written by `ddlsim calibrate`
// and `ddlsim import-trace`): kernel times measured on one GPU, per layer at a batch size, and cost curves of the
// top-k selection algorithms (docs/calibration.md). Here, below every engine, so that calibrate/ and traces/ use
// the same schema.
#pragma once

#include "core/collective.hpp"
#include "core/json.hpp"
#include "dag/compression.hpp"

#include <map>
#include <string>
#include <vector>

namespace ddlsim::dag {

struct LayerTime {
  double forward_s = 0;
  double backward_s = 0;
};

/// A collective measured on one communicator (version 2; `ddlsim calibrate --nccl-tests`): its table of sizes and
/// times (the faster of in-place and out-of-place per size) and the piecewise α-β fit that extends it beyond them
/// (calibrate/alpha_beta.hpp).
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

struct Calibration {
  std::string origin;                      ///< file it came from, or "<inline>"
  int version = 2;                         ///< of the file read (1 or 2); written as 2
  std::string source;                      ///< how it was measured (free text)
  int batch_per_gpu = 0;                   ///< batch the times were measured at; scaled linearly to the scenario's
  std::map<std::string, LayerTime> layers; ///< by layer name
  std::map<std::string, SelectionCurve> selection; ///< by selection name (sort, sampling, threshold)
  std::string selection_pointer;                   ///< JSON pointer of `selection`, for messages
  std::vector<MeasuredCollective> collectives;     ///< version 2
};

/// Parses a calibration document (version 1 or 2); errors are InputErrors naming `file` and the JSON path under
/// `pointer` (an unknown version among them).
[[nodiscard]] Calibration parse_calibration(const Json& doc, const std::string& file, const std::string& pointer);

/// The calibration as a version 2 document (docs/calibration.md): quantities as strings in base units ("0.0001235 s",
/// "8 B", "1.2e-11 s/B") with the shortest digits that read back to the same value, so that writing what was read
/// gives the same bytes.
[[nodiscard]] OrderedJson calibration_json(const Calibration& c);

} // namespace ddlsim::dag
