// Shared machinery of the data-parallel strategies: tensor order, backward timing, the registry's lookups and the
// `strategy` object's parser (the registry itself is generated: dag/strategy_registry.cpp.in), and the builder
// that turns a gradient-group plan into the iteration DAG (see strategy.hpp).
#include "dag/strategy.hpp"

#include "core/json.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <optional>
#include <stdexcept>

namespace ddlsim::dag {

std::vector<TensorRef> flatten_tensors(const Model& model) {
  std::vector<TensorRef> out;
  out.reserve(model.tensor_count());
  for (std::size_t l = 0; l < model.layers.size(); ++l)
    for (const auto& p : model.layers[l].params)
      out.push_back({static_cast<int>(l), p.numel});
  return out;
}

std::vector<int> gradient_ready_order(const Model& model) {
  std::vector<int> order(model.tensor_count());
  for (std::size_t i = 0; i < order.size(); ++i)
    order[i] = static_cast<int>(order.size() - 1 - i);
  return order;
}

std::vector<double> backward_finish_times(const WorkerCosts& costs) {
  std::vector<double> finish(costs.bwd_s.size(), 0);
  double t = 0;
  for (std::size_t l = costs.bwd_s.size(); l-- > 0;) {
    t += costs.bwd_s[l];
    finish[l] = t;
  }
  return finish;
}

GradientGroup make_group(const Model& model, const std::vector<TensorRef>& tensors, const std::vector<int>& order,
                         std::size_t first, std::size_t last, double bytes_per_element) {
  GradientGroup g;
  g.ready_layer = static_cast<int>(model.layers.size());
  for (std::size_t k = first; k < last; ++k) {
    const int t = order[k];
    g.tensors.push_back(t);
    g.elements += tensors[static_cast<std::size_t>(t)].numel;
    g.ready_layer = std::min(g.ready_layer, tensors[static_cast<std::size_t>(t)].layer);
  }
  g.bytes = static_cast<double>(g.elements) * bytes_per_element;
  return g;
}

namespace {

std::vector<GradientGroup> groups_from_cuts(const Model& model, const std::vector<TensorRef>& tensors,
                                            const std::vector<int>& order, double bytes_per_element,
                                            const std::vector<std::size_t>& cut) {
  std::vector<std::size_t> bounds;
  for (std::size_t j = order.size(); j > 0; j = cut[j])
    bounds.push_back(j);
  std::vector<GradientGroup> groups;
  std::size_t first = 0;
  for (auto it = bounds.rbegin(); it != bounds.rend(); ++it) {
    groups.push_back(make_group(model, tensors, order, first, *it, bytes_per_element));
    first = *it;
  }
  return groups;
}

} // namespace

std::vector<GradientGroup>
optimal_consecutive_groups(const Model& model, const std::vector<TensorRef>& tensors, const std::vector<int>& order,
                           double bytes_per_element,
                           const std::function<double(std::size_t i, std::size_t j, double f)>& finish) {
  const std::size_t n = order.size();
  // best[j]: earliest finish of entries [0, j); cut[j]: start of the last group.
  std::vector<double> best(n + 1, std::numeric_limits<double>::infinity());
  std::vector<std::size_t> cut(n + 1, 0);
  best[0] = 0;
  for (std::size_t j = 1; j <= n; ++j)
    for (std::size_t i = 0; i < j; ++i)
      if (const double f = finish(i, j, best[i]); f < best[j]) {
        best[j] = f;
        cut[j] = i;
      }
  return groups_from_cuts(model, tensors, order, bytes_per_element, cut);
}

std::vector<GradientGroup> optimal_merge(const Model& model, const std::vector<TensorRef>& tensors,
                                         const std::vector<int>& order, double bytes_per_element,
                                         const std::vector<double>& ready, const std::vector<double>& prefix_bytes,
                                         const CommCost& cost, const std::optional<AffineCost>& affine) {
  const auto finish = [&](std::size_t i, std::size_t j, double after) {
    return std::max(ready[j - 1], after) + cost(prefix_bytes[j] - prefix_bytes[i]);
  };
  // The linear pass needs ready times in order and a cost that does not fall with its payload.
  if (!affine || affine->alpha_s < 0 || affine->seconds_per_byte < 0 || !std::is_sorted(ready.begin(), ready.end()))
    return optimal_consecutive_groups(model, tensors, order, bytes_per_element, finish);
  // best[j], the earliest finish of entries [0, j), is non-decreasing in j (ready and cost are), so for the last
  // group [i, j) the cuts split at s, the first i with best[i] >= ready[j-1]:
  //  - i < s: the group starts at ready[j-1]; the largest group costs most, so i = s-1 is best (the earliest of
  //    equal ones, as the quadratic programme picks);
  //  - i >= s: it starts at best[i] and ends at best[i] - beta prefix[i] + alpha + beta prefix[j]: the least
  //    key best[i] - beta prefix[i] over the window [s, j), kept in a monotone deque (s and j only grow).
  // Keys only rank the window; the chosen cut is timed with finish(). The plan finishes when the quadratic
  // programme's does, to rounding; where several cuts tie (equal finish in exact arithmetic) it may pick another.
  const std::size_t n = order.size();
  const double beta = affine->seconds_per_byte;
  std::vector<double> best(n + 1, 0), key(n + 1, 0);
  std::vector<std::size_t> cut(n + 1, 0);
  std::deque<std::size_t> window; // indices in [s, j), keys non-decreasing front to back
  std::size_t s = 0;
  const auto key_of = [&](std::size_t i) { return best[i] - beta * prefix_bytes[i]; };
  for (std::size_t j = 1; j <= n; ++j) {
    key[j - 1] = key_of(j - 1);
    while (!window.empty() && key[window.back()] > key[j - 1])
      window.pop_back();
    window.push_back(j - 1);
    const double r = ready[j - 1];
    while (s < j && best[s] < r)
      ++s;
    while (!window.empty() && window.front() < s)
      window.pop_front();
    double value = std::numeric_limits<double>::infinity();
    std::size_t at = 0;
    if (s > 0) { // i < s: i = s-1, or an earlier one that ties with it exactly
      at = s - 1;
      value = finish(at, j, best[at]);
      while (at > 0 && finish(at - 1, j, best[at - 1]) == value)
        --at;
    }
    if (!window.empty()) // i >= s: the least key (exact ties among keys are ties of finish: any of them is optimal)
      if (const double f = finish(window.front(), j, best[window.front()]); f < value) {
        value = f;
        at = window.front();
      }
    best[j] = value;
    cut[j] = at;
  }
  return groups_from_cuts(model, tensors, order, bytes_per_element, cut);
}

std::vector<const StrategyInfo*> strategies() {
  const auto registered = registered_strategies();
  std::vector<const StrategyInfo*> out(registered.begin(), registered.end());
  std::sort(out.begin(), out.end(), [](const StrategyInfo* a, const StrategyInfo* b) { return a->name < b->name; });
  return out;
}

const StrategyInfo* find_strategy(std::string_view name) {
  for (const auto* s : registered_strategies())
    if (s->name == name)
      return s;
  return nullptr;
}

Strategy parse_strategy(ObjectReader& r, StrategyContext ctx) {
  std::vector<std::string> names;
  for (const auto* s : strategies())
    names.emplace_back(s->name);
  const StrategyInfo& info = *find_strategy(r.choice("kind", names));
  // Keys that belong to another kind get a message that says which (registration order).
  const auto registered = registered_strategies();
  for (const auto* owner : registered)
    for (const auto key : owner->keys) {
      if (!r.has(key) || info.owns(key))
        continue;
      std::vector<std::string_view> kinds;
      for (const auto* s : registered)
        if (s->owns(key))
          kinds.push_back(s->name);
      r.fail(key, fmt::format("applies to strategy kind{} '{}', not '{}'", kinds.size() > 1 ? "s" : "",
                              fmt::join(kinds, "', '"), info.name));
    }
  ctx.kind = info.name;
  Strategy out{&info, info.parse != nullptr ? info.parse(r, ctx) : StrategyOptions{}};
  r.finish();
  return out;
}

double communication_finish_time(const std::vector<GradientGroup>& groups, const std::vector<double>& backward_finish,
                                 const CommCost& allreduce_time) {
  double free_at = 0;
  for (const auto& g : groups) {
    const double ready = backward_finish[static_cast<std::size_t>(g.ready_layer)] + g.launch_delay_s;
    free_at = std::max(free_at, ready) + allreduce_time(g.bytes);
  }
  return free_at;
}

void add_group_chains(IterationGraph& g, const std::vector<GradientGroup>& groups,
                      const std::function<IterationGraph::Id(const GradientGroup&)>& ready, IterationGraph::Id update,
                      Device device, int communicator) {
  IterationGraph::Id previous = 0; // the previous group's first collective
  bool have_previous = false;
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const auto& group = groups[i];
    IterationGraph::Id last = ready(group);
    if (group.launch_delay_s > 0) {
      const auto wait = g.add({.kind = TaskKind::delay,
                               .resource = Resource::none,
                               .duration_s = group.launch_delay_s,
                               .device = device,
                               .payload = GroupWork{.group = static_cast<int>(i)}});
      g.depend(last, wait);
      last = wait;
    }
    std::optional<IterationGraph::Id> first_comm;
    bool last_is_comm = false;
    for (const auto& step : group.effective_steps()) {
      if (step.kernel_s > 0) {
        const auto kernel = g.add({.kind = TaskKind::compression,
                                   .resource = group.kernel_resource,
                                   .duration_s = step.kernel_s,
                                   .device = device,
                                   .payload = GroupWork{.group = static_cast<int>(i)}});
        g.depend(last, kernel);
        last = kernel;
        last_is_comm = false;
      }
      if (step.collective != Collective::none) {
        const auto comm =
            g.add({.kind = TaskKind::communication,
                   .resource = Resource::comm,
                   .device = device,
                   .payload = CollectiveOp{
                       .wire = {.collective = step.collective, .communicator = communicator, .bytes = step.bytes},
                       .group = static_cast<int>(i)}});
        g.depend(last, comm);
        if (!first_comm)
          first_comm = comm;
        last = comm;
        last_is_comm = true;
      }
    }
    // The end of the chain: a kernel, or a collective other than the one the launch order chains to the update.
    if (!last_is_comm || last != *first_comm)
      g.depend(last, update);
    if (first_comm) {
      if (have_previous)
        g.depend(previous, *first_comm); // groups are launched in plan order
      previous = *first_comm;
      have_previous = true;
    }
  }
  if (have_previous)
    g.depend(previous, update);
}

