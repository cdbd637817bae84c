// LAGS-SGD (Shi, Tang, Wang, Chu, Li, Zhou, Liu: "Layer-Wise Adaptive Gradient Sparsification for Distributed Deep
// Learning with Convergence Guarantees", ECAI 2020): every tensor is sparsified by itself at the density, as soon as
// its gradient is ready, and its k pairs allgathered while backward goes on, so selection and communication are
// pipelined with the backward pass. The price is one selection and one allgather start-up per tensor.
#include "dag/strategy.hpp"

namespace ddlsim::dag {
namespace {

std::vector<GradientGroup> plan_lags(const StrategyInput& in) {
  auto groups = one_group_per_tensor(in);
  for (auto& g : groups)
    sparsify_group(g, in, Collective::allgather);
  return groups;
}

} // namespace

namespace builtin {
extern constinit const StrategyInfo lags{
    .name = "lags",
    .description = "layer-wise top-k sparsification pipelined with backward (Shi et al., ECAI 2020)",
    .family = StrategyFamily::sparsification,
    .keys = kSparsificationKeys,
    .parse = &parse_sparsification_options,
    .plan = &plan_lags,
};
} // namespace builtin

} // namespace ddlsim::dag
