// TernGrad (Wen, Xu, Yan, Wu, Wang, Chen, Li: "TernGrad: Ternary Gradients to Reduce Communication in Distributed
// Deep Learning", NeurIPS 2017): gradients clipped at 2.5 standard deviations, then stochastically ternarised to
// {-1, 0, 1} times a per-tensor scaler. Run per DDP bucket and allgathered, as PyTorch's quantisation comm hooks do.
#include "dag/strategy.hpp"

namespace ddlsim::dag {
namespace {
std::vector<GradientGroup> plan_terngrad(const StrategyInput& in) {
  return plan_quantised_buckets(in, Quantiser::terngrad);
}
} // namespace

namespace builtin {
extern constinit const StrategyInfo terngrad{
    .name = "terngrad",
    .description = "TernGrad: ternary gradients with a per-tensor scaler per DDP bucket, allgathered",
    .family = StrategyFamily::quantisation,
    .keys = kBucketKeys,
    .parse = &parse_quantised_bucket_options,
    .plan = &plan_terngrad,
};
} // namespace builtin

} // namespace ddlsim::dag
