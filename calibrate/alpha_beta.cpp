// Measured table and piecewise α-β fit (alpha_beta.hpp): relative-residual least squares per segment (Eigen's
// column-pivoting QR), optimal breakpoints per segment count by dynamic programming, segment count by BIC.
#include "calibrate/alpha_beta.hpp"

#include <Eigen/Dense>
#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace ddlsim::calibrate {
namespace {

void check_points(std::span<const SizeTime> points, const char* what) {
  if (points.empty())
    throw std::invalid_argument(fmt::format("{}: no points", what));
  for (std::size_t i = 0; i < points.size(); ++i) {
    const auto& p = points[i];
    if (!std::isfinite(p.size_bytes) || p.size_bytes < 0)
      throw std::invalid_argument(
          fmt::format("{}: point {} has size {} B; sizes must be finite and >= 0", what, i, p.size_bytes));
    if (!std::isfinite(p.time_s) || p.time_s <= 0)
      throw std::invalid_argument(fmt::format("{}: point {} (size {} B) has time {} s; times must be finite and > 0",
                                              what, i, p.size_bytes, p.time_s));
    if (i > 0 && !(points[i - 1].size_bytes < p.size_bytes))
      throw std::invalid_argument(fmt::format("{}: sizes must increase strictly, but point {} has {} B after {} B",
                                              what, i, p.size_bytes, points[i - 1].size_bytes));
  }
}

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

MeasuredTable::MeasuredTable(std::vector<SizeTime> points) : points_(std::move(points)) {
  check_points(points_, "MeasuredTable");
}

bool MeasuredTable::covers(double size_bytes) const {
  return size_bytes >= points_.front().size_bytes && size_bytes <= points_.back().size_bytes;
}

Estimate MeasuredTable::time(double size_bytes) const {
  const SizeTime &lo = points_.front(), &hi = points_.back();
  if (size_bytes < lo.size_bytes)
    return {lo.time_s, true};
  if (size_bytes > hi.size_bytes)
    return {hi.size_bytes > 0 ? hi.time_s * size_bytes / hi.size_bytes : hi.time_s, true};
  // The first point with a larger size; size_bytes lies in [prev.size, next.size).
  const auto next = std::upper_bound(points_.begin(), points_.end(), size_bytes,
                                     [](double s, const SizeTime& p) { return s < p.size_bytes; });
  if (next == points_.end())
    return {hi.time_s, false}; // exactly the largest size
  const SizeTime& prev = *(next - 1);
  const double w = (size_bytes - prev.size_bytes) / (next->size_bytes - prev.size_bytes);
  return {prev.time_s + w * (next->time_s - prev.time_s), false};
}

PiecewiseAlphaBeta PiecewiseAlphaBeta::fit(std::span<const SizeTime> points, const FitOptions& options) {
  check_points(points, "PiecewiseAlphaBeta::fit");
  const std::size_t n = points.size(), m = options.min_segment_points;
  if (m < 2)
    throw std::invalid_argument(
        fmt::format("PiecewiseAlphaBeta::fit: min_segment_points is {}; a segment needs at least 2 points", m));
  if (!(options.noise_floor > 0))
    throw std::invalid_argument(
        fmt::format("PiecewiseAlphaBeta::fit: noise_floor is {}; it must be > 0", options.noise_floor));
  if (n < m)
    throw std::invalid_argument(fmt::format(
        "PiecewiseAlphaBeta::fit: {} point(s), fewer than the {} one segment needs (FitOptions::min_segment_points)", n,
        m));

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

  PiecewiseAlphaBeta result;
  result.bic_ = best_bic;
  std::vector<std::size_t> starts;
  for (std::size_t k = best_k, j = n; k > 0; --k) {
    starts.push_back(from[k][j]);
    j = from[k][j];
  }
  std::reverse(starts.begin(), starts.end());
  assert(starts.front() == 0);
  for (std::size_t s = 0; s < starts.size(); ++s)
    result.segments_.push_back(make_segment(points, starts[s], s + 1 < starts.size() ? starts[s + 1] : n));
  return result;
}

PiecewiseAlphaBeta PiecewiseAlphaBeta::from_segments(std::vector<AlphaBetaSegment> segments) {
  if (segments.empty())
    throw std::invalid_argument("PiecewiseAlphaBeta::from_segments: no segment");
  for (std::size_t k = 0; k < segments.size(); ++k) {
    if (segments[k].last_size_bytes < segments[k].first_size_bytes ||
        (k > 0 && segments[k].first_size_bytes <= segments[k - 1].last_size_bytes))
      throw std::invalid_argument("PiecewiseAlphaBeta::from_segments: segments out of order or overlapping");
  }
  PiecewiseAlphaBeta result;
  result.segments_ = std::move(segments);
  return result;
}

Estimate PiecewiseAlphaBeta::time(double size_bytes) const {
  const AlphaBetaSegment &first = segments_.front(), &last = segments_.back();
  if (size_bytes < first.first_size_bytes) {
    const double t = std::min(first.time(size_bytes), first.time(first.first_size_bytes));
    return {std::max(t, 0.0), true};
  }
  if (size_bytes > last.last_size_bytes)
    return {std::max(last.time(size_bytes), last.time(last.last_size_bytes)), true};
  for (std::size_t k = 0; k < segments_.size(); ++k) {
    const AlphaBetaSegment& seg = segments_[k];
    if (size_bytes > seg.last_size_bytes)
      continue;
    if (size_bytes >= seg.first_size_bytes || k == 0)
      return {seg.time(size_bytes), false};
    const AlphaBetaSegment& prev = segments_[k - 1]; // size_bytes lies in the gap between prev and seg
    const double middle = 0.5 * (prev.last_size_bytes + seg.first_size_bytes);
    return {(size_bytes < middle ? prev : seg).time(size_bytes), false};
  }
  return {last.time(size_bytes), false}; // not reached: size_bytes <= last.last_size_bytes
}

Estimate predict(const MeasuredTable& table, const PiecewiseAlphaBeta& fit, double size_bytes) {
  if (table.covers(size_bytes))
    return table.time(size_bytes);
  return {fit.time(size_bytes).time_s, true};
}

} // namespace ddlsim::calibrate
