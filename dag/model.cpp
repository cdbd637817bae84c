// The per-GPU workload of one training iteration: totals over a model's layers (see model.hpp).
#include "dag/model.hpp"

namespace ddlsim::dag {

double dtype_bytes(DType d) {
  return d == DType::fp32 ? 4.0 : 2.0;
}

std::int64_t Model::param_count() const {
  std::int64_t total = 0;
  for (const Layer& layer : layers) {
    for (const ParamTensor& tensor : layer.params) {
      total += tensor.numel;
    }
  }
  return total;
}

std::size_t Model::tensor_count() const {
  std::size_t total = 0;
  for (const Layer& layer : layers) {
    total += layer.params.size();
  }
  return total;
}

double Model::fwd_flops_per_sample() const {
  double total = 0;
  for (const Layer& layer : layers) {
    total += layer.fwd_flops;
  }
  return total;
}

} // namespace ddlsim::dag
