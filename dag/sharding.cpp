// Sharded data parallelism's units, memory accounting and iteration DAG (dag/sharding.hpp).
#include "dag/sharding.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
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

// Stage 3's gathers of gather groups, in order: each after `gate` (when given), with offloaded parameters after the
// copy of its units' shards to the GPU (one copy, their times summed).
struct UnitGathers {
  IterationGraph& g;
  const ShardedSchedule& s;
  std::vector<int> group_of_unit;
  std::optional<IterationGraph::Id> previous_gather, previous_fetch;

  IterationGraph::Id add(const GatherGroup& group, std::optional<IterationGraph::Id> gate) {
    const auto first = static_cast<std::size_t>(group.first_unit), end = static_cast<std::size_t>(group.end_unit);
    std::int64_t params = 0;
    for (std::size_t u = first; u < end; ++u)
      params += s.units[u].params;
    const auto gather =
        add_gather(g, static_cast<double>(params) * s.param_bytes_per_element, group_of_unit[first], previous_gather);
    if (!s.fetch_unit_s.empty()) {
      double seconds = s.fetch_unit_s[first];
      for (std::size_t u = first + 1; u < end; ++u)
        seconds += s.fetch_unit_s[u];
      const auto fetch = add_copy(g, seconds, previous_fetch);
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
  if (s.units.empty())
    return;
  const auto groups = gather_groups(s);
  const auto group_of = group_of_tensor(model, s.groups);
  std::vector<int> first_tensor(model.layers.size(), -1);
  for (std::size_t l = 0, t = 0; l < model.layers.size(); t += model.layers[l].params.size(), ++l)
    if (!model.layers[l].params.empty())
      first_tensor[l] = static_cast<int>(t);
  UnitGathers gathers{g, s, {}, {}, {}};
  for (const auto& unit : s.units)
    gathers.group_of_unit.push_back(unit_group(first_tensor, group_of, unit));
  const auto layer = [&](int unit, bool first) {
    const auto& u = s.units[static_cast<std::size_t>(unit)];
    return static_cast<std::size_t>(first ? u.first_layer : u.end_layer - 1);
  };
  // A group's forward ends with its last unit's last layer; its backward starts there and ends with its first layer.
  const auto last_fwd = [&](const GatherGroup& x) { return k.fwd[layer(x.end_unit - 1, false)]; };
  const auto first_bwd = [&](const GatherGroup& x) { return k.bwd[layer(x.end_unit - 1, false)]; };
  const auto last_bwd = [&](const GatherGroup& x) { return k.bwd[layer(x.first_unit, true)]; };
  const auto ahead = static_cast<std::size_t>(s.prefetch) + 1;
  const auto& forward = groups.forward;
  for (std::size_t j = 0; j < forward.size(); ++j) { // group j - prefetch - 1 is freed first
    const auto gather =
        gathers.add(forward[j], j >= ahead ? std::optional(last_fwd(forward[j - ahead])) : std::nullopt);
    g.depend(gather, k.fwd[layer(forward[j].first_unit, true)]);
  }
  if (!s.reshard_after_forward)
    return;
  // The last group keeps its parameters for the backward that follows at once: FSDP2 does not reshard its root after
  // forward, nor torchtitan its last unit (the final norm and output projection). It is position 0 of the backward's
  // sequence, the regathered groups positions 1, 2, ...
  const auto end_of_forward = last_fwd(forward.back());
  const auto at = [&](std::size_t position) { return position == 0 ? forward.back() : groups.backward[position - 1]; };
  if (s.reshard_last) // the last group too, gathered again as its backward begins
    g.depend(gathers.add(at(0), end_of_forward), first_bwd(at(0)));
  for (std::size_t p = 1; p <= groups.backward.size(); ++p) {
    const auto gate = p >= ahead ? last_bwd(at(p - ahead)) : end_of_forward;
    g.depend(gathers.add(at(p), gate), first_bwd(at(p)));
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

double gather_sequence_end(const std::vector<GatherGroup>& split, const std::vector<double>& compute_s,
                           const std::vector<double>& bytes, const AffineCost& cost, double busy_s) {
  // The prefix sums and expressions optimal_gather_split uses, so that both give the same value for the same split.
  const auto prefix = [](const std::vector<double>& v) {
    std::vector<double> out(v.size() + 1, 0);
    for (std::size_t i = 0; i < v.size(); ++i)
      out[i + 1] = out[i] + v[i];
    return out;
  };
  const auto F = prefix(compute_s), P = prefix(bytes);
  double end = busy_s;
  for (std::size_t j = 0; j < split.size(); ++j) {
    const auto first = static_cast<std::size_t>(split[j].first_unit),
               last = static_cast<std::size_t>(split[j].end_unit);
    const double gathered = static_cast<double>(j + 1) * cost.alpha_s + cost.seconds_per_byte * P[last];
    end = std::max(end, gathered) + (F[last] - F[first]);
  }
  return end;
}

std::vector<GatherGroup> optimal_gather_split(const std::vector<double>& compute_s, const std::vector<double>& bytes,
                                              const AffineCost& cost, double busy_s) {
  if (compute_s.size() != bytes.size())
    throw std::logic_error("optimal_gather_split: compute times and bytes differ in length");
  const std::size_t n = compute_s.size();
  if (n == 0)
    return {};
  std::vector<double> F(n + 1, 0), P(n + 1, 0);
  for (std::size_t i = 0; i < n; ++i) {
    F[i + 1] = F[i] + compute_s[i];
    P[i + 1] = P[i] + bytes[i];
  }
  const double alpha = cost.alpha_s, beta = cost.seconds_per_byte;
  std::vector<GatherGroup> per_unit(n);
  for (std::size_t u = 0; u < n; ++u)
    per_unit[u] = {static_cast<int>(u), static_cast<int>(u + 1)};
  const double per_unit_end = gather_sequence_end(per_unit, compute_s, bytes, cost, busy_s);
  // Bounds that leave the optimum (and its ties) in: no split ends before every compute has run after busy_s and after
  // the first unit's gather, so one group per unit is optimal where it ends then (hidden gathers); none ends before its
  // last gather, m alpha + beta P[n] for m groups, nor after `upper`, the best end found so far (one group per unit,
  // one group, then each number of groups in turn): a state whose C plus the compute left exceeds it is dropped, and
  // the search stops at the first m whose last gather ends after it.
  const bool bounded = alpha >= 0 && beta >= 0;
  if (bounded && per_unit_end <= (std::max(busy_s, alpha + beta * P[1]) + F[n]) * (1 + 1e-12))
    return per_unit;
  constexpr double kSlack = 1 + 1e-9; // far above rounding, far below the ties' 1e-12
  double upper = bounded ? std::min(per_unit_end,
                                    gather_sequence_end({{0, static_cast<int>(n)}}, compute_s, bytes, cost, busy_s)) *
                               kSlack
                         : std::numeric_limits<double>::infinity();
  // end[m w + k]: the least C after m groups covering units [0, k); cut[m w + k]: the first unit of the m-th group.
  const std::size_t w = n + 1;
  std::vector<double> end(w * w, std::numeric_limits<double>::infinity());
  std::vector<std::uint32_t> cut(w * w, 0);
  end[0] = busy_s;
  std::vector<std::size_t> live; // the states of the previous level that may lead to the optimum, ascending
  std::size_t most = 0;          // levels searched
  for (std::size_t m = 1; m <= n && static_cast<double>(m) * alpha + beta * P[n] <= upper; ++m) {
    most = m;
    const double* before = &end[(m - 1) * w];
    live.clear();
    for (std::size_t i = m - 1; i < n; ++i)
      if (before[i] + (F[n] - F[i]) <= upper)
        live.push_back(i);
    std::size_t below = 0; // live states before k
    for (std::size_t k = m; k <= n; ++k) {
      while (below < live.size() && live[below] < k)
        ++below;
      const double gathered = static_cast<double>(m) * alpha + beta * P[k];
      double least = std::numeric_limits<double>::infinity();
      std::size_t at = k - 1;
      for (std::size_t q = below; q-- > 0;) { // the smallest last group first: ties keep the later cut
        const std::size_t i = live[q];
        if (const double c = std::max(before[i], gathered) + (F[k] - F[i]); c < least) {
          least = c;
          at = i;
        }
      }
      end[m * w + k] = least;
      cut[m * w + k] = static_cast<std::uint32_t>(at);
    }
    if (bounded)
      upper = std::min(upper, end[m * w + n] * kSlack);
  }
  double least = std::numeric_limits<double>::infinity();
  for (std::size_t m = 1; m <= most; ++m)
    least = std::min(least, end[m * w + n]);
  std::size_t groups = most; // the most groups within 1e-12 of the least end
  while (end[groups * w + n] > least + 1e-12 * std::abs(least))
    --groups;
  std::vector<GatherGroup> split(groups);
  for (std::size_t m = groups, k = n; m > 0; --m) {
    const auto first = cut[m * w + k];
    split[m - 1] = {static_cast<int>(first), static_cast<int>(k)};
    k = first;
  }
  return split;
}

GatherGroups plan_gather_groups(const std::vector<double>& forward_s, const std::vector<double>& backward_s,
                                const std::vector<double>& bytes, const AffineCost& cost, bool reshard_after_forward) {
  if (forward_s.size() != bytes.size() || backward_s.size() != bytes.size())
    throw std::logic_error("plan_gather_groups: times and bytes differ in length");
  GatherGroups out{optimal_gather_split(forward_s, bytes, cost), {}};
  if (!reshard_after_forward || out.forward.empty())
    return out;
  // The last forward group's backward runs first; the units before it in backward order.
  const auto kept = static_cast<std::size_t>(out.forward.back().first_unit);
  double busy = 0;
  for (std::size_t u = kept; u < bytes.size(); ++u)
    busy += backward_s[u];
  const std::vector<double> reversed_s(backward_s.rend() - static_cast<std::ptrdiff_t>(kept), backward_s.rend());
  const std::vector<double> reversed_bytes(bytes.rend() - static_cast<std::ptrdiff_t>(kept), bytes.rend());
  for (const auto& x : optimal_gather_split(reversed_s, reversed_bytes, cost, busy)) // position p is unit kept - 1 - p
    out.backward.push_back({static_cast<int>(kept) - x.end_unit, static_cast<int>(kept) - x.first_unit});
  return out;
}

GatherGroups gather_groups(const ShardedSchedule& s) {
  const int n = static_cast<int>(s.units.size());
  GatherGroups out{s.forward_gathers, s.backward_gathers};
  if (out.forward.empty())
    for (int u = 0; u < n; ++u)
      out.forward.push_back({u, u + 1});
  // Forward: ascending, adjacent, covering [0, n).
  int next = 0;
  for (const auto& x : out.forward) {
    if (x.first_unit != next || x.end_unit <= x.first_unit)
      throw std::logic_error("gather_groups: the forward's groups do not cover the units in order");
    next = x.end_unit;
  }
  if (next != n)
    throw std::logic_error("gather_groups: the forward's groups do not cover the units in order");
  if (!s.reshard_after_forward) {
    if (!out.backward.empty())
      throw std::logic_error("gather_groups: backward groups without resharding");
    return out;
  }
  // Backward: descending, adjacent, covering [0, first unit of the last forward group).
  const int kept = out.forward.empty() ? 0 : out.forward.back().first_unit;
  if (out.backward.empty())
    for (int u = kept; u-- > 0;)
      out.backward.push_back({u, u + 1});
  int above = kept;
  for (const auto& x : out.backward) {
    if (x.end_unit != above || x.end_unit <= x.first_unit)
      throw std::logic_error("gather_groups: the backward's groups do not cover the resharded units in order");
    above = x.first_unit;
  }
  if (above != 0)
    throw std::logic_error("gather_groups: the backward's groups do not cover the resharded units in order");
  return out;
}

IterationGraph build_sharded_iteration(const Model& model, const WorkerCosts& costs, const ShardedSchedule& schedule) {
  if (schedule.stage < 1 || schedule.stage > 3)
    throw std::logic_error(fmt::format("build_sharded_iteration: no sharded stage {}", schedule.stage));
  if (schedule.prefetch < 0)
    throw std::logic_error("build_sharded_iteration: negative prefetch");
  if ((!schedule.offload_gradient_s.empty() && schedule.offload_gradient_s.size() != schedule.groups.size()) ||
      (!schedule.fetch_unit_s.empty() && schedule.fetch_unit_s.size() != schedule.units.size()))
    throw std::logic_error("build_sharded_iteration: offload copies do not match the groups or units");
  if (schedule.stage < 3 && (!schedule.forward_gathers.empty() || !schedule.backward_gathers.empty()))
    throw std::logic_error("build_sharded_iteration: gather groups below stage 3");
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
