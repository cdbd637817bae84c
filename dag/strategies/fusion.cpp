// Horovod tensor fusion: a background loop wakes every cycle_time, takes the tensors whose gradients are ready,
// in order, and packs them into fusion buffers of at most `threshold` bytes, one allreduce per buffer; a tensor
// larger than the threshold goes alone, threshold 0 disables fusion. Defaults from Horovod 0.21 (#2468):
// cycle 1 ms, threshold 128 MiB. Source: horovod docs/tensor-fusion.rst. Cycles are aligned with backward start.
#include "dag/strategy.hpp"

#include "core/json.hpp"

#include <cmath>

namespace ddlsim::dag {
namespace {

constexpr std::string_view kFusionKeys[] = {"threshold", "cycle_time"};

StrategyOptions parse_fusion_options(ObjectReader& r, const StrategyContext&) {
  FusionOptions o;
  o.threshold_bytes = r.optional_quantity("threshold", Dimension::bytes).value_or(o.threshold_bytes);
  o.cycle_time_s = r.optional_quantity("cycle_time", Dimension::time).value_or(o.cycle_time_s);
  return o;
}

std::vector<GradientGroup> plan_fusion(const StrategyInput& in) {
  const auto tensors = flatten_tensors(in.model);
  const auto order = gradient_ready_order(in.model);
  const auto finish = backward_finish_times(in.costs);
  const auto& options = options_as<FusionOptions>(in.options);
  const double cycle = options.cycle_time_s;
  const double threshold = options.threshold_bytes;
  auto tick_of = [&](std::size_t k) {
    const double ready = finish[static_cast<std::size_t>(tensors[static_cast<std::size_t>(order[k])].layer)];
    return cycle > 0 ? std::ceil(ready / cycle) * cycle : ready;
  };

  std::vector<GradientGroup> groups;
  std::size_t first = 0;
  double bytes = 0;
  auto close = [&](std::size_t last) {
    auto g = make_group(in.model, tensors, order, first, last, in.bytes_per_element);
    g.launch_delay_s = tick_of(last - 1) - finish[static_cast<std::size_t>(g.ready_layer)];
    groups.push_back(std::move(g));
    first = last;
    bytes = 0;
  };
  for (std::size_t k = 0; k < order.size(); ++k) {
    const double b = static_cast<double>(tensors[static_cast<std::size_t>(order[k])].numel) * in.bytes_per_element;
    if (k > first && (tick_of(k) != tick_of(first) || bytes + b > threshold))
      close(k);
    bytes += b;
  }
  if (first < order.size())
    close(order.size());
  return groups;
}

} // namespace

namespace builtin {
extern constinit const StrategyInfo fusion{
    .name = "fusion",
    .description = "Horovod tensor fusion: ready tensors packed up to threshold every cycle_time",
    .family = StrategyFamily::fusion,
    .keys = kFusionKeys,
    .parse = &parse_fusion_options,
    .plan = &plan_fusion,
};
} // namespace builtin

} // namespace ddlsim::dag
