// OMGS-SGD (Shi, Wang, Chu, Li, Qian, Liu: "Communication-Efficient Distributed Deep Learning with Merged Gradient
// Sparsification on GPUs", INFOCOM 2020): LAGS pays a selection and an allgather start-up per tensor, Top-k of the
// whole gradient waits for the end of backward; OMGS merges consecutive tensors into groups, each sparsified as one
// buffer, so that the last group's communication finishes as early as possible. As for MG-WFBP (mgwfbp.cpp) we solve
// the merge problem exactly by dynamic programming over prefixes. A group of tensors [i, j) is selected when its last
// gradient is ready and goes on the wire when both its selection and the previous group's allgather are done:
//   F[j] = min_i max(F[i], r_j + d_i + s(i, j)) + c(i, j),
// with s the group's selection kernels, c the allgather of its k pairs per worker, r_j the backward finish of its last
// tensor, and d_i the delay that the selections of the tensors before it add to the backward pass, since they share
// the GPU with it: the part of their time that grows with the elements, which does not depend on how the prefix was
// grouped (the per-kernel costs, which do, are left out of d_i). The finish time grows with F[i], so optimal prefix
// plans compose (O(n^2)).
#include "dag/strategy.hpp"

#include <stdexcept>

namespace ddlsim::dag {
namespace {

std::vector<GradientGroup> plan_omgs(const StrategyInput& in) {
  if (!in.allgather_time)
    throw std::logic_error("omgs plans with the allgather's cost: StrategyInput::allgather_time is unset");
  const auto tensors = flatten_tensors(in.model);
  const auto order = gradient_ready_order(in.model);
  const auto finish = backward_finish_times(in.costs);
  const std::size_t n = order.size();
  if (n == 0)
    return {};
  std::vector<double> ready(n);
  std::vector<std::int64_t> prefix(n + 1, 0);
  for (std::size_t t = 0; t < n; ++t) {
    const auto& ref = tensors[static_cast<std::size_t>(order[t])];
    ready[t] = finish[static_cast<std::size_t>(ref.layer)];
    prefix[t + 1] = prefix[t] + ref.numel;
  }
  const double e = in.bytes_per_element;
  const auto& options = options_as<SparsificationOptions>(in.options);
  const SelectionCurve* curve = options.selection_curve ? &*options.selection_curve : nullptr;
  const double bw = in.costs.memory_bandwidth;
  std::vector<double> selection_delay(n + 1); // d_i, once per prefix rather than per candidate group
  for (std::size_t i = 0; i <= n; ++i) {
    const double m = static_cast<double>(prefix[i]);
    selection_delay[i] = compression_seconds(options.selection, curve, m, options.density * m, e, bw, true);
  }
  const auto group_time = [&](std::size_t i, std::size_t j, double after) {
    const std::int64_t m = prefix[j] - prefix[i];
    const std::int64_t k = selected_elements(m, options.density);
    const double select =
        compression_seconds(options.selection, curve, static_cast<double>(m), static_cast<double>(k), e, bw);
    const double comm = in.allgather_time(in.workers * static_cast<double>(k) * pair_bytes(e));
    return std::max(after, ready[j - 1] + selection_delay[i] + select) + comm;
  };
  auto groups = optimal_consecutive_groups(in.model, tensors, order, e, group_time);
  for (auto& g : groups)
    sparsify_group(g, in, Collective::allgather);
  return groups;
}

} // namespace

namespace builtin {
extern constinit const StrategyInfo omgs{
    .name = "omgs",
    .description = "optimal merging of layers for top-k sparsification (Shi et al., INFOCOM 2020)",
    .family = StrategyFamily::sparsification,
    .traits = {.group_search = GroupSearch::allgather},
    .keys = kSparsificationKeys,
    .parse = &parse_sparsification_options,
    .plan = &plan_omgs,
};
} // namespace builtin

} // namespace ddlsim::dag