IterationGraph build_iteration(const Model& model, const WorkerCosts& costs, const std::vector<GradientGroup>& groups,
                               bool communicate) {
  const std::size_t layers = model.layers.size();
  if (layers == 0)
    throw std::logic_error("build_iteration: the model has no layers");
  if (costs.fwd_s.size() != layers || costs.bwd_s.size() != layers)
    throw std::logic_error("build_iteration: costs do not match the model's layers");

  IterationGraph g;
  const auto load =
      g.add({.kind = TaskKind::data_load, .resource = Resource::host_cpu, .duration_s = costs.data_load_s});
  const auto h2d = g.add({.kind = TaskKind::h2d, .resource = Resource::gpu_compute, .duration_s = costs.h2d_s});
  // With prefetching, this iteration's batch was loaded during the previous one: the loader runs beside the
  // iteration and bounds it from below; without, the copy waits for the load.
  if (!costs.prefetch)
    g.depend(load, h2d);

  // Forward in model order on the GPU stream; the model's order is topological (checked when it is loaded).
  std::vector<IterationGraph::Id> fwd(layers), bwd(layers);
  for (std::size_t l = 0; l < layers; ++l) {
    fwd[l] = g.add({.kind = TaskKind::forward,
                    .resource = Resource::gpu_compute,
                    .duration_s = costs.fwd_s[l],
                    .payload = Compute{.layer = static_cast<int>(l)}});
    g.depend(l == 0 ? h2d : fwd[l - 1], fwd[l]);
  }
  // Backward in reverse order, one layer after the other (a valid topological order of autograd's graph).
  for (std::size_t l = layers; l-- > 0;) {
    bwd[l] = g.add({.kind = TaskKind::backward,
                    .resource = Resource::gpu_compute,
                    .duration_s = costs.bwd_s[l],
                    .payload = Compute{.layer = static_cast<int>(l)}});
    g.depend(l + 1 == layers ? fwd[layers - 1] : bwd[l + 1], bwd[l]);
  }
  const auto update =
      g.add({.kind = TaskKind::update, .resource = Resource::gpu_compute, .duration_s = costs.update_s});
  g.depend(bwd[0], update);

  if (!communicate)
    return g;
  add_group_chains(
      g, groups, [&](const GradientGroup& group) { return bwd[static_cast<std::size_t>(group.ready_layer)]; }, update,
      g.task(update).device);
  return g;
}

