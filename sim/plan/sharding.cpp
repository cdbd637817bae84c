// Planning sharded data parallelism (sim/plan/sharding.hpp).
#include "sim/plan/sharding.hpp"

#include "core/units.hpp"
#include "dag/sharding.hpp"
#include "sim/network/lowering/evaluate.hpp"
#include "sim/plan/memory.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

namespace ddlsim::sim {

namespace {

// The time of a reduce group's chain as planners see it: the reduce-scatter over the shard group, plus with HSDP the
// allreduce of its shard (bytes / s) across the replicas; affine when both are.
// The reduce-scatter is costed from its lowering without lowering it again per candidate (LinearLoweringCost), so
// that MG-WFBP's planner, which tries every group of consecutive gradients, runs in linear time on its affine cost.
struct ReduceCost {
  std::optional<LinearLoweringCost> reduce_scatter;
  std::unique_ptr<CollectiveModel> allreduce; // HSDP only
  int shard_size = 1;

  [[nodiscard]] double operator()(double bytes) const {
    double t = (*reduce_scatter)(bytes);
    if (allreduce)
      t += allreduce->cost(bytes / shard_size).time_s;
    return t;
  }
  [[nodiscard]] std::optional<dag::AffineCost> affine() const {
    const auto ab = reduce_scatter->affine();
    if (!ab)
      return std::nullopt;
    const dag::AffineCost rs{ab->alpha_s, ab->beta_s_per_byte};
    if (!allreduce)
      return rs;
    const auto ar = affine_cost(*allreduce);
    if (!ar)
      return std::nullopt;
    return dag::AffineCost{rs.alpha_s + ar->alpha_s, rs.seconds_per_byte + ar->seconds_per_byte / shard_size};
  }
};

ReduceCost reduce_cost(const Scenario& s, const ShardingSpec& sh) {
  ReduceCost c;
  c.shard_size = sh.shard_size;
  const auto shard = layout_of(shard_group_ranks(s), s.cluster);
  c.reduce_scatter.emplace(collective_lowering(s, dag::Collective::reduce_scatter), shard.shape, shard.net);
  if (sh.replicas(data_parallel_degree(s)) > 1)
    c.allreduce = make_cost_model(*s.allreduce.algorithm, layout_of(replica_group_ranks(s), s.cluster).net);
  return c;
}

// Stage 3's units as a model of their own: one layer and one tensor per unit, its compute the unit's layers', so that
// the strategy groups units (wfbp: one per unit; mg-wfbp: consecutive units merged optimally).
struct UnitModel {
  dag::Model model;
  dag::WorkerCosts costs;
};

UnitModel unit_model(const Scenario& s, const dag::WorkerCosts& costs, const std::vector<dag::ShardUnit>& units) {
  UnitModel m;
  m.model.name = s.model.name + " (units)";
  m.costs = costs;
  m.costs.fwd_host_s.clear(); // planners read the passes' times only
  m.costs.bwd_host_s.clear();
  m.costs.fwd_s.assign(units.size(), 0.0);
  m.costs.bwd_s.assign(units.size(), 0.0);
  for (std::size_t u = 0; u < units.size(); ++u) {
    dag::Layer layer;
    layer.name = fmt::format("unit{}", u);
    layer.kind = "unit";
    layer.params.push_back({.name = layer.name, .shape = {units[u].params}, .numel = units[u].params});
    m.model.layers.push_back(std::move(layer));
    for (int l = units[u].first_layer; l < units[u].end_layer; ++l) {
      m.costs.fwd_s[u] += costs.fwd_s[static_cast<std::size_t>(l)];
      m.costs.bwd_s[u] += costs.bwd_s[static_cast<std::size_t>(l)];
    }
  }
  return m;
}

// A group of units (its tensors are unit indices) as a group of the model's tensors, in gradient-ready order.
dag::GradientGroup expand_units(const dag::GradientGroup& g, const std::vector<dag::GradientGroup>& per_unit,
                                std::size_t units) {
  dag::GradientGroup out = g;
  out.tensors.clear();
  out.elements = 0;
  int first_layer = -1;
  for (const int u : g.tensors) { // a unit's group in per_unit is at units - 1 - u (launch order: last unit first)
    const auto& unit = per_unit[units - 1 - static_cast<std::size_t>(u)];
    out.tensors.insert(out.tensors.end(), unit.tensors.begin(), unit.tensors.end());
    out.elements += unit.elements;
    first_layer = unit.ready_layer;
  }
  out.ready_layer = first_layer;
  return out;
}

std::vector<dag::ShardUnit> units_of(const Scenario& s, const ShardingSpec& sh) {
  const double cap = sh.unit == dag::UnitKind::size ? sh.unit_bytes / dtype_bytes(sh.param_dtype) : 0;
  return dag::shard_units(s.model, sh.unit, cap);
}

// The strategy's reduce groups: over the model's gradients (stages 1-2) or over the units (stage 3).
std::vector<dag::GradientGroup> reduce_groups(const Scenario& s, const ShardingSpec& sh, const dag::WorkerCosts& costs,
                                              const std::vector<dag::ShardUnit>& units) {
  const auto cost = reduce_cost(s, sh);
  const dag::CommCost time = [&cost](double bytes) { return cost(bytes); };
  const double e = dtype_bytes(sh.reduce_dtype);
  const auto plan = [&](const dag::Model& model, const dag::WorkerCosts& c) {
    const dag::StrategyInput input{model, c, e, time, s.strategy.options, sh.shard_size, {}, cost.affine()};
    return s.strategy.entry().plan(input);
  };
  if (sh.stage < 3)
    return plan(s.model, costs);
  const auto per_unit = dag::unit_groups(s.model, units, e);
  const auto by_units = unit_model(s, costs, units);
  std::vector<dag::GradientGroup> groups;
  for (const auto& g : plan(by_units.model, by_units.costs)) {
    groups.push_back(expand_units(g, per_unit, units.size()));
    groups.back().bytes = static_cast<double>(groups.back().elements) * e;
  }
  return groups;
}

// Each group's chain: a reduce-scatter of its gradients over the shard group, and with HSDP an allreduce of the shard.
void set_reduce_steps(std::vector<dag::GradientGroup>& groups, const ShardingSpec& sh, int replicas) {
  for (auto& g : groups) {
    g.steps = {{.collective = dag::Collective::reduce_scatter, .bytes = g.bytes}};
    if (replicas > 1)
      g.steps.push_back({.collective = dag::Collective::allreduce, .bytes = g.bytes / sh.shard_size});
  }
}

// The all-gather's alpha and beta over payloads in [least, most] bytes: a closed form's, else those of a lowering's
// phase-synchronous time, a sum over phases of the slowest flow's latency plus its bytes (a fixed share of the
// payload) over its bandwidth. That is convex and piecewise affine in the payload, so it is affine on [least, most]
// when it meets its chord at the middle (here to 1e-12, relative): the ring over a star, where one link class bounds
// every phase, is; nullopt where it is not.
std::optional<dag::AffineCost> affine_between(const CollectiveModel& model, double least, double most) {
  if (const auto closed = affine_cost(model))
    return closed;
  const double low = model.cost(least).time_s, high = model.cost(most).time_s;
  const double middle = model.cost((least + most) / 2).time_s;
  if (!(most > least) || std::abs(middle - (low + high) / 2) > 1e-12 * high)
    return std::nullopt;
  const double beta = (high - low) / (most - least);
  return dag::AffineCost{low - beta * least, beta};
}

// Units beyond which the gather groups are not searched: the search is cubic in them (dag::optimal_gather_split: up to
// 0.17 s for 1,024 units, 1.5 s for 2,048).
constexpr std::size_t kMaxGatherSearchUnits = 1024;

// Stage 3 with MG-WFBP: the units' all-gathers merged into gather groups (dag::plan_gather_groups), timed with the
// parameter all-gather's cost over the shard group and the units' forward and backward times. Empty groups (one per
// unit) and a note where the search does not run.
struct GatherMerge {
  dag::GatherGroups groups;
  std::optional<std::string> note;
};

GatherMerge merge_gathers(const Scenario& s, const ShardingSpec& sh, const dag::WorkerCosts& costs,
                          const std::vector<dag::ShardUnit>& units) {
  if (units.size() < 2)
    return {};
  if (units.size() > kMaxGatherSearchUnits)
    return {{},
            fmt::format("{}: {} units, more than the {} whose gather groups it searches (cubic in the units): one "
                        "all-gather per unit",
                        s.strategy.kind(), units.size(), kMaxGatherSearchUnits)};
  const double e = dtype_bytes(sh.param_dtype);
  std::vector<double> forward_s(units.size(), 0.0), backward_s(units.size(), 0.0), bytes;
  for (std::size_t u = 0; u < units.size(); ++u) {
    for (int l = units[u].first_layer; l < units[u].end_layer; ++l) {
      forward_s[u] += costs.fwd_s[static_cast<std::size_t>(l)];
      backward_s[u] += costs.bwd_s[static_cast<std::size_t>(l)];
    }
    bytes.push_back(static_cast<double>(units[u].params) * e);
  }
  double total = 0;
  for (const double b : bytes)
    total += b;
  const auto gather = make_cost_model(*sh.gather_algorithm, layout_of(shard_group_ranks(s), s.cluster).net);
  const auto cost = affine_between(*gather, *std::min_element(bytes.begin(), bytes.end()), total);
  if (!cost)
    return {{},
            fmt::format("{}: the parameter all-gather's cost over the shard group ({}) is not affine in its payload, "
                        "which the merge of the units' gathers needs: one all-gather per unit",
                        s.strategy.kind(), sh.gather_algorithm->algorithm)};
  return {dag::plan_gather_groups(forward_s, backward_s, bytes, *cost, sh.reshard_after_forward), std::nullopt};
}

// The most parameters gathered at once at stage 3: prefetch + 1 consecutive gather groups in forward or in backward
// (whose sequence starts with the last forward group, kept for it), or every unit without resharding (gathered in
// forward, kept for backward).
double gathered_params(const std::vector<dag::ShardUnit>& units, const dag::GatherGroups& gathers,
                       const ShardingSpec& sh) {
  const auto params = [&](const dag::GatherGroup& x) {
    double sum = 0;
    for (int u = x.first_unit; u < x.end_unit; ++u)
      sum += static_cast<double>(units[static_cast<std::size_t>(u)].params);
    return sum;
  };
  std::vector<double> forward, backward;
  for (const auto& x : gathers.forward)
    forward.push_back(params(x));
  if (!sh.reshard_after_forward) {
    double sum = 0;
    for (const double p : forward)
      sum += p;
    return sum;
  }
  if (!gathers.forward.empty())
    backward.push_back(params(gathers.forward.back()));
  for (const auto& x : gathers.backward)
    backward.push_back(params(x));
  const std::size_t window = static_cast<std::size_t>(sh.prefetch) + 1;
  double most = 0;
  for (const auto* sequence : {&forward, &backward})
    for (std::size_t j = 0; j < sequence->size(); ++j) {
      double sum = 0;
      for (std::size_t k = j; k < std::min(sequence->size(), j + window); ++k)
        sum += (*sequence)[k];
      most = std::max(most, sum);
    }
  return most;
}

void set_memory(const Scenario& s, const ShardingSpec& sh, const std::vector<dag::ShardUnit>& units,
                const dag::GatherGroups& gathers, const std::vector<dag::GradientGroup>& groups, ShardingReport& r) {
  const double params = static_cast<double>(s.model.param_count());
  const auto state = dag::zero_state_per_parameter(s.optimizer, s.gradient_dtype, sh.stage, sh.shard_size);
  r.weights_bytes = params * state.weights;
  r.gradients_bytes = params * state.gradients;
  r.optimizer_bytes = params * state.optimizer;
  r.unsharded_state_bytes = params * dag::zero_state_per_parameter(s.optimizer, s.gradient_dtype, 0, 1).total();
  if (sh.stage == 3)
    r.gathered_bytes = gathered_params(units, gathers, sh) * dtype_bytes(sh.param_dtype);
  for (const auto& g : groups)
    r.reduce_buffer_bytes = std::max(r.reduce_buffer_bytes, g.bytes);
  r.activation_bytes = whole_model_activation_bytes(s); // as data parallelism's
}

// Bytes the host moves per parameter in its optimizer step, a memory-bound loop (DeepSpeed's CPU-Adam): the fp32
// weights, the fp32 gradient and the state read, the weights and the state written, and in mixed precision the 16-bit
// weights the GPU gathers: 30 for mixed-precision Adam.
double host_step_bytes_per_parameter(const Scenario& s) {
  const double state = s.optimizer == dag::Optimizer::adam ? 8 : s.optimizer == dag::Optimizer::sgd_momentum ? 4 : 0;
  return 4 + 4 + state + 4 + state + (s.gradient_dtype == dag::DType::fp32 ? 0 : 2);
}

// Offloaded state: the copies over the GPU's host link, the step on the host, and the memory moved off the GPU.
void set_offload(const Scenario& s, const ShardingSpec& sh, const std::vector<dag::ShardUnit>& units,
                 const dag::GatherGroups& gathers, dag::ShardedSchedule& schedule, ShardingReport& r) {
  if (sh.offload == Offload::none)
    return;
  const double n = sh.shard_size, link = s.gpu.host_link, e_p = dtype_bytes(sh.param_dtype);
  const double shard = static_cast<double>(s.model.param_count()) / n;
  for (const auto& g : schedule.groups) { // each GPU's shard of the group's reduced gradients
    const double bytes = static_cast<double>(g.elements) / n * dtype_bytes(sh.reduce_dtype);
    schedule.offload_gradient_s.push_back(bytes / link);
    r.host_copy_bytes += bytes;
  }
  schedule.update_s = shard * host_step_bytes_per_parameter(s) / sh.host_memory_bandwidth;
  r.host_step_s = schedule.update_s;
  r.host_bytes = r.optimizer_bytes;
  r.optimizer_bytes = 0;
  if (sh.offload == Offload::optimizer) {
    schedule.upload_s = shard * e_p / link;
    r.host_copy_bytes += shard * e_p;
    return;
  }
  r.host_bytes += r.weights_bytes; // the parameter shards live on the host, fetched for every gather
  r.weights_bytes = 0;
  std::vector<int> times(units.size(), 0); // each unit's shard is fetched for each of its gathers
  for (const auto* direction : {&gathers.forward, &gathers.backward})
    for (const auto& x : *direction)
      for (int u = x.first_unit; u < x.end_unit; ++u)
        ++times[static_cast<std::size_t>(u)];
  if (sh.reshard_last && !gathers.forward.empty()) // the last group is gathered again too
    for (int u = gathers.forward.back().first_unit; u < gathers.forward.back().end_unit; ++u)
      ++times[static_cast<std::size_t>(u)];
  for (std::size_t u = 0; u < units.size(); ++u) {
    const double bytes = static_cast<double>(units[u].params) / n * e_p;
    schedule.fetch_unit_s.push_back(bytes / link);
    r.host_copy_bytes += bytes * times[u];
  }
}

std::string stage_name(int stage) {
  static constexpr std::array<const char*, 4> kNames{
      "", "1 (optimizer state: ZeRO-1, Megatron-Core's distributed optimizer)",
      "2 (optimizer state and gradients: ZeRO-2, FSDP SHARD_GRAD_OP)",
      "3 (optimizer state, gradients and parameters: ZeRO-3, FSDP FULL_SHARD)"};
  return kNames.at(static_cast<std::size_t>(stage));
}

std::string unit_text(const ShardingSpec& sh) {
  switch (sh.unit) {
  case dag::UnitKind::layer:
    return "layer";
  case dag::UnitKind::block:
    return "block";
  case dag::UnitKind::size:
    break;
  }
  return format_bytes(sh.unit_bytes);
}

std::string schedule_note(const Scenario& s, const ShardingSpec& sh, const ShardingReport& r, bool merged) {
  const int d = data_parallel_degree(s);
  const std::string where =
      r.replicas > 1
          ? fmt::format("with HSDP, shard groups of {} GPUs (\"{}\"), {} replicas of each shard reduced by an "
                        "allreduce across the shard groups",
                        sh.shard_size, sh.group, r.replicas)
          : fmt::format("over the data-parallel group of {} GPUs", d);
  std::string gathers;
  if (sh.stage < 3)
    gathers = fmt::format("each group's updated parameters all-gathered in {} before its first forward, in forward "
                          "order from the start of the iteration (the steady state of Megatron-Core's "
                          "overlap_param_gather)",
                          dag::dtype_name(sh.param_dtype));
  else
    gathers = fmt::format(
        "{} units ({}), each all-gathered in {} before its forward with {} unit{} prefetched{}; the all-gathers and "
        "the reductions one at a time on the communication stream, as NCCL runs FSDP2's two streams over one process "
        "group",
        r.units, r.unit, dag::dtype_name(sh.param_dtype), sh.prefetch, sh.prefetch == 1 ? "" : "s",
        !sh.reshard_after_forward ? ""
        : sh.reshard_last         ? " and again before its backward, every unit (reshard_after_forward \"all\")"
                                  : " and again before its backward (reshard_after_forward; the last unit keeps its "
                                    "parameters for the backward that starts with it, as FSDP2 and torchtitan do)");
  if (merged)
    gathers += fmt::format(
        "; {} merges consecutive units' all-gathers so that they hide behind compute (MG-WFBP's merge, Shi et al., "
        "INFOCOM 2019, on the gathers, planned with the all-gather's alpha and beta, gathers back to back): {} gather "
        "group{} in forward{}, each one all-gather, the prefetch counting groups",
        s.strategy.kind(), r.forward_gather_groups, r.forward_gather_groups == 1 ? "" : "s",
        sh.reshard_after_forward
            ? fmt::format(" and {} in backward (the last forward group keeps its parameters)", r.backward_gather_groups)
            : "");
  if (sh.ring_gathers_by_default)
    gathers += " (by the ring algorithm, NCCL's for all-gathers: collectives.allgather picks another)";
  const std::string reductions =
      exchanges_compressed(s)
          ? fmt::format("the gradients exchanged compressed as {} exchanges them without sharding ({} group{}), "
                        "every GPU decompressing the whole gradient",
                        s.strategy.kind(), r.reduce_groups, r.reduce_groups == 1 ? "" : "s")
          : fmt::format("{} reduce-scatter{} of the gradients in {} as the strategy groups them", r.reduce_groups,
                        r.reduce_groups == 1 ? "" : "s", dag::dtype_name(sh.reduce_dtype));
  return fmt::format(
      "sharding stage {} {}: {}; {}; the optimizer steps on 1/{} of the parameters; memory per GPU by ZeRO's "
      "accounting (Rajbhandari et al., SC'20, Figure 1): {} (model state {}, {} unsharded)",
      stage_name(sh.stage), where, reductions, gathers, sh.shard_size, format_bytes(r.total_bytes()),
      format_bytes(r.weights_bytes + r.gradients_bytes + r.optimizer_bytes), format_bytes(r.unsharded_state_bytes));
}

std::string offload_note(const Scenario& s, const ShardingSpec& sh, const ShardingReport& r) {
  return fmt::format(
      "offload \"{}\": {} in host memory per GPU; each GPU's gradient shard is copied to the host over its {} link "
      "after its reduction, the optimizer step runs on the host in {} ({} per parameter at {} of host memory traffic "
      "per GPU, {}: DeepSpeed's CPU-Adam is bound by memory traffic), {}; the copies run on the GPU's copy stream, "
      "at the full link rate on both engines (the flow engine does not share a node's host links)",
      offload_name(sh.offload), format_bytes(r.host_bytes), format_bandwidth(s.gpu.host_link),
      format_time(r.host_step_s), format_bytes(host_step_bytes_per_parameter(s)),
      format_bandwidth(sh.host_memory_bandwidth),
      sh.host_memory_bandwidth_given ? "sharding.host_memory_bandwidth"
                                     : "by default a DGX A100's two EPYC 7742 sockets of 204.8 GB/s over 8 GPUs",
      sh.offload == Offload::optimizer
          ? "and the updated parameter shard is copied back before the next iteration's gathers"
          : "and each unit's parameter shard is copied to the GPU before each of its all-gathers");
}

// Keys given that the stage does not read: said, not ignored silently.
void note_unused_keys(const Scenario& s, const ShardingSpec& sh, std::vector<std::string>& notes) {
  const auto& raw = s.raw.at("sharding");
  std::vector<std::string> unused;
  for (const char* key : {"unit", "prefetch", "reshard_after_forward"})
    if (sh.stage < 3 && raw.contains(key))
      unused.push_back(fmt::format("sharding.{}", key));
  std::vector<std::string> unsharded;
  for (const char* key : {"group", "param_dtype", "reduce_dtype"})
    if (sh.stage == 0 && raw.contains(key))
      unsharded.push_back(fmt::format("sharding.{}", key));
  if (!unsharded.empty())
    notes.push_back(fmt::format("{} appl{} to stages 1-3: stage 0 allreduces whole gradients in model.gradient_dtype "
                                "over the data-parallel group",
                                fmt::join(unsharded, ", "), unsharded.size() == 1 ? "ies" : "y"));
  if (sh.offload == Offload::none && raw.contains("host_memory_bandwidth"))
    notes.push_back("sharding.host_memory_bandwidth applies with offload only: nothing is offloaded");
  if (!unused.empty())
    notes.push_back(fmt::format("{} appl{} to stage 3 only: stage {} reduces the strategy's gradient groups and keeps "
                                "whole parameters on every GPU",
                                fmt::join(unused, ", "), unused.size() == 1 ? "ies" : "y", sh.stage));
}

} // namespace

std::vector<int> shard_group_ranks(const Scenario& s) {
  std::vector<int> ranks(static_cast<std::size_t>(s.sharding ? s.sharding->shard_size : 1));
  for (std::size_t k = 0; k < ranks.size(); ++k)
    ranks[k] = static_cast<int>(k);
  return ranks;
}

std::vector<int> replica_group_ranks(const Scenario& s) {
  const int step = s.sharding ? s.sharding->shard_size : 1;
  std::vector<int> ranks;
  for (int k = 0; k < data_parallel_degree(s); k += step)
    ranks.push_back(k);
  return ranks;
}

void plan_sharded(const Scenario& s, const dag::StrategyInput& input, Plan& p) {
  const ShardingSpec& sh = *sharded(s);
  const int replicas = sh.replicas(data_parallel_degree(s));
  const auto units = sh.stage == 3 ? units_of(s, sh) : std::vector<dag::ShardUnit>{};
  if (exchanges_compressed(s)) { // the strategy's own exchange, whole gradients to every GPU
    p.groups = s.strategy.entry().plan(input);
  } else {
    p.groups = reduce_groups(s, sh, p.costs.worker, units);
    set_reduce_steps(p.groups, sh, replicas);
  }
  dag::ShardedSchedule schedule{.stage = sh.stage,
                                .groups = p.groups,
                                .units = units,
                                .prefetch = sh.prefetch,
                                .reshard_after_forward = sh.reshard_after_forward,
                                .reshard_last = sh.reshard_after_forward && sh.reshard_last,
                                .param_bytes_per_element = dtype_bytes(sh.param_dtype),
                                .update_s = p.costs.worker.update_s / sh.shard_size};
  // MG-WFBP (the registry's trait, GroupSearch::allreduce) merges stage 3's gathers as it merges the reductions.
  GatherMerge merge;
  if (sh.stage == 3 && !exchanges_compressed(s) &&
      s.strategy.entry().traits.group_search == dag::GroupSearch::allreduce)
    merge = merge_gathers(s, sh, p.costs.worker, units);
  schedule.forward_gathers = merge.groups.forward;
  schedule.backward_gathers = merge.groups.backward;
  const auto gathers = sh.stage == 3 ? dag::gather_groups(schedule) : dag::GatherGroups{};
  ShardingReport r{.stage = sh.stage,
                   .shard_size = sh.shard_size,
                   .replicas = replicas,
                   .unit = sh.stage == 3 ? unit_text(sh) : "",
                   .units = static_cast<int>(units.size()),
                   .prefetch = sh.stage == 3 ? sh.prefetch : 0,
                   .reshard_after_forward = sh.stage == 3 && sh.reshard_after_forward,
                   .reshard_last_unit = sh.stage == 3 && sh.reshard_after_forward && sh.reshard_last,
                   .param_dtype = std::string(dag::dtype_name(sh.param_dtype)),
                   .reduce_dtype = std::string(dag::dtype_name(sh.reduce_dtype)),
                   .reduce_groups = static_cast<int>(p.groups.size()),
                   .forward_gather_groups = static_cast<int>(gathers.forward.size()),
                   .backward_gather_groups = static_cast<int>(gathers.backward.size()),
                   .offload = std::string(offload_name(sh.offload)),
                   .fits = std::nullopt};
  set_memory(s, sh, units, gathers, p.groups, r);
  set_offload(s, sh, units, gathers, schedule, r);
  p.memory = complete_sharding_memory(s, r, true); // every data-parallel rank computes the loss
  p.graph = dag::build_sharded_iteration(s.model, p.costs.worker, schedule);
  p.peak_memory_bytes_per_gpu = r.total_bytes();
  p.notes.push_back(schedule_note(s, sh, r, !schedule.forward_gathers.empty()));
  if (merge.note)
    p.notes.push_back(*merge.note);
  if (sh.offload != Offload::none)
    p.notes.push_back(offload_note(s, sh, r));
  note_unused_keys(s, sh, p.notes);
  if (r.fits && !*r.fits)
    p.notes.push_back(fmt::format("a GPU needs {} with this sharding, more than its {}", format_bytes(r.total_bytes()),
                                  format_bytes(s.gpu.memory_bytes)));
  p.sharding = std::move(r);
}

void place_shard_groups(const Scenario& s, dag::IterationGraph& g) {
  const auto* sh = sharded(s);
  if (sh == nullptr || sh->replicas(data_parallel_degree(s)) == 1)
    return;
  const int shard = g.add_communicator({shard_group_ranks(s)});
  const int replica = g.add_communicator({replica_group_ranks(s)});
  for (std::size_t v = 0; v < g.size(); ++v) {
    auto& t = g.task(v);
    const auto c = dag::collective_of(t);
    if (c != dag::Collective::none)
      dag::wire(t)->communicator = c == dag::Collective::allreduce ? replica : shard;
  }
  g.replicate({{.gpu = 0, .communicator = replica, .tensor = shard}}, s.cluster.gpus_per_node);
}

void count_sharded_traffic(const dag::IterationGraph& g, const std::vector<double>& sent, ShardingReport& report,
                           std::optional<dag::Device> device) {
  for (std::size_t v = 0; v < g.size(); ++v) {
    const auto& t = g.task(v);
    if (t.iteration != 0 || (device && (t.device != *device || t.resource != dag::Resource::comm)))
      continue;
    if (dag::gathers_parameters(t)) {
      ++report.allgathers;
      report.allgather_bytes += sent[v];
      continue;
    }
    switch (dag::collective_of(t)) { // a compressed exchange's collectives count as its reductions
    case dag::Collective::reduce_scatter:
      ++report.reduce_scatters;
      report.reduce_scatter_bytes += sent[v];
      break;
    case dag::Collective::allreduce:
      ++report.allreduces;
      report.allreduce_bytes += sent[v];
      break;
    case dag::Collective::none:
      break;
    default:
      ++report.other_exchanges;
      report.other_exchange_bytes += sent[v];
      break;
    }
  }
}

void report_pipeline_sharding(const Scenario& s, const dag::StageMemory& stage0, int reduce_groups, dag::Device gpu,
                              const std::vector<double>& sent, Plan& p) {
  const ShardingSpec& sh = *sharded(s);
  const int d = data_parallel_degree(s);
  ShardingReport r;
  r.stage = sh.stage;
  r.shard_size = d;
  r.param_dtype = std::string(dag::dtype_name(sh.param_dtype));
  r.reduce_dtype = std::string(dag::dtype_name(sh.reduce_dtype));
  r.reduce_groups = reduce_groups;
  count_sharded_traffic(p.graph, sent, r, gpu);
  // Megatron-Core's accounting, as the stage's peak memory (dag/memory.hpp); its gradient buffer is reduce-scattered
  // in place (param_and_grad_buffer.py), so no reduce buffer beside it.
  const auto state = dag::megatron_state_per_parameter(s.optimizer, s.gradient_dtype, d);
  r.weights_bytes = stage0.parameters * state.weights;
  r.gradients_bytes = stage0.parameters * state.gradients;
  r.optimizer_bytes = stage0.parameters * state.optimizer;
  r.activation_bytes = stage0.activation_bytes;
  r.unsharded_state_bytes = stage0.parameters * dag::bytes_per_parameter(s.optimizer, s.gradient_dtype, 1);
  complete_sharding_memory(s, r, s.parallelism.pipeline == 1); // stage 0 computes the loss without stages
  p.notes.push_back(fmt::format(
      "sharding stage {} over each stage's data-parallel group of {} GPUs: each stage's gradients reduce-scattered in "
      "{} after the flush as the strategy groups them ({} reduce-scatter{} on stage 0), each group's updated "
      "parameters all-gathered in {}{} before micro-batch 0's forward reaches its first layer, in forward order from "
      "the start of the iteration (the steady state of Megatron-Core's overlap_param_gather), on the communication "
      "stream with the reductions; the optimizer steps on 1/{} of each stage's parameters; memory per GPU by "
      "Megatron-Core's accounting (docs/source/api-guide/dist_optimizer.md: {:.4g} bytes per parameter): stage 0 {} "
      "(model state {}, {} without the distributed optimizer)",
      stage_name(sh.stage), d, r.reduce_dtype, reduce_groups, reduce_groups == 1 ? "" : "s", r.param_dtype,
      sh.ring_gathers_by_default ? " (by the ring algorithm, NCCL's: collectives.allgather picks another)" : "", d,
      state.total(), format_bytes(r.total_bytes()),
      format_bytes(r.weights_bytes + r.gradients_bytes + r.optimizer_bytes), format_bytes(r.unsharded_state_bytes)));
  note_unused_keys(s, sh, p.notes);
  p.sharding = std::move(r);
}

void time_sharding(const RunResult& r, double from, double to, ShardingReport& report) {
  // Sweep over GPU 0's intervals: time a gather (or a reduction) runs while its compute stream does not.
  struct Edge {
    double t;
    int delta;
    int cls; // 0 compute, 1 gather, 2 reduction
  };
  std::vector<Edge> edges;
  const auto gpu0 = dag::Device::gpu(0);
  for (std::size_t v = 0; v < r.graph.size(); ++v) {
    const auto& t = r.graph.task(v);
    if (t.device != gpu0)
      continue;
    int cls = -1;
    // The compute stream's work: passes, update, and a pipeline's tensor-group collectives on it (the analytic engine
    // folds them into the passes)
    if (t.kind == dag::TaskKind::forward || t.kind == dag::TaskKind::backward || t.kind == dag::TaskKind::update ||
        (t.kind == dag::TaskKind::communication && t.resource == dag::Resource::gpu_compute))
      cls = 0;
    else if (dag::gathers_parameters(t))
      cls = 1;
    else if (dag::collective_of(t) != dag::Collective::none)
      cls = 2; // a reduction, or a compressed exchange
    const double start = std::max(r.timing[v].start_s, from), end = std::min(r.timing[v].end_s, to);
    if (cls >= 0 && end > start) {
      edges.push_back({start, +1, cls});
      edges.push_back({end, -1, cls});
    }
  }
  std::sort(edges.begin(), edges.end(),
            [](const Edge& a, const Edge& b) { return a.t != b.t ? a.t < b.t : a.delta < b.delta; });
  std::array<int, 3> active{};
  double last = from;
  for (const auto& e : edges) {
    if (const double span = e.t - last; span > 0 && active[0] == 0) {
      report.exposed_allgather_s += active[1] > 0 ? span : 0;
      report.exposed_reduce_s += active[2] > 0 ? span : 0;
    }
    active[static_cast<std::size_t>(e.cls)] += e.delta;
    last = e.t;
  }
}

void report_unsharded(const Scenario& s, Plan& p) {
  ShardingSpec sh = *s.sharding;
  sh.shard_size = 1;
  ShardingReport r;
  r.stage = 0;
  r.replicas = data_parallel_degree(s);
  r.param_dtype = r.reduce_dtype = std::string(dag::dtype_name(s.gradient_dtype));
  r.reduce_groups = static_cast<int>(p.groups.size());
  set_memory(s, sh, {}, {}, p.groups, r);
  p.memory = complete_sharding_memory(s, r, true);
  p.peak_memory_bytes_per_gpu = r.total_bytes();
  p.notes.push_back(fmt::format("sharding stage 0: every GPU holds the whole model state; memory per GPU by ZeRO's "
                                "accounting (Rajbhandari et al., SC'20, Figure 1), as the sharded stages count it: {} "
                                "(model state {}); without the sharding key, data parallelism counts 12 bytes per "
                                "parameter",
                                format_bytes(r.total_bytes()), format_bytes(r.unsharded_state_bytes)));
  note_unused_keys(s, sh, p.notes);
  p.sharding = std::move(r);
}

} // namespace ddlsim::sim
