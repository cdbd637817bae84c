// Report writers. Numbers are written with full precision (nlohmann's shortest round-trip form), so the same
// input gives byte-identical files; only summary.sim.wall_s measures the machine.
#include "sim/report/report.hpp"

#include "sim/plan/prepare.hpp"
#include "sim/spec/measured_timeline.hpp"

#include "core/error.hpp"
#include "core/io.hpp"
#include "core/units.hpp"

#include <fmt/compile.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <iterator>
#include <map>
#include <stdexcept>

namespace ddlsim::sim {
namespace {

// A byte count as a JSON integer where it is one exactly (below 2^53), else as a number: a cast of a larger double
// to an integer would wrap (the invariant check then reports a figure that is not finite).
OrderedJson byte_count(double bytes) {
  if (std::isfinite(bytes) && bytes >= 0 && bytes < 9007199254740992.0)
    return static_cast<std::int64_t>(bytes);
  return bytes;
}

// Every number in a summary is finite and non-negative. Throws std::logic_error naming the first that is not.
void check_numbers(const OrderedJson& j, const std::string& pointer) {
  if (j.is_object()) {
    for (const auto& [k, v] : j.items())
      check_numbers(v, json_pointer_append(pointer, k));
  } else if (j.is_array()) {
    for (std::size_t i = 0; i < j.size(); ++i)
      check_numbers(j[i], json_pointer_append(pointer, i));
  } else if (j.is_number_float()) {
    const double x = j.get<double>();
    if (!std::isfinite(x) || x < 0)
      throw std::logic_error(fmt::format("summary {} is {}: every figure must be finite and non-negative", pointer, x));
  } else if (j.is_number_integer() && j.get<std::int64_t>() < 0) {
    throw std::logic_error(fmt::format("summary {} is {}: every figure must be non-negative", pointer, j.dump()));
  }
}

std::string layer_name(const Scenario& s, int layer) {
  return layer >= 0 ? s.model.layers[static_cast<std::size_t>(layer)].name : std::string();
}

std::vector<std::string> tensor_names(const Scenario& s) {
  std::vector<std::string> names;
  for (const auto& l : s.model.layers)
    for (const auto& p : l.params)
      names.push_back(p.name);
  return names;
}

// Where a pipeline's task sits: " s<stage> mb<micro-batch>", and " c<chunk>" with interleaved chunks (virtual stage
// c p + s); empty for a task of no micro-batch. `stage` false leaves the stage out (a transfer names its GPUs).
std::string pipeline_place(const Scenario& s, const dag::Task& t, bool stage) {
  const int mb = dag::micro_batch_of(t), vs = dag::virtual_stage_of(t);
  const int p = s.parallelism.pipeline, chunks = s.pipeline ? s.pipeline->virtual_stages : 1;
  std::string out;
  if (stage && vs >= 0)
    out += fmt::format(" s{}", vs % p);
  if (mb >= 0)
    out += fmt::format(" mb{}", mb);
  if (chunks > 1 && vs >= 0)
    out += fmt::format(" c{}", vs / p);
  return out;
}

// What a communication task moves: "allreduce #3" (a gradient group's), "allreduce" (a tensor collective), "p2p
// gpu3->gpu7" (a pipeline transfer, on copy `replica`'s GPUs).
std::string wire_label(const dag::IterationGraph& g, int replica, const dag::Task& t) {
  if (const auto* p = std::get_if<dag::Transfer>(&t.payload))
    return fmt::format("p2p {}->{}", dag::device_name(g.replica_device(replica, dag::Device::gpu(p->src))),
                       dag::device_name(g.replica_device(replica, dag::Device::gpu(p->dst))));
  const std::string name(dag::collective_name(dag::collective_of(t)));
  const std::string what = dag::gathers_parameters(t) ? name + " params" : name;
  return dag::group_of(t) >= 0 ? fmt::format("{} #{}", what, dag::group_of(t)) : what;
}

// A task's name in timeline.json, as copy `replica` runs it: "fwd conv1", "bwd s2 mb3 c1", "allreduce #3 (25 MiB)",
// "p2p gpu3->gpu7 mb3 (1.5 MiB)".
std::string task_label(const Scenario& s, const dag::IterationGraph& g, int replica, const dag::Task& t) {
  const bool transfer = std::holds_alternative<dag::Transfer>(t.payload);
  const std::string place = pipeline_place(s, t, !transfer);
  switch (t.kind) {
  case dag::TaskKind::forward:
  case dag::TaskKind::backward: {
    const std::string layer = layer_name(s, dag::layer_of(t));
    return (t.kind == dag::TaskKind::forward ? "fwd" : "bwd") + (layer.empty() ? "" : " " + layer) + place;
  }
  case dag::TaskKind::communication:
    return fmt::format("{}{} ({})", wire_label(g, replica, t), place, format_bytes(dag::bytes_of(t)));
  case dag::TaskKind::compression:
    return fmt::format("compression #{}", dag::group_of(t));
  case dag::TaskKind::delay:
    if (t.resource == dag::Resource::copy)
      return "host copy"; // offloaded sharded state (dag/sharding.hpp)
    return fmt::format("{} #{}", s.strategy.parameter_server() != nullptr ? "server update" : "fusion wait",
                       dag::group_of(t));
  default:
    return std::string(dag::task_kind_name(t.kind)) + place;
  }
}

// The headline: what ran, the iteration time, throughput, efficiency and breakdown.
void add_headline(OrderedJson& j, const Scenario& s, const RunResult& r) {
  j["scenario"] = s.name;
  j["engine"] = engine_name(r.engine);
  j["workers"] = r.workers;
  j["iteration_time_s"] = r.iteration_time_s;
  if (r.variability)
    j["iteration_time_percentiles_s"] = {
        {"p50", r.variability->p50_s}, {"p90", r.variability->p90_s}, {"p99", r.variability->p99_s}};
  j["throughput_samples_per_s"] = r.throughput_samples_per_s;
  j["scaling_efficiency"] = r.scaling_efficiency;
  j["breakdown_s"] = {{"compute", r.breakdown.compute_s},
                      {"compression", r.breakdown.compression_s},
                      {"exposed_communication", r.breakdown.exposed_communication_s},
                      {"idle", r.breakdown.idle_s}};
  j["communication_bytes_per_worker"] = r.communication_bytes_per_worker;
}

void add_buckets(OrderedJson& j, const Scenario& s, const RunResult& r) {
  const auto names = tensor_names(s);
  OrderedJson buckets = OrderedJson::array();
  for (std::size_t i = 0; i < r.groups.size(); ++i) {
    const auto& g = r.groups[i];
    OrderedJson b;
    b["tensors"] = g.tensors.size();
    b["elements"] = g.elements;
    b["bytes"] = byte_count(g.bytes);
    if (!g.tensors.empty()) { // a traced collective on a model without parameter tensors has none
      b["first_tensor"] = names[static_cast<std::size_t>(g.tensors.front())];
      b["last_tensor"] = names[static_cast<std::size_t>(g.tensors.back())];
    }
    buckets.push_back(std::move(b));
  }
  j["buckets"] = std::move(buckets);
}

// summary.memory_per_gpu (docs/memory.md): the GPU at the peak, by part.
OrderedJson memory_json(const MemoryPerGpu& m) {
  OrderedJson o{{"weights_bytes", byte_count(m.weights_bytes)},
                {"gradients_bytes", byte_count(m.gradients_bytes)},
                {"optimizer_bytes", byte_count(m.optimizer_bytes)},
                {"activation_bytes", byte_count(m.activation_bytes)},
                {"buffer_bytes", byte_count(m.buffer_bytes)},
                {"logits_bytes", byte_count(m.logits_bytes)},
                {"fragmentation_bytes", byte_count(m.fragmentation_bytes)},
                {"reserve_bytes", byte_count(m.reserve_bytes)},
                {"total_bytes", byte_count(m.total_bytes())}};
  if (m.fits)
    o["fits"] = *m.fits;
  return o;
}

// Memory, utilisation, the measurement it is compared with, backup workers, variability and the simulation's cost.
void add_run(OrderedJson& j, const Scenario& s, const RunResult& r) {
  j["peak_memory_bytes_per_gpu"] = byte_count(r.peak_memory_bytes_per_gpu);
  j["memory_per_gpu"] = memory_json(r.memory);
  if (r.model_flops_utilisation)
    j["model_flops_utilisation"] = *r.model_flops_utilisation;
  if (s.measured.iteration_s && s.measured.what_if_keys.empty()) // a what-if is not the measured run
    j["measured_iteration_s"] = *s.measured.iteration_s;
  if (r.backup_workers > 0)
    j["backup_workers"] = r.backup_workers;
  if (r.variability)
    j["variability"] = {{"iterations", r.variability->iterations},
                        {"seed", r.variability->seed},
                        {"copies", r.variability->copies},
                        {"deterministic_iteration_s", r.variability->deterministic_s}};
  j["sim"] = {{"wall_s", r.sim.wall_s}, {"events", r.sim.events}, {"flows", r.sim.flows}};
}

void add_pipeline(OrderedJson& j, const Scenario& s, const PipelineReport& pl) {
  const auto& par = s.parallelism;
  j["parallelism"] = {{"data", par.data}, {"pipeline", par.pipeline}, {"tensor", par.tensor}};
  OrderedJson stages = OrderedJson::array();
  for (const auto& st : pl.per_stage)
    stages.push_back({{"layers", st.layers},
                      {"first_layer", layer_name(s, st.first_layer)},
                      {"last_layer", layer_name(s, st.last_layer)},
                      {"compute_s", st.compute_s},
                      {"tensor_communication_s", st.tensor_communication_s},
                      {"idle_s", st.idle_s},
                      {"p2p_bytes", st.p2p_bytes},
                      {"in_flight_micro_batches", st.in_flight_micro_batches},
                      {"weight_versions", st.weight_versions},
                      {"peak_memory_bytes", byte_count(st.peak_memory_bytes)},
                      {"memory", memory_json(st.memory)},
                      {"exceeds_gpu_memory", st.exceeds_gpu_memory}});
  j["pipeline"] = {{"schedule", pl.schedule},
                   {"stages", pl.stages},
                   {"micro_batches", pl.micro_batches},
                   {"micro_batches_simulated", pl.micro_batches_simulated},
                   {"virtual_stages", pl.virtual_stages},
                   {"partition", pl.partition},
                   {"bubble_fraction", pl.bubble_fraction},
                   {"bubble_fraction_closed_form", pl.bubble_fraction_closed_form},
                   {"per_stage", std::move(stages)}};
}

// summary.sharding (docs/sharding.md, "Report").
void add_sharding(OrderedJson& j, const ShardingReport& sh) {
  OrderedJson o;
  o["stage"] = sh.stage;
  o["shard_group"] = sh.shard_size;
  o["replicas"] = sh.replicas;
  if (sh.stage == 3)
    o["units"] = {{"unit", sh.unit},
                  {"count", sh.units},
                  {"prefetch", sh.prefetch},
                  {"reshard_after_forward", sh.reshard_after_forward},
                  {"reshard_last_unit", sh.reshard_last_unit},
                  {"gather_groups", {{"forward", sh.forward_gather_groups}, {"backward", sh.backward_gather_groups}}}};
  o["param_dtype"] = sh.param_dtype;
  o["reduce_dtype"] = sh.reduce_dtype;
  o["per_iteration"] = {
      {"allgathers", sh.allgathers},           {"allgather_bytes_sent", byte_count(sh.allgather_bytes)},
      {"reduce_scatters", sh.reduce_scatters}, {"reduce_scatter_bytes_sent", byte_count(sh.reduce_scatter_bytes)},
      {"allreduces", sh.allreduces},           {"allreduce_bytes_sent", byte_count(sh.allreduce_bytes)}};
  if (sh.other_exchanges > 0) { // a compressed exchange's gathers or trees
    o["per_iteration"]["compressed_exchanges"] = sh.other_exchanges;
    o["per_iteration"]["compressed_exchange_bytes_sent"] = byte_count(sh.other_exchange_bytes);
  }
  o["exposed_allgather_s"] = sh.exposed_allgather_s;
  o["exposed_reduce_s"] = sh.exposed_reduce_s;
  OrderedJson memory{{"weights_bytes", byte_count(sh.weights_bytes)},
                     {"gradients_bytes", byte_count(sh.gradients_bytes)},
                     {"optimizer_bytes", byte_count(sh.optimizer_bytes)},
                     {"gathered_parameters_bytes", byte_count(sh.gathered_bytes)},
                     {"reduce_buffer_bytes", byte_count(sh.reduce_buffer_bytes)},
                     {"activation_bytes", byte_count(sh.activation_bytes)},
                     {"logits_bytes", byte_count(sh.logits_bytes)},
                     {"fragmentation_bytes", byte_count(sh.fragmentation_bytes)},
                     {"reserve_bytes", byte_count(sh.reserve_bytes)},
                     {"total_bytes", byte_count(sh.total_bytes())},
                     {"unsharded_model_state_bytes", byte_count(sh.unsharded_state_bytes)}};
  if (sh.fits)
    memory["fits"] = *sh.fits;
  o["memory_per_gpu"] = std::move(memory);
  o["offload"] = sh.offload;
  if (sh.offload != "none")
    o["host"] = {{"state_bytes", byte_count(sh.host_bytes)},
                 {"copy_bytes_per_iteration", byte_count(sh.host_copy_bytes)},
                 {"optimizer_step_s", sh.host_step_s}};
  j["sharding"] = std::move(o);
}

void add_links(OrderedJson& j, const RunResult& r) {
  OrderedJson links = OrderedJson::array();
  for (const auto& l : r.links)
    links.push_back({{"name", l.name},
                     {"role", l.role},
                     {"bytes", l.bytes},
                     {"busy_s", l.busy_s},
                     {"peak_utilisation", l.peak_utilisation},
                     {"mean_utilisation", l.mean_utilisation}});
  j["links"] = std::move(links);
}

// Compression: what was sent and how many communication rounds a group's collective took.
void add_compression(OrderedJson& j, const Scenario& s, const RunResult& r) {
  const auto c = compression_totals(r.groups);
  if (c.groups == 0)
    return;
  const auto& group = *std::find_if(r.groups.begin(), r.groups.end(), [](const auto& g) {
    return g.first_collective() == dag::Collective::allgather || g.first_collective() == dag::Collective::global_topk;
  });
  const auto& first = group.steps.front();
  const auto phases =
      collective_lowering(s, first.collective).lower(s.cluster.network().shape(), first.bytes, Granularity::aggregated);
  if (c.selected > 0) {
    const auto& sparse = s.strategy.get<dag::SparsificationOptions>();
    j["sparsification"] = {{"collective", dag::collective_name(first.collective)},
                           {"selection", dag::selection_name(sparse.selection)},
                           {"density", sparse.density},
                           {"groups", c.groups},
                           {"elements", c.elements},
                           {"selected_elements", c.selected},
                           {"achieved_density", static_cast<double>(c.selected) / static_cast<double>(c.elements)},
                           {"rounds", phases.size()},
                           {"compress_s", c.compress_s},
                           {"decompress_s", c.decompress_s}};
  } else {
    const auto levels = s.strategy.get<dag::QuantisationOptions>().levels; // qsgd's only
    j["quantisation"] = {{"scheme", std::string(s.strategy.kind())},
                         {"collective", dag::collective_name(first.collective)},
                         {"bits_per_element", c.wire_bits},
                         {"levels", levels ? OrderedJson(*levels) : OrderedJson()},
                         {"groups", c.groups},
                         {"elements", c.elements},
                         {"rounds", phases.size()},
                         {"compress_s", c.compress_s},
                         {"decompress_s", c.decompress_s}};
  }
}

// PowerSGD: what the low-rank factors saved on the wire and what their kernels cost.
void add_powersgd(OrderedJson& j, const Scenario& s, const RunResult& r) {
  if (const auto ps = powersgd_totals(r.groups))
    j["powersgd"] = {{"rank", s.strategy.get<dag::PowerSgdOptions>().rank},
                     {"compression_stream",
                      s.strategy.get<dag::PowerSgdOptions>().separate_compression_stream ? "separate" : "inline"},
                     {"compressed_matrices", ps->matrices},
                     {"dense_tensors", ps->dense_tensors},
                     {"elements", ps->elements},
                     {"wire_elements_per_worker", ps->wire_elements},
                     {"compression_ratio", ps->compression_ratio()},
                     {"compress_s", ps->compress_s}};
}

// Parameter server (ps-sync, ps-async, ps-ssp): placement, traffic per iteration, and the asynchronous workers'
// figures.
void add_parameter_server(OrderedJson& j, const Scenario& s, const ParameterServerReport& ps) {
  OrderedJson o;
  o["mode"] = ps.async ? "async" : "sync";
  o["servers"] = ps.servers;
  o["placement"] = ps.dedicated ? "dedicated" : "colocated";
  o["bigarray_bound"] = s.strategy.parameter_server()->bigarray_bound;
  o["push_bytes_per_worker"] = ps.push_bytes_per_worker;
  o["pull_bytes_per_worker"] = ps.pull_bytes_per_worker;
  o["server_bytes_received"] = ps.server_bytes_received;
  o["server_bytes_sent"] = ps.server_bytes_sent;
  o["iterations_simulated"] = ps.async ? ps.async->iterations_simulated : ps.iterations_simulated;
  o["warmup_iterations"] = ps.async ? ps.async->warmup_iterations : ps.warmup_iterations;
  if (const auto& a = ps.async) {
    o["worker_speed_spread"] = s.strategy.parameter_server()->worker_speed_spread;
    o["worker_compute_s"] = a->worker_compute_s;
    o["worker_throughput_samples_per_s"] = a->worker_throughput_samples_per_s;
    o["aggregate_throughput_samples_per_s"] = a->aggregate_throughput_samples_per_s;
    OrderedJson histogram = OrderedJson::object();
    for (const auto& [staleness, count] : a->staleness_histogram)
      histogram[std::to_string(staleness)] = count;
    o["staleness"] = {{"histogram", std::move(histogram)}, {"mean", a->staleness_mean}, {"max", a->staleness_max}};
    if (a->staleness_bound >= 0)
      o["stale_synchronous"] = {{"staleness_bound", a->staleness_bound}, {"max_lead", a->clock_lead_max}};
  }
  j["parameter_server"] = std::move(o);
}

// Invariants of every successful run (issue #15): a figure that is not finite or negative, or a breakdown that
// does not add up to the iteration, is a bug, reported as one rather than written.
void check_invariants(const OrderedJson& j, const Scenario& s, const RunResult& r) {
  check_numbers(j, "");
  double parts = 0;
  if (const auto b = j.find("breakdown_s"); b != j.end())
    for (const auto& [k, v] : b->items())
      parts += v.get<double>();
  // A GPU holds at least its share of the weights, at 2 bytes each (bf16/fp16; fp32 holds 4): the largest stage's
  // parameters are at least the average over the p x t GPUs of a replica.
  // Stage 3 shards them over its shard group, and offloaded parameters live in host memory.
  const double gpus_per_replica = static_cast<double>(s.parallelism.pipeline) * s.parallelism.tensor;
  const double shards = r.sharding && r.sharding->stage == 3 ? r.sharding->shard_size : 1;
  const bool on_host = r.sharding && r.sharding->offload == "parameters";
  const double weights = on_host ? 0 : 2 * static_cast<double>(s.model.param_count()) / gpus_per_replica / shards;
  if (r.peak_memory_bytes_per_gpu > 0 && r.peak_memory_bytes_per_gpu < weights * (1 - 1e-12))
    throw std::logic_error(fmt::format("summary: peak memory {} B per GPU is below the weights' share, {} B",
                                       r.peak_memory_bytes_per_gpu, weights));
  if (j.contains("breakdown_s") && std::abs(parts - r.iteration_time_s) > 1e-9 * std::max(1.0, r.iteration_time_s))
    throw std::logic_error(
        fmt::format("summary: the breakdown adds up to {} s, the iteration is {} s", parts, r.iteration_time_s));
}

// A transformer's shape as the run used it (docs/llm.md): the zoo entry's with the scenario's changes.
Json transformer_shape(const dag::TransformerSpec& t) {
  const auto name = [](const auto& names, auto option) {
    return std::string(names.at(static_cast<std::size_t>(option)));
  };
  return {{"layers", t.layers},
          {"hidden", t.hidden},
          {"heads", t.heads},
          {"kv_heads", t.query_groups()},
          {"sequence", t.sequence},
          {"vocabulary", t.vocabulary},
          {"mlp", name(dag::kMlpNames, t.mlp)},
          {"ffn_hidden", t.ffn()},
          {"norm", name(dag::kNormNames, t.norm)},
          {"position", name(dag::kPositionNames, t.position)},
          {"tied_embeddings", t.tied_embeddings},
          {"attention", name(dag::kAttentionNames, t.attention)}};
}

} // namespace

OrderedJson summary_json(const Scenario& s, const RunResult& r) {
  OrderedJson j;
  add_headline(j, s, r);
  add_buckets(j, s, r);
  add_run(j, s, r);
  if (r.pipeline)
    add_pipeline(j, s, *r.pipeline);
  if (r.sharding)
    add_sharding(j, *r.sharding);
  if (!r.links.empty())
    add_links(j, r);
  // Extensions: what the prediction rests on.
  j["model"] = {{"name", s.model.name},
                {"layers", s.model.layers.size()},
                {"parameters", s.model.param_count()},
                {"tensors", s.model.tensor_count()},
                {"batch_per_gpu", s.batch_per_gpu}};
  if (s.model.transformer)
    j["model"]["transformer"] = transformer_shape(*s.model.transformer);
  j["strategy"] = std::string(s.strategy.kind());
  add_compression(j, s, r);
  add_powersgd(j, s, r);
  if (r.parameter_server)
    add_parameter_server(j, s, *r.parameter_server);
  j["allreduce"] = s.allreduce.measured ? "measured alpha-beta" : std::string(s.allreduce.algorithm->algorithm);
  j["compute_source"] = r.compute_source;
  j["single_gpu_iteration_s"] = r.single_gpu_iteration_s;
  j["critical_path_s"] = r.critical_path_s;
  j["notes"] = r.notes;
  check_invariants(j, s, r);
  return j;
}

namespace {

// Replica 0 (the DAG's own devices, r.timing) and the other replicas the engine reports, in that order.
struct ReportedReplica {
  int replica;
  const std::vector<TaskTiming>* timing;
};
std::vector<ReportedReplica> reported_replicas(const RunResult& r) {
  std::vector<ReportedReplica> out{{0, &r.timing}};
  for (const auto& rep : r.replicas)
    out.push_back({rep.replica, &rep.timing});
  return out;
}

// GPU ranks, consecutive or evenly spaced and rising as a range ("gpu0-7", "gpu0-120/8"), others one by one
// ("gpu7 gpu3").
std::string ranks_label(const std::vector<int>& ranks) {
  const int step = ranks.size() > 2 ? ranks[1] - ranks[0] : 0;
  bool even = step > 0;
  for (std::size_t i = 2; even && i < ranks.size(); ++i)
    even = ranks[i] - ranks[i - 1] == step;
  if (even)
    return fmt::format("gpu{}-{}{}", ranks.front(), ranks.back(), step > 1 ? fmt::format("/{}", step) : "");
  std::string out;
  for (const int rank : ranks)
    out += fmt::format("{}gpu{}", out.empty() ? "" : " ", rank);
  return out;
}

// The communicator of a collective or transfer as copy `replica` runs it: what it spans, its size and its GPUs
// ("data 8 gpu0-7", "tensor 4 gpu8-11", "pair 2 gpu3 gpu7"); empty for a task on none.
std::string communicator_label(const dag::IterationGraph& g, int replica, const dag::Task& t) {
  if (dag::communicator_of(t) < 0)
    return "";
  const auto axis = g.axis(t);
  const auto ranks = g.instance_communicator(t, g.instance_of(axis, replica)).ranks;
  const char* spans = axis == dag::IterationGraph::Axis::data     ? "data"
                      : axis == dag::IterationGraph::Axis::tensor ? "tensor"
                                                                  : "pair";
  return fmt::format("{} {} {}", spans, ranks.size(), ranks_label(ranks));
}

} // namespace

std::string tasks_csv(const Scenario& s, const RunResult& r) {
  std::string out = "device,resource,kind,layer,group,bytes,start_s,end_s,collective,communicator\n";
  // The columns between the device and the times, and the collective, are the same in every replica: formatted once
  // per task; the communicator once per task and replica.
  std::vector<std::string> middle(r.graph.size()), collective(r.graph.size());
  for (std::size_t v = 0; v < r.graph.size(); ++v) {
    const auto& t = r.graph.task(v);
    middle[v] = fmt::format(",{},{},{},{},{},", dag::resource_name(t.resource), dag::task_kind_name(t.kind),
                            csv_cell(layer_name(s, dag::layer_of(t))), // RFC 4180: a name may hold commas
                            dag::group_of(t) >= 0 ? std::to_string(dag::group_of(t)) : "", dag::bytes_of(t));
    if (dag::collective_of(t) != dag::Collective::none)
      collective[v] = dag::collective_name(dag::collective_of(t));
  }
  const auto replicas = reported_replicas(r);
  std::size_t row_bytes = 0; // the middle columns, a device name, two times of up to 24 characters each, a collective
  for (std::size_t v = 0; v < r.graph.size(); ++v)
    row_bytes += middle[v].size() + collective[v].size() + 8 + 2 * 24 + 4;
  out.reserve(out.size() + replicas.size() * row_bytes);
  auto it = std::back_inserter(out);
  for (const auto& [replica, timing] : replicas)
    for (std::size_t v = 0; v < r.graph.size(); ++v) {
      out += dag::device_name(r.graph.replica_device(replica, r.graph.task(v).device));
      out += middle[v];
      fmt::format_to(it, FMT_COMPILE("{},{},"), (*timing)[v].start_s, (*timing)[v].end_s);
      out += collective[v];
      out += ',';
      out += communicator_label(r.graph, replica, r.graph.task(v));
      out += '\n';
    }
  return out;
}

namespace {

// The measured step (`measured.timeline`, a Chrome trace written by `ddlsim import-trace`) beside the simulated one:
// its slices and metadata, each of its processes renumbered after the simulated devices and named "traced: ...".
void append_measured_timeline(const std::string& file, std::size_t first_pid, OrderedJson& events) {
  const Json list = read_measured_timeline(file); // checked: what the loop below reads has its type
  std::map<std::string, std::size_t> pids;        // by the trace's pid (a number or a string), in order of appearance
  std::vector<bool> named;
  OrderedJson out = OrderedJson::array();
  for (const Json& e : list) {
    const std::string ph = e.at("ph").get<std::string>();
    if (ph != "X" && ph != "M")
      continue;
    const auto [it, fresh] = pids.try_emplace(e.at("pid").dump(), first_pid + pids.size());
    if (fresh)
      named.push_back(false);
    const std::size_t pid = it->second;
    OrderedJson copy = OrderedJson::parse(e.dump());
    copy["pid"] = pid;
    if (ph == "M" && copy.value("name", "") == "process_name") {
      const std::string name = copy.contains("args") ? copy["args"].value("name", "") : std::string();
      copy["args"]["name"] = "traced: " + (name.empty() ? std::to_string(pid - first_pid) : name);
      named[pid - first_pid] = true;
    }
    out.push_back(std::move(copy));
  }
  for (std::size_t k = 0; k < named.size(); ++k)
    if (!named[k])
      events.push_back({{"name", "process_name"},
                        {"ph", "M"},
                        {"pid", first_pid + k},
                        {"tid", 0},
                        {"args", {{"name", fmt::format("traced: process {}", k)}}}});
  for (auto& e : out)
    events.push_back(std::move(e));
}

} // namespace

OrderedJson timeline_json(const Scenario& s, const RunResult& r) {
  // One process per device (GPUs by rank, then hosts), one thread per resource (stream) that ran something. A host
  // serves the replicas of its node's GPUs: each one's host streams are threads of their own (thread t + i x
  // resources for the i-th replica reported on that host).
  const auto replicas = reported_replicas(r);
  const auto own = r.graph.devices();
  std::vector<dag::Device> devices;
  for (const auto& rep : replicas)
    for (auto d : own)
      devices.push_back(r.graph.replica_device(rep.replica, d));
  std::sort(devices.begin(), devices.end());
  devices.erase(std::unique(devices.begin(), devices.end()), devices.end());
  const auto pid_of = [&](dag::Device d) {
    return static_cast<std::size_t>(std::lower_bound(devices.begin(), devices.end(), d) - devices.begin());
  };
  // thread_base[i][j]: replica i's first thread id on its image of the DAG's device j.
  std::vector<std::vector<int>> thread_base(replicas.size(), std::vector<int>(own.size(), 0));
  std::vector<int> sharing(devices.size(), 0); // replicas seen on each device so far
  for (std::size_t i = 0; i < replicas.size(); ++i)
    for (std::size_t j = 0; j < own.size(); ++j)
      thread_base[i][j] = dag::kResourceCount * sharing[pid_of(r.graph.replica_device(replicas[i].replica, own[j]))]++;
  const auto own_index = [&](dag::Device d) {
    return static_cast<std::size_t>(std::lower_bound(own.begin(), own.end(), d) - own.begin());
  };

  // One pass: each task's event, and the names of the threads they use; the metadata goes first.
  OrderedJson slices = OrderedJson::array();
  std::vector<std::map<int, std::string>> threads(devices.size());
  for (std::size_t i = 0; i < replicas.size(); ++i)
    for (std::size_t v = 0; v < r.graph.size(); ++v) {
      const auto& t = r.graph.task(v);
      const auto& timing = (*replicas[i].timing)[v];
      if (timing.end_s <= timing.start_s)
        continue;
      const auto pid = pid_of(r.graph.replica_device(replicas[i].replica, t.device));
      const int tid = thread_base[i][own_index(t.device)] + static_cast<int>(t.resource);
      if (!threads[pid].contains(tid)) {
        std::string name =
            t.resource == dag::Resource::none ? std::string("waits") : std::string(dag::resource_name(t.resource));
        if (sharing[pid] > 1)
          name += " (" + dag::device_name(r.graph.replica_device(replicas[i].replica, own.front())) + ")";
        threads[pid].emplace(tid, std::move(name));
      }
      OrderedJson e;
      e["name"] = task_label(s, r.graph, replicas[i].replica, t);
      e["cat"] = dag::task_kind_name(t.kind);
      e["ph"] = "X";
      e["ts"] = timing.start_s * 1e6;
      e["dur"] = (timing.end_s - timing.start_s) * 1e6;
      e["pid"] = pid;
      e["tid"] = tid;
      if (dag::bytes_of(t) > 0)
        e["args"] = {{"bytes", dag::bytes_of(t)}};
      slices.push_back(std::move(e));
    }
  OrderedJson events = OrderedJson::array();
  for (std::size_t d = 0; d < devices.size(); ++d) {
    events.push_back({{"name", "process_name"},
                      {"ph", "M"},
                      {"pid", d},
                      {"tid", 0},
                      {"args", {{"name", dag::device_name(devices[d])}}}});
    for (const auto& [tid, name] : threads[d])
      events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", d}, {"tid", tid}, {"args", {{"name", name}}}});
  }
  for (auto& e : slices)
    events.push_back(std::move(e));
  if (!s.measured.timeline.empty())
    append_measured_timeline(s.measured.timeline, devices.size(), events);
  OrderedJson j;
  j["traceEvents"] = std::move(events);
  j["displayTimeUnit"] = "ms";
  j["otherData"] = {{"scenario", s.name}, {"engine", engine_name(r.engine)}};
  return j;
}

std::vector<std::string> notes_lines(const RunResult& r) {
  std::vector<std::string> out;
  if (!r.links.empty()) {
    const auto busiest = std::max_element(r.links.begin(), r.links.end(), [](const LinkUsage& a, const LinkUsage& b) {
      return a.mean_utilisation < b.mean_utilisation;
    });
    out.push_back(fmt::format("  busiest link   {} ({}): busy {}, {} carried, mean utilisation {:.1f} %\n",
                              busiest->name, busiest->role, format_time(busiest->busy_s), format_bytes(busiest->bytes),
                              100 * busiest->mean_utilisation));
  }
  for (const auto& n : r.notes)
    out.push_back("  note: " + n + "\n");
  return out;
}

std::string links_csv(const RunResult& r) {
  std::string out = "name,role,bytes,busy_s,peak_utilisation,mean_utilisation\n";
  for (const auto& l : r.links)
    fmt::format_to(std::back_inserter(out), "{},{},{},{},{},{}\n", l.name, l.role, l.bytes, l.busy_s,
                   l.peak_utilisation, l.mean_utilisation);
  return out;
}

namespace {
// ", tensor 8 (collectives 1.2 s of stage 0's compute stream), MFU 38.6 %" for the pipeline line.
std::string tensor_line(const Scenario& s, const RunResult& r) {
  std::string out;
  if (s.parallelism.tensor > 1)
    out += fmt::format(", tensor {}{} (collectives {} on stage 0's compute stream)", s.parallelism.tensor,
                       s.parallelism.sequence_parallel ? " with sequence parallelism" : "",
                       format_time(r.pipeline->per_stage.front().tensor_communication_s));
  if (r.model_flops_utilisation)
    out += fmt::format(", model FLOPs utilisation {:.1f} %", 100 * *r.model_flops_utilisation);
  return out;
}
} // namespace

namespace {

// The measured step beside the prediction, for the run the scenario describes; a what-if (--set changed the run) is
// not compared with it.
std::string measured_line(const Scenario& s, const RunResult& r) {
  const auto& m = s.measured;
  if (!m.iteration_s)
    return "";
  const std::string source = m.source.empty() ? std::string() : "; " + m.source;
  if (!m.what_if_keys.empty())
    return fmt::format("  measured       {} by the run the scenario describes{}; not compared: --set changed {}\n",
                       format_time(*m.iteration_s), source, fmt::join(m.what_if_keys, ", "));
  return fmt::format("  measured       {}  (prediction {:+.1f} %{})\n", format_time(*m.iteration_s),
                     100 * (r.iteration_time_s / *m.iteration_s - 1), source);
}

// "  memory         21.5 GiB per GPU (fits the GPU's 32 GiB): weights 2.1 GiB, ..., reserve 720 MiB"
std::string memory_line(const Scenario& s, const MemoryPerGpu& m) {
  return fmt::format(
      "  memory         {} per GPU{}: weights {}, gradients {}, optimizer {}, activations {}, buffers {}, "
      "logits {}, fragmentation {}, reserve {}\n",
      format_bytes(m.total_bytes()),
      m.fits ? fmt::format(" ({} the GPU's {})", *m.fits ? "fits" : "exceeds", format_bytes(s.gpu.memory_bytes))
             : std::string(),
      format_bytes(m.weights_bytes), format_bytes(m.gradients_bytes), format_bytes(m.optimizer_bytes),
      format_bytes(m.activation_bytes), format_bytes(m.buffer_bytes), format_bytes(m.logits_bytes),
      format_bytes(m.fragmentation_bytes), format_bytes(m.reserve_bytes));
}

// "  sharding       stage 3 over 16 GPUs: 54.2 GiB per GPU of 80 GiB (...); exposed gathers 12 ms, reductions 5 ms"
std::string offload_line(const ShardingReport& sh) {
  if (sh.offload == "none")
    return "";
  return fmt::format(
      "  offload        {}: {} in host memory, {} over the host link per iteration, the step on the host "
      "{}\n",
      sh.offload, format_bytes(sh.host_bytes), format_bytes(sh.host_copy_bytes), format_time(sh.host_step_s));
}

std::string sharding_line(const Scenario& s, const ShardingReport& sh) {
  return fmt::format(
             "  sharding       stage {} over {} GPU{}{}: {} per GPU{} (weights {}, gradients {}, optimizer {}{}, "
             "buffers {}, activations {}, logits {}, fragmentation {}, reserve {}); exposed all-gathers {}, reductions "
             "{}\n",
             sh.stage, sh.shard_size, sh.shard_size == 1 ? "" : "s",
             sh.replicas > 1 ? fmt::format(" x {} replicas", sh.replicas) : std::string(),
             format_bytes(sh.total_bytes()),
             sh.fits
                 ? fmt::format(" ({} the GPU's {})", *sh.fits ? "fits" : "exceeds", format_bytes(s.gpu.memory_bytes))
                 : std::string(),
             format_bytes(sh.weights_bytes), format_bytes(sh.gradients_bytes), format_bytes(sh.optimizer_bytes),
             sh.stage == 3 ? fmt::format(", gathered {}", format_bytes(sh.gathered_bytes)) : std::string(),
             format_bytes(sh.reduce_buffer_bytes), format_bytes(sh.activation_bytes), format_bytes(sh.logits_bytes),
             format_bytes(sh.fragmentation_bytes), format_bytes(sh.reserve_bytes), format_time(sh.exposed_allgather_s),
             format_time(sh.exposed_reduce_s)) +
         offload_line(sh);
}

} // namespace

std::string human_summary(const Scenario& s, const RunResult& r) {
  const auto& b = r.breakdown;
  std::size_t collectives = 0; // one per group, or a chain of them (PowerSGD)
  for (std::size_t v = 0; v < r.graph.size(); ++v)
    if (r.graph.task(v).kind == dag::TaskKind::communication && r.graph.task(v).iteration == 0 &&
        dag::collective_of(r.graph.task(v)) != dag::Collective::point_to_point &&
        r.graph.task(v).resource != dag::Resource::gpu_compute) // tensor parallelism's: on the pipeline line
      ++collectives;
  const std::string groups =
      collectives == r.groups.size() ? std::string() : fmt::format(" in {} buckets", r.groups.size());
  std::string traffic = fmt::format("{} {}{}{} ({})", collectives,
                                    r.parameter_server ? "key"
                                    : r.groups.empty() ? "allreduce"
                                                       : dag::collective_name(r.groups.front().first_collective()),
                                    collectives == 1 ? "" : "s", groups, s.strategy.kind());
  if (const auto& sh = r.sharding) {
    std::vector<std::string> parts;
    const auto count = [&parts](int n, std::string_view what) {
      if (n > 0)
        parts.push_back(fmt::format("{} {}{}", n, what, n == 1 ? "" : "s"));
    };
    count(sh->reduce_scatters, "reduce-scatter");
    count(sh->allreduces, "allreduce");
    count(sh->other_exchanges, "compressed exchange");
    count(sh->allgathers, "parameter all-gather");
    traffic = fmt::format("{} ({}, sharding stage {})", fmt::join(parts, ", "), s.strategy.kind(), sh->stage);
  }
  return fmt::format("{}: {} on {} GPU{} ({} node{} x {}), {} engine\n"
                     "  iteration      {}  ({:.1f} samples/s, scaling efficiency {:.1f} %)\n"
                     "  1-GPU          {}  (compute costs from {})\n"
                     "  breakdown      compute {}, {}exposed communication {}, idle {}\n"
                     "  communication  {}, {} sent per worker\n",
                     s.name, s.model.name, r.workers, r.workers == 1 ? "" : "s", s.cluster.nodes,
                     s.cluster.nodes == 1 ? "" : "s", s.cluster.gpus_per_node, engine_name(r.engine),
                     format_time(r.iteration_time_s), r.throughput_samples_per_s, 100 * r.scaling_efficiency,
                     format_time(r.single_gpu_iteration_s), r.compute_source, format_time(b.compute_s),
                     b.compression_s > 0 ? fmt::format("compression {}, ", format_time(b.compression_s)) : "",
                     format_time(b.exposed_communication_s), format_time(b.idle_s), traffic,
                     format_bytes(r.communication_bytes_per_worker)) +
         (r.peak_memory_bytes_per_gpu > 0 ? memory_line(s, r.memory) : std::string()) +
         (r.sharding ? sharding_line(s, *r.sharding) : std::string()) +
         (r.pipeline
              ? fmt::format("  pipeline       {}, {} stages{}, {} micro-batches, {} data-parallel{}; bubble {:.1f} % "
                            "(closed form {:.1f} %)\n",
                            r.pipeline->schedule, r.pipeline->stages,
                            r.pipeline->virtual_stages > 1 ? fmt::format(" x {} virtual", r.pipeline->virtual_stages)
                                                           : std::string(),
                            r.pipeline->micro_batches, r.data_parallel, tensor_line(s, r),
                            100 * r.pipeline->bubble_fraction, 100 * r.pipeline->bubble_fraction_closed_form)
              : std::string()) +
         (r.variability ? fmt::format("  variability    mean of {} sampled iterations: p50 {}, p90 {}, p99 {} (without "
                                      "variability {}; iterations.csv)\n",
                                      r.variability->iterations, format_time(r.variability->p50_s),
                                      format_time(r.variability->p90_s), format_time(r.variability->p99_s),
                                      format_time(r.variability->deterministic_s))
                        : std::string()) +
         measured_line(s, r) + fmt::format("{}", fmt::join(notes_lines(r), ""));
}

void write_reports(const std::string& dir, const Scenario& s, const RunResult& r, bool trace) {
  // Render everything first, so that an exception leaves no file behind.
  const std::string summary = summary_json(s, r).dump(2) + "\n";
  const std::string tasks = tasks_csv(s, r);
  const std::string timeline = trace ? timeline_json(s, r).dump() + "\n" : std::string();
  const std::filesystem::path d(dir);
  OutputBatch batch; // the run's files replace the previous run's all together, or not at all
  batch.add((d / "tasks.csv").string(), tasks);
  if (!r.links.empty())
    batch.add((d / "links.csv").string(), links_csv(r));
  if (trace)
    batch.add((d / "timeline.json").string(), timeline);
  if (r.variability) {
    std::string rows = "iteration,iteration_time_s\n";
    for (std::size_t i = 0; i < r.variability->iteration_s.size(); ++i)
      fmt::format_to(std::back_inserter(rows), "{},{}\n", i, r.variability->iteration_s[i]);
    batch.add((d / "iterations.csv").string(), rows);
  }
  batch.add((d / "summary.json").string(), summary);
  batch.commit();
}

} // namespace ddlsim::sim
