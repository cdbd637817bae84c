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

// Where segments may start and end: `bounds` (indices into the points, 0 and n among them, increasing) and the RSS
// of one line over points [bounds[i], bounds[j]) for every pair, infinite where that is fewer than m points.
struct Candidates {
  std::vector<std::size_t> bounds;
  std::vector<double> rss; // rss[i * bounds.size() + j]

  [[nodiscard]] double cost(std::size_t i, std::size_t j) const { return rss[i * bounds.size() + j]; }
};

// Every point a candidate: the exact optimum, n² line fits by QR of up to n rows each.
Candidates every_point(std::span<const SizeTime> points, std::size_t m) {
  const std::size_t n = points.size();
  Candidates c;
  for (std::size_t i = 0; i <= n; ++i)
    c.bounds.push_back(i);
  c.rss.assign((n + 1) * (n + 1), std::numeric_limits<double>::infinity());
  for (std::size_t i = 0; i + m <= n; ++i)
    for (std::size_t j = i + m; j <= n; ++j)
      c.rss[i * (n + 1) + j] = fit_line(points, i, j).rss;
  return c;
}

// The sums of the normal equations of fit_line over some points: with w_i = 1 / t_i, the rows are
// (w_i, s_i w_i) and the right-hand side 1, so A'A = [Σw², Σsw²; Σsw², Σs²w²] and A'1 = [Σw, Σsw]. Extended
// precision because RSS = count - x'A'1 cancels where the line fits well.
struct NormalSums {
  long double ww = 0, sww = 0, ssww = 0, w = 0, sw = 0, count = 0;

  void add(const SizeTime& p) {
    const long double wi = 1.0L / p.time_s, s = p.size_bytes;
    ww += wi * wi;
    sww += s * wi * wi;
    ssww += s * s * wi * wi;
    w += wi;
    sw += s * wi;
    count += 1;
  }
  void add(const NormalSums& o) {
    ww += o.ww;
    sww += o.sww;
    ssww += o.ssww;
    w += o.w;
    sw += o.sw;
    count += o.count;
  }
  // The least RSS of a line, sizes scaled by `scale` as fit_line does; where the two columns are collinear to
  // working precision (sizes too close together), that of α alone, which then fits as well.
  [[nodiscard]] double rss(double scale) const {
    const long double s = scale, a11 = ww, a12 = sww / s, a22 = ssww / (s * s), b1 = w, b2 = sw / s;
    const long double det = a11 * a22 - a12 * a12;
    long double explained = b1 * b1 / a11;
    if (det > 1e-15L * a11 * a22)
      explained = (b1 * (a22 * b1 - a12 * b2) + b2 * (a11 * b2 - a12 * b1)) / det;
    return static_cast<double>(std::max(count - explained, 0.0L));
  }
};

// A point every ceil(n / blocks) a candidate (the last block may be shorter), each pair's RSS from the blocks'
// normal-equation sums: O(n + blocks²) and blocks² doubles.
Candidates every_block(std::span<const SizeTime> points, std::size_t m, std::size_t blocks) {
  const std::size_t n = points.size(), step = (n + blocks - 1) / blocks;
  Candidates c;
  std::vector<NormalSums> sums;
  for (std::size_t first = 0; first < n; first += step) {
    c.bounds.push_back(first);
    NormalSums& block = sums.emplace_back();
    for (std::size_t i = first; i < std::min(first + step, n); ++i)
      block.add(points[i]);
  }
  c.bounds.push_back(n);
  const std::size_t nb = c.bounds.size();
  c.rss.assign(nb * nb, std::numeric_limits<double>::infinity());
  for (std::size_t i = 0; i + 1 < nb; ++i) {
    NormalSums total;
    for (std::size_t j = i + 1; j < nb; ++j) {
      total.add(sums[j - 1]);
      if (c.bounds[j] - c.bounds[i] >= m)
        c.rss[i * nb + j] = total.rss(std::max(points[c.bounds[j] - 1].size_bytes, 1.0));
    }
  }
  return c;
}

// The segmentation of least BIC over the candidates' bounds: for each number of segments K, the dynamic programme of
// least total RSS; returns the first point of each segment and the BIC.
std::pair<std::vector<std::size_t>, double> best_segmentation(const Candidates& c, std::size_t n, std::size_t m,
                                                              double noise_floor) {
  // best[k][j]: least total RSS of points [0, bounds[j]) in k segments; from[k][j]: the bound its last one starts at.
  constexpr double inf = std::numeric_limits<double>::infinity();
  const std::size_t nb = c.bounds.size(), max_k = std::min(n / m, nb - 1);
  std::vector<std::vector<double>> best(max_k + 1, std::vector<double>(nb, inf));
  std::vector<std::vector<std::size_t>> from(max_k + 1, std::vector<std::size_t>(nb, 0));
  best[0][0] = 0;
  double best_bic = inf;
  std::size_t best_k = 0;
  const double nd = static_cast<double>(n), floor_sq = noise_floor * noise_floor;
  for (std::size_t k = 1; k <= max_k; ++k) {
    for (std::size_t j = 1; j < nb; ++j) {
      for (std::size_t i = 0; c.bounds[i] + m <= c.bounds[j]; ++i) {
        const double total = best[k - 1][i] + c.cost(i, j);
        if (total < best[k][j]) {
          best[k][j] = total;
          from[k][j] = i;
        }
      }
    }
    const double params = 3.0 * static_cast<double>(k) - 1.0;
    const double bic = nd * std::log(std::max(best[k][nb - 1] / nd, floor_sq)) + params * std::log(nd);
    if (bic < best_bic) { // strict: on a tie, fewer segments
      best_bic = bic;
      best_k = k;
    }
  }
  assert(best_k >= 1 && "one segment over all points always exists");
  std::vector<std::size_t> starts;
  for (std::size_t k = best_k, j = nb - 1; k > 0; --k) {
    starts.push_back(c.bounds[from[k][j]]);
    j = from[k][j];
  }
  std::reverse(starts.begin(), starts.end());
  return {std::move(starts), best_bic};
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

  const Candidates candidates =
      n <= kExactFitPoints ? every_point(points, m) : every_block(points, m, std::min(kCandidateBlocks, n / m));
  const auto [starts, bic] = best_segmentation(candidates, n, m, options.noise_floor);
  assert(starts.front() == 0);
  std::vector<AlphaBetaSegment> segments;
  for (std::size_t s = 0; s < starts.size(); ++s)
    segments.push_back(make_segment(points, starts[s], s + 1 < starts.size() ? starts[s + 1] : n));
  // Contiguous runs of strictly increasing sizes: in order and not overlapping, as from_segments requires.
  return {dag::PiecewiseAlphaBeta::from_segments(std::move(segments)), bic};
}

} // namespace ddlsim::calibrate
