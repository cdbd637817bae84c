// signSGD with majority vote (Bernstein, Zhao, Azizzadenesheli, Anandkumar, ICLR 2019): every worker sends the sign
// of each gradient element (1 bit) and a per-tensor scale; signs do not add, so they are allgathered and every worker
// takes the majority (the sign of their sum). Run per DDP bucket.
#include "dag/strategy.hpp"

namespace ddlsim::dag {
namespace {
std::vector<GradientGroup> plan_signsgd(const StrategyInput& in) {
  return plan_quantised_buckets(in, Quantiser::signsgd);
}
} // namespace

namespace builtin {
extern constinit const StrategyInfo signsgd{
    .name = "signsgd",
    .description = "signSGD: 1-bit signs per DDP bucket, allgathered, majority vote (Bernstein et al., ICLR 2019)",
    .family = StrategyFamily::quantisation,
    .keys = kBucketKeys,
    .parse = &parse_quantised_bucket_options,
    .plan = &plan_signsgd,
};
} // namespace builtin

} // namespace ddlsim::dag
