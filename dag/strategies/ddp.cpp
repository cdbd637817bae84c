// PyTorch DDP gradient buckets, steady state (after the first iteration's bucket rebuild): parameters in the
// order their gradients become ready (reverse registration), a bucket closes as soon as its size reaches its
// limit, the first limit is dist._DEFAULT_FIRST_BUCKET_BYTES (1 MiB), then bucket_cap_mb (25 MiB).
// Source: torch/csrc/distributed/c10d/reducer.cpp, compute_bucket_assignment_by_size and rebuild_buckets.
#include "dag/strategy.hpp"

namespace ddlsim::dag {

std::vector<GradientGroup> plan_ddp(const StrategyInput& in) {
  const auto tensors = flatten_tensors(in.model);
  const auto order = gradient_ready_order(in.model);
  std::vector<GradientGroup> groups;
  double limit = in.options.first_bucket_bytes;
  std::size_t first = 0;
  double bytes = 0;
  for (std::size_t k = 0; k < order.size(); ++k) {
    bytes += static_cast<double>(tensors[static_cast<std::size_t>(order[k])].numel) * in.bytes_per_element;
    if (bytes >= limit) {
      groups.push_back(make_group(in.model, tensors, order, first, k + 1, in.bytes_per_element));
      first = k + 1;
      bytes = 0;
      limit = in.options.bucket_cap_bytes;
    }
  }
  if (first < order.size())
    groups.push_back(make_group(in.model, tensors, order, first, order.size(), in.bytes_per_element));
  return groups;
}

} // namespace ddlsim::dag
