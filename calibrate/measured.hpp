// From nccl-tests logs to a calibration's measured collectives (dag/calibration.hpp, version 2): per collective,
// communicator size and node count, the measured table and its piecewise α-β fit.
#pragma once

#include "calibrate/alpha_beta.hpp"
#include "calibrate/nccl_tests.hpp"
#include "dag/calibration.hpp"

#include <optional>
#include <string>
#include <vector>

namespace ddlsim::calibrate {

struct MeasuredCollectives {
  std::vector<dag::MeasuredCollective> collectives; ///< by (collective, ranks, nodes), as group_by_communicator
  std::vector<std::string> notes;                   ///< what was skipped or could not be fitted, and why
};

/// The measured collectives of `logs`: for each (collective, ranks, nodes) that ddlsim simulates (all_reduce,
/// all_gather, reduce_scatter, broadcast, sendrecv as point_to_point), the faster of in-place and out-of-place per
/// size (nccl-tests' `size`, which is the lowering's payload: the buffer, or the whole gathered / scattered buffer)
/// and PiecewiseAlphaBeta's segments fitted to the out-of-place times (measured.cpp says why), with their fit quality.
/// Series of a collective ddlsim does not simulate are left out with a note, as is the fit of a table of fewer points
/// than a segment needs. `source` names each log (its path), in the order of `logs`.
[[nodiscard]] MeasuredCollectives measured_collectives(const std::vector<NcclTestsLog>& logs,
                                                       const std::vector<std::string>& sources);

/// The time of a measured collective at `size_bytes`: its table interpolated inside the measured sizes, its fit's
/// segments outside them (flagged as extrapolated; the table's own fallback when it has no segments). Built once per
/// measured collective; throws std::invalid_argument on a table or segments that MeasuredTable or
/// PiecewiseAlphaBeta::from_segments refuse (parse_calibration has checked them).
class MeasuredModel {
public:
  explicit MeasuredModel(const dag::MeasuredCollective& m);
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
[[nodiscard]] Estimate scaled_time(const MeasuredModel& model, dag::Collective collective, int measured_ranks,
                                   int ranks, double size_bytes);

} // namespace ddlsim::calibrate
