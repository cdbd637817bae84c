// Cost models of one collective on one communicator, from measured (size, time) points: the measured table itself,
// interpolated inside its range, and a piecewise α-β fit (time = α + β·size per segment, Hockney's model) whose
// segments are chosen by the Bayesian information criterion (Schwarz, Ann. Statist. 6(2), 1978) over a dynamic
// programme on the breakpoints (Bai & Perron, J. Appl. Econometrics 18(1), 2003, §3).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace ddlsim::calibrate {

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

/// The measured points, interpolated piecewise linearly in (size, time).
///
/// Why linear in size and time: between two neighbouring sizes NCCL runs one algorithm and protocol, whose cost is
/// α + β·size (the model fitted below), and the line through two measured points of one α-β regime is that regime
/// exactly. Interpolation in log-log space would bend the latency-bound rows (time nearly constant) and
/// extrapolate nothing better; a spline would overshoot at the steps where NCCL switches algorithm (the H100 2x8
/// sweep jumps from 16 to 32 MiB). A linear interpolant never leaves [t_i, t_i+1] between two points.
///
/// Outside the measured sizes the table is only a fallback, flagged as extrapolated: below the smallest size it keeps
/// the smallest size's time (the latency floor), above the largest it scales the largest size's time with the size
/// (its throughput). Prefer the fit there (`predict`).
class MeasuredTable {
public:
  /// `points` in strictly increasing size, sizes >= 0, times > 0 and finite; at least one point.
  /// Throws std::invalid_argument otherwise.
  explicit MeasuredTable(std::vector<SizeTime> points);

  [[nodiscard]] Estimate time(double size_bytes) const;
  /// Whether `size_bytes` lies in [smallest, largest measured size].
  [[nodiscard]] bool covers(double size_bytes) const;
  [[nodiscard]] std::span<const SizeTime> points() const noexcept { return points_; }

private:
  std::vector<SizeTime> points_;
};

/// One segment of the piecewise fit: time = alpha_s + beta_s_per_byte · size over the measured sizes
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

struct FitOptions {
  /// Fewest points per segment: two fix a line, the third measures how well it fits (with two, every segment fits
  /// exactly and the criterion below would prefer as many segments as it may have).
  std::size_t min_segment_points = 3;
  /// Relative residual below which a better fit is not rewarded: the criterion uses max(RSS/n, noise_floor²), so
  /// that exact synthetic data or a handful of perfectly collinear rows do not pay for extra segments with a log(0).
  /// 0.1 % is below what nccl-tests resolves: one size's in-place and out-of-place times often differ by more than
  /// 1 % in the shared logs, and older versions print times with 3 to 5 significant digits (e.g. "1054.0", "14716").
  double noise_floor = 1e-3;
};

/// Piecewise α-β fit over contiguous segments in size order.
///
/// Each segment is fitted by least squares on the relative residual (α + β·s_i - t_i) / t_i, i.e. weighted least
/// squares with weights 1/t_i². Plain least squares on times would let the largest messages (seconds) decide every
/// segment and ignore the latency-bound ones (microseconds) a DDP bucket or a tensor-parallel allreduce sends;
/// relative residuals weigh a 1 % error the same at 8 B and at 8 GiB, which is also how a prediction is judged.
///
/// For each number of segments K, a dynamic programme over the breakpoints finds the segmentation of least total
/// RSS (every segment at least `min_segment_points` long); K is the one of least
///   BIC(K) = n·ln(max(RSS_K / n, noise_floor²)) + (3K - 1)·ln(n)
/// counting α and β of each segment and the K - 1 breakpoints as parameters. For n points, O(n²) Eigen QR solves of
/// up to n rows each.
class PiecewiseAlphaBeta {
public:
  /// `points` as for MeasuredTable, at least `min_segment_points` of them. Throws std::invalid_argument otherwise.
  [[nodiscard]] static PiecewiseAlphaBeta fit(std::span<const SizeTime> points, const FitOptions& options = {});
  /// A fit read back from a calibration file: its segments, in size order, not overlapping; at least one. Throws
  /// std::invalid_argument otherwise.
  [[nodiscard]] static PiecewiseAlphaBeta from_segments(std::vector<AlphaBetaSegment> segments);

  /// In size order; the first starts at the smallest measured size, the last ends at the largest.
  [[nodiscard]] const std::vector<AlphaBetaSegment>& segments() const noexcept { return segments_; }
  [[nodiscard]] double bic() const noexcept { return bic_; }

  /// The fit at `size_bytes`: inside the measured range, the segment whose sizes hold it (between two segments, the
  /// one on its side of the midpoint of the gap); below the range the first segment, above it the last, flagged as
  /// extrapolated. An extrapolated time is kept monotone: never above the first segment's time at its smallest size
  /// when going down (nor below zero), never below the last segment's time at its largest size when going up (a
  /// segment fitted with a negative slope would otherwise predict that more bytes take less time).
  [[nodiscard]] Estimate time(double size_bytes) const;

private:
  std::vector<AlphaBetaSegment> segments_;
  double bic_ = 0;
};

/// The calibrated time of a collective: the table's interpolation inside the measured sizes, the fit outside them
/// (flagged as extrapolated).
[[nodiscard]] Estimate predict(const MeasuredTable& table, const PiecewiseAlphaBeta& fit, double size_bytes);

} // namespace ddlsim::calibrate
