// Draws of task times around their modelled values (docs/variability.md), shared by the Monte Carlo over iterations
// (monte_carlo.hpp) and ps-ssp's replay of the workers (ps_ssp.hpp). Uniforms from std::mt19937_64 (its sequence is
// fixed by the C++ standard), normals from Boost.Random's ziggurat, exponentials by inversion: a seed gives the same
// draws on every run and machine.
#pragma once

#include "dag/graph.hpp"
#include "sim/plan/result.hpp"
#include "sim/plan/schedule.hpp"
#include "sim/spec/variability.hpp"

#include <boost/random/normal_distribution.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace ddlsim::sim {

class Draws {
public:
  explicit Draws(std::uint64_t seed) : engine_(seed) {}
  /// Uniform in (0, 1].
  double uniform() { return (static_cast<double>(engine_() >> 11) + 1.0) * 0x1.0p-53; }
  /// Boost.Random's ziggurat (Marsaglia & Tsang, J. Stat. Softw. 5(8), 2000; Doornik's correction): a fixed algorithm,
  /// so a seed gives the same normals everywhere.
  double standard_normal() { return normal_(engine_); }
  double exponential(double mean) { return -mean * std::log(uniform()); }
  /// A factor of mean 1 (normal, lognormal, empirical).
  double factor(const TimeDistribution& d) {
    using Kind = TimeDistribution::Kind;
    switch (d.kind) {
    case Kind::normal:
      return std::max(0.0, 1.0 + d.cv * standard_normal());
    case Kind::lognormal:
      return std::exp(d.log_mean + d.log_sd * standard_normal());
    case Kind::empirical:
      return d.factors[static_cast<std::size_t>(uniform() * static_cast<double>(d.factors.size())) % d.factors.size()];
    case Kind::exponential:
      break;
    }
    return 1.0;
  }

private:
  std::mt19937_64 engine_;
  boost::random::normal_distribution<double> normal_;
};

/// The VariedClass of a task (communication, compute, data loading), or -1: never varied.
inline int varied_class_of(const dag::Task& t) {
  if (t.collective != dag::Collective::none)
    return static_cast<int>(VariedClass::communication);
  if (slowed_by_communication(t))
    return static_cast<int>(VariedClass::compute);
  if (t.kind == dag::TaskKind::data_load)
    return static_cast<int>(VariedClass::data_loading);
  return -1;
}

/// Linear interpolation between order statistics (numpy's default, Hyndman & Fan type 7) of a sorted, non-empty
/// sample.
inline double percentile(const std::vector<double>& sorted, double q) {
  const double at = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(at));
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (at - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

/// p50, p90 and p99 of `samples` into `report` (sorted on the way).
inline void set_percentiles(std::vector<double> samples, VariabilityReport& report) {
  std::sort(samples.begin(), samples.end());
  report.p50_s = percentile(samples, 0.50);
  report.p90_s = percentile(samples, 0.90);
  report.p99_s = percentile(samples, 0.99);
}

} // namespace ddlsim::sim
