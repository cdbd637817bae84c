// Sharded data parallelism's units, memory accounting and iteration DAG (dag/sharding.hpp).
#include "dag/sharding.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <stdexcept>

namespace ddlsim::dag {

namespace {

std::int64_t layer_params(const Layer& layer) {
  std::int64_t n = 0;
  for (const auto& p : layer.params)
    n += p.numel;
  return n;
}

// Whether layer l starts a new unit after layer l - 1.
bool starts_unit(const Model& model, UnitKind kind, std::size_t l, std::int64_t current, double cap_params) {
  if (l == 0)
    return true;
  switch (kind) {
  case UnitKind::layer:
    return true;
  case UnitKind::block:
    return model.layers[l].block != model.layers[l - 1].block;
  case UnitKind::size:
    return static_cast<double>(current) >= cap_params;
  }
  return true;
}

// The tasks build_iteration made, found by kind and layer.
struct Skeleton {
  std::vector<IterationGraph::Id> fwd, bwd;
  IterationGraph::Id update = 0;
};

Skeleton find_skeleton(const IterationGraph& g, std::size_t layers) {
  Skeleton k{std::vector<IterationGraph::Id>(layers), std::vector<IterationGraph::Id>(layers), 0};
  for (std::size_t v = 0; v < g.size(); ++v) {
    const auto& t = g.task(v);
    if (t.kind == TaskKind::forward)
      k.fwd[static_cast<std::size_t>(layer_of(t))] = v;
    else if (t.kind == TaskKind::backward)
      k.bwd[static_cast<std::size_t>(layer_of(t))] = v;
    else if (t.kind == TaskKind::update)
      k.update = v;
  }
  return k;
}

IterationGraph::Id add_gather(IterationGraph& g, double bytes, int group, std::optional<IterationGraph::Id>& previous) {
  const auto id =
      g.add({.kind = TaskKind::communication,
             .resource = Resource::comm,
             .payload = CollectiveOp{
                 .wire = {.collective = Collective::allgather, .bytes = bytes}, .group = group, .parameters = true}});
  if (previous)
    g.depend(*previous, id); // issued in order
  previous = id;
  return id;
}

// The reduce group holding each tensor.
std::vector<int> group_of_tensor(const Model& model, const std::vector<GradientGroup>& groups) {
  std::vector<int> out(model.tensor_count(), -1);
  for (std::size_t i = 0; i < groups.size(); ++i)
    for (const int t : groups[i].tensors)
      out[static_cast<std::size_t>(t)] = static_cast<int>(i);
  return out;
}

// The reduce group of a unit's first tensor (its gathers are labelled with it), -1 when none holds it.
int unit_group(const std::vector<int>& first_tensor_of_layer, const std::vector<int>& group_of, const ShardUnit& u) {
  for (int l = u.first_layer; l < u.end_layer; ++l)
    if (const int t = first_tensor_of_layer[static_cast<std::size_t>(l)]; t >= 0)
      return group_of[static_cast<std::size_t>(t)];
  return -1;
}

// The copy of `seconds` on the GPU's copy stream, after `previous` copy when there is one.
IterationGraph::Id add_copy(IterationGraph& g, double seconds, std::optional<IterationGraph::Id>& previous) {
  const auto id = g.add({.kind = TaskKind::delay, .resource = Resource::copy, .duration_s = seconds});
  if (previous)
    g.depend(*previous, id);
  previous = id;
  return id;
}

// Stage 3's gathers of units, in order: each after `gate` (when given), with offloaded parameters after the copy of the
// unit's shard to the GPU.
struct UnitGathers {
  IterationGraph& g;
  const ShardedSchedule& s;
  std::vector<int> group_of_unit;
  std::optional<IterationGraph::Id> previous_gather, previous_fetch;

