// ByteScheduler (Peng, Zhu, Chen, Bao, Yi, Lan, Wu, Guo, "A Generic Communication Scheduler for Distributed DNN
// Training Acceleration", SOSP 2019; bytedance/byteps, bytescheduler/bytescheduler/common/bytecore.py): every
// tensor's communication is cut into partitions of `partition` parameters, each given its layer's priority (front
// layers first: the next forward needs them first); a scheduler hands partitions to the communication engine in
// priority order while the parameters handed and not finished are below `credit`, and the global barrier between
// iterations goes: a layer's next forward waits only for its own partitions and its update. Over an allreduce engine
// (NCCL runs the handed partitions one after the other on its stream).
#include "dag/strategy.hpp"

#include "core/json.hpp"
#include "core/units.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace ddlsim::dag {
namespace {

constexpr std::string_view kByteSchedulerKeys[] = {"partition", "credit", "backend", "servers", "placement"};

StrategyOptions parse_bytescheduler(ObjectReader& r, const StrategyContext& ctx) {
  ByteSchedulerOptions o;
  o.partition = r.optional_integer("partition", 1, std::int64_t{1} << 40).value_or(o.partition);
  o.credit = r.optional_integer("credit", 1, std::int64_t{1} << 40).value_or(o.credit);
  o.ps_backend = r.optional_choice("backend", {"allreduce", "ps"}).value_or("allreduce") == "ps";
  for (const char* key : {"servers", "placement"})
    if (!o.ps_backend && r.has(key))
      r.fail(key, "parameter servers only with \"backend\": \"ps\"");
  // As ps-sync: one server per node by default, co-located; MXNet's key placement for each partition.
  o.ps.servers = static_cast<int>(r.optional_integer("servers", 1, 1 << 16).value_or(ctx.nodes));
  o.ps.dedicated_servers =
      r.optional_choice("placement", {"colocated", "dedicated"}).value_or("colocated") == "dedicated";
  o.ps.nodes = ctx.nodes;
  if (o.ps.dedicated_servers && !ctx.star_network)
    r.fail("placement",
           fmt::format("dedicated server hosts are attached to a star network only, not a {}", ctx.topology));
  return o;
}

std::vector<GradientGroup> plan_bytescheduler(const StrategyInput& in) {
  const auto tensors = flatten_tensors(in.model);
  const auto order = gradient_ready_order(in.model);
  const auto& o = options_as<ByteSchedulerOptions>(in.options);
  std::vector<GradientGroup> groups;
  for (std::size_t k = 0; k < order.size(); ++k) {
    const auto whole = make_group(in.model, tensors, order, k, k + 1, in.bytes_per_element);
    // bytetask.partition: full partitions of `partition` parameters, the last one the rest
    const std::int64_t parts = std::max<std::int64_t>(1, (whole.elements + o.partition - 1) / o.partition);
    for (std::int64_t part = 0; part < parts; ++part) {
      auto g = whole;
      g.elements = part + 1 < parts ? o.partition : whole.elements - part * o.partition;
      g.bytes = static_cast<double>(g.elements) * in.bytes_per_element;
      g.priority = whole.ready_layer;
      if (o.ps_backend) { // each partition a key of MXNet's KVStore, pushed then pulled (build_ps_sync)
        const auto shard =
            shard_key(static_cast<int>(groups.size()), g.elements, std::max(1, o.ps.servers), o.ps.bigarray_bound);
        g.steps = {{.kernel_s = 0, .collective = Collective::ps_push, .bytes = g.bytes}};
        g.on_wire = ServerSharded{.shard_first = shard.first, .shard_count = shard.count};
      }
      groups.push_back(std::move(g));
    }
  }
  return groups;
}

// ByteScheduler's DAG: over parameter servers, ps-sync's with the priority credit (pushes and pulls by priority);
// over an allreduce, its own (build_bytescheduler). kPsSyncIterations unrolled either way.
IterationGraph build_scheduled_graph(const GraphInput& in, std::vector<std::string>& notes) {
  const auto& o = options_as<ByteSchedulerOptions>(in.options);
  const double credit_bytes = static_cast<double>(o.credit) * in.bytes_per_element;
  if (o.ps_backend) {
    auto graph = build_ps_sync(in.model, in.costs, in.groups, kPsSyncIterations);
    graph.set_priority_credit(credit_bytes);
    notes.push_back(fmt::format(
        "bytescheduler over parameter servers: {} partitions of at most {} parameters, each a key placed as MXNet "
        "places keys; pushes and pulls go in layer order (front layers first) while at most {} parameters ({}) "
        "per stream are handed to the servers and unfinished",
        in.groups.size(), o.partition, o.credit, format_bytes(credit_bytes)));
    return graph;
  }
  notes.push_back(fmt::format(
      "bytescheduler: {} partitions of at most {} parameters, allreduced in layer order (front layers first) "
      "while at most {} parameters ({}) are handed to NCCL and unfinished; a layer's update follows its "
      "partitions and its next forward waits only for that; {} iterations are unrolled and the iteration time is "
      "the steady-state period between the last two iterations' ends",
      in.groups.size(), o.partition, o.credit, format_bytes(credit_bytes), kPsSyncIterations));
  return build_bytescheduler(in.model, in.costs, in.groups, kPsSyncIterations, credit_bytes);
}

} // namespace

