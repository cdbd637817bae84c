// WFBP (wait-free backpropagation, Zhang et al., Poseidon, USENIX ATC 2017): each tensor's gradient is
// allreduced as soon as its layer's backward finishes, paying the start-up cost once per tensor.
#include "dag/strategy.hpp"

namespace ddlsim::dag {

std::vector<GradientGroup> one_group_per_tensor(const StrategyInput& in) {
  const auto tensors = flatten_tensors(in.model);
  const auto order = gradient_ready_order(in.model);
  std::vector<GradientGroup> groups;
  groups.reserve(order.size());
  for (std::size_t k = 0; k < order.size(); ++k)
    groups.push_back(make_group(in.model, tensors, order, k, k + 1, in.bytes_per_element));
  return groups;
}

namespace builtin {
extern constinit const StrategyInfo wfbp{
    .name = "wfbp",
    .description = "wait-free backpropagation: one allreduce per tensor as soon as it is ready",
    .family = StrategyFamily::dense,
    .plan = &one_group_per_tensor,
};
} // namespace builtin

} // namespace ddlsim::dag
