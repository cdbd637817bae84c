// The probe's GEMM sweep to the calibration's GEMM ceiling (calibrate_gemm.hpp).
#include "sim/cli/calibrate_gemm.hpp"

#include "core/error.hpp"
#include "sim/plan/gemm_fit.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace ddlsim::sim {
namespace {

ComputeDtype probe_format(const calibrate::ProbeFile& p) {
  return p.dtype == "bf16" ? ComputeDtype::bf16 : p.dtype == "fp16" ? ComputeDtype::fp16 : ComputeDtype::fp32;
}

std::vector<MeasuredGemm> measured_gemms(const calibrate::ProbeFile& p) {
  std::vector<MeasuredGemm> out;
  for (const auto& g : p.gemm)
    out.push_back({.shape = {.m = g.m, .n = g.n, .k = g.k, .count = 1}, .time_s = g.time_s});
  return out;
}

// The fitted ceiling of one probe file as a calibration entry, and a note on it.
dag::GemmCeilingFit fitted_entry(const calibrate::ProbeFile& p, std::string& note) {
  const ProbeGemmDevice on = probe_gemm_device(p);
  const CeilingFit fit = fit_gemm_ceiling(measured_gemms(p), on.device);
  dag::GemmCeilingFit entry;
  entry.dtype = p.dtype;
  entry.ceiling = fit.ceiling;
  entry.gpu = std::string(on.preset->name);
  entry.points = static_cast<int>(p.gemm.size());
  entry.mean_relative_error = fit.mean_relative_error;
  entry.max_relative_error = fit.max_relative_error;
  entry.source = fmt::format("ddlsim-probe {}: {} cuBLASLt GEMMs on {}; {} SMs, {} peak {:g} TFLOP/s ({}), memory "
                             "bandwidth {:g} GB/s ({})",
                             p.path, p.gemm.size(), p.device, on.device.units, p.dtype, on.device.peak_flops / 1e12,
                             on.preset->name, on.device.bandwidth / 1e9,
                             on.measured_bandwidth ? "measured by the probe" : "the preset's");
  note = fmt::format("{}: GEMM ceiling {:.4f} of the {} peak ({} GEMMs; mean error {:.1f} %, worst {:.1f} %)", p.path,
                     fit.ceiling, p.dtype, p.gemm.size(), 100 * fit.mean_relative_error, 100 * fit.max_relative_error);
  return entry;
}

} // namespace

ProbeGemmDevice probe_gemm_device(const calibrate::ProbeFile& p) {
  ProbeGemmDevice out;
  out.preset = find_gpu_preset_for_device(p.device_name);
  if (out.preset == nullptr)
    throw InputError(p.path, "/device/name",
                     fmt::format("'{}' is no GPU preset's device (`ddlsim list gpus`): the GEMM sweep's ceiling is a "
                                 "fraction of a preset's peak",
                                 p.device_name.substr(0, 200)));
  const ComputeDtype format = probe_format(p);
  const double peak = peak_of(out.preset->peaks, format);
  if (!(peak > 0))
    throw InputError(p.path, "/dtype",
                     fmt::format("{} has no {} peak to fit the GEMM ceiling against", out.preset->name, p.dtype));
  double bandwidth = 0;
  for (const auto& b : p.memory)
    bandwidth = std::max(bandwidth, b.bytes / b.time_s);
  out.measured_bandwidth = bandwidth > 0;
  out.device = {.peak_flops = peak,
                .ceiling = 1,
                .bandwidth = out.measured_bandwidth ? bandwidth : out.preset->memory_bandwidth,
                .units = p.multiprocessors > 0 ? p.multiprocessors : out.preset->compute_units,
                .in_bytes = element_bytes(format),
                .out_bytes = element_bytes(format)};
  return out;
}

std::vector<std::string> add_gemm_calibration(dag::Calibration& c, const std::vector<calibrate::ProbeFile>& probes) {
  std::vector<std::string> notes;
  for (const auto& p : probes) {
    if (p.gemm.empty())
      continue;
    if (c.gemm) {
      notes.push_back(fmt::format("{}: its {} GEMMs are not used: the GEMM ceiling comes from an earlier file", p.path,
                                  p.gemm.size()));
      continue;
    }
    std::string note;
    c.gemm = fitted_entry(p, note);
    notes.push_back(note);
  }
  return notes;
}

} // namespace ddlsim::sim
