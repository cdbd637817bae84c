// Piecewise α-β fit (alpha_beta.hpp): relative-residual least squares per segment (Eigen's column-pivoting QR),
// optimal breakpoints per segment count by dynamic programming, segment count by BIC.
#include "calibrate/alpha_beta.hpp"

#include <Eigen/Dense>
#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <utility>
#include <vector>

namespace ddlsim::calibrate {
namespace {

using dag::AlphaBetaSegment;
using dag::SizeTime;

struct LineFit {
  double alpha_s = 0;
  double beta_s_per_byte = 0;
  double rss = 0; // sum of squared relative residuals
};

// Minimises sum ((alpha + beta * s_i - t_i) / t_i)^2 over points [first, last): the least-squares solution of
// A x = 1 with rows A_i = (1 / t_i, (s_i / scale) / t_i). Sizes are scaled by the segment's largest size so that both
// columns are of similar magnitude (sizes span 8 B .. 8 GiB); beta = x_1 / scale.
LineFit fit_line(std::span<const SizeTime> points, std::size_t first, std::size_t last) {
  assert(last > first + 1 && "a line needs two points");
  const auto n = static_cast<Eigen::Index>(last - first);
  const double scale = std::max(points[last - 1].size_bytes, 1.0);
  Eigen::MatrixXd a(n, 2);
  for (Eigen::Index r = 0; r < n; ++r) {
    const auto& p = points[first + static_cast<std::size_t>(r)];
    a(r, 0) = 1.0 / p.time_s;
    a(r, 1) = p.size_bytes / scale / p.time_s;
  }
  const Eigen::VectorXd ones = Eigen::VectorXd::Ones(n);
  const Eigen::Vector2d x = a.colPivHouseholderQr().solve(ones);
  return {x(0), x(1) / scale, (a * x - ones).squaredNorm()};
}

AlphaBetaSegment make_segment(std::span<const SizeTime> points, std::size_t first, std::size_t last) {
  const LineFit line = fit_line(points, first, last);
  AlphaBetaSegment seg;
  seg.alpha_s = line.alpha_s;
  seg.beta_s_per_byte = line.beta_s_per_byte;
  seg.first_size_bytes = points[first].size_bytes;
  seg.last_size_bytes = points[last - 1].size_bytes;
  seg.points = last - first;
  double sum = 0;
  for (std::size_t i = first; i < last; ++i) {
    const double err = std::abs(seg.time(points[i].size_bytes) - points[i].time_s) / points[i].time_s;
    sum += err;
    seg.max_relative_error = std::max(seg.max_relative_error, err);
  }
  seg.mean_relative_error = sum / static_cast<double>(seg.points);
  return seg;
}

} // namespace

PiecewiseFit fit_piecewise(std::span<const dag::SizeTime> points, const FitOptions& options) {
  dag::check_size_times(points, "fit_piecewise");
  const std::size_t n = points.size(), m = options.min_segment_points;
  if (m < 2)
    throw std::invalid_argument(
        fmt::format("fit_piecewise: min_segment_points is {}; a segment needs at least 2 points", m));
  if (!(options.noise_floor > 0))
    throw std::invalid_argument(fmt::format("fit_piecewise: noise_floor is {}; it must be > 0", options.noise_floor));
  if (n < m)
    throw std::invalid_argument(fmt::format(
        "fit_piecewise: {} point(s), fewer than the {} one segment needs (FitOptions::min_segment_points)", n, m));

  // rss[i * (n + 1) + j]: the RSS of one segment over points [i, j), for j - i >= m.
  constexpr double inf = std::numeric_limits<double>::infinity();
  std::vector<double> rss((n + 1) * (n + 1), inf);
  for (std::size_t i = 0; i + m <= n; ++i)
    for (std::size_t j = i + m; j <= n; ++j)
      rss[i * (n + 1) + j] = fit_line(points, i, j).rss;

  // best[k][j]: least total RSS of points [0, j) in k segments; from[k][j]: where its last segment starts.
  const std::size_t max_k = n / m;
  std::vector<std::vector<double>> best(max_k + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<std::size_t>> from(max_k + 1, std::vector<std::size_t>(n + 1, 0));
  best[0][0] = 0;
  double best_bic = inf;
  std::size_t best_k = 0;
  const double nd = static_cast<double>(n), floor_sq = options.noise_floor * options.noise_floor;
  for (std::size_t k = 1; k <= max_k; ++k) {
    for (std::size_t j = k * m; j <= n; ++j) {
      for (std::size_t i = (k - 1) * m; i + m <= j; ++i) {
        const double total = best[k - 1][i] + rss[i * (n + 1) + j];
        if (total < best[k][j]) {
          best[k][j] = total;
          from[k][j] = i;
        }
      }
    }
    const double params = 3.0 * static_cast<double>(k) - 1.0;
    const double bic = nd * std::log(std::max(best[k][n] / nd, floor_sq)) + params * std::log(nd);
    if (bic < best_bic) { // strict: on a tie, fewer segments
      best_bic = bic;
      best_k = k;
    }
  }
  assert(best_k >= 1 && "one segment over all points always exists");

  std::vector<std::size_t> starts;
  for (std::size_t k = best_k, j = n; k > 0; --k) {
    starts.push_back(from[k][j]);
    j = from[k][j];
  }
  std::reverse(starts.begin(), starts.end());
  assert(starts.front() == 0);
  std::vector<AlphaBetaSegment> segments;
  for (std::size_t s = 0; s < starts.size(); ++s)
    segments.push_back(make_segment(points, starts[s], s + 1 < starts.size() ? starts[s + 1] : n));
  // Contiguous runs of strictly increasing sizes: in order and not overlapping, as from_segments requires.
  return {dag::PiecewiseAlphaBeta::from_segments(std::move(segments)), best_bic};
}

} // namespace ddlsim::calibrate
