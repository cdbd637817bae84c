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

double TransformerSpec::block_matmul_params() const {
  const double h = hidden, kv = static_cast<double>(query_groups()) * head_dim();
  const double projections = 2 * h * h + 2 * h * kv;
  return projections + (mlp == Mlp::swiglu ? 3.0 : 2.0) * h * ffn();
}

double Model::fwd_flops_per_sample() const {
  double total = 0;
  for (const Layer& layer : layers) {
    total += layer.fwd_flops;
  }
  return total;
}

} // namespace ddlsim::dag
