// The shape-aware model's main-loop ceiling fitted to measured GEMMs (the probe's GEMM sweep, `ddlsim calibrate
// --probe`; docs/calibration.md): the ceiling c that makes gemm_time_s (gemm_efficiency.hpp) closest to the measured
// times, by least squares on relative error, so that a sweep spanning microseconds and seconds weighs each GEMM alike.
// A one-dimensional search over (0, 1]: every model time is a + b / c per split of K, at least the memory traffic,
// so each relative error falls as c grows and their sum of squares has one minimum where the data fit the model.
#pragma once

#include "sim/plan/gemm_efficiency.hpp"

#include <vector>

namespace ddlsim::sim {

/// A GEMM and its measured time.
struct MeasuredGemm {
  GemmShape shape;
  double time_s = 0;
};

/// A ceiling and the model's relative errors |model - measured| / measured at it over the measured GEMMs.
struct CeilingFit {
  double ceiling = 0;
  double mean_relative_error = 0;
  double max_relative_error = 0;
};

/// The ceilings scanned before the golden-section search: c = 1/kCeilingScanSteps, 2/kCeilingScanSteps, ..., 1.
inline constexpr int kCeilingScanSteps = 200;

/// The ceiling c in (0, 1] minimising sum ((gemm_time_s(g, d at c) - t) / t)^2 over `points` (non-empty, each time
/// positive; `device.ceiling` is not read): the best of the scan (the larger c on a tie, so that GEMMs the ceiling
/// does not bound leave it at 1), refined by golden-section search between its neighbours and kept where it fits
/// better than the scan's. Deterministic.
[[nodiscard]] CeilingFit fit_gemm_ceiling(const std::vector<MeasuredGemm>& points, GemmDevice device);

/// The model's relative errors at `device` (its ceiling) over `points`.
[[nodiscard]] CeilingFit gemm_fit_errors(const std::vector<MeasuredGemm>& points, const GemmDevice& device);

} // namespace ddlsim::sim
