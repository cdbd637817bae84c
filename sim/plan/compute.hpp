// Per-task compute costs of one worker (docs/engines.md, "Where the numbers come from"), first match wins per layer:
// calibration table > measured single-GPU iteration spread over layers by FLOPs > roofline from the GPU preset at
// `gpu.efficiency`, or without it the shape-aware model (sim/plan/layer_costs.hpp).
#pragma once

#include "dag/strategy.hpp"
#include "sim/spec/scenario.hpp"

#include <string>

namespace ddlsim::sim {

struct ComputeCosts {
  dag::WorkerCosts worker;
  std::string source; ///< "calibration", "single_gpu_iteration", "roofline", "shape-aware" or a mix, for the report
  std::string
      note; ///< what the shape-aware model rests on, or why a calibration's GEMM ceiling is not used; else empty
};

/// Optimizer state per parameter for SGD with momentum: weight, gradient, momentum buffer (fp32 each).
inline constexpr double kUpdateBytesPerParam = 20.0; ///< read w, g, m + write w, m: 5 x 4 B
inline constexpr double kUpdateFlopsPerParam = 6.0;  ///< d = g + wd*w; m = mu*m + d; w -= lr*m

[[nodiscard]] ComputeCosts compute_costs(const Scenario& s);

} // namespace ddlsim::sim
