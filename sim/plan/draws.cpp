// The draws of a graph's task copies (draws.hpp).
#include "sim/plan/draws.hpp"

#include "core/error.hpp"
#include "core/units.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <numeric>
#include <tuple>

namespace ddlsim::sim {

CopyDraws::CopyDraws(const dag::IterationGraph& g, const std::vector<std::size_t>& order, const VariabilitySpec& spec,
                     std::size_t copies)
    : spec_(spec), copies_(copies), tasks_(g.size()) {
  const auto devices = g.devices();
  std::map<std::tuple<std::size_t, int, int>, int> groups;
  int iterations = 1;
  for (std::size_t v : order) {
    const auto& t = g.task(v);
    iterations = std::max(iterations, t.iteration + 1);
    const int cls = varied_class_of(t);
    if (cls < 0 || !spec.by_class[static_cast<std::size_t>(cls)])
      continue;
    auto& p = tasks_[v];
    p.dist = &*spec.by_class[static_cast<std::size_t>(cls)];
    p.iteration = t.iteration;
    p.source = p.dist->kind == TimeDistribution::Kind::exponential   ? Source::none
               : p.dist->per_task                                    ? Source::per_task
               : cls == static_cast<int>(VariedClass::communication) ? Source::network
                                                                     : Source::group;
    const auto device =
        static_cast<std::size_t>(std::lower_bound(devices.begin(), devices.end(), t.device) - devices.begin());
    const auto [it, inserted] = groups.try_emplace({device, t.iteration, cls}, static_cast<int>(group_class_.size()));
    if (inserted)
      group_class_.push_back(cls);
    p.group = it->second;
    p.first = inserted;
  }
  group_count_ = group_class_.size();
  per_task_draws_ = per_task_draw_count(g, spec, copies);
  group_factor_.assign(copies * group_count_, 1.0);
  group_delay_.assign(copies * group_count_, 0.0);
  network_factor_.assign(static_cast<std::size_t>(iterations), 1.0);
}

void CopyDraws::next_sample(Draws& draws) {
  for (std::size_t c = 0; c < copies_; ++c)
    for (std::size_t k = 0; k < group_count_; ++k) {
      const auto& d = *spec_.by_class[static_cast<std::size_t>(group_class_[k])];
      const bool exponential = d.kind == TimeDistribution::Kind::exponential;
      group_delay_[c * group_count_ + k] = exponential ? draws.exponential(d.mean_s) : 0.0;
      group_factor_[c * group_count_ + k] = !exponential && !d.per_task ? draws.factor(d) : 1.0;
    }
  if (const auto& comm = spec_.of(VariedClass::communication);
      comm && !comm->per_task && comm->kind != TimeDistribution::Kind::exponential)
    for (auto& f : network_factor_)
      f = draws.factor(*comm);
}

std::pair<double, double> sampled_window(const dag::IterationGraph& g, const IterationWindow& window,
                                         const std::vector<double>& end_max) {
  switch (window.kind) {
  case IterationWindow::Kind::makespan:
    return {0.0, end_max.empty() ? 0.0 : *std::max_element(end_max.begin(), end_max.end())};
  case IterationWindow::Kind::between_tasks:
    return {end_max[window.from_task], end_max[window.to_task]};
  case IterationWindow::Kind::between_iterations: {
    const auto ends = iteration_ends(g, end_max);
    return {ends[ends.size() - 2], ends.back()};
  }
  }
  return {0.0, 0.0};
}

double per_task_draw_count(const dag::IterationGraph& g, const VariabilitySpec& spec, std::size_t copies) {
  double count = 0;
  for (std::size_t v = 0; v < g.size(); ++v) {
    const auto& t = g.task(v);
    const int cls = varied_class_of(t);
    if (cls < 0)
      continue;
    const auto& dist = spec.by_class[static_cast<std::size_t>(cls)];
    if (dist && dist->kind != TimeDistribution::Kind::exponential && dist->per_task)
      count += dag::collective_of(t) != dag::Collective::none ? 1.0 : static_cast<double>(copies);
  }
  return count;
}

void check_samplable(const Scenario& s, const dag::IterationGraph& g) {
  if (g.priority_credit() > 0)
    throw InputError(s.file, "/variability",
                     fmt::format("is not sampled for '{}': its priority scheduling under a credit reorders "
                                 "transfers at run time; leave 'variability' out",
                                 s.strategy.kind()));
  if (const auto slowdown = comm_slowdown(s); slowdown.factor > 0)
    throw InputError(s.file, "/variability",
                     fmt::format("is not sampled with a compute slowdown beside communication ({}): set "
                                 "gpu.comm_slowdown to 0 or leave 'variability' out",
                                 slowdown.source));
}

void add_breakdown(Breakdown& sum, const Breakdown& b) {
  sum.compute_s += b.compute_s;
  sum.compression_s += b.compression_s;
  sum.exposed_communication_s += b.exposed_communication_s;
  sum.idle_s += b.idle_s;
}

void record_samples(const VariabilitySpec& spec, RunResult& r, const Breakdown& sum, const std::string& timed) {
  auto& report = *r.variability;
  const auto count = static_cast<double>(report.iteration_s.size());
  const double mean = std::accumulate(report.iteration_s.begin(), report.iteration_s.end(), 0.0) / count;
  set_percentiles(report.iteration_s, report);
  // Throughput and efficiency follow the mean iteration (they already count the backup workers' dropped samples).
  const double scale = r.iteration_time_s > 0 ? r.iteration_time_s / mean : 1.0;
  r.throughput_samples_per_s *= scale;
  r.scaling_efficiency *= scale;
  r.iteration_time_s = mean;
  r.breakdown = {sum.compute_s / count, sum.compression_s / count, sum.exposed_communication_s / count,
                 sum.idle_s / count};
  std::vector<std::string> drawn;
  for (std::size_t c = 0; c < kVariedClassNames.size(); ++c)
    if (const auto& d = spec.by_class[c]) {
      using Kind = TimeDistribution::Kind;
      std::string what =
          d->kind == Kind::exponential ? fmt::format("+ Exp(mean {}) per worker and iteration", format_time(d->mean_s))
          : d->kind == Kind::empirical
              ? fmt::format("x one of {} empirical factors", d->factors.size())
              : fmt::format("x {}(mean 1, cv {})", kDistributionNames[static_cast<std::size_t>(d->kind)], d->cv);
      if (d->kind != Kind::exponential)
        what += d->per_task ? " per task" : " per worker and iteration";
      drawn.push_back(fmt::format("{} {}", kVariedClassNames[c], what));
    }
  r.notes.push_back(fmt::format(
      "variability: {} sampled iterations (seed {}), each timing {} with its own draws ({}); "
      "iteration_time_s is their mean (p50 {}, p99 {}; without variability {}), the breakdown copy 0's mean; "
      "tasks.csv and the timeline show the deterministic iteration",
      report.iteration_s.size(), spec.seed, timed, fmt::join(drawn, "; "), format_time(report.p50_s),
      format_time(report.p99_s), format_time(report.deterministic_s)));
}

} // namespace ddlsim::sim
