// BSP: all gradients are averaged by one allreduce after the whole backward pass (no overlap).
#include "dag/strategy.hpp"

namespace ddlsim::dag {

std::vector<GradientGroup> one_group_after_backward(const StrategyInput& in) {
  const auto tensors = flatten_tensors(in.model);
  if (tensors.empty())
    return {};
  const auto order = gradient_ready_order(in.model);
  auto group = make_group(in.model, tensors, order, 0, order.size(), in.bytes_per_element);
  group.ready_layer = 0; // after the last backward, even if the first layer has no parameters
  return {group};
}

namespace builtin {
extern constinit const StrategyInfo bsp{
    .name = "bsp",
    .description = "one allreduce of all gradients after the backward pass",
    .family = StrategyFamily::dense,
    .plan = &one_group_after_backward,
};
} // namespace builtin

} // namespace ddlsim::dag