namespace builtin {
extern constinit const StrategyInfo bytescheduler{
    .name = "bytescheduler",
    .description = "ByteScheduler: tensors partitioned, allreduced (or pushed and pulled) by layer priority within "
                   "a credit, no iteration barrier (Peng et al., SOSP 2019)",
    .family = StrategyFamily::scheduled,
    .traits = {.own_iterations = true},
    .keys = kByteSchedulerKeys,
    .parse = &parse_bytescheduler,
    .plan = &plan_bytescheduler,
    .build = &build_scheduled_graph,
};
} // namespace builtin

IterationGraph build_bytescheduler(const Model& model, const WorkerCosts& costs,
                                   const std::vector<GradientGroup>& groups, int iterations, double credit_bytes) {
  const auto tensors = flatten_tensors(model);
  double total_elements = 0;
  std::vector<double> layer_elements(model.layers.size(), 0.0);
  for (const auto& t : tensors) {
    total_elements += static_cast<double>(t.numel);
    layer_elements[static_cast<std::size_t>(t.layer)] += static_cast<double>(t.numel);
  }
  auto graph = build_layerwise(
      model, costs, iterations, "build_bytescheduler",
      [&](IterationGraph& g, int it, const std::vector<IterationGraph::Id>& bwd,
          std::vector<std::vector<IterationGraph::Id>>& updated) {
        // Each layer's update: after every partition of its tensors, its share of the worker's optimizer step; the
        // layer's next forward waits for it.
        std::vector<IterationGraph::Id> update(layer_elements.size());
        for (std::size_t l = 0; l < layer_elements.size(); ++l) {
          if (layer_elements[l] <= 0)
            continue;
          update[l] = g.add({.kind = TaskKind::update,
                             .resource = Resource::gpu_compute,
                             .iteration = it,
                             .duration_s = costs.update_s * layer_elements[l] / total_elements,
                             .payload = Compute{.layer = static_cast<int>(l)}});
          g.depend(bwd[l], update[l]);
          updated[l].push_back(update[l]);
        }
        for (std::size_t i = 0; i < groups.size(); ++i) {
          const auto& group = groups[i];
          const auto allreduce =
              g.add({.kind = TaskKind::communication,
                     .resource = Resource::comm,
                     .iteration = it,
                     .priority = group.priority,
                     .payload = CollectiveOp{.wire = {.collective = Collective::allreduce, .bytes = group.bytes},
                                             .group = static_cast<int>(i)}});
          g.depend(bwd[static_cast<std::size_t>(group.ready_layer)], allreduce);
          for (int t : group.tensors) // a group's tensors have parameters, so their layers have an update
            g.depend(allreduce, update[static_cast<std::size_t>(tensors[static_cast<std::size_t>(t)].layer)]);
        }
      });
  graph.set_priority_credit(credit_bytes);
  return graph;
}

} // namespace ddlsim::dag
