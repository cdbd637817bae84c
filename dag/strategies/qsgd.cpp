// QSGD (Alistarh, Grubic, Li, Tomioka, Vojnovic: "QSGD: Communication-Efficient SGD via Gradient Quantization and
// Encoding", NeurIPS 2017): each bucket of 512 elements is scaled by its norm and stochastically rounded to one of
// s levels (strategy.levels). Run per DDP bucket, as PyTorch's quantisation comm hooks run, and allgathered
// (compression.hpp gives the wire format and the kernels).
#include "dag/strategy.hpp"

#include "core/json.hpp"

namespace ddlsim::dag {
namespace {

constexpr std::string_view kQsgdKeys[] = {"first_bucket", "bucket_cap", "levels"};

StrategyOptions parse_qsgd_options(ObjectReader& r, const StrategyContext& ctx) {
  QuantisationOptions o;
  o.buckets = parse_bucket_options(r);
  o.levels = static_cast<int>(r.optional_integer("levels", 1, 1 << 30).value_or(127)); // 8 bits per element
  require_memory_bandwidth(r, ctx);
  return o;
}

std::vector<GradientGroup> plan_qsgd(const StrategyInput& in) {
  return plan_quantised_buckets(in, Quantiser::qsgd);
}

} // namespace

namespace builtin {
extern constinit const StrategyInfo qsgd{
    .name = "qsgd",
    .description = "QSGD stochastic quantisation to strategy.levels levels per DDP bucket, allgathered",
    .family = StrategyFamily::quantisation,
    .keys = kQsgdKeys,
    .parse = &parse_qsgd_options,
    .plan = &plan_qsgd,
};
} // namespace builtin

} // namespace ddlsim::dag
