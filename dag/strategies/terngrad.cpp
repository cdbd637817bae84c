// TernGrad (Wen, Xu, Yan, Wu, Wang, Chen, Li: "TernGrad: Ternary Gradients to Reduce Communication in Distributed
// Deep Learning", NeurIPS 2017): gradients clipped at 2.5 standard deviations, then stochastically ternarised to
// {-1, 0, 1} times a per-tensor scaler. Run per DDP bucket and allgathered, as PyTorch's quantisation comm hooks do.
#include "dag/strategy.hpp"

#include "core/json.hpp"

namespace ddlsim::dag {
namespace {

StrategyOptions parse(ObjectReader& r, const StrategyContext& ctx) {
  QuantisationOptions o;
  o.buckets = parse_bucket_options(r);
  require_memory_bandwidth(r, ctx);
  return o;
}

std::vector<GradientGroup> plan(const StrategyInput& in) {
  auto groups = ddp_buckets(in, options_as<QuantisationOptions>(in.options).buckets);
  for (auto& g : groups)
    quantise_group(g, in, Quantiser::terngrad);
  return groups;
}

} // namespace

namespace builtin {
extern constinit const StrategyInfo terngrad{
    .name = "terngrad",
    .description = "TernGrad: ternary gradients with a per-tensor scaler per DDP bucket, allgathered",
    .family = StrategyFamily::quantisation,
    .keys = kBucketKeys,
    .parse = &parse,
    .plan = &plan,
};
} // namespace builtin

} // namespace ddlsim::dag
