// Compute costs per layer. Roofline (Williams, Waterman, Patterson, CACM 2009): a layer takes
// max(FLOPs / peak, bytes moved / memory bandwidth) / efficiency; the forward moves its input and output
// activations and reads its weights, the backward twice that. Without `gpu.efficiency` on a preset, the layers'
// kernel shapes give their times instead (sim/plan/layer_costs.hpp). A measured single-GPU iteration T is spread over
// forward, backward and update in proportion to their FLOPs after subtracting the host-to-device copy.
#include "sim/plan/compute.hpp"

#include "sim/plan/layer_costs.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace ddlsim::sim {
namespace {

double layer_param_bytes(const dag::Layer& layer) {
  double n = 0;
  for (const auto& p : layer.params)
    n += static_cast<double>(p.numel);
  return 4.0 * n;
}

// A note that the calibration's fitted GEMM ceiling times no layer, and why (empty without one).
std::string unused_gemm_note(const Scenario& s, const std::string& why) {
  if (!s.gpu.calibration || !s.gpu.calibration->gemm)
    return "";
  return fmt::format("compute: the calibration's {} GEMM ceiling ({}) is not used: {}", s.gpu.calibration->gemm->dtype,
                     gemm_entry_place(s), why);
}

} // namespace

namespace {

// What holds whichever source costed the kernels: the calibration's optimizer step, data loading and copy, the host
// thread's times (sim/plan/host.hpp), and gpu.speedup.
void finish_costs(const Scenario& s, dag::WorkerCosts& w) {
  const auto& m = s.model;
  const std::size_t layers = m.layers.size();
  const dag::Calibration* c = s.gpu.calibration ? &*s.gpu.calibration : nullptr;
  if (c != nullptr) {
    if (c->optimizer.gpu_s)
      w.update_s = *c->optimizer.gpu_s;
    if (c->host.data_loading_s && s.data.loading_per_sample_s == 0) { // the scenario's `data` wins
      w.data_load_s = *c->host.data_loading_s * s.batch_per_gpu / c->batch_per_gpu;
      w.prefetch = c->host.prefetch.value_or(w.prefetch);
    }
    if (c->host.h2d_bandwidth)
      w.h2d_s = m.input_bytes_per_sample * s.batch_per_gpu / *c->host.h2d_bandwidth;
  }
  for (std::size_t l = 0; l < layers; ++l) {
    w.fwd_s[l] /= s.gpu.speedup;
    w.bwd_s[l] /= s.gpu.speedup;
  }
  w.update_s /= s.gpu.speedup;
  w.memory_bandwidth *= s.gpu.speedup;
  w.peak_flops *= s.gpu.speedup;

  // Host: the scenario's launch cost, else the calibration's, else one kernel launch (dag/compression.hpp).
  w.launch_s = s.host.launch_s                    ? *s.host.launch_s
               : c != nullptr && c->host.launch_s ? *c->host.launch_s
                                                  : dag::kKernelLaunchS;
  w.fwd_host_s.assign(layers, w.launch_s);
  w.bwd_host_s.assign(layers, w.launch_s);
  w.update_host_s = w.launch_s;
  w.iteration_host_s = 0;
  w.host_times_given = s.host.launch_s.has_value();
  if (c != nullptr) {
    for (std::size_t l = 0; l < layers; ++l) {
      const auto it = c->layers.find(m.layers[l].name);
      if (it == c->layers.end())
        continue;
      w.fwd_host_s[l] = it->second.forward_host_s.value_or(w.fwd_host_s[l]);
      w.bwd_host_s[l] = it->second.backward_host_s.value_or(w.bwd_host_s[l]);
      w.host_times_given |= it->second.forward_host_s.has_value() || it->second.backward_host_s.has_value();
    }
    w.update_host_s = c->optimizer.host_s.value_or(w.update_host_s);
    w.iteration_host_s = c->host.iteration_s.value_or(0);
    w.host_times_given |=
        c->host.launch_s.has_value() || c->optimizer.host_s.has_value() || c->host.iteration_s.has_value();
  }
}

ComputeCosts gpu_costs(const Scenario& s);

} // namespace

ComputeCosts compute_costs(const Scenario& s) {
  auto out = gpu_costs(s);
  finish_costs(s, out.worker);
  return out;
}

