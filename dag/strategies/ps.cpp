// Parameter server (Li et al., "Scaling Distributed Machine Learning with the Parameter Server", OSDI 2014): the
// parameters are split into keys held by S server shards; a worker pushes each key's gradient to the servers that
// own it and pulls the updated parameters back; the servers aggregate and apply the update. Keys are placed as
// MXNet's KVStore places them (src/kvstore/kvstore_dist.h, EncodeDefaultKey): a key of fewer than
// MXNET_KVSTORE_BIGARRAY_BOUND elements (default 1,000,000) goes whole to server (key x 9973) mod S, a larger one
// is split evenly over all S servers. One key per parameter tensor, pushed as soon as its gradient is ready (WFBP
// with a parameter server: Zhang et al., Poseidon, ATC 2017; Shi, Wang, Chu, DASC 2018, whose DAG lets layer l's
// forward of the next iteration start once layer l's parameters were pulled).
#include "dag/strategy.hpp"

#include "core/json.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace ddlsim::dag {

KeyShard shard_key(int key, std::int64_t numel, int servers, std::int64_t bigarray_bound) {
  if (servers < 1)
    throw std::logic_error("shard_key: needs at least one server");
  if (numel < bigarray_bound)
    return {static_cast<int>((static_cast<std::int64_t>(key) * 9973) % servers), 1};
  return {0, servers};
}

namespace {

constexpr std::string_view kSyncKeys[] = {"servers", "placement",       "bigarray_bound",
                                          "mode",    "partition_bytes", "server_sum_bandwidth"};
// BytePS's servers sum the nodes' pushes on CPUs: by default at one core's streaming sum, 15 GB/s of pushed bytes (a
// plain summation loop reads 13-17 GB/s on one core of a 14-core i7-12700H, std::accumulate 19-24 GB/s: Duvanenko,
// "Maximum Read Bandwidth", 2023); BytePS runs several summation threads per server, so this errs slow.
constexpr double kBytePsSumBandwidth = 15e9;
constexpr std::string_view kAsyncKeys[] = {"servers", "placement", "bigarray_bound", "worker_speed_spread"};
constexpr std::string_view kSspKeys[] = {"servers", "placement", "bigarray_bound", "worker_speed_spread",
                                         "staleness_bound"};

StrategyOptions parse_ps_options(ObjectReader& r, const StrategyContext& ctx) {
  ParameterServerOptions o;
  // Servers: one per node by default (MXNet's launcher and BytePS's co-located mode); dedicated hosts hang off the
  // star with the workers' NIC.
  o.servers = static_cast<int>(r.optional_integer("servers", 1, 1 << 16).value_or(ctx.nodes));
  o.dedicated_servers = r.optional_choice("placement", {"colocated", "dedicated"}).value_or("colocated") == "dedicated";
  o.bigarray_bound = r.optional_integer("bigarray_bound", 1, std::int64_t{1} << 40).value_or(o.bigarray_bound);
  o.worker_speed_spread = r.optional_number("worker_speed_spread", 0.0, 10.0).value_or(0.0);
  if (ctx.kind == "ps-ssp")
    o.staleness_bound = static_cast<int>(r.integer("staleness_bound", 0, 1 << 20));
  o.nodes = ctx.nodes;
  o.byteps = r.optional_choice("mode", {"kvstore", "byteps"}).value_or("kvstore") == "byteps";
  for (const char* key : {"partition_bytes", "server_sum_bandwidth"})
    if (!o.byteps && r.has(key))
      r.fail(key, "only with \"mode\": \"byteps\"");
  if (o.byteps) {
    if (r.has("bigarray_bound"))
      r.fail("bigarray_bound", "MXNet's key placement; BytePS cuts tensors into partition_bytes instead");
    o.partition_bytes = r.optional_quantity("partition_bytes", Dimension::bytes, 1, false).value_or(o.partition_bytes);
    o.server_sum_bandwidth =
        r.optional_quantity("server_sum_bandwidth", Dimension::bandwidth, 0, true).value_or(kBytePsSumBandwidth);
  }
  if (o.dedicated_servers && !ctx.star_network)
    r.fail("placement",
           fmt::format("dedicated server hosts are attached to a star network only, not a {}", ctx.topology));
  return o;
}

std::vector<GradientGroup> plan_ps(const StrategyInput& in) {
  const auto tensors = flatten_tensors(in.model);
  const auto order = gradient_ready_order(in.model);
  const auto& options = options_as<ParameterServerOptions>(in.options);
  const int servers = options.servers > 0 ? options.servers : 1;
  std::vector<GradientGroup> groups;
  groups.reserve(order.size());
  if (options.byteps) {
    // BytePS: each tensor cut into partitions of partition_bytes (the last one shorter), each a key whole on one
    // server, round-robin in the order they become ready; with more than one node the servers sum the nodes' pushes.
    int next_server = 0;
    for (std::size_t k = 0; k < order.size(); ++k) {
      const auto whole = make_group(in.model, tensors, order, k, k + 1, in.bytes_per_element);
      const double parts = std::max(1.0, std::ceil(whole.bytes / options.partition_bytes));
      for (double part = 0; part < parts; ++part) {
        auto g = whole;
        g.bytes = part + 1 < parts ? options.partition_bytes : whole.bytes - part * options.partition_bytes;
        g.elements = static_cast<std::int64_t>(std::llround(g.bytes / in.bytes_per_element));
        g.steps = {{.kernel_s = 0, .collective = Collective::ps_push, .bytes = g.bytes}};
        g.on_wire =
            ServerSharded{.shard_first = next_server,
                          .shard_count = 1,
                          .server_s = options.nodes > 1 ? options.nodes * g.bytes / options.server_sum_bandwidth : 0.0};
        next_server = (next_server + 1) % servers;
        groups.push_back(std::move(g));
      }
    }
    return groups;
  }
  for (std::size_t k = 0; k < order.size(); ++k) {
    auto g = make_group(in.model, tensors, order, k, k + 1, in.bytes_per_element);
    const auto shard =
        shard_key(order[k], tensors[static_cast<std::size_t>(order[k])].numel, servers, options.bigarray_bound);
    // A push of the key, then (built by build_ps_sync) its pull.
    g.steps = {{.kernel_s = 0, .collective = Collective::ps_push, .bytes = g.bytes}};
    g.on_wire = ServerSharded{.shard_first = shard.first, .shard_count = shard.count};
    groups.push_back(std::move(g));
  }
  return groups;
}

// ps-sync's DAG: kPsSyncIterations of one worker pushing and pulling every key (ps-sync; ps-ssp's workers are
// replayed on it).
IterationGraph build_ps_sync_graph(const GraphInput& in, std::vector<std::string>& /*notes*/) {
  return build_ps_sync(in.model, in.costs, in.groups, kPsSyncIterations);
}

// ps-async's DAG: one iteration of one worker whose whole gradient is one key on every server (the analytic engine's
// queue model times the workers' loops around it).
IterationGraph build_ps_async_graph(const GraphInput& in, std::vector<std::string>& /*notes*/) {
  std::vector<GradientGroup> whole;
  if (!in.groups.empty()) {
    GradientGroup g;
    g.ready_layer = 0;
    // the whole gradient: every server's shards
    g.on_wire = ServerSharded{.shard_count = options_as<ParameterServerOptions>(in.options).servers};
    for (const auto& k : in.groups) {
      g.tensors.insert(g.tensors.end(), k.tensors.begin(), k.tensors.end());
      g.elements += k.elements;
      g.bytes += k.bytes;
    }
    g.steps = {{.kernel_s = 0, .collective = Collective::ps_push, .bytes = g.bytes}};
    whole.push_back(std::move(g));
  }
  return build_ps_sync(in.model, in.costs, whole, 1);
}

} // namespace

