// The GEMM ceiling fitted to measured times (gemm_fit.hpp).
#include "sim/plan/gemm_fit.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace ddlsim::sim {
namespace {

// The golden section's ratio, (sqrt 5 - 1) / 2, and the interval at which it stops, relative to its upper end.
constexpr double kGolden = 0.6180339887498949;
constexpr double kTolerance = 1e-13;

// Sum of squared relative errors at ceiling c.
double squared_error(const std::vector<MeasuredGemm>& points, GemmDevice d, double c) {
  d.ceiling = c;
  double sum = 0;
  for (const auto& p : points) {
    const double r = (gemm_time_s(p.shape, d) - p.time_s) / p.time_s;
    sum += r * r;
  }
  return sum;
}

// The scan's best step (1 .. kCeilingScanSteps), the larger one on a tie.
int best_step(const std::vector<MeasuredGemm>& points, const GemmDevice& d) {
  int best = 1;
  double lowest = squared_error(points, d, 1.0 / kCeilingScanSteps);
  for (int j = 2; j <= kCeilingScanSteps; ++j) {
    const double e = squared_error(points, d, static_cast<double>(j) / kCeilingScanSteps);
    if (e <= lowest) {
      lowest = e;
      best = j;
    }
  }
  return best;
}

// Golden-section search for the minimum of the squared error on [a, b].
double golden_section(const std::vector<MeasuredGemm>& points, const GemmDevice& d, double a, double b) {
  double x1 = b - kGolden * (b - a), x2 = a + kGolden * (b - a);
  double f1 = squared_error(points, d, x1), f2 = squared_error(points, d, x2);
  while (b - a > kTolerance * b) {
    if (f1 <= f2) {
      b = x2;
      x2 = x1;
      f2 = f1;
      x1 = b - kGolden * (b - a);
      f1 = squared_error(points, d, x1);
    } else {
      a = x1;
      x1 = x2;
      f1 = f2;
      x2 = a + kGolden * (b - a);
      f2 = squared_error(points, d, x2);
    }
  }
  return (a + b) / 2;
}

} // namespace

CeilingFit gemm_fit_errors(const std::vector<MeasuredGemm>& points, const GemmDevice& device) {
  CeilingFit fit{.ceiling = device.ceiling, .mean_relative_error = 0, .max_relative_error = 0};
  for (const auto& p : points) {
    const double r = std::abs(gemm_time_s(p.shape, device) - p.time_s) / p.time_s;
    fit.mean_relative_error += r;
    fit.max_relative_error = std::max(fit.max_relative_error, r);
  }
  fit.mean_relative_error /= static_cast<double>(points.size());
  return fit;
}

CeilingFit fit_gemm_ceiling(const std::vector<MeasuredGemm>& points, GemmDevice device) {
  assert(!points.empty() && "a ceiling is fitted to at least one measured GEMM");
  const int j = best_step(points, device);
  const double step = 1.0 / kCeilingScanSteps;
  const double scanned = j * step;
  const double refined = golden_section(points, device, (j - 1) * step, std::min(1.0, (j + 1) * step));
  // the refined ceiling where it fits better than the scan's (not where the error is flat or not unimodal there)
  device.ceiling = squared_error(points, device, refined) < squared_error(points, device, scanned) ? refined : scanned;
  return gemm_fit_errors(points, device);
}

} // namespace ddlsim::sim
