// Planning a pipeline (sim/plan/pipeline.hpp).
#include "sim/plan/pipeline.hpp"

#include "core/units.hpp"
#include "dag/memory.hpp"
#include "sim/network/lowering/evaluate.hpp"
#include "sim/plan/host.hpp"
#include "sim/plan/memory.hpp"
#include "sim/plan/schedule.hpp"
#include "sim/plan/sharding.hpp"
#include "sim/plan/tensor_parallel.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <utility>

namespace ddlsim::sim {

namespace {

// The host thread's time per pipeline task (sim/plan/host.hpp): a pass issues its layers' kernels, their host times
// summed (a backward that recomputes issues the forward's again), split over the pass's tasks (tensor parallelism's
// parts) by their share of its compute; a task starts once its share of one layer's is issued, the rest is issued
// while it runs. Every other GPU task is one launch.
void add_pipeline_host_tasks(dag::IterationGraph& g, const dag::WorkerCosts& w, const dag::PipelinePlan& plan) {
  HostTimes times(w);
  if (!times.any())
    return;
  struct Pass {
    double host_s = 0;
    double compute_s = 0;
    int layers = 1;
  };
  std::vector<Pass> forward, backward;
  const auto compute = [](const std::vector<dag::PassPart>& parts) {
    double sum = 0;
    for (const auto& part : parts)
      sum += part.compute_s;
    return sum;
  };
  for (const auto& vs : plan.stages) {
    Pass f, b;
    f.layers = b.layers = std::max(1, vs.end_layer - vs.first_layer);
    for (int l = vs.first_layer; l < vs.end_layer; ++l) {
      f.host_s += w.fwd_host_s[static_cast<std::size_t>(l)];
      b.host_s += w.bwd_host_s[static_cast<std::size_t>(l)];
    }
    if (vs.recompute_s > 0)
      b.host_s += f.host_s;
    f.compute_s = vs.forward_parts.empty() ? vs.forward_s : compute(vs.forward_parts);
    b.compute_s = vs.backward_parts.empty() ? vs.backward_s + vs.recompute_s
                                            : compute(vs.backward_parts) + compute(vs.recompute_parts) +
                                                  (vs.recompute_parts.empty() ? vs.recompute_s : 0.0);
    forward.push_back(f);
    backward.push_back(b);
  }
  times.issue = [&](const dag::Task& t) {
    const bool pass = (t.kind == dag::TaskKind::forward || t.kind == dag::TaskKind::backward) &&
                      dag::virtual_stage_of(t) >= 0 &&
                      static_cast<std::size_t>(dag::virtual_stage_of(t)) < forward.size();
    if (!pass)
      return HostTimes::Issue{t.kind == dag::TaskKind::update ? times.update_s : times.launch_s};
    const Pass& whole =
        (t.kind == dag::TaskKind::forward ? forward : backward)[static_cast<std::size_t>(dag::virtual_stage_of(t))];
    const double share = whole.compute_s > 0 ? std::min(1.0, t.duration_s / whole.compute_s) : 1.0;
    const double before = whole.host_s * share / whole.layers;
    return HostTimes::Issue{before, whole.host_s * share - before};
  };
  add_host_tasks(g, times);
}

// Activations cross between stages in the training dtype (the model's activation_bytes are fp32).
// PipelinePlan::update_every of a schedule's weight updates: 0 after the flush, else every that many backwards.
int update_every(dag::WeightUpdates updates, int micro_batches) {
  switch (updates) {
  case dag::WeightUpdates::after_flush:
    return 0;
  case dag::WeightUpdates::every_micro_batch:
    return 1;
  case dag::WeightUpdates::every_iteration:
    return micro_batches;
  }
  return 0;
}

double activation_scale(const Scenario& s) {
  return dtype_bytes(s.gradient_dtype) / 4.0;
}

// The forward time the backward of a virtual stage recomputes (per micro-batch).
double recompute_s(const Scenario& s, const dag::WorkerCosts& costs, int first, int end) {
  double out = 0;
  for (int l = first; l < end; ++l) {
    const auto i = static_cast<std::size_t>(l);
    switch (s.pipeline->recompute) {
    case dag::Recompute::none:
      break;
    case dag::Recompute::full:
    case dag::Recompute::except_last:
      out += costs.fwd_s[i];
      break;
    case dag::Recompute::selective:
      if (is_attention_core(s.model.layers[i]))
        out += costs.fwd_s[i];
      break;
    }
  }
  return out;
}

// The cost model of an allreduce over a data-parallel group: the measured fit when the group is the whole cluster,
// else the algorithm's closed form on the group's layout (as cost_communication does).
std::unique_ptr<CollectiveModel> group_allreduce(const Scenario& s, const CommunicatorLayout& layout) {
  if (s.allreduce.measured && layout.whole_cluster)
    return make_measured_allreduce(layout.net, *s.allreduce.measured);
  return make_cost_model(*s.allreduce.algorithm, layout.net);
}

// The layers of one rank (its chunks' layers in forward order) as a model of their own, with their costs; and the
// map from the sub-model's tensors and layers back to the whole model's.
struct RankModel {
  dag::Model model;
  dag::WorkerCosts costs;
  std::vector<int> layers;  ///< whole-model index of each sub-model layer
  std::vector<int> tensors; ///< whole-model index of each sub-model tensor
};

RankModel rank_model(const Scenario& s, const dag::WorkerCosts& costs, const std::vector<dag::StageSpan>& spans,
                     int rank, int stages) {
  RankModel out;
  out.model.name = s.model.name;
  out.costs = costs;
  out.costs.fwd_s.clear();
  out.costs.bwd_s.clear();
  std::vector<int> first_tensor(s.model.layers.size() + 1, 0); // whole-model index of each layer's first tensor
  for (std::size_t l = 0; l < s.model.layers.size(); ++l)
    first_tensor[l + 1] = first_tensor[l] + static_cast<int>(s.model.layers[l].params.size());
  std::int64_t params = 0;
  for (std::size_t stage = static_cast<std::size_t>(rank); stage < spans.size();
       stage += static_cast<std::size_t>(stages))
    for (int l = spans[stage].first; l < spans[stage].end; ++l) {
      const auto i = static_cast<std::size_t>(l);
      auto layer = s.model.layers[i];
      layer.inputs.clear(); // indices into the whole model; the strategies do not read them
      shard_parameters(layer, s.parallelism.tensor);
      for (std::size_t t = 0; t < layer.params.size(); ++t) {
        out.tensors.push_back(first_tensor[i] + static_cast<int>(t));
        params += layer.params[t].numel;
      }
      out.model.layers.push_back(std::move(layer));
      out.layers.push_back(l);
      out.costs.fwd_s.push_back(costs.fwd_s[i]);
      out.costs.bwd_s.push_back(costs.bwd_s[i]);
    }
  const auto total = s.model.param_count();
  out.costs.update_s = total > 0 ? costs.update_s * static_cast<double>(params) / static_cast<double>(total) : 0;
  return out;
}

// Passes of each chunk held at the instant the rank holds the most (its activations' peak).
std::vector<int> in_flight_at_peak(const std::vector<dag::PipelineOp>& ops, int chunks) {
  std::vector<int> held(static_cast<std::size_t>(chunks), 0), at_peak = held;
  int total = 0, most = 0;
  for (const auto& op : ops) {
    held[static_cast<std::size_t>(op.chunk)] += op.forward ? 1 : -1;
    total += op.forward ? 1 : -1;
    if (total > most) {
      most = total;
      at_peak = held;
    }
  }
  return at_peak;
}

// The tensor collectives' time inside a pass task the analytic engine folded (0 for any other task).
double folded_tensor_s(const std::vector<FoldedTensor>& folded, const dag::Task& t, int micro_batches) {
  if (folded.empty() || dag::virtual_stage_of(t) < 0 ||
      (t.kind != dag::TaskKind::forward && t.kind != dag::TaskKind::backward))
    return 0;
  const auto& f = folded[static_cast<std::size_t>(dag::virtual_stage_of(t))];
  if (t.kind == dag::TaskKind::forward)
    return f.forward_s;
  return f.backward_s + (dag::micro_batch_of(t) + 1 < micro_batches || f.recompute_last ? f.recompute_s : 0.0);
}

// Micro-batch 0's forwards cut for parameter gathers (VirtualStage::first_forward_parts) into several tasks: the
// forward's duration by virtual stage (folded, each task holds its share of the pass's tensor collectives).
std::map<int, double> cut_forward_s(const dag::IterationGraph& g) {
  std::map<int, std::pair<int, double>> passes; // tasks, seconds
  for (std::size_t v = 0; v < g.size(); ++v) {
    const auto& t = g.task(v);
    if (t.kind == dag::TaskKind::forward && dag::micro_batch_of(t) == 0 && dag::virtual_stage_of(t) >= 0) {
      auto& [tasks, seconds] = passes[dag::virtual_stage_of(t)];
      ++tasks;
      seconds += t.duration_s;
    }
  }
  std::map<int, double> out;
  for (const auto& [stage, pass] : passes)
    if (pass.first > 1)
      out[stage] = pass.second;
  return out;
}

// The duration of the pass a task of it belongs to: its own, or a cut forward's (cut_forward_s).
double cut_pass_s(const std::map<int, double>& cut, const dag::Task& t) {
  if (t.kind != dag::TaskKind::forward || dag::micro_batch_of(t) != 0)
    return t.duration_s;
  const auto it = cut.find(dag::virtual_stage_of(t));
  return it == cut.end() ? t.duration_s : it->second;
}

} // namespace

std::vector<dag::StageSpan> partition_stages(const Scenario& s, const dag::WorkerCosts& costs) {
  const auto& pl = *s.pipeline;
  const int stages = s.parallelism.pipeline * pl.virtual_stages;
  const int layers = static_cast<int>(s.model.layers.size());
  if (pl.partition == PartitionKind::uniform)
    return dag::partition_uniform(s.model, stages);
  if (pl.partition == PartitionKind::explicit_layers)
    return dag::partition_explicit(pl.layers_per_stage, layers);
  // The min-max partitions run over units: layers, or blocks with the layers around them.
  auto starts = dag::unit_starts(s.model);
  starts.push_back(layers);
  const std::size_t units = starts.size() - 1;
  std::vector<double> cost(units, 0.0);
  for (std::size_t u = 0; u < units; ++u)
    for (int l = starts[u]; l < starts[u + 1]; ++l)
      cost[u] += costs.fwd_s[static_cast<std::size_t>(l)] + costs.bwd_s[static_cast<std::size_t>(l)] +
                 recompute_s(s, costs, l, l + 1);
  std::vector<dag::StageSpan> spans;
  if (pl.partition == PartitionKind::balanced) {
    spans = dag::partition_balanced(cost, stages);
  } else {
    const auto layer_cut = dag::cut_activation_bytes(s.model);
    std::vector<double> cut(units - 1);
    for (std::size_t u = 0; u + 1 < units; ++u)
      cut[u] = layer_cut[static_cast<std::size_t>(starts[u + 1] - 1)] * s.batch_per_gpu * activation_scale(s);
    // The transfers cross the slowest link between two stages' GPUs: the NIC when a stage boundary leaves a node.
    const auto& par = s.parallelism;
    bool crosses_nodes = false;
    for (int r = 0; r + 1 < par.pipeline; ++r)
      crosses_nodes =
          crosses_nodes || par.gpu(r, 0) / s.cluster.gpus_per_node != par.gpu(r + 1, 0) / s.cluster.gpus_per_node;
    const double bandwidth = crosses_nodes ? s.cluster.inter.bandwidth : s.cluster.intra.bandwidth;
    spans = dag::partition_pipedream(cost, cut, bandwidth, stages);
  }
  for (auto& span : spans) // units back to layers
    span = {starts[static_cast<std::size_t>(span.first)], starts[static_cast<std::size_t>(span.end)]};
  return spans;
}

namespace {

// The schedule's settings and the virtual stages: their layers, costs, activations sent on and tensor-parallel parts.
dag::PipelinePlan pipeline_plan(const Scenario& s, const dag::WorkerCosts& costs,
                                const std::vector<dag::StageSpan>& spans) {
  const auto& pl = *s.pipeline;
  const auto& par = s.parallelism;
  const int stages = par.pipeline;
  const auto cut = dag::cut_activation_bytes(s.model);
  const auto roles = par.tensor > 1 ? tensor_roles(s.model) : std::vector<TensorRole>{};
  // Megatron-Core sends each tensor rank's whole activation to its peer on the next stage, or its sequence shard
  // with sequence parallelism (schedules.py, get_tensor_shapes: seq_length // tp_size).
  const double p2p_share = par.sequence_parallel ? 1.0 / par.tensor : 1.0;

  // The asynchronous schedules run their steady state: m + 3p micro-batches unrolled, an iteration measured over m of
  // them after 2p (finalize_pipeline), well clear of the warm-up and of the cool-down's last p.
  const bool async = pl.schedule->asynchronous;
  dag::PipelinePlan plan;
  plan.schedule = pl.schedule;
  plan.micro_batches = async ? pl.micro_batches + 3 * stages : pl.micro_batches;
  plan.update_every = update_every(pl.schedule->updates, pl.micro_batches);
  plan.chunks = pl.virtual_stages;
  plan.gpus_per_node = s.cluster.gpus_per_node;
  plan.host_node = par.gpu(0, 0) / s.cluster.gpus_per_node;
  plan.data_load_s = costs.data_load_s;
  plan.h2d_s = costs.h2d_s;
  plan.prefetch = costs.prefetch;
  // the tied embeddings' gradient on one tensor rank, in the format the data-parallel groups reduce
  const auto* sh = sharded(s);
  plan.tied_embedding_bytes =
      tied_output_copy_parameters(s) / par.tensor * dtype_bytes(sh != nullptr ? sh->reduce_dtype : s.gradient_dtype);
  for (const auto& span : spans) {
    dag::VirtualStage vs{.first_layer = span.first, .end_layer = span.end};
    for (int l = span.first; l < span.end; ++l) {
      vs.forward_s += costs.fwd_s[static_cast<std::size_t>(l)];
      vs.backward_s += costs.bwd_s[static_cast<std::size_t>(l)];
    }
    vs.recompute_s = recompute_s(s, costs, span.first, span.end);
    vs.recompute_last = pl.recompute != dag::Recompute::except_last;
    if (span.end < static_cast<int>(s.model.layers.size()))
      vs.activation_bytes =
          cut[static_cast<std::size_t>(span.end - 1)] * s.batch_per_gpu * activation_scale(s) * p2p_share;
    if (par.tensor > 1) {
      auto parts = tensor_parts(s, costs, roles, span.first, span.end);
      vs.forward_parts = parts.forward;
      vs.backward_parts = std::move(parts.backward);
      // Full recomputation repeats the forward, its collectives included; selective only the attention core.
      if (pl.recompute == dag::Recompute::full || pl.recompute == dag::Recompute::except_last)
        vs.recompute_parts = std::move(parts.forward);
    }
    plan.stages.push_back(vs);
  }
  return plan;
}

// A rank's gradient groups over its data-parallel group `ranks`, planned by the strategy on the rank's own layers and
// mapped back to the whole model's tensors and layers. Sharded (stage 1: Megatron-Core's distributed optimizer), the
// strategy groups them with the reduce-scatter's cost in reduce_dtype, each group one reduce-scatter
// (megatron/core/distributed/param_and_grad_buffer.py, start_grad_sync: reduce_scatter_tensor with
// use_distributed_optimizer), as plan_sharded does without a pipeline.
std::vector<dag::GradientGroup> data_parallel_groups(const Scenario& s, const RankModel& sub,
                                                     const std::vector<int>& ranks) {
  const auto layout = layout_of(ranks, s.cluster);
  const auto* sh = sharded(s);
  // The reduce-scatter from its lowering without lowering it per candidate (its affine cost keeps MG-WFBP linear).
  std::optional<LinearLoweringCost> reduce_scatter;
  std::unique_ptr<CollectiveModel> allreduce;
  if (sh != nullptr)
    reduce_scatter.emplace(collective_lowering(s, dag::Collective::reduce_scatter), layout.shape, layout.net);
  else
    allreduce = group_allreduce(s, layout);
  const dag::CommCost reduce_time = [&](double bytes) {
    return reduce_scatter ? (*reduce_scatter)(bytes) : allreduce->cost(bytes).time_s;
  };
  std::optional<dag::AffineCost> affine;
  if (!reduce_scatter)
    affine = affine_cost(*allreduce);
  else if (const auto ab = reduce_scatter->affine())
    affine = dag::AffineCost{ab->alpha_s, ab->beta_s_per_byte};
  std::optional<LinearLoweringCost> allgather;
  const dag::CommCost allgather_time = [&](double bytes) {
    if (!allgather)
      allgather.emplace(collective_lowering(s, dag::Collective::allgather), layout.shape, layout.net);
    return (*allgather)(bytes);
  };
  const double e = dtype_bytes(sh != nullptr ? sh->reduce_dtype : s.gradient_dtype);
  const dag::StrategyInput input{sub.model,          sub.costs,      e,     reduce_time, s.strategy.options,
                                 s.parallelism.data, allgather_time, affine};
  auto groups = s.strategy.entry().plan(input);
  for (auto& g : groups) { // back to the whole model's tensors and layers
    for (int& t : g.tensors)
      t = sub.tensors[static_cast<std::size_t>(t)];
    g.ready_layer = sub.layers[static_cast<std::size_t>(g.ready_layer)];
    if (sh != nullptr)
      g.steps = {{.collective = dag::Collective::reduce_scatter, .bytes = g.bytes}};
  }
  return groups;
}

// Sharding: each group's updated parameters all-gathered in param_dtype before micro-batch 0's forward reaches the
// group's first layer, in forward order from the start of the iteration: the steady state of Megatron-Core's
// overlap_param_gather (megatron/core/distributed/distributed_data_parallel.py, _make_forward_pre_hook waits for a
// bucket group's gather; param_and_grad_buffer.py, finish_param_sync dispatches the next one's).
std::vector<dag::ParamGather> param_gathers(const ShardingSpec& sh, const std::vector<dag::GradientGroup>& groups) {
  std::vector<dag::ParamGather> gathers;
  for (std::size_t i = 0; i < groups.size(); ++i)
    gathers.push_back({.group = static_cast<int>(i),
                       .bytes = static_cast<double>(groups[i].elements) * dtype_bytes(sh.param_dtype),
                       .first_layer = groups[i].ready_layer});
  std::stable_sort(gathers.begin(), gathers.end(),
                   [](const auto& a, const auto& b) { return a.first_layer < b.first_layer; });
  return gathers;
}

// One rank of the replica: its GPU, its data-parallel and tensor groups, its update (on 1/d of its parameters when
// sharded), weight prediction, gradient groups and parameter gathers.
dag::PipelineRank pipeline_rank(const Scenario& s, const dag::WorkerCosts& costs,
                                const std::vector<dag::StageSpan>& spans, int rank) {
  const auto& pl = *s.pipeline;
  const auto& par = s.parallelism;
  const int stages = par.pipeline;
  dag::PipelineRank pr;
  pr.gpu = par.gpu(rank, 0);
  for (int k = 0; k < par.data; ++k)
    pr.data_parallel.ranks.push_back(par.gpu(rank, k));
  if (par.tensor > 1)
    for (int j = 0; j < par.tensor; ++j)
      pr.tensor.ranks.push_back(par.gpu(rank, 0, j));
  auto sub = rank_model(s, costs, spans, rank, stages);
  pr.update_s = sharded(s) != nullptr ? sub.costs.update_s / par.data : sub.costs.update_s;
  if (pl.schedule->predicts_weights) {
    // W' = W - s lr v reads W and v and writes W' (3 words per parameter); the restore copies W back (2 words):
    // memory-bound kernels, costed like the compression kernels (dag/compression.hpp).
    const auto steps = dag::prediction_steps(pl.weight_prediction, stages, rank);
    const double weights = static_cast<double>(sub.model.param_count()) * 4;
    const double predict = dag::KernelCost{3 * weights, 1}.seconds(costs.memory_bandwidth);
    pr.predict_forward_s = steps.forward > 0 ? predict : 0;
    pr.predict_backward_s = steps.backward > 0 ? predict : 0;
    pr.restore_s = dag::KernelCost{2 * weights, 1}.seconds(costs.memory_bandwidth);
  }
  if (par.data > 1)
    pr.groups = data_parallel_groups(s, sub, pr.data_parallel.ranks);
  if (const auto* sh = sharded(s))
    pr.gathers = param_gathers(*sh, pr.groups);
  return pr;
}

// Sharding: micro-batch 0's forward on each virtual stage whose layers a gather brings, cut before those layers.
void gate_first_forwards(const Scenario& s, const dag::WorkerCosts& costs, dag::PipelinePlan& plan) {
  const auto roles = s.parallelism.tensor > 1 ? tensor_roles(s.model) : std::vector<TensorRole>{};
  const auto stages = plan.ranks.size();
  std::vector<int> gates(s.model.layers.size(), -1);
  for (const auto& rank : plan.ranks)
    for (std::size_t k = 0; k < rank.gathers.size(); ++k) // the last of a layer's gathers: it ends after the others
      gates[static_cast<std::size_t>(rank.gathers[k].first_layer)] = static_cast<int>(k);
  for (std::size_t vs = 0; vs < plan.stages.size(); ++vs) {
    auto& stage = plan.stages[vs];
    if (!plan.ranks[vs % stages].gathers.empty())
      stage.first_forward_parts = forward_parts(s, costs, roles, stage.first_layer, stage.end_layer, gates);
  }
}

// Costs the tensor collectives of each pass (the closed forms cost_communication would give their tasks) into the
// plan's parts and `folded`; adds what each rank sends per iteration to `sent_by_rank`.
void fold_tensor_collectives(const Scenario& s, const CollectiveModel& whole_cluster, dag::PipelinePlan& plan,
                             std::vector<FoldedTensor>& folded, std::vector<double>& sent_by_rank) {
  const auto stages = static_cast<std::size_t>(s.parallelism.pipeline);
  plan.fold_tensor_parts = true;
  CollectiveCoster coster(s, whole_cluster);
  std::vector<std::optional<CommunicatorLayout>> layouts(stages);
  for (std::size_t vs = 0; vs < plan.stages.size(); ++vs) {
    const auto rank = vs % stages;
    auto& layout = layouts[rank];
    if (!layout)
      layout = layout_of(plan.ranks[rank].tensor.ranks, s.cluster);
    auto& stage = plan.stages[vs];
    FoldedTensor f{.recompute_last = stage.recompute_last};
    const auto cost = [&](std::vector<dag::PassPart>& parts, double& time_s) {
      double sent = 0;
      for (auto& part : parts) {
        if (part.collective == dag::Collective::none)
          continue;
        const auto c = coster(
            dag::Task{.payload = dag::CollectiveOp{.wire = {.collective = part.collective, .bytes = part.bytes}}},
            *layout);
        part.collective_s = c.time_s;
        time_s += c.time_s;
        sent += c.bytes_sent;
      }
      return sent;
    };
    const double m = plan.micro_batches;
    const double recomputed = stage.recompute_last ? m : m - 1;
    sent_by_rank[rank] += m * cost(stage.forward_parts, f.forward_s) + m * cost(stage.backward_parts, f.backward_s) +
                          recomputed * cost(stage.recompute_parts, f.recompute_s);
    double first_forward_s = 0; // micro-batch 0's forward cut for gathers: the forward's collectives, counted above
    (void)cost(stage.first_forward_parts, first_forward_s);
    folded.push_back(f);
  }
}

// The reference for scaling efficiency: the same model on one GPU over the iteration's m micro-batches (gradient
// accumulation), one update, no recomputation.
double single_gpu_reference_s(const Scenario& s, const dag::WorkerCosts& worker, const dag::PipelinePlan& plan) {
  dag::PipelinePlan alone = plan;
  alone.schedule = &dag::pipeline_schedule("1f1b");
  alone.micro_batches = s.pipeline->micro_batches;
  alone.chunks = 1;
  alone.update_every = 0;
  alone.stages = {{.first_layer = 0, .end_layer = static_cast<int>(s.model.layers.size())}};
  for (std::size_t l = 0; l < s.model.layers.size(); ++l) {
    alone.stages[0].forward_s += worker.fwd_s[l];
    alone.stages[0].backward_s += worker.bwd_s[l];
  }
  alone.ranks = {
      {.gpu = plan.ranks[0].gpu, .groups = {}, .update_s = worker.update_s, .data_parallel = {{plan.ranks[0].gpu}}}};
  auto alone_graph = dag::build_pipeline(alone);
  add_pipeline_host_tasks(alone_graph, worker, alone);
  return makespan_of(schedule(alone_graph));
}

// Transfers and the stages' collectives: their closed forms; bytes per GPU, the busiest GPU's reported. Returns what
// each task's sender sends.
std::vector<double> cost_pipeline_communication(const Scenario& s, const CollectiveModel& whole_cluster,
                                                const dag::PipelinePlan& plan, const std::vector<double>& folded_sent,
                                                Plan& p) {
  std::vector<double> sent;
  cost_communication(s, whole_cluster, p.graph, &sent, measured_collectives_notes(s, p));
  std::map<dag::Device, double> by_gpu;
  for (std::size_t v = 0; v < p.graph.size(); ++v)
    by_gpu[p.graph.task(v).device] += sent[v];
  for (std::size_t rank = 0; rank < folded_sent.size(); ++rank)
    by_gpu[dag::Device::gpu(plan.ranks[rank].gpu)] += folded_sent[rank];
  for (const auto& [device, bytes] : by_gpu)
    p.communication_bytes_per_worker = std::max(p.communication_bytes_per_worker, bytes);
  return sent;
}

// What stage_memory reads of rank `rank`: its chunks with the micro-batches each holds at the rank's peak, the
// activations' setup, and the optimizer state's shards: d with sharding (Megatron-Core's distributed optimizer,
// docs/source/api-guide/dist_optimizer.md: bf16 Adam 6 + 12/d bytes per parameter), else 1.
dag::StageMemoryInput stage_memory_input(const Scenario& s, const std::vector<dag::StageSpan>& spans,
                                         const std::vector<dag::PipelineOp>& ops, int rank, int weight_versions) {
  const auto& pl = *s.pipeline;
  const auto& par = s.parallelism;
  dag::StageMemoryInput memory{.chunks = {},
                               .activations = {.micro_batch = s.batch_per_gpu,
                                               .tensor_parallel = par.tensor,
                                               .sequence_parallel = par.sequence_parallel,
                                               .recompute = pl.recompute,
                                               .dtype = s.gradient_dtype},
                               .optimizer = s.optimizer,
                               .optimizer_shards = sharded(s) != nullptr ? par.data : 1,
                               .extra_weight_versions = weight_versions - 1};
  const auto held = in_flight_at_peak(ops, pl.virtual_stages);
  for (int c = 0; c < pl.virtual_stages; ++c) {
    const auto& span = spans[static_cast<std::size_t>(c * par.pipeline + rank)];
    memory.chunks.push_back({span.first, span.end - 1, held[static_cast<std::size_t>(c)]});
  }
  return memory;
}

// One stage's report before timing: its layers, transfers, weight versions, micro-batches in flight and memory.
PipelineStageReport stage_report(const Scenario& s, const dag::PipelinePlan& plan,
                                 const std::vector<dag::StageSpan>& spans, const dag::IterationGraph& graph, int rank) {
  const auto& pl = *s.pipeline;
  const auto& par = s.parallelism;
  const int stages = par.pipeline;
  PipelineStageReport st;
  st.first_layer = static_cast<int>(s.model.layers.size());
  for (std::size_t vs = static_cast<std::size_t>(rank); vs < spans.size(); vs += static_cast<std::size_t>(stages)) {
    st.layers += spans[vs].end - spans[vs].first;
    st.first_layer = std::min(st.first_layer, spans[vs].first);
    st.last_layer = std::max(st.last_layer, spans[vs].end - 1);
  }
  const auto gpu = dag::Device::gpu(par.gpu(rank, 0));
  for (std::size_t v = 0; v < graph.size(); ++v)
    if (graph.task(v).device == gpu && dag::collective_of(graph.task(v)) == dag::Collective::point_to_point)
      st.p2p_bytes += dag::bytes_of(graph.task(v));
  const auto ops = dag::pipeline_ops(*pl.schedule, stages, plan.micro_batches, pl.virtual_stages, rank);
  const auto& pr = plan.ranks[static_cast<std::size_t>(rank)];
  st.weight_versions =
      pl.schedule->weight_versions(stages, rank, pr.predict_forward_s > 0 || pr.predict_backward_s > 0);
  st.in_flight_micro_batches = dag::in_flight_passes(ops);
  // Memory: its chunks' weights, gradients and optimizer state, the activations held at its peak, and what the
  // framework holds beside them (the loss's logits on the stage that holds the model's last layer).
  const auto memory = stage_memory_input(s, spans, ops, rank, st.weight_versions);
  const bool computes_loss = st.last_layer + 1 == static_cast<int>(s.model.layers.size());
  st.memory = stage_memory_per_gpu(s, dag::stage_memory(s.model, memory), memory.optimizer_shards, computes_loss);
  st.peak_memory_bytes = st.memory.total_bytes();
  st.exceeds_gpu_memory = st.memory.fits == std::optional<bool>(false);
  return st;
}

// The pipeline's report before timing (its schedule and each stage's), the peak memory per GPU, and a note on the
// stages that need more than the GPU's memory.
PipelineReport pipeline_report(const Scenario& s, const dag::PipelinePlan& plan,
                               const std::vector<dag::StageSpan>& spans, Plan& p) {
  const auto& pl = *s.pipeline;
  const int stages = s.parallelism.pipeline;
  PipelineReport report;
  report.schedule = std::string(pl.schedule->name);
  report.stages = stages;
  report.micro_batches = pl.micro_batches;
  report.micro_batches_simulated = plan.micro_batches;
  report.virtual_stages = pl.virtual_stages;
  report.partition = std::string(partition_name(pl.partition));
  report.bubble_fraction_closed_form =
      dag::bubble_fraction_closed_form(*pl.schedule, stages, pl.micro_batches, pl.virtual_stages);
  for (int rank = 0; rank < stages; ++rank) {
    const auto st = stage_report(s, plan, spans, p.graph, rank);
    if (rank == 0 || st.peak_memory_bytes > p.peak_memory_bytes_per_gpu)
      p.memory = st.memory;
    p.peak_memory_bytes_per_gpu = p.memory.total_bytes();
    report.per_stage.push_back(st);
  }
  std::vector<std::string> over;
  for (std::size_t i = 0; i < report.per_stage.size(); ++i)
    if (report.per_stage[i].exceeds_gpu_memory)
      over.push_back(fmt::format("{} ({})", i, format_bytes(report.per_stage[i].peak_memory_bytes)));
  if (!over.empty())
    p.notes.push_back(fmt::format("pipeline: stage{} {} need{} more than the GPU's {} of memory",
                                  over.size() > 1 ? "s" : "", fmt::join(over, ", "), over.size() > 1 ? "" : "s",
                                  format_bytes(s.gpu.memory_bytes)));
  return report;
}

std::string pipeline_note(const Scenario& s, const dag::PipelinePlan& plan) {
  const auto& pl = *s.pipeline;
  const auto& par = s.parallelism;
  const int stages = par.pipeline;
  const bool async = pl.schedule->asynchronous;
  return fmt::format(
      "pipeline: {} over {} stages{} of {} partitioned layers, {} micro-batches of {} per replica, {} data-parallel "
      "replica{}; activations and their gradients cross between stages as point-to-point transfers in {} on a "
      "stream of their own; each stage's gradients are reduced by {} over its data-parallel group {}, then its "
      "optimizer step; recomputation {}{}",
      pl.schedule->name, stages,
      pl.virtual_stages > 1 ? fmt::format(" x {} virtual stages", pl.virtual_stages) : std::string(),
      partition_name(pl.partition), pl.micro_batches, s.batch_per_gpu, par.data, par.data == 1 ? "" : "s",
      s.gradient_dtype == DType::fp32 ? "fp32" : "16-bit", s.strategy.kind(),
      !async                   ? std::string("after the flush")
      : plan.update_every == 1 ? std::string("after every backward")
                               : fmt::format("after every {} backwards", plan.update_every),
      recompute_name(pl.recompute),
      async
          ? fmt::format("; no flush: {} micro-batches unrolled, the iteration is the steady state's m = {} between the "
                        "ends of stage 0's backwards of micro-batches {} and {}{}",
                        plan.micro_batches, pl.micro_batches, 2 * stages - 1, 2 * stages - 1 + pl.micro_batches,
                        pl.schedule->predicts_weights
                            ? fmt::format("; SpecTrain {} weight prediction, a prediction kernel before and a "
                                          "restore kernel after each pass that predicts (memory-bound, at the GPU's "
                                          "memory bandwidth)",
                                          pl.weight_prediction == dag::WeightPrediction::v1 ? "v1" : "v2")
                            : std::string())
          : std::string());
}

// The window an iteration is read over. Flushing schedules: the whole DAG (the bubble over the passes, from the
// replica's first forward to its last backward, finalize_pipeline). Asynchronous ones: between the ends of stage 0's
// backwards of micro-batches 2p - 1 and 2p - 1 + m, in the steady state.
IterationWindow pipeline_window(const Scenario& s, const dag::IterationGraph& graph) {
  if (!s.pipeline->schedule->asynchronous)
    return {};
  const int first = 2 * s.parallelism.pipeline - 1, last = first + s.pipeline->micro_batches;
  std::optional<std::size_t> a, b;
  for (std::size_t v = 0; v < graph.size(); ++v) {
    const auto& t = graph.task(v);
    if (t.kind == dag::TaskKind::backward && dag::virtual_stage_of(t) == 0 && dag::micro_batch_of(t) == first)
      a = v;
    if (t.kind == dag::TaskKind::backward && dag::virtual_stage_of(t) == 0 && dag::micro_batch_of(t) == last)
      b = v;
  }
  if (!a || !b)
    throw std::logic_error(fmt::format("pipeline: no backward of micro-batches {} and {} on stage 0", first, last));
  return {IterationWindow::Kind::between_tasks, *a, *b};
}

} // namespace

void prepare_pipeline(const Scenario& s, Plan& p) {
  const auto& par = s.parallelism;
  const int stages = par.pipeline;
  const auto spans = partition_stages(s, p.costs.worker);
  // One tensor rank's work (the DAG holds tensor rank 0 of each stage; its peers run the same).
  const auto tensor_costs = tensor_rank_costs(s, p.costs.worker);
  const auto& costs = tensor_costs;
  dag::PipelinePlan plan = pipeline_plan(s, costs, spans);
  for (int rank = 0; rank < stages; ++rank) {
    auto pr = pipeline_rank(s, costs, spans, rank);
    p.groups.insert(p.groups.end(), pr.groups.begin(), pr.groups.end());
    plan.ranks.push_back(std::move(pr));
  }
  gate_first_forwards(s, costs, plan);
  // The analytic engine folds each pass's tensor collectives into it (PipelinePlan::fold_tensor_parts), costed here
  // by the closed forms cost_communication would give their tasks; what they take and send is kept for the report.
  std::vector<FoldedTensor> folded;
  std::vector<double> folded_sent(static_cast<std::size_t>(stages), 0.0); // per rank, per iteration
  if (par.tensor > 1 && capabilities(p.engine).folds_tensor_collectives)
    fold_tensor_collectives(s, *p.allreduce, plan, folded, folded_sent);
  p.graph = dag::build_pipeline(plan);
  p.single_gpu_iteration_s = single_gpu_reference_s(s, p.costs.worker, plan);
  const auto sent = cost_pipeline_communication(s, *p.allreduce, plan, folded_sent, p);
  add_pipeline_host_tasks(p.graph, p.costs.worker, plan);

  p.data_parallel = par.data;
  p.folded_tensor = std::move(folded);
  p.pipeline = pipeline_report(s, plan, spans, p);
  if (par.tensor > 1)
    p.notes.push_back(tensor_parallel_note(s));
  p.notes.push_back(pipeline_note(s, plan));
  if (sharded(s) != nullptr) {
    const auto ops =
        dag::pipeline_ops(*s.pipeline->schedule, stages, plan.micro_batches, s.pipeline->virtual_stages, 0);
    const auto stage0 =
        dag::stage_memory(s.model, stage_memory_input(s, spans, ops, 0, p.pipeline->per_stage[0].weight_versions));
    report_pipeline_sharding(s, stage0, static_cast<int>(plan.ranks[0].groups.size()),
                             dag::Device::gpu(plan.ranks[0].gpu), sent, p);
  }
  p.window = pipeline_window(s, p.graph);
}

void finalize_pipeline(const Scenario& s, const std::vector<FoldedTensor>& folded_tensor, RunResult& r) {
  auto& report = *r.pipeline;
  const auto& par = s.parallelism;
  const int stages = par.pipeline;
  const bool async = r.window.kind == IterationWindow::Kind::between_tasks;
  double from = 0, to = 0;
  if (async) {
    const std::size_t a = r.window.from_task, b = r.window.to_task;
    from = r.timing[a].end_s;
    to = r.timing[b].end_s;
    r.iteration_time_s = to - from;
    const auto longest = longest_finish(r.graph);
    r.critical_path_s = longest[b] - longest[a];
  } else {
    r.iteration_time_s = makespan_of(r.timing);
    r.critical_path_s = r.graph.critical_path().length_s;
    from = r.iteration_time_s;
    for (std::size_t v = 0; v < r.graph.size(); ++v) {
      const auto kind = r.graph.task(v).kind;
      if (kind == dag::TaskKind::forward || kind == dag::TaskKind::backward) {
        from = std::min(from, r.timing[v].start_s);
        to = std::max(to, r.timing[v].end_s);
      }
    }
  }
  const double window = std::max(0.0, to - from);
  const auto cut = folded_tensor.empty() ? std::map<int, double>{} : cut_forward_s(r.graph);
  Breakdown mean;
  for (int rank = 0; rank < stages; ++rank) {
    auto& st = report.per_stage[static_cast<std::size_t>(rank)];
    const auto gpu = dag::Device::gpu(par.gpu(rank, 0));
    st.compute_s = 0;
    st.tensor_communication_s = 0;
    for (std::size_t v = 0; v < r.graph.size(); ++v) {
      const auto& t = r.graph.task(v);
      if (t.device != gpu)
        continue;
      const double inside = std::max(0.0, std::min(r.timing[v].end_s, to) - std::max(r.timing[v].start_s, from));
      if (t.kind == dag::TaskKind::forward || t.kind == dag::TaskKind::backward) {
        // A folded pass holds its tensor collectives: their share of the time inside the window.
        const double pass_s = cut_pass_s(cut, t);
        const double tensor =
            folded_tensor_s(folded_tensor, t, report.micro_batches_simulated) * (pass_s > 0 ? inside / pass_s : 0.0);
        st.compute_s += inside - tensor;
        st.tensor_communication_s += tensor;
      } else if (t.kind == dag::TaskKind::communication && t.resource == dag::Resource::gpu_compute) {
        st.tensor_communication_s += inside;
      }
    }
    st.idle_s = std::max(0.0, window - st.compute_s - st.tensor_communication_s);
    auto b = async ? breakdown_in(r.graph, r.timing, from, to, gpu)
                   : breakdown_in(r.graph, r.timing, 0, r.iteration_time_s, gpu);
    if (!folded_tensor.empty()) { // folded tensor collectives: exposed communication, not compute
      // (every pass lies inside the window st was measured over: the passes' own, or the asynchronous one)
      b.compute_s -= st.tensor_communication_s;
      b.exposed_communication_s += st.tensor_communication_s;
    }
    mean.compute_s += b.compute_s / stages;
    mean.compression_s += b.compression_s / stages;
    mean.exposed_communication_s += b.exposed_communication_s / stages;
    mean.idle_s += b.idle_s / stages;
    report.bubble_fraction += window > 0 ? st.idle_s / window / stages : 0;
  }
  r.breakdown = mean;
  // Unequal stages keep the bubble above the closed form's (equal stages, free transfers): say by how much.
  double slowest = 0, total = 0;
  for (const auto& st : report.per_stage) {
    slowest = std::max(slowest, st.compute_s);
    total += st.compute_s;
  }
  if (total > 0 && report.bubble_fraction > report.bubble_fraction_closed_form && slowest * stages > total)
    r.notes.push_back(fmt::format("pipeline: the slowest stage computes {:.0f} % longer than the mean ({} vs {} in the "
                                  "window): with unequal stages the bubble exceeds the closed form's, which assumes "
                                  "equal ones",
                                  100 * (slowest * stages / total - 1), format_time(slowest),
                                  format_time(total / stages)));
  // Throughput b m d per iteration; efficiency against the same m micro-batches on one GPU (prepare_pipeline).
  const double samples = static_cast<double>(s.batch_per_gpu) * report.micro_batches;
  r.throughput_samples_per_s = samples * par.data / r.iteration_time_s;
  r.scaling_efficiency = r.throughput_samples_per_s * r.single_gpu_iteration_s / (r.workers * samples);
}

} // namespace ddlsim::sim
