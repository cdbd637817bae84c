// The calibration file (`gpu.calibration` or a top-level `calibration` in a scenario; written by `ddlsim calibrate`
// and `ddlsim import-trace`): kernel times measured on one GPU, per layer at a batch size, and cost curves of the
// top-k selection algorithms (docs/calibration.md). Here, below every engine, so that calibrate/ and traces/ use
// the same schema.
#pragma once

#include "core/json.hpp"
#include "dag/compression.hpp"

#include <map>
#include <string>

namespace ddlsim::dag {

struct LayerTime {
  double forward_s = 0;
  double backward_s = 0;
};

struct Calibration {
  std::string origin;                      ///< file it came from, or "<inline>"
  int batch_per_gpu = 0;                   ///< batch the times were measured at; scaled linearly to the scenario's
  std::map<std::string, LayerTime> layers; ///< by layer name
  std::map<std::string, SelectionCurve> selection; ///< by selection name (sort, sampling, threshold)
  std::string selection_pointer;                   ///< JSON pointer of `selection`, for messages
};

/// Parses a calibration document; errors are InputErrors naming `file` and the JSON path under `pointer`.
[[nodiscard]] Calibration parse_calibration(const Json& doc, const std::string& file, const std::string& pointer);

} // namespace ddlsim::dag
