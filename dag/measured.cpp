// Measured collectives evaluated (measured.hpp): the table's linear interpolation, the α-β segments' time, the
// replay at another communicator size.
#include "dag/measured.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

namespace ddlsim::dag {

void check_size_times(std::span<const SizeTime> points, const char* what) {
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

MeasuredTable::MeasuredTable(std::vector<SizeTime> points) : points_(std::move(points)) {
  check_size_times(points_, "MeasuredTable");
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

namespace {
std::vector<SizeTime> table_points(const MeasuredCollective& m) {
  std::vector<SizeTime> out;
  for (const auto& p : m.table)
    out.push_back({p.size_bytes, p.time_s});
  return out;
}
} // namespace

MeasuredModel::MeasuredModel(const MeasuredCollective& m) : table_(table_points(m)) {
  if (m.segments.empty())
    return;
  std::vector<AlphaBetaSegment> segments;
  for (const auto& g : m.segments)
    segments.push_back({g.alpha_s, g.beta_s_per_byte, g.first_size_bytes, g.last_size_bytes,
                        static_cast<std::size_t>(g.points), g.mean_relative_error, g.max_relative_error});
  fit_ = PiecewiseAlphaBeta::from_segments(std::move(segments));
}

Estimate MeasuredModel::time(double size_bytes) const {
  return fit_ ? predict(table_, *fit_, size_bytes) : table_.time(size_bytes);
}

double MeasuredModel::latency_s(double size_bytes) const {
  double alpha = table_.points().front().time_s;
  if (fit_) {
    const auto& segments = fit_->segments();
    alpha = segments.front().alpha_s;
    for (const auto& g : segments)
      if (g.first_size_bytes <= size_bytes)
        alpha = g.alpha_s;
  }
  return std::clamp(alpha, 0.0, time(size_bytes).time_s);
}

namespace {
// A ring's steps and nccl-tests' bus-bandwidth factor for p ranks.
std::pair<double, double> ring_steps_and_factor(Collective c, int p) {
  const double q = p - 1;
  switch (c) {
  case Collective::allreduce:
    return {2 * q, 2 * q / p};
  case Collective::allgather:
  case Collective::reduce_scatter:
    return {q, q / p};
  case Collective::broadcast:
    return {q, 1.0};
  default:
    return {1.0, 1.0};
  }
}
} // namespace

Estimate scaled_time(const MeasuredModel& model, Collective collective, int measured_ranks, int ranks,
                     double size_bytes) {
  Estimate e = model.time(size_bytes);
  if (ranks == measured_ranks)
    return e;
  const double alpha = model.latency_s(size_bytes);
  const auto [steps, factor] = ring_steps_and_factor(collective, measured_ranks);
  const auto [new_steps, new_factor] = ring_steps_and_factor(collective, ranks);
  if (!(steps > 0) || !(factor > 0))
    return e;
  e.time_s = alpha * new_steps / steps + (e.time_s - alpha) * new_factor / factor;
  return e;
}

} // namespace ddlsim::dag
