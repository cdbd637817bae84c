// Pipeline schedules and the DAG of one pipeline replica (dag/pipeline.hpp).
#include "dag/pipeline.hpp"

#include "dag/strategy.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <utility>

namespace ddlsim::dag {

const PipelineScheduleInfo* find_pipeline_schedule(std::string_view name) {
  for (const auto* info : pipeline_schedules())
    if (info->name == name)
      return info;
  return nullptr;
}

const PipelineScheduleInfo& pipeline_schedule(std::string_view name) {
  const auto* info = find_pipeline_schedule(name);
  if (info == nullptr)
    throw std::logic_error(fmt::format("no pipeline schedule '{}' is registered", name));
  return *info;
}

double flushing_bubble(int stages, int micro_batches, int chunks) {
  const double p = stages, m = micro_batches, v = chunks;
  return (p - 1) / (v * m + p - 1);
}

double no_bubble(int /*stages*/, int /*micro_batches*/, int /*chunks*/) {
  return 0;
}

int one_weight_version(int /*stages*/, int /*rank*/, bool /*predicts*/) {
  return 1;
}

PredictionSteps prediction_steps(WeightPrediction version, int stages, int rank) {
  if (version == WeightPrediction::v2)
    return {stages - rank - 1, stages - rank - 1};
  return {rank / 2 + stages - rank - 1, rank / 2};
}

std::vector<PipelineOp> pipeline_ops(const PipelineScheduleInfo& schedule, int stages, int micro_batches, int chunks,
                                     int rank) {
  if (stages < 1 || micro_batches < 1 || chunks < 1 || rank < 0 || rank >= stages)
    throw std::invalid_argument(fmt::format("pipeline_ops: no rank {} of {} stages with {} micro-batches and {} chunks",
                                            rank, stages, micro_batches, chunks));
  if (!schedule.interleaved && chunks != 1)
    throw std::invalid_argument(fmt::format("pipeline_ops: {} runs one chunk per rank, not {}", schedule.name, chunks));
  std::vector<PipelineOp> ops;
  ops.reserve(static_cast<std::size_t>(2 * micro_batches * chunks));
  schedule.order(stages, micro_batches, chunks, rank, ops);
  return ops;
}

int in_flight_passes(const std::vector<PipelineOp>& ops) {
  int held = 0, most = 0;
  for (const auto& op : ops) {
    held += op.forward ? 1 : -1;
    most = std::max(most, held);
  }
  return most;
}

double bubble_fraction_closed_form(const PipelineScheduleInfo& schedule, int stages, int micro_batches, int chunks) {
  return schedule.bubble(stages, micro_batches, schedule.interleaved ? chunks : 1);
}

namespace {

/// The DAG of one pipeline replica, added phase by phase into `g` (build_pipeline's, returned without a copy:
/// Boost's adjacency_list copies its vertices when moved).
class PipelineBuilder {
public:
  PipelineBuilder(const PipelinePlan& plan, IterationGraph& g)
      : plan_(plan), p_(static_cast<int>(plan.ranks.size())), v_(plan.chunks), m_(plan.micro_batches),
        last_stage_(p_ * v_ - 1), g_(g) {}

  void build();

private:
  using Id = IterationGraph::Id;
  struct Pass {
    Id first, last;
  };

  [[nodiscard]] int rank_of(int stage) const { return stage % p_; }
  [[nodiscard]] Device gpu_of(int stage) const {
    return Device::gpu(plan_.ranks[static_cast<std::size_t>(rank_of(stage))].gpu);
  }
  [[nodiscard]] Pass pass_of(int stage, int i, bool forward) const {
    return (forward ? fwd_ : bwd_)[static_cast<std::size_t>(stage)][static_cast<std::size_t>(i)];
  }
  // A task of a pass of micro-batch i on the virtual stage's GPU.
  [[nodiscard]] Task pass_task(int stage, TaskKind kind, int i, double duration_s) const {
    return {.kind = kind,
            .resource = Resource::gpu_compute,
            .duration_s = duration_s,
            .device = gpu_of(stage),
            .payload = Compute{.micro_batch = i, .virtual_stage = stage}};
  }

  void add_tensor_groups();
  void add_passes(int stage);
  Pass add_chain(int stage, TaskKind kind, const std::vector<PassPart>& parts, double extra, int i);
  void add_transfers();
  void add_transfer(int stage, int to, int i, Pass from, Pass into);
  void add_input();
  void add_rank(int r);
  void add_gathers(int r, int communicator);
  [[nodiscard]] std::optional<Id> tied_embedding(int r, int update);

