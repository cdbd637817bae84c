// Monte Carlo over iterations (sim/analytic/monte_carlo.hpp). Per sample, tasks in a topological order of the
// dependencies plus each stream's order in the deterministic schedule (with_stream_order), every copy at once: a
// task's copies start when their predecessors' copies have ended; a collective's instance starts when its members are
// ready (the (d - b)-th of a data-parallel group with b backup workers) and all its members end together.
// Draws (docs/variability.md): a factor of mean 1 per task (normal cut at 0, lognormal) or per worker and iteration
// (any, empirical by default), and an exponential delay once per worker (GPU) and iteration before its first task of
// the class (draws.hpp).
#include "sim/analytic/monte_carlo.hpp"

#include "core/error.hpp"
#include "core/units.hpp"
#include "sim/analytic/draws.hpp"
#include "sim/plan/schedule.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <numeric>
#include <random>
#include <tuple>

namespace ddlsim::sim {
namespace {

// The sampler's cost, measured on the release build (docs/benchmarks.md, "Variability": 0.50 s for 4.6e8 task copies,
// 3.39 s more for 3.3e8 lognormal factors): ~1.1 ns per task copy timed, ~10 ns more per factor drawn for a task copy;
// 8 B per task copy held. A run estimated beyond a minute or 4 GiB is refused before it samples.
constexpr double kSecondsPerTiming = 1.1e-9;
constexpr double kSecondsPerDraw = 10e-9;
constexpr double kMaxSamplingSeconds = 60;
constexpr double kMaxSamplingBytes = 4.0 * 1073741824;

// Where a task copy's factor comes from.
enum class FactorSource : std::uint8_t {
  none,     ///< not varied, or only delayed (exponential)
  per_task, ///< a draw of its own
  group,    ///< its GPU's draw for the iteration (group_factor)
  network,  ///< communication per iteration: one draw for the whole network (comm_iteration_factor)
};

// What the sampler keeps per task, fixed over samples.
struct TaskPlan {
  double duration_s = 0;
  const TimeDistribution* dist = nullptr;
  FactorSource source = FactorSource::none;
  int cls = -1;       ///< VariedClass, or -1: not varied
  int group = -1;     ///< (device, iteration, class) group: per-iteration factors and delays
  bool first = false; ///< first task of its group: takes the group's exponential delay
  int axis = -1;      ///< collective shared by copies: IterationGraph::Axis (data, tensor); -1 otherwise
  int iteration = 0;
  std::size_t pred_begin = 0, pred_end = 0;
};

} // namespace

void sample_iterations(const Scenario& s, RunResult& r) {
  const auto& spec = *s.variability;
  const auto& g = r.graph;
  const std::size_t n = g.size();
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
  const auto copies = static_cast<std::size_t>(g.replicas());
  // Refused up front when too long or too large (task copies per sample, and those that draw a factor of their own).
  double drawing = 0;
  for (std::size_t v = 0; v < n; ++v) {
    const auto& t = g.task(v);
    const int cls = varied_class_of(t);
    if (cls < 0 || !spec.by_class[static_cast<std::size_t>(cls)])
      continue;
    const auto& d = *spec.by_class[static_cast<std::size_t>(cls)];
    if (d.per_task && d.kind != TimeDistribution::Kind::exponential)
      drawing += t.collective != dag::Collective::none ? 1.0 : static_cast<double>(copies);
  }
  const double work = static_cast<double>(spec.iterations) * static_cast<double>(copies) * static_cast<double>(n);
  const double seconds = work * kSecondsPerTiming + static_cast<double>(spec.iterations) * drawing * kSecondsPerDraw;
  const double bytes = 8.0 * static_cast<double>(copies) * static_cast<double>(n);
  if (seconds > kMaxSamplingSeconds || bytes > kMaxSamplingBytes)
    throw InputError(s.file, "/variability/iterations",
                     fmt::format("{} iterations x {} DAG copies x {} tasks ({:.3g} task timings, {:.3g} factors drawn) "
                                 "would take ~{:.0f} s and ~{:.3g} GiB; the limits are {:.0f} s and {:.0f} GiB: sample "
                                 "fewer iterations (several runs with other seeds add up), or fewer GPUs",
                                 spec.iterations, copies, n, work, static_cast<double>(spec.iterations) * drawing,
                                 seconds, bytes / 1073741824, kMaxSamplingSeconds, kMaxSamplingBytes / 1073741824));

  // The order: dependencies plus each stream's order in the deterministic timeline.
  const Dependencies deps = with_stream_order(g, r.timing);
  const std::vector<std::size_t> order = topological_order(deps);
  std::vector<std::vector<std::size_t>> preds(n);
  for (std::size_t v = 0; v < n; ++v)
    for (std::size_t w : deps.successors[v])
      preds[w].push_back(v);

  // Tasks, their groups (device, iteration, class), and the collectives' instances.
  const auto devices = g.devices();
  std::vector<TaskPlan> plan(n);
  std::vector<std::size_t> pred_list;
  std::map<std::tuple<std::size_t, int, int>, int> groups;
  std::vector<int> group_class;
  for (std::size_t v : order) {
    const auto& t = g.task(v);
    auto& p = plan[v];
    p.duration_s = t.duration_s;
    p.cls = varied_class_of(t);
    p.iteration = t.iteration;
    if (p.cls >= 0 && !spec.by_class[static_cast<std::size_t>(p.cls)])
      p.cls = -1;
    if (p.cls >= 0) {
      p.dist = &*spec.by_class[static_cast<std::size_t>(p.cls)];
      p.source = p.dist->kind == TimeDistribution::Kind::exponential     ? FactorSource::none
                 : p.dist->per_task                                      ? FactorSource::per_task
                 : p.cls == static_cast<int>(VariedClass::communication) ? FactorSource::network
                                                                         : FactorSource::group;
      const auto device =
          static_cast<std::size_t>(std::lower_bound(devices.begin(), devices.end(), t.device) - devices.begin());
      const auto [it, inserted] =
          groups.try_emplace({device, t.iteration, p.cls}, static_cast<int>(group_class.size()));
      if (inserted)
        group_class.push_back(p.cls);
      p.group = it->second;
      p.first = inserted;
    }
    if (t.collective != dag::Collective::none && g.instances(t) < static_cast<int>(copies))
      p.axis = static_cast<int>(g.axis(t));
    p.pred_begin = pred_list.size();
    pred_list.insert(pred_list.end(), preds[v].begin(), preds[v].end());
    p.pred_end = pred_list.size();
  }
  // Members of each shared instance, per axis: instance i's copies, in copy order.
  std::array<std::vector<std::vector<std::size_t>>, 2> members;
  for (const auto axis : {dag::IterationGraph::Axis::data, dag::IterationGraph::Axis::tensor}) {
    const auto a = static_cast<std::size_t>(axis);
    for (std::size_t c = 0; c < copies; ++c) {
      const int i = g.instance_of(axis, static_cast<int>(c));
      if (members[a].size() <= static_cast<std::size_t>(i))
        members[a].resize(static_cast<std::size_t>(i) + 1);
      members[a][static_cast<std::size_t>(i)].push_back(c);
    }
  }
  const auto backups = static_cast<std::size_t>(s.backup_workers);

  const std::size_t group_count = group_class.size();
  const int iterations_in_graph =
      order.empty() ? 1 : 1 + std::accumulate(plan.begin(), plan.end(), 0, [](int m, const TaskPlan& p) {
                            return std::max(m, p.iteration);
                          });
  std::vector<double> end(n * copies), ready(copies), group_factor(copies * group_count),
      group_delay(copies * group_count), comm_iteration_factor(static_cast<std::size_t>(iterations_in_graph), 1.0),
      end_max(n), scratch;
  std::vector<TaskTiming> first_copy(n);
  std::vector<char> dropped(copies, 0); ///< per copy: dropped from the last data-parallel collective it was in
  Draws draws(spec.seed);
  auto& report = r.variability.emplace();
  report.iterations = spec.iterations;
  report.seed = spec.seed;
  report.copies = static_cast<int>(copies);
  report.deterministic_s = r.iteration_time_s;
  report.iteration_s.reserve(static_cast<std::size_t>(spec.iterations));
  Breakdown sum;
  const auto& comm = spec.of(VariedClass::communication);

  for (int sample = 0; sample < spec.iterations; ++sample) {
    std::fill(dropped.begin(), dropped.end(), 0);
    // Per worker and iteration: factors and delays of every group, copy-major.
    for (std::size_t c = 0; c < copies; ++c)
      for (std::size_t k = 0; k < group_count; ++k) {
        const auto& d = *spec.by_class[static_cast<std::size_t>(group_class[k])];
        const bool exponential = d.kind == TimeDistribution::Kind::exponential;
        group_delay[c * group_count + k] = exponential ? draws.exponential(d.mean_s) : 0.0;
        group_factor[c * group_count + k] = !exponential && !d.per_task ? draws.factor(d) : 1.0;
      }
    if (comm && !comm->per_task && comm->kind != TimeDistribution::Kind::exponential)
      for (auto& f : comm_iteration_factor)
        f = draws.factor(*comm);

    for (std::size_t v : order) {
      const auto& p = plan[v];
      double* ev = end.data() + v * copies;
      // ready: the last predecessor's end, copy by copy
      if (p.pred_begin == p.pred_end)
        std::fill(ready.begin(), ready.end(), 0.0);
      else {
        const double* first = end.data() + pred_list[p.pred_begin] * copies;
        std::copy(first, first + copies, ready.begin());
        for (std::size_t q = p.pred_begin + 1; q < p.pred_end; ++q) {
          const double* e = end.data() + pred_list[q] * copies;
          for (std::size_t c = 0; c < copies; ++c)
            ready[c] = std::max(ready[c], e[c]);
        }
      }
      // The factor of copy c (a shared collective's: its first member's source, one draw for the instance).
      const auto factor = [&](std::size_t c) {
        switch (p.source) {
        case FactorSource::per_task:
          return draws.factor(*p.dist);
        case FactorSource::group:
          return group_factor[c * group_count + static_cast<std::size_t>(p.group)];
        case FactorSource::network:
          return comm_iteration_factor[static_cast<std::size_t>(p.iteration)];
        case FactorSource::none:
          break;
        }
        return 1.0;
      };
      if (p.group >= 0 && p.first)
        for (std::size_t c = 0; c < copies; ++c)
          ready[c] += group_delay[c * group_count + static_cast<std::size_t>(p.group)];
      if (p.axis >= 0) {
        // A shared collective: each instance starts when its members are ready (the kept-th of a data-parallel group)
        // and takes one duration for all of them.
        const auto a = static_cast<std::size_t>(p.axis);
        for (std::size_t i = 0; i < members[a].size(); ++i) {
          const auto& m = members[a][i];
          scratch.resize(m.size());
          for (std::size_t j = 0; j < m.size(); ++j)
            scratch[j] = ready[m[j]];
          double start = 0;
          if (p.axis == static_cast<int>(dag::IterationGraph::Axis::data) && backups > 0) {
            const std::size_t kept = m.size() - backups;
            std::nth_element(scratch.begin(), scratch.begin() + static_cast<std::ptrdiff_t>(kept - 1), scratch.end());
            start = scratch[kept - 1];
            for (std::size_t c : m)
              dropped[c] = ready[c] > start ? 1 : 0;
          } else
            start = *std::max_element(scratch.begin(), scratch.end());
          const double finish = start + p.duration_s * factor(m.front());
          for (std::size_t c : m)
            ev[c] = finish;
          end_max[v] = i == 0 ? finish : std::max(end_max[v], finish);
          if (m.front() == 0)
            first_copy[v].start_s = start;
        }
      } else {
        double latest = 0;
        for (std::size_t c = 0; c < copies; ++c) {
          ev[c] = ready[c] + p.duration_s * factor(c);
          latest = std::max(latest, ev[c]);
        }
        end_max[v] = latest;
        first_copy[v].start_s = ready[0];
      }
      first_copy[v].end_s = ev[0];
    }

    // The sample's iteration, read off the ends of every copy (end_max, kept as the copies were timed) as finalize
    // reads the deterministic timeline. With backup workers, a replica dropped from the last data-parallel collective
    // it took part in abandons its work (Chen et al.: it takes the new parameters and starts the next iteration): only
    // the others' ends count.
    if (backups > 0)
      for (std::size_t v = 0; v < n; ++v) {
        const double* ev = end.data() + v * copies;
        double m = 0;
        for (std::size_t c = 0; c < copies; ++c)
          if (dropped[c] == 0)
            m = std::max(m, ev[c]);
        end_max[v] = m;
      }
    double from = 0, to = 0;
    switch (r.window.kind) {
    case IterationWindow::Kind::makespan:
      to = n == 0 ? 0.0 : *std::max_element(end_max.begin(), end_max.end());
      break;
    case IterationWindow::Kind::between_tasks:
      from = end_max[r.window.from_task];
      to = end_max[r.window.to_task];
      break;
    case IterationWindow::Kind::between_iterations: {
      const auto ends = iteration_ends(g, end_max);
      from = ends[ends.size() - 2];
      to = ends.back();
      break;
    }
    }
    report.iteration_s.push_back(to - from);
    const Breakdown b = breakdown_in(g, first_copy, from, to);
    sum.compute_s += b.compute_s;
    sum.compression_s += b.compression_s;
    sum.exposed_communication_s += b.exposed_communication_s;
    sum.idle_s += b.idle_s;
  }

  const double count = spec.iterations;
  const double mean = std::accumulate(report.iteration_s.begin(), report.iteration_s.end(), 0.0) / count;
  set_percentiles(report.iteration_s, report);
  // Throughput and efficiency follow the mean iteration (they already count the backup workers' dropped samples).
  const double scale = r.iteration_time_s > 0 ? r.iteration_time_s / mean : 1.0;
  r.throughput_samples_per_s *= scale;
  r.scaling_efficiency *= scale;
  r.iteration_time_s = mean;
  r.breakdown = {sum.compute_s / count, sum.compression_s / count, sum.exposed_communication_s / count,
                 sum.idle_s / count};
  r.sim.events += static_cast<std::size_t>(work);
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
      spec.iterations, spec.seed,
      copies == 1 ? std::string("the DAG") : fmt::format("every one of the DAG's {} copies", copies),
      fmt::join(drawn, "; "), format_time(report.p50_s), format_time(report.p99_s),
      format_time(report.deterministic_s)));
}

} // namespace ddlsim::sim
