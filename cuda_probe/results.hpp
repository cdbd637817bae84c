// What the probe writes: the versioned "ddlsim-probe" JSON that `ddlsim calibrate --probe` reads (format in
// docs/calibration.md#probe-file), and the collectives again in nccl-tests' text format (the `*_perf` tables with
// out-of-place and in-place columns, nccl-tests src/common.cu) so that tools made for nccl-tests read them. Plain C++:
// the writers are tested with fake timings on machines without a GPU.
#pragma once

#include "cuda_probe/gpu/gpu.hpp"
#include "cuda_probe/plan.hpp"
#include "cuda_probe/sampler.hpp"

#include <string>
#include <vector>

namespace ddlsim::probe {

/// Version 2 adds the "gemm" group (the GEMM sweep); version 1 files, without it, are still read.
inline constexpr int kProbeFormatVersion = 2;

struct ProbeResults {
  std::string generator = "ddlsim-probe";
  ProbePlan plan;
  ProbeOptions options;
  StoppingRule rule;
  gpu::DeviceInfo device;
  int processes = 1;              ///< of a multi-process run (one per GPU)
  std::vector<std::string> hosts; ///< the hosts of the ranks, in rank order (nccl-tests' device listing)
  struct Entry {
    Measurement measurement;
    gpu::Result result;
  };
  std::vector<Entry> entries; ///< in the order measured
  struct Failure {
    Measurement measurement;
    std::string error;
  };
  std::vector<Failure> failures; ///< measurements that failed on the GPU (out of memory, an unsupported shape, ...)
};

/// The "ddlsim-probe" document, quantities as strings with their units in base units ("1.25e-05 s", "4096 B",
/// "1410000000 Hz") written with the shortest digits that read back to the same double.
[[nodiscard]] std::string probe_json(const ProbeResults& r);

/// The collectives in nccl-tests' text format, one `*_perf` table per collective (empty when none was measured).
/// Times are the median sample, in microseconds; algbw and busbw in GB/s as nccl-tests defines them.
[[nodiscard]] std::string nccl_tests_text(const ProbeResults& r);

/// A quantity as the probe writes it: shortest round-trip digits and the unit ("0.000125 s").
[[nodiscard]] std::string quantity(double value, const char* unit);

/// Writes `text` to `path` through a temporary file in the same directory and a rename; throws std::runtime_error
/// naming the path when it cannot.
void write_file_atomic(const std::string& path, const std::string& text);

} // namespace ddlsim::probe
