// `variability`: task times drawn around their modelled values, for Monte Carlo over iterations (issue #16,
// docs/variability.md). Per class of task (compute, data loading, communication) a distribution: a multiplicative
// factor of mean 1 (normal, lognormal, empirical) or an additive straggler delay (exponential), as in Chen et al.,
// "Revisiting Distributed Synchronous SGD" (arXiv:1604.00981), whose backup workers the strategy's `backup_workers`
// adds.
#pragma once

#include "core/json.hpp"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ddlsim::sim {

/// The classes of task a distribution applies to, in the order of VariabilitySpec::by_class.
enum class VariedClass : std::uint8_t { compute, data_loading, communication };
inline constexpr std::array<std::string_view, 3> kVariedClassNames{"compute", "data_loading", "communication"};

struct TimeDistribution {
  enum class Kind : std::uint8_t { normal, lognormal, exponential, empirical };
  Kind kind = Kind::normal;
  /// normal, lognormal, empirical: a factor drawn per task (true), or once per worker and iteration for all its tasks
  /// of the class (false). exponential: always one delay per worker (GPU) and iteration.
  bool per_task = true;
  double cv = 0;               ///< normal, lognormal: coefficient of variation of the factor (mean 1)
  double log_mean = 0;         ///< lognormal: mean of the factor's log, -log_sd^2 / 2
  double log_sd = 0;           ///< lognormal: sd of the factor's log, sqrt(ln(1 + cv^2))
  double mean_s = 0;           ///< exponential: the delay's mean
  std::vector<double> factors; ///< empirical: the samples divided by their mean
};

inline constexpr std::array<std::string_view, 4> kDistributionNames{"normal", "lognormal", "exponential", "empirical"};

struct VariabilitySpec {
  std::array<std::optional<TimeDistribution>, 3> by_class; ///< by VariedClass
  int iterations = 1000;                                   ///< sampled iterations
  std::uint64_t seed = 1;
  [[nodiscard]] const std::optional<TimeDistribution>& of(VariedClass c) const {
    return by_class[static_cast<std::size_t>(c)];
  }
};

/// The most iterations one run samples.
inline constexpr int kMaxVariabilityIterations = 1'000'000;

/// An array of 1 to 1,000,000 positive times at `pointer` (`variability`'s empirical samples, `measured.steps`), in
/// seconds; `alternative` names what else the key accepts, for the message ("" when nothing).
[[nodiscard]] std::vector<double> parse_times_at(const Json& value, const std::string& file, const std::string& pointer,
                                                 std::string_view alternative = "");

/// Parses the `variability` object (r at its pointer); throws InputError naming the path. `measured_steps`: the
/// scenario's `measured.steps`, which an empirical distribution takes with `"samples": "measured"`.
[[nodiscard]] VariabilitySpec parse_variability(ObjectReader r, const std::vector<double>& measured_steps = {});

} // namespace ddlsim::sim