  IterationGraph::Id add(std::size_t u, std::optional<IterationGraph::Id> gate) {
    const auto gather = add_gather(g, static_cast<double>(s.units[u].params) * s.param_bytes_per_element,
                                   group_of_unit[u], previous_gather);
    if (!s.fetch_unit_s.empty()) {
      const auto fetch = add_copy(g, s.fetch_unit_s[u], previous_fetch);
      if (gate)
        g.depend(*gate, fetch);
      g.depend(fetch, gather);
    } else if (gate) {
      g.depend(*gate, gather);
    }
    return gather;
  }
};

void add_unit_gathers(IterationGraph& g, const Model& model, const ShardedSchedule& s, const Skeleton& k) {
  const auto n = s.units.size();
  const auto group_of = group_of_tensor(model, s.groups);
  std::vector<int> first_tensor(model.layers.size(), -1);
  for (std::size_t l = 0, t = 0; l < model.layers.size(); t += model.layers[l].params.size(), ++l)
    if (!model.layers[l].params.empty())
      first_tensor[l] = static_cast<int>(t);
  UnitGathers gathers{g, s, {}, {}, {}};
  for (const auto& unit : s.units)
    gathers.group_of_unit.push_back(unit_group(first_tensor, group_of, unit));
  const auto last_fwd = [&](std::size_t u) { return k.fwd[static_cast<std::size_t>(s.units[u].end_layer - 1)]; };
  const auto first_bwd = [&](std::size_t u) { return k.bwd[static_cast<std::size_t>(s.units[u].end_layer - 1)]; };
  const auto ahead = static_cast<std::size_t>(s.prefetch) + 1;
  for (std::size_t u = 0; u < n; ++u) { // unit u - prefetch - 1 is freed first
    const auto gather = gathers.add(u, u >= ahead ? std::optional(last_fwd(u - ahead)) : std::nullopt);
    g.depend(gather, k.fwd[static_cast<std::size_t>(s.units[u].first_layer)]);
  }
  if (!s.reshard_after_forward || n == 0)
    return;
  // The last unit keeps its parameters for the backward that follows at once: FSDP2 does not reshard its root after
  // forward, nor torchtitan its last unit (the final norm and output projection).
  const auto end_of_forward = last_fwd(n - 1);
  for (std::size_t u = n - 1; u-- > 0;) {
    const auto gate = u + ahead < n ? k.bwd[static_cast<std::size_t>(s.units[u + ahead].first_layer)] : end_of_forward;
    g.depend(gathers.add(u, gate), first_bwd(u));
  }
}

// Offloaded optimizer state: each group's gradient shard copied to the host after its chain, the step on the host
// after every copy, and (parameters kept on the GPU) the updated shard copied back.
void add_offload(IterationGraph& g, const ShardedSchedule& s, IterationGraph::Id update) {
  std::vector<std::optional<IterationGraph::Id>> chain_end(s.groups.size());
  for (std::size_t v = 0; v < g.size(); ++v) // a chain's tasks are added in order: its last one has the largest id
    if (const int group = group_of(g.task(v)); group >= 0 && !gathers_parameters(g.task(v)))
      chain_end[static_cast<std::size_t>(group)] = v;
  std::optional<IterationGraph::Id> previous;
  for (std::size_t i = 0; i < s.groups.size(); ++i) {
    const auto copy = add_copy(g, s.offload_gradient_s[i], previous);
    if (chain_end[i])
      g.depend(*chain_end[i], copy);
    g.depend(copy, update);
  }
  g.task(update).resource = Resource::none; // on the host's cores, beside the GPU's streams
  if (s.upload_s > 0) {
    std::optional<IterationGraph::Id> none;
    g.depend(update, add_copy(g, s.upload_s, none));
  }
}

void add_group_gathers(IterationGraph& g, const ShardedSchedule& s, const Skeleton& k) {
  std::vector<std::size_t> order(s.groups.size());
  for (std::size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  // forward order: the group whose parameters the forward reaches first is gathered first
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return s.groups[a].ready_layer < s.groups[b].ready_layer; });
  std::optional<IterationGraph::Id> previous;
  for (const auto i : order) {
    const auto& group = s.groups[i];
    const auto gather =
        add_gather(g, static_cast<double>(group.elements) * s.param_bytes_per_element, static_cast<int>(i), previous);
    g.depend(gather, k.fwd[static_cast<std::size_t>(group.ready_layer)]);
  }
}

} // namespace

