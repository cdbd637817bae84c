// `ddlsim calibrate --probe`'s GEMM ceiling (docs/calibration.md): the probe's GEMM sweep (its "gemm" group) fitted
// by the shape-aware model (sim/plan/gemm_fit.hpp) on the preset of the device it ran on, its SMs and the memory
// bandwidth it measured, into the calibration's `gemm` entry.
#pragma once

#include "calibrate/probe.hpp"
#include "dag/calibration.hpp"
#include "sim/plan/gemm_efficiency.hpp"

#include <string>
#include <vector>

namespace ddlsim::sim {

/// The GPU the probe's GEMMs ran on, as the model sees it: the preset of its device name (its peak in the probe's
/// dtype), the probe's SMs (the preset's when not given) and the best memory bandwidth it measured (the preset's
/// without memory measurements). Throws InputError naming the file and JSON path: a device that matches no preset
/// (/device/name), a preset without a peak in the probe's dtype (/dtype).
struct ProbeGemmDevice {
  const GpuPreset* preset = nullptr;
  GemmDevice device;
  bool measured_bandwidth = false;
};
[[nodiscard]] ProbeGemmDevice probe_gemm_device(const calibrate::ProbeFile& p);

/// Fits the GEMM ceiling of the first probe file with a GEMM sweep into `c.gemm` (none there yet); notes on what was
/// fitted and what was not used.
[[nodiscard]] std::vector<std::string> add_gemm_calibration(dag::Calibration& c,
                                                            const std::vector<calibrate::ProbeFile>& probes);

} // namespace ddlsim::sim
