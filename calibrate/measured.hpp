// From nccl-tests logs to a calibration's measured collectives (dag/calibration.hpp, version 2): per collective,
// communicator size and node count, the measured table and its piecewise α-β fit (dag/measured.hpp evaluates them).
#pragma once

#include "calibrate/nccl_tests.hpp"
#include "dag/calibration.hpp"

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
/// and the segments fit_piecewise fits to the out-of-place times (measured.cpp says why), with their fit quality.
/// Series of a collective ddlsim does not simulate are left out with a note, as is the fit of a table of fewer points
/// than a segment needs. `source` names each log (its path), in the order of `logs`.
[[nodiscard]] MeasuredCollectives measured_collectives(const std::vector<NcclTestsLog>& logs,
                                                       const std::vector<std::string>& sources);

} // namespace ddlsim::calibrate
