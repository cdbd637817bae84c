// The piecewise α-β fit of one collective on one communicator from measured (size, time) points (time = α + β·size
// per segment, Hockney's model): segments chosen by the Bayesian information criterion (Schwarz, Ann. Statist. 6(2),
// 1978) over a dynamic programme on the breakpoints (Bai & Perron, J. Appl. Econometrics 18(1), 2003, §3). What it
// fits is evaluated by dag/measured.hpp (the table, the segments, their prediction), beside the calibration schema.
#pragma once

#include "dag/measured.hpp"

#include <cstddef>
#include <span>

namespace ddlsim::calibrate {

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

/// The most points fitted with every point a candidate breakpoint (fit_piecewise): nccl-tests' sweeps by a factor
/// (-f 2) print 30 to 40 sizes, every log in tests/data at most 31; 256 sizes take about 0.1 s.
inline constexpr std::size_t kExactFitPoints = 256;
/// Beyond kExactFitPoints, the blocks of points whose bounds are the candidate breakpoints: as many candidates as the
/// exact programme has at kExactFitPoints, so no fit costs more than that one plus a pass over the points.
inline constexpr std::size_t kCandidateBlocks = kExactFitPoints;

/// A fit: its segments (what a calibration file keeps) and the BIC their count was chosen by.
struct PiecewiseFit : dag::PiecewiseAlphaBeta {
  double bic = 0;
};

/// The piecewise α-β fit of `points` (as dag::check_size_times takes them), contiguous segments in size order.
///
/// Each segment is fitted by least squares on the relative residual (α + β·s_i - t_i) / t_i, i.e. weighted least
/// squares with weights 1/t_i². Plain least squares on times would let the largest messages (seconds) decide every
/// segment and ignore the latency-bound ones (microseconds) a DDP bucket or a tensor-parallel allreduce sends;
/// relative residuals weigh a 1 % error the same at 8 B and at 8 GiB, which is also how a prediction is judged.
///
/// For each number of segments K, a dynamic programme over the breakpoints finds the segmentation of least total
/// RSS (every segment at least `min_segment_points` long); K is the one of least
///   BIC(K) = n·ln(max(RSS_K / n, noise_floor²)) + (3K - 1)·ln(n)
/// counting α and β of each segment and the K - 1 breakpoints as parameters.
///
/// Up to kExactFitPoints points, a breakpoint may fall before any point: the exact optimum, O(n²) QR solves of up to
/// n rows each and O(n³) steps of the programme. Beyond, before every ceil(n / kCandidateBlocks)-th point only (a
/// regime switch is placed to within one such block), each candidate segment's RSS from its blocks' sums of the normal
/// equations, the chosen segments refitted by QR on their points: O(n + kCandidateBlocks³) time and
/// O(kCandidateBlocks²) memory.
///
/// Throws std::invalid_argument on bad points, fewer than `min_segment_points` of them or bad options.
[[nodiscard]] PiecewiseFit fit_piecewise(std::span<const dag::SizeTime> points, const FitOptions& options = {});

} // namespace ddlsim::calibrate
