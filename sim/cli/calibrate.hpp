// `ddlsim calibrate`: measurements to a calibration file (docs/calibration.md). So far from nccl-tests output: the
// measured collectives (calibrate/measured.hpp); from PyTorch profiler traces (--kineto), per-layer GPU and host
// times, host costs and the optimizer; from ddlsim-probe files (--probe, calibrate/probe.hpp), per-layer kernel
// times, selection curves, collectives, the host-to-device bandwidth and the GEMM sweep's ceiling
// (calibrate_gemm.hpp); written as a version-2 calibration.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ddlsim::sim {

struct CalibrateRequest {
  std::vector<std::string> nccl_tests; ///< nccl-tests logs (text or -J JSON)
  /// For logs that do not name theirs ("all_reduce", "all_gather", ...): one for all of them, or one per log ("auto"
  /// for a log that names its own).
  std::vector<std::string> collectives;
  std::optional<int> ranks;        ///< for logs without a device listing
  std::vector<std::string> kineto; ///< PyTorch profiler traces: layers, host costs, optimizer (import_trace.hpp)
  std::vector<std::string> probes; ///< ddlsim-probe files: layers, GEMM sweep, selection curves, collectives, copies
  std::string out;                 ///< the calibration file to write
};

/// Reads the measurements, writes `out` atomically and prints what it kept, fitted and left out. Returns the exit
/// code; bad input throws InputError naming the file and line.
int calibrate_command(const CalibrateRequest& request);

} // namespace ddlsim::sim
