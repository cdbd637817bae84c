// MG-WFBP (Shi, Wang, Chu, Li: "MG-WFBP: Efficient Data Communication for Distributed Synchronous SGD
// Algorithms", INFOCOM 2019; Shi, Chu, Li, TPDS 2021): merge the gradients of consecutive layers so that the
// communication finishes as early as possible, given the backward times and the allreduce cost model. The paper
// derives a greedy merge rule optimal for a linear cost a + b*M. We solve the same problem exactly for any cost
// function the engine uses: with groups sent in order on one stream, the finish time F of a prefix only grows
// with the prefix's own finish time, so F[j] = min_i max(r_j, F[i]) + c(bytes(i+1..j)) is optimal: O(m^2) in
// general, O(m) for the affine costs of every closed form (optimal_merge, dag/strategy.hpp).
#include "dag/strategy.hpp"

namespace ddlsim::dag {
namespace {

std::vector<GradientGroup> plan_mgwfbp(const StrategyInput& in) {
  const auto tensors = flatten_tensors(in.model);
  const auto order = gradient_ready_order(in.model);
  const auto finish = backward_finish_times(in.costs);
  const std::size_t m = order.size();
  if (m == 0)
    return {};

  std::vector<double> ready(m), prefix_bytes(m + 1, 0);
  for (std::size_t k = 0; k < m; ++k) {
    const auto& t = tensors[static_cast<std::size_t>(order[k])];
    ready[k] = finish[static_cast<std::size_t>(t.layer)];
    prefix_bytes[k + 1] = prefix_bytes[k] + static_cast<double>(t.numel) * in.bytes_per_element;
  }
  return optimal_merge(in.model, tensors, order, in.bytes_per_element, ready, prefix_bytes, in.allreduce_time,
                       in.allreduce_affine);
}

} // namespace

namespace builtin {
extern constinit const StrategyInfo mgwfbp{
    .name = "mg-wfbp",
    .description = "MG-WFBP optimal merging of consecutive gradients (Shi et al., INFOCOM 2019)",
    .family = StrategyFamily::dense,
    .traits = {.group_search = GroupSearch::allreduce},
    .plan = &plan_mgwfbp,
};
} // namespace builtin

} // namespace ddlsim::dag