namespace builtin {
extern constinit const StrategyInfo ps_sync{
    .name = "ps-sync",
    .description = "parameter server, synchronous: per-tensor push and pull overlapped with backward and forward",
    .family = StrategyFamily::parameter_server,
    .traits = {.own_iterations = true},
    .keys = kSyncKeys,
    .parse = &parse_ps_options,
    .plan = &plan_ps,
    .build = &build_ps_sync_graph,
};
extern constinit const StrategyInfo ps_async{
    .name = "ps-async",
    .description = "parameter server, asynchronous: each worker pushes and pulls on its own (Li et al., OSDI 2014)",
    .family = StrategyFamily::parameter_server,
    .traits = {.asynchronous = true, .own_iterations = true},
    .keys = kAsyncKeys,
    .parse = &parse_ps_options,
    .plan = &plan_ps,
    .build = &build_ps_async_graph,
};
extern constinit const StrategyInfo ps_ssp{
    .name = "ps-ssp",
    .description = "parameter server, stale-synchronous: ps-async's loop, no worker more than staleness_bound "
                   "iterations ahead of the slowest (Ho et al., NIPS 2013)",
    .family = StrategyFamily::parameter_server,
    .traits = {.asynchronous = true, .own_iterations = true},
    .keys = kSspKeys,
    .parse = &parse_ps_options,
    .plan = &plan_ps,
    .build = &build_ps_sync_graph,
};
} // namespace builtin

