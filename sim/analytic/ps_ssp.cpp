// ps-ssp's replay of the workers (ps_ssp.hpp).
#include "sim/analytic/ps_ssp.hpp"

#include "sim/plan/draws.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>

namespace ddlsim::sim {
namespace {

constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();

// What the replay keeps per task.
struct Step {
  double duration_s = 0;
  bool worker_side = false; ///< the worker's own work: scaled by its speed and drawn (not transfers, not servers)
  std::size_t gate = kNone; ///< a pull: the task that applies its key's push of iteration - s (every worker's)
};

// Iterations and keys of the DAG; each iteration's end (its last backward, of layer 0), as ps-sync reads it; per
// (key, iteration) the task that applies a worker's push (the server's update, else the push) and the pull.
struct SspIndex {
  int iterations = 0, keys = 0;
  std::vector<std::size_t> iteration_end, applied, pulled;

  std::size_t at(int key, int iteration) const {
    return static_cast<std::size_t>(key) * static_cast<std::size_t>(iterations) + static_cast<std::size_t>(iteration);
  }
};

SspIndex index_of(const dag::IterationGraph& g) {
  const std::size_t n = g.size();
  SspIndex ix;
  for (std::size_t v = 0; v < n; ++v) {
    ix.iterations = std::max(ix.iterations, g.task(v).iteration + 1);
    ix.keys = std::max(ix.keys, dag::group_of(g.task(v)) + 1);
  }
  ix.iteration_end.assign(static_cast<std::size_t>(ix.iterations), kNone);
  ix.applied.assign(static_cast<std::size_t>(ix.keys) * static_cast<std::size_t>(ix.iterations), kNone);
  ix.pulled = ix.applied;
  for (std::size_t v = 0; v < n; ++v) {
    const auto& t = g.task(v);
    const auto* key = std::get_if<dag::ServerTransfer>(&t.payload);
    if (t.kind == dag::TaskKind::backward && dag::layer_of(t) == 0)
      ix.iteration_end[static_cast<std::size_t>(t.iteration)] = v;
    else if (key != nullptr && key->wire.collective == dag::Collective::ps_pull)
      ix.pulled[ix.at(key->group, t.iteration)] = v;
    else if (key != nullptr && key->wire.collective == dag::Collective::ps_push &&
             ix.applied[ix.at(key->group, t.iteration)] == kNone)
      ix.applied[ix.at(key->group, t.iteration)] = v;
  }
  for (std::size_t v = 0; v < n; ++v) { // the server's update, where there is one, applies the push
    const auto& t = g.task(v);
    if (const auto* update = std::get_if<dag::GroupWork>(&t.payload);
        update != nullptr && t.kind == dag::TaskKind::delay && update->group >= 0)
      ix.applied[ix.at(update->group, t.iteration)] = v;
  }
  if (ix.iterations < 2 || std::count(ix.iteration_end.begin(), ix.iteration_end.end(), kNone) > 0)
    throw std::logic_error("ps-ssp: the DAG is not ps-sync's unrolled over two or more iterations");
  return ix;
}

// Every copy's end (task by task, p copies each), and the pulls' starts: when they read the parameters.
struct Replay {
  std::vector<double> end;
  std::vector<std::size_t> pull_slot;
  std::vector<double> pull_start;
};

Replay replay(const SspInput& in, const SspIndex& ix) {
  const auto& g = *in.graph;
  const std::size_t n = g.size();
  const std::size_t p = in.worker_scale.size();
  const int bound = in.staleness_bound;
  const Dependencies deps = with_stream_order(g, in.timing);
  const auto order = topological_order(deps);
  const auto preds = predecessors_in_order(deps, order);
  std::vector<Step> steps(n);
  for (std::size_t v : order) {
    const auto& t = g.task(v);
    auto& step = steps[v];
    step.duration_s = t.duration_s;
    step.worker_side = dag::collective_of(t) == dag::Collective::none && t.kind != dag::TaskKind::delay;
    if (const auto* key = std::get_if<dag::ServerTransfer>(&t.payload);
        key != nullptr && key->wire.collective == dag::Collective::ps_pull && t.iteration - bound >= 0)
      step.gate = ix.applied[ix.at(key->group, t.iteration - bound)];
  }
  // Draws (one sample: the whole run), worker by worker as the copies are timed.
  std::optional<CopyDraws> copy_draws;
  std::optional<Draws> draws;
  if (in.variability != nullptr) {
    copy_draws.emplace(g, order, *in.variability, p);
    draws.emplace(in.variability->seed);
    copy_draws->next_sample(*draws);
  }

  // The replay: every copy of a task once its predecessors' copies have ended; a gated pull also once every worker's
  // push of its key in iteration - s has been applied.
  Replay out;
  std::vector<double>& end = out.end;
  end.assign(n * p, 0.0);
  std::vector<double> ready(p);
  out.pull_slot.assign(n, kNone);
  std::size_t pulls = 0;
  for (std::size_t v = 0; v < n; ++v)
    if (dag::collective_of(g.task(v)) == dag::Collective::ps_pull)
      out.pull_slot[v] = pulls++;
  out.pull_start.assign(pulls * p, 0.0);
  for (std::size_t v : order) {
    const auto& step = steps[v];
    std::fill(ready.begin(), ready.end(), 0.0);
    for (std::size_t q = preds.begin[v]; q < preds.end[v]; ++q) {
      const double* e = end.data() + preds.list[q] * p;
      for (std::size_t c = 0; c < p; ++c)
        ready[c] = std::max(ready[c], e[c]);
    }
    if (step.gate != kNone) {
      const double* e = end.data() + step.gate * p;
      const double all = *std::max_element(e, e + p);
      for (auto& r : ready)
        r = std::max(r, all);
    }
    double* ev = end.data() + v * p;
    const bool varied = copy_draws && copy_draws->varied(v);
    for (std::size_t c = 0; c < p; ++c) {
      double factor = step.worker_side ? in.worker_scale[c] : 1.0;
      double start = ready[c];
      if (varied) {
        start += copy_draws->delay(v, c);
        factor *= copy_draws->factor(v, c, *draws);
      }
      ev[c] = start + step.duration_s * factor;
      if (out.pull_slot[v] != kNone)
        out.pull_start[out.pull_slot[v] * p + c] = start;
    }
  }
  return out;
}

struct Window {
  double from = 0, to = std::numeric_limits<double>::infinity();
};

// The window (from every worker's end of warm-up to the first worker's last iteration, into `window`) and each
// worker's iterations in it.
SspResult rates_in_window(const SspIndex& ix, const std::vector<double>& end, std::size_t p, int warmup_iterations,
                          Window& window) {
  const int iterations = ix.iterations;
  const auto finish = [&](std::size_t c, int it) {
    return end[ix.iteration_end[static_cast<std::size_t>(it)] * p + c];
  };
  const int warmup = std::clamp(warmup_iterations, 1, iterations - 1);
  double& from = window.from;
  double& to = window.to;
  for (std::size_t c = 0; c < p; ++c) {
    from = std::max(from, finish(c, warmup - 1));
    to = std::min(to, finish(c, iterations - 1));
  }
  SspResult r;
  r.measured = std::numeric_limits<int>::max();
  for (std::size_t c = 0; c < p; ++c) {
    int first = -1, last = -1;
    for (int it = 0; it < iterations; ++it)
      if (finish(c, it) >= from && finish(c, it) <= to) {
        if (first < 0)
          first = it;
        last = it;
      }
    if (first < 0 || last <= first)
      throw std::logic_error(fmt::format("ps-ssp: worker {} has no whole iteration in the window of {} unrolled "
                                         "iterations (ssp_iterations sizes it)",
                                         c, iterations));
    r.measured = std::min(r.measured, last - first);
    r.iterations_per_s.push_back((last - first) / (finish(c, last) - finish(c, first)));
    for (int it = first + 1; it <= last; ++it)
      r.iteration_s.push_back(finish(c, it) - finish(c, it - 1));
  }
  return r;
}

// Staleness of each (update, key) applied in the window: the other workers' updates of the key applied after the
// pull that read the parameters its gradient was computed on (iteration 0: the initial ones) and before it.
// The lead at each pull after iteration i: i + 1 - (iterations of the key every worker has applied by then).
void add_staleness(const SspIndex& ix, const Replay& rp, std::size_t p, const Window& window, SspResult& r) {
  const int iterations = ix.iterations;
  const auto& end = rp.end;
  const double from = window.from, to = window.to;
  long updates = 0;
  double staleness_sum = 0;
  std::vector<double> times, all_applied(static_cast<std::size_t>(iterations));
  for (int key = 0; key < ix.keys; ++key) {
    if (ix.applied[ix.at(key, 0)] == kNone)
      continue;
    times.clear();
    for (int it = 0; it < iterations; ++it) {
      const double* e = end.data() + ix.applied[ix.at(key, it)] * p;
      times.insert(times.end(), e, e + p);
      all_applied[static_cast<std::size_t>(it)] = *std::max_element(e, e + p);
    }
    std::sort(times.begin(), times.end());
    for (int it = 0; it < iterations; ++it)
      for (std::size_t c = 0; c < p; ++c) {
        const double t_apply = end[ix.applied[ix.at(key, it)] * p + c];
        if (t_apply > from && t_apply <= to) {
          const double t_read = it == 0 ? 0.0 : rp.pull_start[rp.pull_slot[ix.pulled[ix.at(key, it - 1)]] * p + c];
          const auto stale = static_cast<int>(std::lower_bound(times.begin(), times.end(), t_apply) -
                                              std::upper_bound(times.begin(), times.end(), t_read));
          ++r.staleness[std::max(0, stale)];
          ++updates;
          staleness_sum += std::max(0, stale);
          r.staleness_max = std::max(r.staleness_max, stale);
        }
        const double t_pull = rp.pull_start[rp.pull_slot[ix.pulled[ix.at(key, it)]] * p + c];
        const auto complete = std::upper_bound(all_applied.begin(), all_applied.end(), t_pull) - all_applied.begin();
        r.clock_lead_max = std::max(r.clock_lead_max, it + 1 - static_cast<int>(complete));
      }
  }
  r.staleness_mean = updates > 0 ? staleness_sum / static_cast<double>(updates) : 0.0;
}

} // namespace

SspRun ssp_run(int measured, int staleness_bound, double speed_ratio, bool drawn) {
  // Free running (the bound never binds): the first worker ends its last iteration I - 1 at I times its period, the
  // slowest has then done I / ratio (a quarter fewer for drawn times drifting apart); a lead of I (1 - 1/ratio) at
  // most.
  constexpr int kWarmup = 10, kPerBound = 50;
  const double ratio = std::max(1.0, speed_ratio);
  const double free = std::ceil((kWarmup + measured + 2.0) * ratio * 1.25) + 2;
  const double reach = drawn ? free : free * (1 - 1 / ratio);
  if (reach < staleness_bound)
    return {kWarmup, static_cast<int>(free)};
  // Bounded: when the first worker ends its last iteration I - 1, the slowest has applied its pushes of I - 2 - s, so
  // at least I - 3 - s - warmup of its iterations lie in the window.
  const int warmup = kWarmup + kPerBound * staleness_bound;
  return {warmup, warmup + measured + staleness_bound + 3};
}

SspResult simulate_ps_ssp(const SspInput& in) {
  const std::size_t n = in.graph->size();
  const std::size_t p = in.worker_scale.size();
  if (p == 0 || n == 0)
    throw std::logic_error("ps-ssp: no workers or an empty DAG");
  const SspIndex ix = index_of(*in.graph);
  const Replay rp = replay(in, ix);
  Window window;
  SspResult r = rates_in_window(ix, rp.end, p, in.warmup, window);
  add_staleness(ix, rp, p, window, r);
  return r;
}

} // namespace ddlsim::sim
