// PyTorch DDP gradient buckets, steady state (after the first iteration's bucket rebuild): parameters in the
// order their gradients become ready (reverse registration), a bucket closes as soon as its size reaches its
// limit, the first limit is dist._DEFAULT_FIRST_BUCKET_BYTES (1 MiB), then bucket_cap_mb (25 MiB).
// Source: torch/csrc/distributed/c10d/reducer.cpp, compute_bucket_assignment_by_size and rebuild_buckets.
#include "dag/strategy.hpp"

#include "core/json.hpp"

namespace ddlsim::dag {

std::vector<GradientGroup> ddp_buckets(const StrategyInput& in, const BucketOptions& buckets) {
  const auto tensors = flatten_tensors(in.model);
  const auto order = gradient_ready_order(in.model);
  std::vector<GradientGroup> groups;
  double limit = buckets.first_bucket_bytes;
  std::size_t first = 0;
  double bytes = 0;
  for (std::size_t k = 0; k < order.size(); ++k) {
    bytes += static_cast<double>(tensors[static_cast<std::size_t>(order[k])].numel) * in.bytes_per_element;
    if (bytes >= limit) {
      groups.push_back(make_group(in.model, tensors, order, first, k + 1, in.bytes_per_element));
      first = k + 1;
      bytes = 0;
      limit = buckets.bucket_cap_bytes;
    }
  }
  if (first < order.size())
    groups.push_back(make_group(in.model, tensors, order, first, order.size(), in.bytes_per_element));
  return groups;
}

BucketOptions parse_bucket_options(ObjectReader& r) {
  BucketOptions o;
  o.first_bucket_bytes = r.optional_quantity("first_bucket", Dimension::bytes, 0, true).value_or(o.first_bucket_bytes);
  o.bucket_cap_bytes = r.optional_quantity("bucket_cap", Dimension::bytes, 0, true).value_or(o.bucket_cap_bytes);
  return o;
}

namespace builtin {
extern constinit const StrategyInfo ddp{
    .name = "ddp",
    .description = "PyTorch DDP buckets: reverse order, first_bucket then bucket_cap",
    .family = StrategyFamily::buckets,
    .keys = kBucketKeys,
    .parse = [](ObjectReader& r, const StrategyContext&) -> StrategyOptions { return parse_bucket_options(r); },
    .plan = [](const StrategyInput& in) { return ddp_buckets(in, options_as<BucketOptions>(in.options)); },
};
} // namespace builtin

} // namespace ddlsim::dag
