// `ddlsim import-trace` and `ddlsim calibrate --kineto` (import_trace.hpp).
#include "sim/cli/import_trace.hpp"

#include "core/error.hpp"
#include "sim/spec/gpus.hpp"
#include "traces/import.hpp"

#include <fmt/format.h>

namespace ddlsim::sim {
namespace {

traces::Imported import(const std::string& trace, double host_scale) {
  if (!(host_scale > 0))
    throw InputError("", "--host-scale", fmt::format("must be a positive factor, not {}", host_scale));
  auto im = traces::import_trace(trace, {.host_scale = host_scale});
  if (!im.gpu_candidate.empty() && find_gpu_preset(im.gpu_candidate) == nullptr) {
    im.summary.push_back(fmt::format("not in the trace / not simulated: GPU preset for '{}' (no preset '{}'; the "
                                     "calibration's measured times stand in)",
                                     im.analysis.device_name, im.gpu_candidate));
    im.scenario.erase("gpu");
  } else if (!im.gpu_candidate.empty() && im.gpu_candidate != im.analysis.device_name) {
    im.summary.push_back(fmt::format("GPU '{}' taken as preset {}", im.analysis.device_name, im.gpu_candidate));
  }
  return im;
}

} // namespace

int import_trace_command(const ImportTraceRequest& request) {
  const auto im = import(request.trace, request.host_scale);
  traces::write_import(im, request.out);
  for (const auto& line : im.summary)
    fmt::print("{}\n", line);
  fmt::print("wrote {}/{{workload,calibration,scenario,traced_step}}.json\n", request.out);
  return 0;
}

void add_kineto_calibration(dag::Calibration& c, const std::vector<std::string>& traces, double host_scale) {
  for (const auto& trace : traces) {
    const auto im = import(trace, host_scale);
    const auto& k = im.calibration;
    if (c.layers.empty()) {
      c.layers = k.layers;
      c.batch_per_gpu = k.batch_per_gpu;
    }
    if (!c.host.launch_s)
      c.host = k.host;
    if (!c.optimizer.host_s)
      c.optimizer = k.optimizer;
    fmt::print("{}: {} layers{}, median step {:.3f} ms, host per launched GPU task {:.1f} us\n", trace, k.layers.size(),
               im.zoo.empty() ? "" : fmt::format(" ({})", im.zoo), im.analysis.phases.step_s * 1e3,
               im.analysis.phases.launch_s * 1e6);
  }
}

} // namespace ddlsim::sim
