// The time of a measured collective (dag/calibration.hpp's MeasuredCollective) at a message size: its measured table,
// interpolated inside its range, and its piecewise α-β segments (time = α + β·size per segment, Hockney's model)
// outside it; and its replay on a communicator of another size. Here, beside the schema and below every engine, so
// that the planner evaluates what calibrate/ fits (calibrate/alpha_beta.hpp chooses the segments) without linking it.
#pragma once

#include "core/collective.hpp"
#include "dag/calibration.hpp"

#include <cstddef>
#include <optional>
#include <span>
#include <vector>

namespace ddlsim::dag {

/// One measurement: a message of `size_bytes` took `time_s`.
struct SizeTime {
  double size_bytes = 0;
  double time_s = 0;
};

/// A time and whether it came from outside the measured sizes (callers mark those in `summary.notes`).
struct Estimate {
  double time_s = 0;
  bool extrapolated = false;
};

/// Throws std::invalid_argument, its message starting with `what`, unless `points` is not empty, in strictly
/// increasing size, sizes >= 0, times > 0 and finite (what MeasuredTable and calibrate's fit take).
void check_size_times(std::span<const SizeTime> points, const char* what);

/// The measured points, interpolated piecewise linearly in (size, time).
///
/// Why linear in size and time: between two neighbouring sizes NCCL runs one algorithm and protocol, whose cost is
/// α + β·size (the model calibrate/ fits), and the line through two measured points of one α-β regime is that regime
/// exactly. Interpolation in log-log space would bend the latency-bound rows (time nearly constant) and
/// extrapolate nothing better; a spline would overshoot at the steps where NCCL switches algorithm (the H100 2x8
/// sweep jumps from 16 to 32 MiB). A linear interpolant never leaves [t_i, t_i+1] between two points.
///
/// Outside the measured sizes the table is only a fallback, flagged as extrapolated: below the smallest size it keeps
/// the smallest size's time (the latency floor), above the largest it scales the largest size's time with the size
/// (its throughput). Prefer the fit there (`predict`).
class MeasuredTable {
public:
  /// `points` as check_size_times takes them; throws std::invalid_argument otherwise.
  explicit MeasuredTable(std::vector<SizeTime> points);

  [[nodiscard]] Estimate time(double size_bytes) const;
  /// Whether `size_bytes` lies in [smallest, largest measured size].
  [[nodiscard]] bool covers(double size_bytes) const;
  [[nodiscard]] std::span<const SizeTime> points() const noexcept { return points_; }

private:
  std::vector<SizeTime> points_;
};

/// One segment of a piecewise α-β fit: time = alpha_s + beta_s_per_byte · size over the measured sizes
/// [first_size_bytes, last_size_bytes], with its fit quality on those points.
struct AlphaBetaSegment {
  double alpha_s = 0;
  double beta_s_per_byte = 0;
  double first_size_bytes = 0;
  double last_size_bytes = 0;
  std::size_t points = 0;
  double mean_relative_error = 0; ///< mean of |fit - measured| / measured over the segment's points
  double max_relative_error = 0;

  [[nodiscard]] double time(double size_bytes) const { return alpha_s + beta_s_per_byte * size_bytes; }
};

/// A piecewise α-β fit over contiguous segments in size order: as calibrate::fit_piecewise chose it, or as a
/// calibration file keeps it.
class PiecewiseAlphaBeta {
public:
  /// Its segments, in size order, not overlapping; at least one. Throws std::invalid_argument otherwise.
  [[nodiscard]] static PiecewiseAlphaBeta from_segments(std::vector<AlphaBetaSegment> segments);

  /// In size order; the first starts at the smallest measured size, the last ends at the largest.
  [[nodiscard]] const std::vector<AlphaBetaSegment>& segments() const noexcept { return segments_; }

  /// The fit at `size_bytes`: inside the measured range, the segment whose sizes hold it (between two segments, the
  /// one on its side of the midpoint of the gap); below the range the first segment, above it the last, flagged as
  /// extrapolated. An extrapolated time is kept monotone: never above the first segment's time at its smallest size
  /// when going down (nor below zero), never below the last segment's time at its largest size when going up (a
  /// segment fitted with a negative slope would otherwise predict that more bytes take less time).
  [[nodiscard]] Estimate time(double size_bytes) const;

private:
  std::vector<AlphaBetaSegment> segments_;
};

/// The calibrated time of a collective: the table's interpolation inside the measured sizes, the fit outside them
/// (flagged as extrapolated).
[[nodiscard]] Estimate predict(const MeasuredTable& table, const PiecewiseAlphaBeta& fit, double size_bytes);

/// The time of a measured collective at `size_bytes`: its table interpolated inside the measured sizes, its fit's
/// segments outside them (flagged as extrapolated; the table's own fallback when it has no segments). Built once per
/// measured collective; throws std::invalid_argument on a table or segments that MeasuredTable or
/// PiecewiseAlphaBeta::from_segments refuse (parse_calibration has checked them).
class MeasuredModel {
public:
  explicit MeasuredModel(const MeasuredCollective& m);
  [[nodiscard]] Estimate time(double size_bytes) const;
  /// The start-up part of time(size_bytes): the α of the segment that times it (the table's smallest time when there
  /// are no segments), at most the time itself.
  [[nodiscard]] double latency_s(double size_bytes) const;

private:
  MeasuredTable table_;
  std::optional<PiecewiseAlphaBeta> fit_;
};

/// A measured collective replayed on a communicator of another size (issue #12): its bus bandwidth kept (nccl-tests'
/// busbw = algbw x factor, factor 2(p-1)/p for allreduce, (p-1)/p for allgather and reduce-scatter, 1 for broadcast
/// and point-to-point), its start-up scaled by a ring's step count (2(p-1) for allreduce, p-1 for allgather,
/// reduce-scatter and broadcast, 1 for point-to-point): t' = α s'/s + (t - α) factor'/factor, with t and α the
/// measurement's at that size.
[[nodiscard]] Estimate scaled_time(const MeasuredModel& model, Collective collective, int measured_ranks, int ranks,
                                   double size_bytes);

} // namespace ddlsim::dag