IterationGraph unroll_iterations(const IterationGraph& one, int iterations) {
  const auto unique = [&](TaskKind kind) {
    std::optional<IterationGraph::Id> found;
    for (std::size_t v = 0; v < one.size(); ++v)
      if (one.task(v).kind == kind) {
        if (found)
          throw std::logic_error(fmt::format("unroll_iterations: more than one {} task", task_kind_name(kind)));
        found = v;
      }
    if (!found)
      throw std::logic_error(fmt::format("unroll_iterations: no {} task", task_kind_name(kind)));
    return *found;
  };
  const auto load = unique(TaskKind::data_load), h2d = unique(TaskKind::h2d), update = unique(TaskKind::update);
  IterationGraph g;
  const std::size_t n = one.size();
  for (int k = 0; k < iterations; ++k) {
    const std::size_t base = g.size();
    for (std::size_t v = 0; v < n; ++v) {
      Task t = one.task(v);
      t.iteration = k;
      g.add(t);
    }
    for (std::size_t v = 0; v < n; ++v)
      for (const auto w : one.successors(v))
        g.depend(base + v, base + w);
    if (k > 0) {
      g.depend(base - n + update, base + h2d);
      g.depend(base - n + load, base + load);
    }
  }
  return g;
}

} // namespace ddlsim::dag