  const PipelinePlan& plan_;
  const int p_, v_, m_;
  const int last_stage_;
  IterationGraph& g_;
  std::vector<int> tensor_; // the rank's tensor group, registered (-1: none)
  // Passes by virtual stage and micro-batch: the first and the last task of each (one task, or a chain of parts).
  std::vector<std::vector<Pass>> fwd_, bwd_;
  std::vector<Id> h2d_; // micro-batch i's input copy
  // Sharding: by rank, the tasks of micro-batch 0's forwards that wait for a parameter gather (its index).
  std::vector<std::vector<std::pair<int, Id>>> gated_;
  std::vector<Id> tied_; // by update: the embeddings' gradient allreduce between the first and the last rank
};

void PipelineBuilder::build() {
  add_tensor_groups();
  fwd_.resize(static_cast<std::size_t>(p_ * v_));
  bwd_.resize(static_cast<std::size_t>(p_ * v_));
  gated_.resize(static_cast<std::size_t>(p_));
  for (int stage = 0; stage <= last_stage_; ++stage)
    add_passes(stage);
  add_transfers();
  add_input();
  for (int r = 0; r < p_; ++r)
    add_rank(r);

  std::vector<IterationGraph::ReplicaGroup> replicas;
  for (const auto& rank : plan_.ranks)
    replicas.push_back({rank.gpu, g_.add_communicator(rank.data_parallel),
                        tensor_[static_cast<std::size_t>(&rank - plan_.ranks.data())]});
  g_.replicate(replicas, plan_.gpus_per_node);
}

void PipelineBuilder::add_tensor_groups() {
  tensor_.assign(static_cast<std::size_t>(p_), -1);
  for (int r = 0; r < p_; ++r)
    if (plan_.ranks[static_cast<std::size_t>(r)].tensor.ranks.size() > 1)
      tensor_[static_cast<std::size_t>(r)] = g_.add_communicator(plan_.ranks[static_cast<std::size_t>(r)].tensor);
}

// The stage's forward and backward pass of each micro-batch: one task each, or chains of parts.
void PipelineBuilder::add_passes(int stage) {
  const auto& vs = plan_.stages[static_cast<std::size_t>(stage)];
  auto& fwd = fwd_[static_cast<std::size_t>(stage)];
  auto& bwd = bwd_[static_cast<std::size_t>(stage)];
  for (int i = 0; i < m_; ++i) {
    const bool recomputes = i + 1 < m_ || vs.recompute_last;
    const auto& forward = i == 0 && !vs.first_forward_parts.empty() ? vs.first_forward_parts : vs.forward_parts;
    if (forward.empty()) {
      const Id fi = g_.add(pass_task(stage, TaskKind::forward, i, vs.forward_s));
      fwd.push_back({fi, fi});
    } else {
      fwd.push_back(add_chain(stage, TaskKind::forward, forward, 0, i));
    }
    if (vs.backward_parts.empty()) {
      const Id bi =
          g_.add(pass_task(stage, TaskKind::backward, i, vs.backward_s + (recomputes ? vs.recompute_s : 0.0)));
      bwd.push_back({bi, bi});
      continue;
    }
    auto parts = recomputes ? vs.recompute_parts : std::vector<PassPart>{};
    parts.insert(parts.end(), vs.backward_parts.begin(), vs.backward_parts.end());
    const double extra = recomputes && vs.recompute_parts.empty() ? vs.recompute_s : 0.0;
    bwd.push_back(add_chain(stage, TaskKind::backward, parts, extra, i));
  }
}

// The parts as a chain: compute tasks of `kind`, each followed by its collective (none of zero duration); folded, one
// task of the parts' compute and collectives, or one per run of parts that no parameter gather cuts.
PipelineBuilder::Pass PipelineBuilder::add_chain(int stage, TaskKind kind, const std::vector<PassPart>& parts,
                                                 double extra, int i) {
  const int comm = tensor_[static_cast<std::size_t>(rank_of(stage))];
  auto& gated = gated_[static_cast<std::size_t>(rank_of(stage))];
  std::optional<Pass> out;
  const auto link = [&](Id next) {
    if (out) {
      g_.depend(out->last, next);
      out->last = next;
    } else {
      out = Pass{next, next};
    }
  };
  const auto compute = [&](const PassPart& part, double duration_s) {
    link(g_.add(pass_task(stage, kind, i, duration_s)));
    if (part.gather >= 0)
      gated.emplace_back(part.gather, out->last);
  };
  if (plan_.fold_tensor_parts) {
    for (std::size_t k = 0; k < parts.size(); ++k) {
      if (k == 0 || parts[k].gather >= 0)
        compute(parts[k], k == 0 ? extra : 0.0);
      g_.task(out->last).duration_s += parts[k].compute_s + parts[k].collective_s;
    }
    if (!out)
      link(g_.add(pass_task(stage, kind, i, extra)));
    return *out;
  }
  for (std::size_t k = 0; k < parts.size(); ++k) {
    const double compute_s = parts[k].compute_s + (k == 0 ? extra : 0.0);
    if (compute_s > 0 || parts[k].collective == Collective::none || parts[k].gather >= 0)
      compute(parts[k], compute_s);
    if (parts[k].collective == Collective::none)
      continue;
    if (comm < 0)
      throw std::logic_error(fmt::format("build_pipeline: stage {} has tensor collectives and no tensor group", stage));
    link(g_.add({.kind = TaskKind::communication,
                 .resource = Resource::gpu_compute,
                 .device = gpu_of(stage),
                 .payload = CollectiveOp{
                     .wire = {.collective = parts[k].collective, .communicator = comm, .bytes = parts[k].bytes},
                     .micro_batch = i,
                     .virtual_stage = stage}}));
  }
  if (!out)
    throw std::logic_error(fmt::format("build_pipeline: stage {} has a pass of no parts", stage));
  return *out;
}

void PipelineBuilder::add_transfers() {
  for (int stage = 0; stage <= last_stage_; ++stage)
    for (int i = 0; i < m_; ++i) {
      if (stage < last_stage_) {
        add_transfer(stage, stage + 1, i, pass_of(stage, i, true), pass_of(stage + 1, i, true));
        add_transfer(stage + 1, stage, i, pass_of(stage + 1, i, false), pass_of(stage, i, false));
      } else {
        g_.depend(pass_of(stage, i, true).last, pass_of(stage, i, false).first);
      }
    }
}

// A transfer from `stage`'s GPU to `to`'s between `before` and `after` (a direct edge when both are on one GPU).
void PipelineBuilder::add_transfer(int stage, int to, int i, Pass from, Pass into) {
  const Id before = from.last, after = into.first;
  const Device src = gpu_of(stage), dst = gpu_of(to);
  if (src == dst) {
    g_.depend(before, after);
    return;
  }
  const Wire wire{.collective = Collective::point_to_point,
                  .communicator = g_.add_communicator({{src.index, dst.index}}),
                  .bytes = plan_.stages[static_cast<std::size_t>(std::min(stage, to))].activation_bytes};
  const auto send =
      g_.add({.kind = TaskKind::communication,
              .resource = Resource::p2p,
              .device = src,
              .payload = Transfer{
                  .wire = wire, .src = src.index, .dst = dst.index, .micro_batch = i, .virtual_stage = stage}});
  g_.depend(before, send);
  g_.depend(send, after);
}

// The input pipeline: micro-batch i's load on the host, its copy on rank 0 right before its first forward.
void PipelineBuilder::add_input() {
  h2d_.resize(static_cast<std::size_t>(m_));
  for (int i = 0; i < m_; ++i) {
    const auto load = g_.add({.kind = TaskKind::data_load,
                              .resource = Resource::host_cpu,
                              .duration_s = plan_.data_load_s,
                              .device = Device::host(plan_.host_node),
                              .payload = Compute{.micro_batch = i}});
    h2d_[static_cast<std::size_t>(i)] = g_.add({.kind = TaskKind::h2d,
                                                .resource = Resource::gpu_compute,
                                                .duration_s = plan_.h2d_s,
                                                .device = gpu_of(0),
                                                .payload = Compute{.micro_batch = i}});
    if (!plan_.prefetch)
      g_.depend(load, h2d_[static_cast<std::size_t>(i)]);
  }
}

// Rank r's passes in the schedule's order (SpecTrain's kernels around them); its gradient groups and its update
// after the flush, or after every update_every-th backward.
void PipelineBuilder::add_rank(int r) {
  const auto& rank = plan_.ranks[static_cast<std::size_t>(r)];
  const Device gpu = Device::gpu(rank.gpu);
  const int communicator = rank.groups.empty() ? -1 : g_.add_communicator(rank.data_parallel);
  std::optional<Id> previous; // the last task on the compute stream
  const auto chain = [&](Id next) {
    if (previous)
      g_.depend(*previous, next);
    previous = next;
  };
  const auto kernel = [&](double seconds, const PipelineOp& op, int stage) {
    chain(g_.add({.kind = TaskKind::prediction,
                  .resource = Resource::gpu_compute,
                  .duration_s = seconds,
                  .device = gpu,
                  .payload = Compute{.micro_batch = op.micro_batch, .virtual_stage = stage}}));
  };
  int updates = 0;
  const auto update = [&] {
    const Id last = *previous;
    const auto step = g_.add(
        {.kind = TaskKind::update, .resource = Resource::gpu_compute, .duration_s = rank.update_s, .device = gpu});
    // the data-parallel reduction, then the tied embeddings' (Megatron-LM's finalize_model_grads order)
    const auto tied = tied_embedding(r, updates++);
    const Id reduced = tied.value_or(step);
    add_group_chains(
        g_, rank.groups, [last](const GradientGroup&) { return last; }, reduced, gpu, communicator);
    if (tied) {
      g_.depend(last, *tied);
      g_.depend(*tied, step);
    }
    chain(step);
  };
  add_gathers(r, communicator);
  int backwards = 0;
  for (const auto& op : pipeline_ops(*plan_.schedule, p_, m_, v_, r)) {
    const int stage = op.chunk * p_ + r;
    if (op.forward && stage == 0) // the copy goes first on the compute stream
      chain(h2d_[static_cast<std::size_t>(op.micro_batch)]);
    const double predict = op.forward ? rank.predict_forward_s : rank.predict_backward_s;
    if (predict > 0)
      kernel(predict, op, stage);
    const auto run = pass_of(stage, op.micro_batch, op.forward);
    chain(run.first);
    previous = run.last;
    if (predict > 0 && rank.restore_s > 0)
      kernel(rank.restore_s, op, stage);
    if (!op.forward && plan_.update_every > 0 && ++backwards % plan_.update_every == 0)
      update();
  }
  if (plan_.update_every == 0)
    update();
}

// Rank r's parameter all-gathers over its data-parallel group, one after the other on the communication stream, each
// before the tasks of micro-batch 0's forwards that wait for it.
void PipelineBuilder::add_gathers(int r, int communicator) {
  const auto& rank = plan_.ranks[static_cast<std::size_t>(r)];
  std::vector<Id> ids;
  for (const auto& gather : rank.gathers) {
    ids.push_back(
        g_.add({.kind = TaskKind::communication,
                .resource = Resource::comm,
                .device = Device::gpu(rank.gpu),
                .payload = CollectiveOp{
                    .wire = {.collective = Collective::allgather, .communicator = communicator, .bytes = gather.bytes},
                    .group = gather.group,
                    .parameters = true}}));
    if (ids.size() > 1)
      g_.depend(ids[ids.size() - 2], ids.back()); // issued in order
  }
  for (const auto& [gather, task] : gated_[static_cast<std::size_t>(r)])
    g_.depend(ids.at(static_cast<std::size_t>(gather)), task);
}

// The allreduce of the tied word embeddings' gradient between the first and the last rank for their `update`-th
// update (created by whichever of the two comes first), on the last rank's communication stream; none for another
// rank, or without tied embeddings.
std::optional<IterationGraph::Id> PipelineBuilder::tied_embedding(int r, int update) {
  if (plan_.tied_embedding_bytes <= 0 || p_ < 2 || (r != 0 && r != p_ - 1))
    return std::nullopt;
  const auto u = static_cast<std::size_t>(update);
  if (u < tied_.size())
    return tied_[u];
  const int first = plan_.ranks.front().gpu, last = plan_.ranks.back().gpu;
  tied_.push_back(g_.add({.kind = TaskKind::communication,
                          .resource = Resource::comm,
                          .device = Device::gpu(last),
                          .payload = CollectiveOp{.wire = {.collective = Collective::allreduce,
                                                           .communicator = g_.add_communicator({{first, last}}),
                                                           .bytes = plan_.tied_embedding_bytes}}}));
  return tied_.back();
}

} // namespace

IterationGraph build_pipeline(const PipelinePlan& plan) {
  const int p = static_cast<int>(plan.ranks.size());
  const int v = plan.chunks;
  if (p < 1 || static_cast<int>(plan.stages.size()) != p * v)
    throw std::logic_error(
        fmt::format("build_pipeline: {} virtual stages for {} ranks of {} chunks", plan.stages.size(), p, v));
  IterationGraph g;
  PipelineBuilder(plan, g).build();
  return g;
}

} // namespace ddlsim::dag
