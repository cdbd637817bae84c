// Parsing of `variability` (sim/spec/variability.hpp): every key checked, every error naming its JSON path.
#include "sim/spec/variability.hpp"

#include "core/error.hpp"
#include "core/units.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ddlsim::sim {
namespace {

TimeDistribution parse_distribution(ObjectReader r, const std::vector<double>& measured_steps) {
  TimeDistribution d;
  const auto kind = r.choice("distribution", {kDistributionNames.begin(), kDistributionNames.end()});
  using Kind = TimeDistribution::Kind;
  d.kind = static_cast<Kind>(std::find(kDistributionNames.begin(), kDistributionNames.end(), kind) -
                             kDistributionNames.begin()); // kDistributionNames is in Kind's order
  // A normal factor is cut at 0 (a task never takes negative time), which raises its mean by cv phi(1/cv) - ...:
  // less than 1e-6 for cv <= 0.2, 0.3 % at cv = 0.5, 8 % at cv = 1; the lognormal has no such bias.
  if (d.kind == Kind::normal)
    d.cv = r.number("cv", 0, 1);
  if (d.kind == Kind::lognormal) {
    d.cv = r.number("cv", 0, 10);
    d.log_sd = std::sqrt(std::log1p(d.cv * d.cv));
    d.log_mean = -0.5 * d.log_sd * d.log_sd;
  }
  if (d.kind == Kind::exponential)
    d.mean_s = r.quantity("mean", Dimension::time);
  if (d.kind == Kind::empirical) {
    const Json& samples = r.required("samples");
    const auto at = r.path("samples");
    if (samples == "measured") { // the measured steps (measured.steps, written by import-trace)
      if (measured_steps.empty())
        throw InputError(
            r.file(), at,
            "\"measured\" takes the scenario's measured.steps, which it does not have (ddlsim import-trace "
            "writes them); give the times instead");
      d.factors = measured_steps;
    } else
      d.factors = parse_times_at(samples, r.file(), at, "\"measured\" or ");
    const double mean =
        std::accumulate(d.factors.begin(), d.factors.end(), 0.0) / static_cast<double>(d.factors.size());
    for (double& f : d.factors)
      f /= mean;
  }
  const auto per = r.optional_choice("per", {"task", "iteration"});
  if (per && d.kind == Kind::exponential)
    r.fail("per", "an exponential delay is drawn once per worker and iteration; 'per' applies to the factors of "
                  "normal, lognormal and empirical");
  d.per_task = per ? *per == "task" : d.kind != Kind::empirical;
  r.finish();
  return d;
}

} // namespace

std::vector<double> parse_times_at(const Json& value, const std::string& file, const std::string& pointer,
                                   std::string_view alternative) {
  if (!value.is_array() || value.empty() || value.size() > 1'000'000)
    throw InputError(
        file, pointer,
        fmt::format("expected {}an array of 1 to 1,000,000 times, e.g. [\"152.1 ms\", \"149.8 ms\"]", alternative));
  std::vector<double> times;
  times.reserve(value.size());
  for (std::size_t i = 0; i < value.size(); ++i)
    times.push_back(parse_quantity_at(value[i], Dimension::time, file, json_pointer_append(pointer, i), 0, true));
  return times;
}

VariabilitySpec parse_variability(ObjectReader r, const std::vector<double>& measured_steps) {
  VariabilitySpec v;
  bool any = false;
  for (std::size_t c = 0; c < kVariedClassNames.size(); ++c)
    if (auto o = r.optional_object(kVariedClassNames[c])) {
      v.by_class[c] = parse_distribution(std::move(*o), measured_steps);
      any = true;
    }
  if (!any)
    r.fail_here(fmt::format("gives no distribution: add one of '{}' (e.g. \"compute\": {{\"distribution\": "
                            "\"exponential\", \"mean\": \"10 ms\"}}), or leave 'variability' out",
                            fmt::join(kVariedClassNames, "', '")));
  v.iterations = static_cast<int>(r.optional_integer("iterations", 1, kMaxVariabilityIterations).value_or(1000));
  v.seed =
      static_cast<std::uint64_t>(r.optional_integer("seed", 0, std::numeric_limits<std::int64_t>::max()).value_or(1));
  r.finish();
  return v;
}

} // namespace ddlsim::sim
