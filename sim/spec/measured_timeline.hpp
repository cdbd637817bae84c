// The measured step beside the simulated one (`measured.timeline`: a Chrome trace, as `ddlsim import-trace` writes
// traced_step.json), read and checked when the scenario is, so that `check` refuses what `run` would refuse after
// simulating (issue #31 R22); the report (sim/report/report.cpp) draws the events it returns.
#pragma once

#include "core/json.hpp"

#include <string>

namespace ddlsim::sim {

/// The timeline's events (its "traceEvents", or the whole file when it is an array): each an object with a string
/// "ph"; complete ("X") and metadata ("M") events with a number or string "pid"; a metadata event's "name", and a
/// process_name's "args" and "args/name", of the right type where given. Throws InputError naming the file and the
/// JSON path of the first event that is not.
[[nodiscard]] Json read_measured_timeline(const std::string& file);

} // namespace ddlsim::sim