IterationGraph build_layerwise(const Model& model, const WorkerCosts& costs, int iterations, std::string_view who,
                               const AfterBackward& after_backward) {
  const std::size_t layers = model.layers.size();
  if (layers == 0)
    throw std::logic_error(fmt::format("{}: the model has no layers", who));
  if (costs.fwd_s.size() != layers || costs.bwd_s.size() != layers)
    throw std::logic_error(fmt::format("{}: costs do not match the model's layers", who));
  if (iterations < 1)
    throw std::logic_error(fmt::format("{}: needs at least one iteration", who));
  IterationGraph g;
  std::vector<std::vector<IterationGraph::Id>> gates(layers); // what each layer's next forward waits for
  bool have_previous_end = false;
  IterationGraph::Id previous_end = 0; // the previous iteration's last backward
  for (int it = 0; it < iterations; ++it) {
    const auto load = g.add({.kind = TaskKind::data_load,
                             .resource = Resource::host_cpu,
                             .iteration = it,
                             .duration_s = costs.data_load_s});
    const auto h2d =
        g.add({.kind = TaskKind::h2d, .resource = Resource::gpu_compute, .iteration = it, .duration_s = costs.h2d_s});
    // With prefetching the loader runs ahead on the host (one batch after the other); without, it loads the next
    // batch once the worker has finished its backward.
    g.depend(load, h2d);
    if (have_previous_end) {
      g.depend(previous_end, h2d);
      if (!costs.prefetch)
        g.depend(previous_end, load);
    }
    std::vector<IterationGraph::Id> fwd(layers), bwd(layers);
    for (std::size_t l = 0; l < layers; ++l) {
      fwd[l] = g.add({.kind = TaskKind::forward,
                      .resource = Resource::gpu_compute,
                      .iteration = it,
                      .duration_s = costs.fwd_s[l],
                      .payload = Compute{.layer = static_cast<int>(l)}});
      g.depend(l == 0 ? h2d : fwd[l - 1], fwd[l]);
      for (auto gate : gates[l])
        g.depend(gate, fwd[l]); // the layer's parameters of this iteration
    }
    for (std::size_t l = layers; l-- > 0;) {
      bwd[l] = g.add({.kind = TaskKind::backward,
                      .resource = Resource::gpu_compute,
                      .iteration = it,
                      .duration_s = costs.bwd_s[l],
                      .payload = Compute{.layer = static_cast<int>(l)}});
      g.depend(l + 1 == layers ? fwd[layers - 1] : bwd[l + 1], bwd[l]);
    }
    for (auto& v : gates)
      v.clear();
    after_backward(g, it, bwd, gates);
    previous_end = bwd[0];
    have_previous_end = true;
  }
  return g;
}

IterationGraph build_ps_sync(const Model& model, const WorkerCosts& costs, const std::vector<GradientGroup>& groups,
                             int iterations) {
  const auto tensors = flatten_tensors(model);
  double total_elements = 0;
  for (const auto& t : tensors)
    total_elements += static_cast<double>(t.numel);
  return build_layerwise(
      model, costs, iterations, "build_ps_sync",
      [&](IterationGraph& g, int it, const std::vector<IterationGraph::Id>& bwd,
          std::vector<std::vector<IterationGraph::Id>>& pulled_by_layer) {
        for (std::size_t i = 0; i < groups.size(); ++i) {
          const auto& group = groups[i];
          const auto transfer = [&](Resource stream, Collective c) {
            return g.add({.kind = TaskKind::communication,
                          .resource = stream,
                          .iteration = it,
                          .lane = shard_count_of(group) == 1 ? shard_first_of(group) : -1,
                          .priority = group.priority,
                          .payload = ServerTransfer{.wire = {.collective = c, .bytes = group.bytes},
                                                    .group = static_cast<int>(i),
                                                    .shard_first = shard_first_of(group),
                                                    .shard_count = shard_count_of(group)}});
          };
          const auto push = transfer(Resource::comm, Collective::ps_push);
          const auto pull = transfer(Resource::comm_pull, Collective::ps_pull);
          g.depend(bwd[static_cast<std::size_t>(group.ready_layer)], push);
          // The servers apply the update to their shards of the key (MXNet's update_on_kvstore) before it is pulled:
          // the worker's optimizer step over the key's share of the parameters, the shards in parallel.
          const double update_s =
              server_s_of(group) + (total_elements > 0 ? costs.update_s * static_cast<double>(group.elements) /
                                                             total_elements / std::max(1, shard_count_of(group))
                                                       : 0.0);
          if (update_s > 0) {
            const auto update = g.add({.kind = TaskKind::delay,
                                       .resource = Resource::none,
                                       .iteration = it,
                                       .duration_s = update_s,
                                       .payload = GroupWork{.group = static_cast<int>(i)}});
            g.depend(push, update);
            g.depend(update, pull);
          } else {
            g.depend(push, pull);
          }
          for (int t : group.tensors) { // every layer with a tensor in the group waits for its pull
            auto& waits = pulled_by_layer[static_cast<std::size_t>(tensors[static_cast<std::size_t>(t)].layer)];
            if (waits.empty() || waits.back() != pull)
              waits.push_back(pull);
          }
        }
      });
}

} // namespace ddlsim::dag
