// Pipeline schedules and the DAG of one pipeline replica (dag/pipeline.hpp).
#include "dag/pipeline.hpp"

#include "dag/strategy.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <stdexcept>

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

IterationGraph build_pipeline(const PipelinePlan& plan) {
  const int p = static_cast<int>(plan.ranks.size());
  const int v = plan.chunks;
  const int m = plan.micro_batches;
  if (p < 1 || static_cast<int>(plan.stages.size()) != p * v)
    throw std::logic_error(
        fmt::format("build_pipeline: {} virtual stages for {} ranks of {} chunks", plan.stages.size(), p, v));
  const int last_stage = p * v - 1;
  const auto rank_of = [p](int stage) { return stage % p; };
  const auto gpu_of = [&](int stage) { return Device::gpu(plan.ranks[static_cast<std::size_t>(rank_of(stage))].gpu); };

  IterationGraph g;
  using Id = IterationGraph::Id;
  // The rank's tensor group, registered (-1: none).
  std::vector<int> tensor(static_cast<std::size_t>(p), -1);
  for (int r = 0; r < p; ++r)
    if (plan.ranks[static_cast<std::size_t>(r)].tensor.ranks.size() > 1)
      tensor[static_cast<std::size_t>(r)] = g.add_communicator(plan.ranks[static_cast<std::size_t>(r)].tensor);
  // Passes by virtual stage and micro-batch: the first and the last task of each (one task, or a chain of parts).
  struct Pass {
    Id first, last;
  };
  std::vector<std::vector<Pass>> fwd(static_cast<std::size_t>(p * v)), bwd(static_cast<std::size_t>(p * v));
  for (int stage = 0; stage <= last_stage; ++stage) {
    const auto& vs = plan.stages[static_cast<std::size_t>(stage)];
    const Task pass{.resource = Resource::gpu_compute, .device = gpu_of(stage), .stage = stage};
    const int comm = tensor[static_cast<std::size_t>(rank_of(stage))];
    // The parts as a chain: compute tasks of `kind`, each followed by its collective (none of zero duration).
    const auto chain_of = [&](TaskKind kind, const std::vector<PassPart>& parts, double extra, int i) {
      std::optional<Pass> out;
      if (plan.fold_tensor_parts) {
        auto folded = pass;
        folded.kind = kind;
        folded.micro_batch = i;
        folded.duration_s = extra;
        for (const auto& part : parts)
          folded.duration_s += part.compute_s + part.collective_s;
        const Id id = g.add(folded);
        return Pass{id, id};
      }
      const auto link = [&](Id next) {
        if (out) {
          g.depend(out->last, next);
          out->last = next;
        } else {
          out = Pass{next, next};
        }
      };
      for (std::size_t k = 0; k < parts.size(); ++k) {
        auto compute = pass;
        compute.kind = kind;
        compute.micro_batch = i;
        compute.duration_s = parts[k].compute_s + (k == 0 ? extra : 0.0);
        if (compute.duration_s > 0 || parts[k].collective == Collective::none)
          link(g.add(compute));
        if (parts[k].collective == Collective::none)
          continue;
        if (comm < 0)
          throw std::logic_error(
              fmt::format("build_pipeline: stage {} has tensor collectives and no tensor group", stage));
        auto c = pass;
        c.kind = TaskKind::communication;
        c.micro_batch = i;
        c.collective = parts[k].collective;
        c.bytes = parts[k].bytes;
        c.communicator = comm;
        link(g.add(c));
      }
      if (!out)
        throw std::logic_error(fmt::format("build_pipeline: stage {} has a pass of no parts", stage));
      return *out;
    };
    for (int i = 0; i < m; ++i) {
      const bool recomputes = i + 1 < m || vs.recompute_last;
      if (vs.forward_parts.empty()) {
        auto f = pass, b = pass;
        f.micro_batch = b.micro_batch = i;
        f.kind = TaskKind::forward;
        f.duration_s = vs.forward_s;
        b.kind = TaskKind::backward;
        b.duration_s = vs.backward_s + (recomputes ? vs.recompute_s : 0.0);
        const Id fi = g.add(f), bi = g.add(b);
        fwd[static_cast<std::size_t>(stage)].push_back({fi, fi});
        bwd[static_cast<std::size_t>(stage)].push_back({bi, bi});
        continue;
      }
      fwd[static_cast<std::size_t>(stage)].push_back(chain_of(TaskKind::forward, vs.forward_parts, 0, i));
      auto parts = recomputes ? vs.recompute_parts : std::vector<PassPart>{};
      parts.insert(parts.end(), vs.backward_parts.begin(), vs.backward_parts.end());
      const double extra = recomputes && vs.recompute_parts.empty() ? vs.recompute_s : 0.0;
      bwd[static_cast<std::size_t>(stage)].push_back(chain_of(TaskKind::backward, parts, extra, i));
    }
  }
  const auto pass = [&](int stage, int i, bool forward) {
    return (forward ? fwd : bwd)[static_cast<std::size_t>(stage)][static_cast<std::size_t>(i)];
  };
  // A transfer from `stage`'s GPU to `to`'s between `before` and `after` (a direct edge when both are on one GPU).
  const auto transfer = [&](int stage, int to, int i, Pass from, Pass into) {
    const Id before = from.last, after = into.first;
    const Device src = gpu_of(stage), dst = gpu_of(to);
    if (src == dst) {
      g.depend(before, after);
      return;
    }
    const auto send = g.add({.kind = TaskKind::communication,
                             .resource = Resource::p2p,
                             .collective = Collective::point_to_point,
                             .bytes = plan.stages[static_cast<std::size_t>(std::min(stage, to))].activation_bytes,
                             .device = src,
                             .communicator = g.add_communicator({{src.index, dst.index}}),
                             .src = src.index,
                             .dst = dst.index,
                             .micro_batch = i,
                             .stage = stage});
    g.depend(before, send);
    g.depend(send, after);
  };
  for (int stage = 0; stage <= last_stage; ++stage)
    for (int i = 0; i < m; ++i) {
      if (stage < last_stage) {
        transfer(stage, stage + 1, i, pass(stage, i, true), pass(stage + 1, i, true));
        transfer(stage + 1, stage, i, pass(stage + 1, i, false), pass(stage, i, false));
      } else {
        g.depend(pass(stage, i, true).last, pass(stage, i, false).first);
      }
    }

  // The input pipeline: micro-batch i's load on the host, its copy on rank 0 right before its first forward.
  std::vector<Id> h2d(static_cast<std::size_t>(m));
  for (int i = 0; i < m; ++i) {
    const auto load = g.add({.kind = TaskKind::data_load,
                             .resource = Resource::host_cpu,
                             .duration_s = plan.data_load_s,
                             .device = Device::host(plan.host_node),
                             .micro_batch = i});
    h2d[static_cast<std::size_t>(i)] = g.add({.kind = TaskKind::h2d,
                                              .resource = Resource::gpu_compute,
                                              .duration_s = plan.h2d_s,
                                              .device = gpu_of(0),
                                              .micro_batch = i});
    if (!plan.prefetch)
      g.depend(load, h2d[static_cast<std::size_t>(i)]);
  }

  // Each rank's passes in the schedule's order (SpecTrain's kernels around them); its gradient groups and its update
  // after the flush, or after every update_every-th backward.
  for (int r = 0; r < p; ++r) {
    const auto& rank = plan.ranks[static_cast<std::size_t>(r)];
    const Device gpu = Device::gpu(rank.gpu);
    const int communicator = rank.groups.empty() ? -1 : g.add_communicator(rank.data_parallel);
    std::optional<Id> previous; // the last task on the compute stream
    const auto chain = [&](Id next) {
      if (previous)
        g.depend(*previous, next);
      previous = next;
    };
    const auto kernel = [&](double seconds, const PipelineOp& op, int stage) {
      chain(g.add({.kind = TaskKind::prediction,
                   .resource = Resource::gpu_compute,
                   .duration_s = seconds,
                   .device = gpu,
                   .micro_batch = op.micro_batch,
                   .stage = stage}));
    };
    const auto update = [&] {
      const Id last = *previous;
      const auto step = g.add(
          {.kind = TaskKind::update, .resource = Resource::gpu_compute, .duration_s = rank.update_s, .device = gpu});
      add_group_chains(
          g, rank.groups, [last](const GradientGroup&) { return last; }, step, gpu, communicator);
      chain(step);
    };
    int backwards = 0;
    for (const auto& op : pipeline_ops(*plan.schedule, p, m, v, r)) {
      const int stage = op.chunk * p + r;
      if (op.forward && stage == 0) // the copy goes first on the compute stream
        chain(h2d[static_cast<std::size_t>(op.micro_batch)]);
      const double predict = op.forward ? rank.predict_forward_s : rank.predict_backward_s;
      if (predict > 0)
        kernel(predict, op, stage);
      const auto run = pass(stage, op.micro_batch, op.forward);
      chain(run.first);
      previous = run.last;
      if (predict > 0 && rank.restore_s > 0)
        kernel(rank.restore_s, op, stage);
      if (!op.forward && plan.update_every > 0 && ++backwards % plan.update_every == 0)
        update();
    }
    if (plan.update_every == 0)
      update();
  }

  std::vector<IterationGraph::ReplicaGroup> replicas;
  for (const auto& rank : plan.ranks)
    replicas.push_back({rank.gpu, g.add_communicator(rank.data_parallel),
                        tensor[static_cast<std::size_t>(&rank - plan.ranks.data())]});
  g.replicate(replicas, plan.gpus_per_node);
  return g;
}

} // namespace ddlsim::dag
