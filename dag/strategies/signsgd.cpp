// signSGD with majority vote (Bernstein, Zhao, Azizzadenesheli, Anandkumar, ICLR 2019): every worker sends the sign
// of each gradient element (1 bit) and a per-tensor scale; signs do not add, so they are allgathered and every worker
// takes the majority (the sign of their sum). Run per DDP bucket.
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
    quantise_group(g, in, Quantiser::signsgd);
  return groups;
}

} // namespace

namespace builtin {
extern constinit const StrategyInfo signsgd{
    .name = "signsgd",
    .description = "signSGD: 1-bit signs per DDP bucket, allgathered, majority vote (Bernstein et al., ICLR 2019)",
    .family = StrategyFamily::quantisation,
    .keys = kBucketKeys,
    .parse = &parse,
    .plan = &plan,
};
} // namespace builtin

} // namespace ddlsim::dag
