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
#include "sim/plan/draws.hpp"
#include "sim/plan/schedule.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <numeric>

namespace ddlsim::sim {
namespace {

// The sampler's cost, measured on the release build (docs/benchmarks.md, "Variability": 0.50 s for 4.6e8 task copies,
// 3.39 s more for 3.3e8 lognormal factors): ~1.1 ns per task copy timed, ~10 ns more per factor drawn for a task copy;
// 8 B per task copy held. A run estimated beyond a minute or 4 GiB is refused before it samples.
constexpr double kSecondsPerTiming = 1.1e-9;
constexpr double kSecondsPerDraw = 10e-9;
constexpr double kMaxSamplingSeconds = 60;
constexpr double kMaxSamplingBytes = 4.0 * 1073741824;

// What the sampler keeps per task, fixed over samples (its draws: CopyDraws).
struct TaskPlan {
  double duration_s = 0;
  int axis = -1; ///< collective shared by copies: IterationGraph::Axis (data, tensor); -1 otherwise
  std::size_t pred_begin = 0, pred_end = 0;
};

} // namespace

void check_sampling(const Scenario& s, const dag::IterationGraph& g) {
  check_samplable(s, g);
  const auto& spec = *s.variability;
  const auto copies = static_cast<std::size_t>(g.replicas());
  const std::size_t n = g.size();
  // Refused up front when too long or too large (task copies per sample, and those that draw a factor of their own).
  const double work = static_cast<double>(spec.iterations) * static_cast<double>(copies) * static_cast<double>(n);
  const double drawing = per_task_draw_count(g, spec, copies);
  const double seconds = work * kSecondsPerTiming + static_cast<double>(spec.iterations) * drawing * kSecondsPerDraw;
  const double bytes = 8.0 * static_cast<double>(copies) * static_cast<double>(n);
  if (seconds > kMaxSamplingSeconds || bytes > kMaxSamplingBytes)
    throw InputError(s.file, "/variability/iterations",
                     fmt::format("{} iterations x {} DAG copies x {} tasks ({:.3g} task timings, {:.3g} factors drawn) "
                                 "would take ~{:.0f} s and ~{:.3g} GiB; the limits are {:.0f} s and {:.0f} GiB: sample "
                                 "fewer iterations (several runs with other seeds add up), or fewer GPUs",
                                 spec.iterations, copies, n, work, static_cast<double>(spec.iterations) * drawing,
                                 seconds, bytes / 1073741824, kMaxSamplingSeconds, kMaxSamplingBytes / 1073741824));
}

SampledIterations sample_iterations(const Scenario& s, const dag::IterationGraph& g, const IterationWindow& window,
                                    const std::vector<TaskTiming>& timing) {
  const auto& spec = *s.variability;
  const std::size_t n = g.size();
  check_sampling(s, g);
  const auto copies = static_cast<std::size_t>(g.replicas());

  // The order: dependencies plus each stream's order in the deterministic timeline.
  const Dependencies deps = with_stream_order(g, timing);
  const std::vector<std::size_t> order = topological_order(deps);
  const auto preds = predecessors_in_order(deps, order);
  CopyDraws draw_plan(g, order, spec, copies);
  // Tasks and the collectives' shared instances.
  std::vector<TaskPlan> plan(n);
  for (std::size_t v : order) {
    const auto& t = g.task(v);
    auto& p = plan[v];
    p.duration_s = t.duration_s;
    if (dag::collective_of(t) != dag::Collective::none && g.instances(t) < static_cast<int>(copies))
      p.axis = static_cast<int>(g.axis(t));
    p.pred_begin = preds.begin[v];
    p.pred_end = preds.end[v];
  }
  const auto& pred_list = preds.list;
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

  std::vector<double> end(n * copies), ready(copies), end_max(n), scratch;
  std::vector<TaskTiming> first_copy(n);
  std::vector<char> dropped(copies, 0); ///< per copy: dropped from the last data-parallel collective it was in
  Draws draws(spec.seed);
  SampledIterations out;
  auto& report = out.report;
  report.iterations = spec.iterations;
  report.seed = spec.seed;
  report.copies = static_cast<int>(copies);
  report.iteration_s.reserve(static_cast<std::size_t>(spec.iterations));

  for (int sample = 0; sample < spec.iterations; ++sample) {
    std::fill(dropped.begin(), dropped.end(), 0);
    draw_plan.next_sample(draws);
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
      // The factor of copy c (a shared collective's: its first member's, one draw for the instance), its delay.
      const bool varied = draw_plan.varied(v);
      const auto factor = [&](std::size_t c) { return varied ? draw_plan.factor(v, c, draws) : 1.0; };
      if (varied)
        for (std::size_t c = 0; c < copies; ++c)
          ready[c] += draw_plan.delay(v, c);
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
    const auto [from, to] = sampled_window(g, window, end_max);
    report.iteration_s.push_back(to - from);
    add_breakdown(out.breakdown_sum, breakdown_in(g, first_copy, from, to));
  }
  out.events = static_cast<std::size_t>(spec.iterations) * copies * n; // task timings
  out.timed = copies == 1 ? std::string("the DAG") : fmt::format("every one of the DAG's {} copies", copies);
  return out;
}

} // namespace ddlsim::sim