std::vector<ShardUnit> shard_units(const Model& model, UnitKind kind, double cap_params) {
  if (kind == UnitKind::size && !(cap_params > 0))
    throw std::invalid_argument(fmt::format("shard_units: a unit size must be positive, got {}", cap_params));
  std::vector<ShardUnit> units;
  for (std::size_t l = 0; l < model.layers.size(); ++l) {
    const std::int64_t current = units.empty() ? 0 : units.back().params;
    if (starts_unit(model, kind, l, current, cap_params)) {
      if (!units.empty() && units.back().params == 0) // a unit without parameters joins the next one
        units.back().end_layer = static_cast<int>(l);
      else
        units.push_back({static_cast<int>(l), static_cast<int>(l), 0});
    }
    units.back().end_layer = static_cast<int>(l) + 1;
    units.back().params += layer_params(model.layers[l]);
  }
  if (!units.empty() && units.back().params == 0) { // trailing layers without parameters join the unit before
    const int end = units.back().end_layer;
    units.pop_back();
    if (!units.empty())
      units.back().end_layer = end;
  }
  return units;
}

std::vector<GradientGroup> unit_groups(const Model& model, const std::vector<ShardUnit>& units,
                                       double bytes_per_element) {
  const auto tensors = flatten_tensors(model);
  std::vector<int> first_tensor(model.layers.size() + 1, 0);
  for (std::size_t l = 0; l < model.layers.size(); ++l)
    first_tensor[l + 1] = first_tensor[l] + static_cast<int>(model.layers[l].params.size());
  std::vector<GradientGroup> groups;
  for (auto u = units.rbegin(); u != units.rend(); ++u) {
    GradientGroup g;
    const int first = first_tensor[static_cast<std::size_t>(u->first_layer)];
    for (int t = first_tensor[static_cast<std::size_t>(u->end_layer)]; t-- > first;) {
      g.tensors.push_back(t);
      g.elements += tensors[static_cast<std::size_t>(t)].numel;
    }
    g.ready_layer = u->first_layer;
    g.bytes = static_cast<double>(g.elements) * bytes_per_element;
    groups.push_back(std::move(g));
  }
  return groups;
}

ModelStateBytes zero_state_per_parameter(Optimizer optimizer, DType dtype, int stage, int shards) {
  if (stage < 0 || stage > 3)
    throw std::invalid_argument(fmt::format("zero_state_per_parameter: no ZeRO stage {}", stage));
  if (shards < 1)
    throw std::invalid_argument(fmt::format("zero_state_per_parameter: shards must be positive, got {}", shards));
  const double e = dtype_bytes(dtype);
  const double master = dtype == DType::fp32 ? 0 : 4; // fp32 master weights beside 16-bit ones
  const double state = optimizer == Optimizer::adam ? 8 : optimizer == Optimizer::sgd_momentum ? 4 : 0;
  const double n = shards;
  return {.weights = stage >= 3 ? e / n : e,
          .gradients = stage >= 2 ? e / n : e,
          .optimizer = stage >= 1 ? (master + state) / n : master + state};
}

IterationGraph build_sharded_iteration(const Model& model, const WorkerCosts& costs, const ShardedSchedule& schedule) {
  if (schedule.stage < 1 || schedule.stage > 3)
    throw std::logic_error(fmt::format("build_sharded_iteration: no sharded stage {}", schedule.stage));
  if (schedule.prefetch < 0)
    throw std::logic_error("build_sharded_iteration: negative prefetch");
  if ((!schedule.offload_gradient_s.empty() && schedule.offload_gradient_s.size() != schedule.groups.size()) ||
      (!schedule.fetch_unit_s.empty() && schedule.fetch_unit_s.size() != schedule.units.size()))
    throw std::logic_error("build_sharded_iteration: offload copies do not match the groups or units");
  IterationGraph g = build_iteration(model, costs, {}, false);
  const auto k = find_skeleton(g, model.layers.size());
  g.task(k.update).duration_s = schedule.update_s;
  add_group_chains(
      g, schedule.groups,
      [&](const GradientGroup& group) { return k.bwd[static_cast<std::size_t>(group.ready_layer)]; }, k.update,
      g.task(k.update).device);
  if (schedule.stage == 3)
    add_unit_gathers(g, model, schedule, k);
  else
    add_group_gathers(g, schedule, k);
  if (!schedule.offload_gradient_s.empty())
    add_offload(g, schedule, k.update);
  return g;
}

} // namespace ddlsim::dag
