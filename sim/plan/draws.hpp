// Draws of task times around their modelled values (docs/variability.md), shared by the analytic engine's Monte Carlo
// over iterations (sim/analytic/monte_carlo.hpp), ps-ssp's replay of the workers (sim/analytic/ps_ssp.hpp) and the flow
// engine's sampled iterations. Uniforms from std::mt19937_64 (its sequence is fixed by the C++ standard), normals from
// Boost.Random's ziggurat, exponentials by inversion: a seed gives the same draws on every run and machine.
#pragma once

#include "dag/graph.hpp"
#include "sim/plan/result.hpp"
#include "sim/plan/schedule.hpp"
#include "sim/spec/scenario.hpp"
#include "sim/spec/variability.hpp"

#include <boost/random/normal_distribution.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
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
  if (dag::collective_of(t) != dag::Collective::none)
    return static_cast<int>(VariedClass::communication);
  if (slowed_by_communication(t))
    return static_cast<int>(VariedClass::compute);
  if (t.kind == dag::TaskKind::data_load)
    return static_cast<int>(VariedClass::data_loading);
  return -1;
}

/// What every copy of every task of a graph draws, sample after sample. Per task (fixed): its distribution (by its
/// VariedClass), where its factor comes from (a draw of its own, its device's draw for the iteration, the network's
/// for the iteration) and its (device, iteration, class) group, whose first task (in `order`) takes the group's
/// exponential delay. Per sample (next_sample): every copy's group factors and delays, copy-major, then the network's
/// factor per iteration; the per-task factors are drawn as the copies are timed (factor), so that engines that time
/// the tasks in `order`, copy after copy, draw the same numbers.
class CopyDraws {
public:
  CopyDraws(const dag::IterationGraph& g, const std::vector<std::size_t>& order, const VariabilitySpec& spec,
            std::size_t copies);
  /// Draws the sample's group factors and delays and the network's factors.
  void next_sample(Draws& draws);
  /// Whether task v is varied at all (else factor() is 1 and delay() 0).
  [[nodiscard]] bool varied(std::size_t v) const { return tasks_[v].dist != nullptr; }
  /// Copy c's factor on task v's time (a per-task draw consumes the generator).
  double factor(std::size_t v, std::size_t c, Draws& draws) const {
    const auto& t = tasks_[v];
    switch (t.source) {
    case Source::per_task:
      return draws.factor(*t.dist);
    case Source::group:
      return group_factor_[c * group_count_ + static_cast<std::size_t>(t.group)];
    case Source::network:
      return network_factor_[static_cast<std::size_t>(t.iteration)];
    case Source::none:
      break;
    }
    return 1.0;
  }
  /// Copy c's delay before task v (its group's exponential delay, on the group's first task; else 0).
  [[nodiscard]] double delay(std::size_t v, std::size_t c) const {
    const auto& t = tasks_[v];
    return t.first ? group_delay_[c * group_count_ + static_cast<std::size_t>(t.group)] : 0.0;
  }
  /// Factors drawn per sample for per-task distributions, counting a shared collective's instance once per copy
  /// (an upper bound, for the cost estimates).
  [[nodiscard]] double per_task_draws() const { return per_task_draws_; }

private:
  enum class Source : std::uint8_t { none, per_task, group, network };
  struct Task {
    const TimeDistribution* dist = nullptr;
    Source source = Source::none;
    int group = -1;
    bool first = false;
    int iteration = 0;
  };
  const VariabilitySpec& spec_;
  std::size_t copies_;
  std::vector<Task> tasks_;
  std::vector<int> group_class_;
  std::size_t group_count_ = 0;
  std::vector<double> group_factor_, group_delay_, network_factor_;
  double per_task_draws_ = 0;
};

/// Factors drawn per sample for per-task distributions over `copies` copies of `g`, counting a shared collective's
/// instance once per copy (an upper bound, for the cost estimates): CopyDraws::per_task_draws.
[[nodiscard]] double per_task_draw_count(const dag::IterationGraph& g, const VariabilitySpec& spec, std::size_t copies);

/// A sampled iteration's window [from, to], read off the latest end of every task's copies (end_max, by task id of
/// `g`, in any time origin) as finalize reads the deterministic timeline over the plan's `window`.
[[nodiscard]] std::pair<double, double> sampled_window(const dag::IterationGraph& g, const IterationWindow& window,
                                                       const std::vector<double>& end_max);

/// Refuses (InputError at /variability) what sampled iterations cannot replay on either engine: priority scheduling
/// under a credit (it reorders transfers at run time) and compute slowed beside communication.
void check_samplable(const Scenario& s, const dag::IterationGraph& g);

/// Sums a sample's breakdown into `sum`.
void add_breakdown(Breakdown& sum, const Breakdown& b);

/// Writes the samples (r.variability->iteration_s, with its iterations, seed, copies and deterministic_s set) into
/// `r`: the mean iteration, its percentiles, throughput and efficiency scaled to it, the breakdown (`sum` over the
/// samples, averaged), and a note naming the draws; `timed` says what each sample timed.
void record_samples(const VariabilitySpec& spec, RunResult& r, const Breakdown& sum, const std::string& timed);

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