namespace {

ComputeCosts gpu_costs(const Scenario& s) {
  const auto& m = s.model;
  const std::size_t layers = m.layers.size();
  const double batch = s.batch_per_gpu;
  const double params = static_cast<double>(m.param_count());
  ComputeCosts out;
  auto& w = out.worker;
  w.fwd_s.assign(layers, 0);
  w.bwd_s.assign(layers, 0);
  w.prefetch = s.data.prefetch;
  w.data_load_s = s.data.loading_per_sample_s * batch;
  w.memory_bandwidth = s.gpu.memory_bandwidth * s.gpu.efficiency; // memory-bound kernels (compression)
  w.peak_flops = s.gpu.peak_flops * s.gpu.efficiency;             // compression matmuls (PowerSGD)
  w.h2d_s = s.gpu.host_link > 0 ? m.input_bytes_per_sample * batch / s.gpu.host_link : 0;

  // Which layers the calibration covers.
  std::vector<bool> calibrated(layers, false);
  if (const auto& c = s.gpu.calibration) {
    const double scale = batch / c->batch_per_gpu; // kernel time grows linearly with batch (large-batch regime)
    for (std::size_t l = 0; l < layers; ++l) {
      const auto it = c->layers.find(m.layers[l].name);
      if (it == c->layers.end())
        continue;
      calibrated[l] = true;
      w.fwd_s[l] = it->second.forward_s * scale;
      w.bwd_s[l] = it->second.backward_s * scale;
    }
  }
  const bool all_calibrated = std::all_of(calibrated.begin(), calibrated.end(), [](bool b) { return b; });
  const bool calibrated_any = std::any_of(calibrated.begin(), calibrated.end(), [](bool b) { return b; });

  if (s.gpu.single_gpu_iteration_s) {
    // Spread what is left of T after the calibrated layers and the copy over the rest by FLOPs, backward = 2 x forward
    // (docs/engines.md, "Where the numbers come from").
    double calibrated_s = 0, flops = kUpdateFlopsPerParam * params;
    for (std::size_t l = 0; l < layers; ++l) {
      if (calibrated[l])
        calibrated_s += w.fwd_s[l] + w.bwd_s[l];
      else
        flops += batch * 3 * m.layers[l].fwd_flops; // forward + backward
    }
    const double left = *s.gpu.single_gpu_iteration_s - w.h2d_s - calibrated_s;
    if (!(left > 0))
      throw InputError(s.file, "/gpu/single_gpu_iteration",
                       fmt::format("{} leaves no time for computation after the host-to-device copy ({}) and the "
                                   "calibrated layers ({})",
                                   format_time(*s.gpu.single_gpu_iteration_s), format_time(w.h2d_s),
                                   format_time(calibrated_s)));
    const double per_flop = flops > 0 ? left / flops : 0;
    for (std::size_t l = 0; l < layers; ++l) {
      if (calibrated[l])
        continue;
      w.fwd_s[l] = per_flop * batch * m.layers[l].fwd_flops;
      w.bwd_s[l] = 2 * w.fwd_s[l];
    }
    w.update_s = per_flop * kUpdateFlopsPerParam * params;
    out.source = all_calibrated   ? "calibration"
                 : calibrated_any ? "calibration+single_gpu_iteration"
                                  : "single_gpu_iteration";
    out.note = unused_gemm_note(s, "gpu.single_gpu_iteration times the layers");
    return out;
  }

  const double bandwidth = s.gpu.memory_bandwidth * s.gpu.efficiency;
  const LayerTimes shaped = s.gpu.shape_aware ? shape_aware_layer_times(s) : LayerTimes{};
  bool used_model = false;
  for (std::size_t l = 0; l < layers; ++l) {
    if (calibrated[l])
      continue;
    used_model = true;
    if (s.gpu.shape_aware) {
      w.fwd_s[l] = shaped.fwd_s[l];
      w.bwd_s[l] = shaped.bwd_s[l];
      continue;
    }
    const auto& layer = m.layers[l];
    const double peak = (runs_in_fp8(s, layer) ? s.gpu.fp8_flops : s.gpu.peak_flops) * s.gpu.efficiency;
    const double bytes = batch * (input_activation_bytes(m, l) + layer.activation_bytes) + layer_param_bytes(layer);
    const CastBytes cast = fp8_cast_bytes(s, l); // FP8's casts, memory-bound kernels beside the GEMM
    w.fwd_s[l] = std::max(batch * layer.fwd_flops / peak, bytes / bandwidth) + cast.forward / bandwidth;
    w.bwd_s[l] = std::max(batch * layer.bwd_flops / peak, 2 * bytes / bandwidth) + cast.backward / bandwidth;
  }
  w.update_s = s.gpu.memory_bandwidth > 0 ? kUpdateBytesPerParam * params / bandwidth : 0;
  const std::string model = s.gpu.shape_aware ? "shape-aware" : "roofline";
  if (used_model && s.gpu.shape_aware)
    out.note = shape_aware_note(s);
  else if (used_model)
    out.note = unused_gemm_note(s, "gpu.efficiency, peak_flops or memory_bandwidth is given (or no preset), so the "
                                   "roofline times the layers");
  else
    out.note = unused_gemm_note(s, "the calibration's layers time every layer");
  out.source = !used_model ? "calibration" : calibrated_any ? "calibration+" + model : model;
  return out;
}

} // namespace

} // namespace ddlsim::sim
