// FP8 layers and their casts (layer_costs.hpp).
#include "sim/plan/layer_costs.hpp"

namespace ddlsim::sim {

double input_activation_bytes(const dag::Model& m, std::size_t l) {
  if (m.layers[l].inputs.empty())
    return l == 0 ? m.input_bytes_per_sample : m.layers[l - 1].activation_bytes;
  double sum = 0;
  for (int i : m.layers[l].inputs)
    sum += m.layers[static_cast<std::size_t>(i)].activation_bytes;
  return sum;
}

bool runs_in_fp8(const Scenario& s, const dag::Layer& layer) {
  return s.compute_dtype == ComputeDtype::fp8 && layer.kind == "linear" && layer.block >= 0;
}

CastBytes fp8_cast_bytes(const Scenario& s, std::size_t l) {
  const auto& layer = s.model.layers[l];
  if (!runs_in_fp8(s, layer))
    return {};
  double weights = 0;
  for (const auto& p : layer.params)
    weights += static_cast<double>(p.numel);
  // elements: the input and output activations (fp32 bytes / 4 in the model) per sample, the weights once per pass
  const double in = input_activation_bytes(s.model, l) / 4.0, out = layer.activation_bytes / 4.0, b = s.batch_per_gpu;
  return {.forward = kFp8CastBytesPerElement * (b * in + weights), .backward = kFp8CastBytesPerElement * b * out};
}

} // namespace ddlsim::sim
