// Trace analysis across steps (analysis.hpp): the trace's ProfilerStep#N spans, each analysed on its own
// (step_analysis.hpp), and the steps of the majority's structure reduced to medians.
#include "traces/analysis.hpp"
#include "traces/operators.hpp"
#include "traces/step_analysis.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>
#include <tuple>
#include <vector>

namespace ddlsim::traces {
namespace {

using namespace detail;

/// The trace's ProfilerStep#N spans in time order; refuses a trace without steps or GPU kernels.
std::vector<std::size_t> profiler_steps(const KinetoTrace& trace) {
  std::vector<std::size_t> steps;
  for (std::size_t i = 0; i < trace.events.size(); ++i) {
    const Event& e = trace.events[i];
    if (is_cpu(e.cat) && starts_with(e.name, "ProfilerStep#"))
      steps.push_back(i);
  }
  if (steps.empty())
    throw InputError(trace.path, "",
                     fmt::format("no ProfilerStep#N span among its {} events: profile with torch.profiler.profile(...) "
                                 "and call prof.step() every iteration",
                                 trace.event_count));
  const bool any_kernel =
      std::any_of(trace.events.begin(), trace.events.end(), [](const Event& e) { return e.cat == Category::kernel; });
  if (!any_kernel)
    throw InputError(trace.path, "",
                     "no GPU kernels (category \"kernel\" or \"Kernel\"): profile with ProfilerActivity.CUDA");
  std::sort(steps.begin(), steps.end(),
            [&](std::size_t x, std::size_t y) { return trace.events[x].ts_us < trace.events[y].ts_us; });
  return steps;
}

/// The results of the steps whose structure is the majority's; the others are left out (a note says which).
std::vector<const StepResult*> majority_steps(const KinetoTrace& trace, const std::vector<StepResult>& results,
                                              TraceAnalysis& a) {
  std::map<std::tuple<std::size_t, std::size_t, bool>, int> shapes;
  for (const auto& r : results)
    if (r.ok)
      ++shapes[{r.layers.size(), r.collectives.size(), r.from_modules}];
  if (shapes.empty())
    throw InputError(trace.path, "", fmt::format("{} in {}", results.front().problem, a.steps.back().name));
  const auto shape = std::max_element(shapes.begin(), shapes.end(), [](const auto& x, const auto& y) {
                       return x.second < y.second;
                     })->first;
  std::vector<const StepResult*> used;
  std::size_t r = 0;
  for (auto& s : a.steps) {
    if (!s.used)
      continue;
    const StepResult& res = results[r++];
    if (!res.ok || std::tuple{res.layers.size(), res.collectives.size(), res.from_modules} != shape) {
      s.used = false;
      a.notes.push_back(
          fmt::format("{} left out: {}", s.name,
                      res.ok ? "its operators form other layers or collectives than the other steps'" : res.problem));
      continue;
    }
    used.push_back(&res);
  }
  return used;
}

/// The median over the used steps of one figure.
template <class Get> double median_of(const std::vector<const StepResult*>& used, Get get) {
  std::vector<double> v;
  for (const auto* r : used)
    v.push_back(get(*r));
  return median(v);
}

/// The median step: the used step whose duration is closest to the median.
void find_median_step(TraceAnalysis& a, const std::vector<const StepResult*>& used) {
  std::vector<double> durations;
  for (const auto* r : used)
    durations.push_back(r->duration_s);
  const double med = median(durations);
  double closest = 1e300;
  for (std::size_t i = 0; i < a.steps.size(); ++i)
    if (a.steps[i].used && std::abs(a.steps[i].duration_s - med) < closest) {
      closest = std::abs(a.steps[i].duration_s - med);
      a.median_step = static_cast<int>(i);
    }
}

/// The layers' median times.
void median_layers(TraceAnalysis& a, const std::vector<const StepResult*>& used) {
  a.layers = used.front()->layers;
  for (std::size_t l = 0; l < a.layers.size(); ++l) {
    auto& L = a.layers[l];
    L.forward_gpu_s = median_of(used, [&](const StepResult& r) { return r.layers[l].forward_gpu_s; });
    L.backward_gpu_s = median_of(used, [&](const StepResult& r) { return r.layers[l].backward_gpu_s; });
    L.forward_host_s = median_of(used, [&](const StepResult& r) { return r.layers[l].forward_host_s; });
    L.backward_host_s = median_of(used, [&](const StepResult& r) { return r.layers[l].backward_host_s; });
  }
  // Per-layer medians add up to less than the median step's total when the layers vary independently: rescale them
  // so that they add up to the median of the per-step totals.
  const auto rescale = [&](double TracedLayer::*field) {
    const double total = median_of(used, [&](const StepResult& r) {
      return std::accumulate(r.layers.begin(), r.layers.end(), 0.0,
                             [&](double s, const TracedLayer& l) { return s + l.*field; });
    });
    const double sum = std::accumulate(a.layers.begin(), a.layers.end(), 0.0,
                                       [&](double s, const TracedLayer& l) { return s + l.*field; });
    if (sum > 0)
      for (auto& L : a.layers)
        L.*field *= total / sum;
  };
  rescale(&TracedLayer::forward_gpu_s);
  rescale(&TracedLayer::backward_gpu_s);
  rescale(&TracedLayer::forward_host_s);
  rescale(&TracedLayer::backward_host_s);
}

/// The collectives' fastest NCCL kernel times and median host times.
void median_collectives(TraceAnalysis& a, const std::vector<const StepResult*>& used) {
  a.collectives = used.front()->collectives;
  for (std::size_t c = 0; c < a.collectives.size(); ++c) {
    auto& C = a.collectives[c];
    std::optional<double> lowest;
    for (const auto* r : used)
      if (const auto g = r->collectives[c].gpu_min_s)
        lowest = lowest ? std::min(*lowest, *g) : *g;
    C.gpu_min_s = lowest;
    C.host_s = median_of(used, [&](const StepResult& r) { return r.collectives[c].host_s; });
  }
}

/// The phases' median times.
void median_phases(TraceAnalysis& a, const std::vector<const StepResult*>& used) {
  auto& p = a.phases;
#define DDLSIM_MEDIAN(field) p.field = median_of(used, [](const StepResult& r) { return r.phases.field; })
  DDLSIM_MEDIAN(step_s);
  DDLSIM_MEDIAN(data_loading_s);
  DDLSIM_MEDIAN(h2d_host_s);
  DDLSIM_MEDIAN(h2d_copy_s);
  DDLSIM_MEDIAN(h2d_bytes);
  DDLSIM_MEDIAN(forward_s);
  DDLSIM_MEDIAN(backward_s);
  DDLSIM_MEDIAN(optimizer_host_s);
  DDLSIM_MEDIAN(optimizer_gpu_s);
  DDLSIM_MEDIAN(other_host_s);
  DDLSIM_MEDIAN(sync_wait_s);
  DDLSIM_MEDIAN(backward_wait_s);
  DDLSIM_MEDIAN(gpu_busy_s);
  DDLSIM_MEDIAN(gpu_kernels_s);
  DDLSIM_MEDIAN(other_gpu_s);
  DDLSIM_MEDIAN(nccl_s);
#undef DDLSIM_MEDIAN
  std::vector<double> launches;
  for (const auto* r : used)
    launches.insert(launches.end(), r->launch_per_task.begin(), r->launch_per_task.end());
  p.launch_s = median(launches);
  p.gpu_tasks = used.front()->phases.gpu_tasks;
}

/// Activation bytes per sample: the next layer's input (fp32); FLOPs of convolutions at the output's size.
void size_activations(std::vector<TracedLayer>& layers) {
  for (std::size_t l = 0; l < layers.size(); ++l) {
    auto& L = layers[l];
    if (l + 1 < layers.size()) {
      const auto& next = layers[l + 1].input_shape;
      if (next.size() >= 2 && next[0] > 0) {
        L.activation_bytes = 4.0 * static_cast<double>(numel(next) / next[0]);
        if (L.kind == "conv" && next.size() == 4 && L.input_shape.size() == 4 && L.input_shape[2] > 0)
          L.fwd_flops *=
              static_cast<double>(next[2] * next[3]) / static_cast<double>(L.input_shape[2] * L.input_shape[3]);
      }
    }
  }
}

} // namespace

TraceAnalysis analyse(const KinetoTrace& trace) {
  TraceAnalysis a;
  a.path = trace.path;
  a.device = trace.device;
  a.world_size = trace.world_size;
  a.rank = trace.rank;
  const std::vector<std::size_t> steps = profiler_steps(trace);
  // DataLoader workers prepare batches ahead; the single-process iterator loads on the training thread.
  a.prefetch = std::any_of(trace.events.begin(), trace.events.end(), [](const Event& e) {
    return is_cpu(e.cat) && contains(e.name, "_MultiProcessingDataLoaderIter");
  });
  const Index ix = build_index(trace);

  std::vector<StepResult> results;
  for (std::size_t k = 0; k < steps.size(); ++k) {
    const Event& s = trace.events[steps[k]];
    StepSpan span{s.name, s.ts_us, s.dur_us * kUs, steps.size() < 3 || k > 0};
    a.steps.push_back(span);
    if (!span.used)
      continue;
    results.push_back(analyse_step(trace, ix, static_cast<std::size_t>(s.thread), s.ts_us, s.end_us()));
  }
  const std::vector<const StepResult*> used = majority_steps(trace, results, a);
  // The median step and the medians of every figure.
  find_median_step(a, used);
  median_layers(a, used);
  median_collectives(a, used);
  median_phases(a, used);
  a.batch = used.front()->batch;
  a.layers_from_modules = used.front()->from_modules;
  size_activations(a.layers);
  return a;
}

} // namespace ddlsim::traces