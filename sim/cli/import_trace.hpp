// `ddlsim import-trace TRACE.json[.gz] --out DIR [--host-scale F]`: a PyTorch profiler trace as the files of a runnable
// scenario of the traced run (traces/import.hpp; docs/traces.md), and the trace's calibration for `ddlsim calibrate
// --kineto`.
#pragma once

#include "dag/calibration.hpp"

#include <string>
#include <vector>

namespace ddlsim::sim {

struct ImportTraceRequest {
  std::string trace;
  std::string out;
  double host_scale = 1;
};

/// Imports the trace, writes DIR/{workload,calibration,scenario,traced_step}.json atomically and prints the figures.
/// Returns the exit code; bad input throws InputError naming the file.
int import_trace_command(const ImportTraceRequest& request);

/// The calibration content of traces (layers, host, optimizer) merged into `c` (the first trace's layers; host and
/// optimizer from the first trace that measures them); prints one line per trace.
void add_kineto_calibration(dag::Calibration& c, const std::vector<std::string>& traces, double host_scale = 1);

} // namespace ddlsim::sim
