// Planning (sim/plan/prepare.hpp): costs, the strategy's groups and the iteration DAG with closed-form collective
// durations, before an engine times it; and the derived figures after.
#include "sim/plan/prepare.hpp"

#include "core/units.hpp"
#include "dag/measured.hpp"
#include "sim/network/communicator.hpp"
#include "sim/network/lowering/evaluate.hpp"
#include "sim/plan/contention.hpp"
#include "sim/plan/draws.hpp"
#include "sim/plan/host.hpp"
#include "sim/plan/measured_links.hpp"
#include "sim/plan/memory.hpp"
#include "sim/plan/pipeline.hpp"
#include "sim/plan/schedule.hpp"
#include "sim/plan/sharding.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>

namespace ddlsim::sim {

std::string parameter_server_placement(const Scenario& s) {
  const auto& o = *s.strategy.parameter_server();
  const std::string placement =
      o.dedicated_servers
          ? fmt::format("on {} dedicated host{} with the workers' NIC", o.servers, o.servers == 1 ? "" : "s")
          : fmt::format("co-located on GPU 0 of node{} 0{}", o.servers == 1 ? "" : "s",
                        o.servers == 1 ? "" : fmt::format("..{}", std::min(o.servers, s.cluster.nodes) - 1));
  return fmt::format(
      "{} server{} {}; keys placed as in MXNet's KVStore (a tensor of at least {} elements split evenly over all "
      "servers, a smaller one whole on server key x 9973 mod S)",
      o.servers, o.servers == 1 ? "" : "s", placement, o.bigarray_bound);
}

// Bytes of one worker's push to each server (its shards of every key, dag/strategies/ps.cpp).
std::vector<double> server_shard_bytes(const std::vector<dag::GradientGroup>& groups, int servers) {
  std::vector<double> out(static_cast<std::size_t>(servers), 0.0);
  for (const auto& g : groups) {
    const int count = dag::shard_count_of(g) > 0 ? dag::shard_count_of(g) : servers;
    for (int j = 0; j < count; ++j)
      out[static_cast<std::size_t>(dag::shard_first_of(g) + j)] += g.bytes / count;
  }
  return out;
}

namespace {

// ps-async's timeline of worker 0: one iteration, the whole gradient pushed after backward and pulled back; the
// push and pull take their mean durations from the simulation (set by prepare_parameter_server).
// ps-sync's DAG: ps-sync's, and ps-ssp's (its workers replayed on it); ps-async has its own one-iteration graph.
bool runs_ps_sync_dag(const Scenario& s) {
  const auto* o = s.strategy.parameter_server();
  return o != nullptr && (!s.strategy.asynchronous() || o->staleness_bound >= 0);
}

dag::IterationGraph::Placement worker_placement(const Scenario& s) {
  return {.gpu = 0, .node = 0, .gpus_per_node = s.cluster.gpus_per_node, .data_parallel = data_parallel_group(s)};
}

void prepare_parameter_server(const Scenario& s, Plan& p) {
  const auto& o = *s.strategy.parameter_server();
  ParameterServerReport ps;
  ps.servers = o.servers;
  ps.dedicated = o.dedicated_servers;
  const LoweringShape shape = server_shape(s, s.cluster.network().shape());
  const auto shard = server_shard_bytes(p.groups, o.servers);
  for (const auto& g : p.groups)
    ps.push_bytes_per_worker += g.bytes;
  ps.pull_bytes_per_worker = ps.push_bytes_per_worker;
  // Who pushes to a server: every worker, or (BytePS) every node once, none with one node; a co-located server's
  // own worker (node) sends nothing over the network.
  const int pushers = !o.byteps ? p.workers : s.cluster.nodes > 1 ? s.cluster.nodes : 0;
  for (int k = 0; k < o.servers && pushers > 0; ++k) {
    const int local = shape.server_rank(k) < p.workers ? 1 : 0;
    ps.server_bytes_received =
        std::max(ps.server_bytes_received, (pushers - local) * shard[static_cast<std::size_t>(k)]);
  }
  ps.server_bytes_sent = ps.server_bytes_received;
  if (runs_ps_sync_dag(s)) {
    ps.iterations_simulated = kPsSyncIterations;
    ps.warmup_iterations = kPsSyncIterations - 1;
    for (std::size_t v = 0; v < p.graph.size(); ++v) {
      const auto& t = p.graph.task(v);
      if (t.kind == dag::TaskKind::backward && dag::layer_of(t) == 0)
        ps.iteration_end.push_back(v);
    }
    if (s.strategy.asynchronous()) {
      // ps-ssp: the engine replays the workers on this DAG (sim/analytic/ps_ssp.hpp) and says so.
    } else if (o.byteps)
      p.notes.push_back(fmt::format(
          "ps-sync in BytePS's mode (Jiang et al., OSDI 2020): {} server{} {}; tensors cut into partitions of {}, each "
          "a key whole on one server, round-robin; a node's {} GPUs reduce a key onto GPU 0, which pushes it once to "
          "its server ({}), and after the pull broadcasts it to them; the servers sum the {} nodes' pushes on CPUs at "
          "{} of pushed bytes, then apply the update at the worker's optimizer rate; a layer's forward waits for its "
          "pulls; {} iterations are unrolled and the iteration time is the steady-state period",
          o.servers, o.servers == 1 ? "" : "s",
          o.dedicated_servers ? "on dedicated hosts" : "co-located on GPU 0 of the nodes",
          format_bytes(o.partition_bytes), s.cluster.gpus_per_node,
          s.cluster.nodes > 1 ? "over the node's NIC" : "one node: no server and no network traffic", s.cluster.nodes,
          format_bandwidth(o.server_sum_bandwidth), kPsSyncIterations));
    else
      p.notes.push_back(fmt::format(
          "ps-sync: {}; each tensor is pushed as soon as its gradient is ready, the servers aggregate all {} workers' "
          "pushes, and it is pulled back while the next forward runs (a layer's forward waits for its pull); {} "
          "iterations are unrolled and the iteration time is the steady-state period between the ends of the last "
          "two backward passes; each server applies the update to its shard of a key before it is pulled, at the "
          "worker's optimizer rate (the worker's update time for the key's share of the parameters, split over its "
          "servers); the aggregation of the pushes is not costed",
          parameter_server_placement(s), p.workers, kPsSyncIterations));
  }
  // ps-async: the engine simulates the asynchronous workers (sim/analytic/ps_async.hpp) and fills in the rest.
  p.parameter_server = std::move(ps);
}

// The window an iteration is read over, chosen once: ps-sync's (and ps-ssp's lockstep timeline) steady-state period
// between the last two unrolled iterations' ends of backward; with host times given, the period between the last two
// iterations' ends; else the makespan. (Pipelines choose theirs: sim/plan/pipeline.cpp.)
IterationWindow iteration_window(const Plan& p) {
  if (p.parameter_server && p.parameter_server->iteration_end.size() >= 2) {
    const auto& ends = p.parameter_server->iteration_end;
    return {IterationWindow::Kind::between_tasks, ends[ends.size() - 2], ends[ends.size() - 1]};
  }
  int iterations = 0;
  for (std::size_t v = 0; v < p.graph.size(); ++v)
    iterations = std::max(iterations, p.graph.task(v).iteration + 1);
  if (!p.parameter_server && iterations >= 2)
    return {IterationWindow::Kind::between_iterations, 0, 0};
  return {};
}

// The same worker alone, without communication: the reference for scaling efficiency.
double single_gpu_iteration_s(const Scenario& s, const ComputeCosts& costs) {
  const HostTimes host(costs.worker);
  auto alone = dag::build_iteration(s.model, costs.worker, {}, false);
  if (host.steady_state())
    alone = dag::unroll_iterations(alone, kSteadyStateIterations);
  add_host_tasks(alone, host);
  const auto alone_timing = schedule(alone);
  const auto alone_ends = iteration_ends(alone, alone_timing);
  return alone_ends.size() >= 2 ? alone_ends.back() - alone_ends[alone_ends.size() - 2] : makespan_of(alone_timing);
}

} // namespace

// The flow engine simulates the algorithms on the platform: on links derived from a measured allreduce over the
// whole cluster (measured_links.hpp), or on the scenario's; it says which.
std::vector<std::string>* measured_collectives_notes(const Scenario& s, Plan& p) {
  if (!s.gpu.calibration || s.gpu.calibration->collectives.empty())
    return nullptr;
  if (capabilities(p.engine).replays_measured_collectives)
    return &p.notes;
  if (const auto links = measured_links(s))
    p.notes.push_back(links->note);
  else
    p.notes.push_back(fmt::format("the flow engine simulates the collective algorithms on the scenario's links; the "
                                  "measured collectives of {} are replayed by the analytic engine only (the flow "
                                  "engine derives its links from a measured allreduce over every GPU of the cluster, "
                                  "for a ring allreduce on a star with a NIC per node)",
                                  s.gpu.calibration->origin));
  return nullptr;
}

Plan prepare(const Scenario& s, Engine engine) {
  Plan p;
  p.engine = engine;
  p.workers = s.cluster.workers();
  p.costs = compute_costs(s);
  p.compute_source = p.costs.source;
  if (!p.costs.note.empty())
    p.notes.push_back(p.costs.note);
  const Network net = s.cluster.network();
  // links whose transport (or the scenario) scales their rate (network/cluster.hpp: transport_efficiency)
  const std::pair<const char*, const LinkSpec*> links[] = {
      {"intra-node", s.cluster.gpus_per_node > 1 ? &s.cluster.intra : nullptr},
      {"inter-node", s.cluster.nodes > 1 ? &s.cluster.inter : nullptr}};
  for (const auto& [name, link] : links)
    if (link && link->efficiency != 1)
      p.notes.push_back(
          fmt::format("{} links: {} at {:.1f} % of the rate the scenario gives ({} of {})", name,
                      link->transport.empty() ? "the scenario's efficiency" : link->transport + " transport",
                      100 * link->efficiency, format_bandwidth(link->bandwidth),
                      format_bandwidth(link->bandwidth / link->efficiency)));
  if (const auto slowdown = comm_slowdown(s); slowdown.factor > 0)
    p.notes.push_back(fmt::format("compute on a GPU runs {:.3g} x slower while a collective runs on it ({}{}; "
                                  "docs/engines.md)",
                                  1 + slowdown.factor, slowdown.source == "gpu.comm_slowdown" ? "" : "calibration ",
                                  slowdown.source));
  p.allreduce = allreduce_model(s, net);
  if (s.pipeline) {
    prepare_pipeline(s, p);
    return p;
  }
  const CollectiveModel& model = *p.allreduce;
  const dag::CommCost allreduce_time = [&model](double bytes) { return model.cost(bytes).time_s; };
  const LoweringShape shape = net.shape();
  // The allgather's cost as a function of its payload, built on first use (only OMGS plans with it).
  std::optional<LinearLoweringCost> allgather;
  const dag::CommCost allgather_time = [&](double bytes) {
    if (!allgather)
      allgather.emplace(collective_lowering(s, dag::Collective::allgather), shape, net);
    return (*allgather)(bytes);
  };
  const dag::StrategyInput input{s.model,        p.costs.worker,     dtype_bytes(s.gradient_dtype),
                                 allreduce_time, s.strategy.options, p.workers,
                                 allgather_time, affine_cost(model)};
  const bool ps = s.strategy.parameter_server() != nullptr;
  // A single worker communicates only with a dedicated server.
  const bool communicate = p.workers > 1 || (ps && s.strategy.parameter_server()->dedicated_servers);
  if (sharded(s) != nullptr) { // reduce-scatters, gathers and the step on the shard (sim/plan/sharding.hpp)
    plan_sharded(s, input, p);
  } else {
    p.groups = communicate ? s.strategy.entry().plan(input) : std::vector<dag::GradientGroup>{};
    // The family's DAG shape (its registry entry's builder), the data-parallel iteration by default.
    const dag::GraphInput graph_input{
        s.model, p.costs.worker, p.groups, s.strategy.options, dtype_bytes(s.gradient_dtype), communicate};
    const auto build = s.strategy.entry().build;
    p.graph = build != nullptr ? build(graph_input, p.notes)
                               : dag::build_iteration(s.model, p.costs.worker, p.groups, communicate);
  }
  if (!s.strategy.entry().traits.own_iterations && HostTimes(p.costs.worker).steady_state()) {
    p.graph = dag::unroll_iterations(p.graph, kSteadyStateIterations);
    p.notes.push_back(fmt::format(
        "host times given: {} iterations are unrolled, each GPU's host thread issuing the next iteration's work "
        "while its GPU finishes the last, and the iteration time is the steady-state period between the last two "
        "iterations' ends",
        kSteadyStateIterations));
  }
  p.graph.place(worker_placement(s));
  place_shard_groups(s, p.graph);
  std::vector<double> sent;
  p.communication_bytes_per_worker =
      cost_communication(s, *p.allreduce, p.graph, s.sharding ? &sent : nullptr, measured_collectives_notes(s, p));
  if (s.sharding && s.sharding->stage == 0)
    report_unsharded(s, p);
  if (p.sharding)
    count_sharded_traffic(p.graph, sent, *p.sharding);
  add_host_tasks(p.graph, HostTimes(p.costs.worker));
  if (ps)
    prepare_parameter_server(s, p);
  if (const auto c = compression_totals(p.groups); c.groups > 0) {
    const double bw = p.costs.worker.memory_bandwidth / 1e9;
    if (c.selected > 0) {
      const auto& sparse = s.strategy.get<dag::SparsificationOptions>();
      p.notes.push_back(fmt::format(
          "{}: {} of {} gradient elements sent per worker in {} group{} (density {}), {} selection{}; compression {} "
          "and decompression {} per iteration on the GPU (memory traffic at {:.0f} GB/s and {} us per kernel launch)",
          s.strategy.kind(), c.selected, c.elements, c.groups, c.groups > 1 ? "s" : "", sparse.density,
          dag::selection_name(sparse.selection),
          sparse.selection_curve ? " (its time from the calibration's cost curve)" : "", format_time(c.compress_s),
          format_time(c.decompress_s), bw, dag::kKernelLaunchS * 1e6));
    } else {
      p.notes.push_back(fmt::format(
          "{}: {} bits per gradient element on the wire, {} DDP bucket{} allgathered and decoded on every worker; "
          "quantisation {} and decoding {} per iteration on the GPU (memory traffic at {:.0f} GB/s and {} us per "
          "kernel launch)",
          s.strategy.kind(), c.wire_bits, c.groups, c.groups > 1 ? "s" : "", format_time(c.compress_s),
          format_time(c.decompress_s), bw, dag::kKernelLaunchS * 1e6));
    }
  }
  if (const auto low_rank = powersgd_totals(p.groups)) {
    const auto& w = p.costs.worker;
    const auto& low_rank_options = s.strategy.get<dag::PowerSgdOptions>();
    p.notes.push_back(fmt::format(
        "powersgd: rank {}, {} weight matrices sent as low-rank factors and {} tensors dense; {} of {} gradient "
        "elements allreduced per worker (compression ratio {:.1f}); compression kernels {} per iteration "
        "(roofline at {:.1f} TFLOPS, {:.0f} GB/s) on {}",
        low_rank_options.rank, low_rank->matrices, low_rank->dense_tensors, low_rank->wire_elements, low_rank->elements,
        low_rank->compression_ratio(), format_time(low_rank->compress_s), w.peak_flops / 1e12, w.memory_bandwidth / 1e9,
        low_rank_options.separate_compression_stream
            ? "a separate GPU stream, assumed to overlap with backward without slowing it"
            : "the compute stream"));
  }
  p.window = iteration_window(p);
  p.single_gpu_iteration_s = single_gpu_iteration_s(s, p.costs);
  if (p.sharding) // plan_sharded has counted the memory by ZeRO's accounting
    return p;
  double largest = 0;
  for (const auto& g : p.groups)
    largest = std::max(largest, g.bytes);
  p.memory = data_parallel_memory(s, largest);
  p.peak_memory_bytes_per_gpu = p.memory.total_bytes();
  return p;
}

CompressionTotals compression_totals(const std::vector<dag::GradientGroup>& groups) {
  CompressionTotals c;
  for (const auto& g : groups) {
    const auto first = g.first_collective();
    if (first != dag::Collective::allgather && first != dag::Collective::global_topk)
      continue;
    if (dag::selected_of(g) == 0 && dag::wire_bits_of(g) == 0 && g.kernel_s() == 0)
      continue; // a dense allgather (strategy traced), not a compressed group
    ++c.groups;
    c.elements += g.elements;
    c.selected += dag::selected_of(g);
    c.wire_bits = dag::wire_bits_of(g);
    c.compress_s += g.steps.front().kernel_s;
    c.decompress_s += g.kernel_s() - g.steps.front().kernel_s;
  }
  return c;
}

std::optional<PowerSgdTotals> powersgd_totals(const std::vector<dag::GradientGroup>& groups) {
  PowerSgdTotals t;
  bool any = false;
  for (const auto& g : groups) {
    if (dag::wire_elements_of(g) == 0 && dag::low_rank_matrices_of(g) == 0)
      continue;
    any = true;
    t.matrices += dag::low_rank_matrices_of(g);
    t.dense_tensors += static_cast<int>(g.tensors.size()) - dag::low_rank_matrices_of(g);
    t.elements += g.elements;
    t.wire_elements += dag::wire_elements_of(g);
    t.compress_s += g.kernel_s();
  }
  if (!any)
    return std::nullopt;
  return t;
}

dag::Communicator data_parallel_group(const Scenario& s) {
  dag::Communicator all;
  all.ranks.resize(static_cast<std::size_t>(s.cluster.workers()));
  for (std::size_t i = 0; i < all.ranks.size(); ++i)
    all.ranks[i] = static_cast<int>(i);
  return all;
}

struct CollectiveCoster::Measured {
  const dag::MeasuredCollective& collective;
  dag::MeasuredModel model;
  int used = 0;
  int extrapolated = 0;
  double largest_extrapolated_bytes = 0;
  std::map<int, int> scaled{}; ///< collectives timed on communicators of other sizes, by their size
};

CollectiveCoster::CollectiveCoster(const Scenario& s, const CollectiveModel& whole_cluster)
    : s_(s), whole_cluster_(whole_cluster) {
  if (s.gpu.calibration)
    for (const auto& m : s.gpu.calibration->collectives)
      measured_.push_back(std::make_unique<Measured>(Measured{m, dag::MeasuredModel(m)}));
}

CollectiveCoster::~CollectiveCoster() = default;

std::vector<std::string> CollectiveCoster::notes() const {
  std::vector<std::string> out;
  for (const auto& m : measured_) {
    const auto& c = m->collective;
    if (m->used > 0)
      out.push_back(fmt::format(
          "measured {} over {} ranks{} ({}) timed {} collective{} in place of the algorithm{}",
          collective_name(c.collective), c.ranks, c.nodes > 0 ? fmt::format(" on {} nodes", c.nodes) : std::string(),
          s_.gpu.calibration->origin, m->used, m->used == 1 ? "" : "s",
          m->extrapolated > 0
              ? fmt::format("; {} of them outside its measured sizes ({} .. {}), extrapolated by its "
                            "alpha-beta fit, up to {}",
                            m->extrapolated, format_bytes(c.table.front().size_bytes),
                            format_bytes(c.table.back().size_bytes), format_bytes(m->largest_extrapolated_bytes))
              : std::string()));
    for (const auto& [ranks, count] : m->scaled)
      out.push_back(fmt::format("measured {} over {} ranks{} ({}) timed {} collective{} over {} ranks, its bus "
                                "bandwidth kept and its start-up scaled by a ring's step count",
                                collective_name(c.collective), c.ranks,
                                c.nodes > 0 ? fmt::format(" on {} nodes", c.nodes) : std::string(),
                                s_.gpu.calibration->origin, count, count == 1 ? "" : "s", ranks));
  }
  return out;
}

CollectiveCost CollectiveCoster::operator()(const dag::Task& task, const CommunicatorLayout& layout) {
  const auto shape = task_shape(s_, task, layout.shape);
  const Key key{dag::collective_of(task),
                dag::gathers_parameters(task),
                shape.nodes,
                shape.gpus_per_node,
                shape.shard_first,
                shape.shard_count,
                layout.whole_cluster,
                dag::bytes_of(task)};
  const auto known = memo_.find(key);
  const int ranks = layout.shape.workers();
  Measured* measured = nullptr;
  for (const auto& m : measured_)
    if (m->collective.collective == dag::collective_of(task) && m->collective.ranks == ranks &&
        (m->collective.nodes == 0 || m->collective.nodes == layout.shape.nodes))
      measured = m.get();
  // Else a measurement of the same collective with as many GPUs per node, inside one node or across nodes as this
  // communicator is, the closest in size: replayed at this size (dag::scaled_time).
  bool scaled = false;
  if (measured == nullptr)
    for (const auto& m : measured_) {
      const auto& c = m->collective;
      if (c.collective != dag::collective_of(task) || c.nodes <= 0 || c.ranks % c.nodes != 0 ||
          c.ranks / c.nodes != layout.shape.gpus_per_node || (c.nodes > 1) != (layout.shape.nodes > 1))
        continue;
      if (measured == nullptr || std::abs(c.ranks - ranks) < std::abs(measured->collective.ranks - ranks))
        measured = m.get();
      scaled = true;
    }
  if (measured != nullptr && task.iteration == 0) { // counted per collective of one iteration, not per distinct cost
    ++(scaled ? measured->scaled[ranks] : measured->used);
    if (!scaled && measured->model.time(dag::bytes_of(task)).extrapolated) {
      ++measured->extrapolated;
      measured->largest_extrapolated_bytes = std::max(measured->largest_extrapolated_bytes, dag::bytes_of(task));
    }
  }
  if (known != memo_.end())
    return known->second;
  const Network& net = layout.net;
  // The closed form, or the phase-synchronous cost of the lowering; the flow engine replaces it with what it
  // simulates.
  CollectiveCost cost;
  if (dag::collective_of(task) == dag::Collective::allreduce) {
    if (layout.whole_cluster) {
      cost = whole_cluster_.cost(dag::bytes_of(task));
    } else {
      auto& model = other_groups_[{layout.shape.nodes, layout.shape.gpus_per_node}];
      if (!model) // a measured fit describes the whole cluster; a smaller group takes the algorithm's closed form
        model = make_cost_model(*s_.allreduce.algorithm, net);
      cost = model->cost(dag::bytes_of(task));
    }
  } else {
    const bool ps = s_.strategy.parameter_server() != nullptr;
    const auto phases = task_lowering(s_, task).lower(shape, dag::bytes_of(task), Granularity::aggregated);
    // A parameter-server worker sends its gradient (push) and receives the parameters (pull).
    const double sent = !ps ? busiest_sender_bytes(phases, layout.shape.workers())
                        : dag::collective_of(task) == dag::Collective::ps_push ? dag::bytes_of(task)
                                                                               : 0.0;
    cost = {phase_synchronous_time(phases, net), sent};
  }
  if (measured != nullptr) // what each rank sends stays the algorithm's; the time is the measurement's
    cost.time_s = dag::scaled_time(measured->model, dag::collective_of(task), measured->collective.ranks, ranks,
                                   dag::bytes_of(task))
                      .time_s;
  memo_.emplace(key, cost);
  return cost;
}

double cost_communication(const Scenario& s, const CollectiveModel& whole_cluster, dag::IterationGraph& graph,
                          std::vector<double>* sent_by_task, std::vector<std::string>* notes) {
  if (sent_by_task != nullptr)
    sent_by_task->assign(graph.size(), 0.0);
  std::vector<std::optional<CommunicatorLayout>> layouts(graph.communicators().size());
  CollectiveCoster coster(s, whole_cluster);
  InstanceContention contention(s, graph);
  double bytes_sent = 0;
  for (std::size_t v = 0; v < graph.size(); ++v) {
    auto& task = graph.task(v);
    if (dag::collective_of(task) == dag::Collective::none)
      continue;
    const auto cost = coster(task, task_layout(s, graph, task, layouts));
    // The task's instances run at once: their time together (1 x alone when they share no link).
    task.duration_s = cost.time_s * contention.factor(task);
    if (sent_by_task != nullptr)
      (*sent_by_task)[v] = cost.bytes_sent;
    if (task.iteration == 0)
      bytes_sent += cost.bytes_sent;
  }
  if (notes != nullptr) {
    const auto used = coster.notes();
    notes->insert(notes->end(), used.begin(), used.end());
  }
  return bytes_sent;
}

const CommunicatorLayout& task_layout(const Scenario& s, const dag::IterationGraph& graph, const dag::Task& task,
                                      std::vector<std::optional<CommunicatorLayout>>& cache) {
  if (dag::communicator_of(task) < 0)
    throw std::logic_error(fmt::format("{} task on {} has no communicator",
                                       dag::collective_name(dag::collective_of(task)), dag::device_name(task.device)));
  auto& slot = cache.at(static_cast<std::size_t>(dag::communicator_of(task)));
  if (!slot)
    slot = layout_of(graph.communicator(dag::communicator_of(task)).ranks, s.cluster);
  return *slot;
}

LoweringShape server_shape(const Scenario& s, LoweringShape communicator) {
  const auto& o = *s.strategy.parameter_server();
  communicator.servers = o.servers;
  communicator.dedicated_servers = o.dedicated_servers;
  return communicator;
}

LoweringShape task_shape(const Scenario& s, const dag::Task& task, const LoweringShape& communicator) {
  LoweringShape shape = communicator;
  if (const auto* server = std::get_if<dag::ServerTransfer>(&task.payload)) { // a push or pull
    const auto& o = *s.strategy.parameter_server();
    shape = server_shape(s, shape);
    shape.shard_first = server->shard_first;
    shape.shard_count = server->shard_count;
    shape.node_aggregation = o.byteps;
  }
  return shape;
}

namespace {
// Transformers on a GPU of known peak: Korthikanti et al.'s model FLOPs (arXiv:2205.05198, §6) per second over peak,
// 72·s·L·h²·(1 + s/(6h) + V/(12·L·h)) per sample for GPT, i.e. 6·s·(L·c·h² + h·V) + 12·L·h·s² with c·h² the
// weights of a block's matmuls (c = 12 for GPT; TransformerSpec::block_matmul_params for others) and attention
// counted whole, causal or not (PaLM's convention: Chowdhery et al. 2022, arXiv:2204.02311, Appendix B).
void set_model_flops_utilisation(const Scenario& s, RunResult& r) {
  if (!s.model.transformer || s.gpu.peak_flops <= 0 || r.iteration_time_s <= 0)
    return;
  const auto& tf = *s.model.transformer;
  const double seq = tf.sequence, h = tf.hidden, layers = tf.layers, vocab = tf.vocabulary;
  const double c = tf.block_matmul_params() / (h * h);
  const double per_sample = 6 * c * seq * layers * h * h * (1 + 2 * seq / (c * h) + vocab / (c * layers * h));
  r.model_flops_utilisation = r.throughput_samples_per_s * per_sample / (r.workers * s.gpu.peak_flops);
}
} // namespace

namespace {
// A note when the host thread that drives the DAG's first GPU is busy most of the iteration (sim/plan/host.hpp).
void note_host_bound(const Scenario& s, const ComputeCosts& costs, RunResult& r) {
  double busy = 0, gpu = 0;
  int iterations = 1;
  const auto first = r.graph.devices().front();
  const dag::Device host{.kind = dag::Device::Kind::host, .index = first.index / s.cluster.gpus_per_node};
  for (std::size_t v = 0; v < r.graph.size(); ++v) {
    const auto& t = r.graph.task(v);
    iterations = std::max(iterations, t.iteration + 1);
    // a batch loaded without prefetch is loaded by the thread that issues the work
    if (t.resource == dag::Resource::host_cpu && !costs.worker.prefetch && t.device == host)
      busy += r.timing[v].end_s - r.timing[v].start_s;
    if (t.device != first)
      continue;
    if (t.resource == dag::Resource::host_thread)
      busy += r.timing[v].end_s - r.timing[v].start_s;
    else if (t.resource == dag::Resource::gpu_compute && t.kind != dag::TaskKind::communication)
      gpu += r.timing[v].end_s - r.timing[v].start_s;
  }
  busy /= iterations;
  gpu /= iterations;
  if (!(busy >= 0.8 * r.iteration_time_s) || !(busy > gpu))
    return;
  const auto* c = s.gpu.calibration ? &*s.gpu.calibration : nullptr;
  const bool measured = c != nullptr && std::any_of(c->layers.begin(), c->layers.end(), [](const auto& l) {
                          return l.second.forward_host_s.has_value() || l.second.backward_host_s.has_value();
                        });
  r.notes.push_back(fmt::format(
      "host-bound: the host thread that issues {}'s work{} is busy {} of the {} iteration, its GPU compute {} ({}{} "
      "per other GPU task); a faster GPU would not shorten the step",
      dag::device_name(first), costs.worker.prefetch || costs.worker.data_load_s == 0 ? "" : " and loads its batches",
      format_time(busy), format_time(r.iteration_time_s), format_time(gpu),
      measured ? "host times per layer from the calibration, " : "", format_time(costs.worker.launch_s)));
}
} // namespace

void count_backup_workers(const Scenario& s, RunResult& r) {
  r.backup_workers = s.backup_workers;
  if (s.backup_workers == 0)
    return;
  // Each iteration applies the gradients of d - b replicas (Chen et al., arXiv:1604.00981): b replicas' samples are
  // computed and dropped.
  const int d = data_parallel_degree(s);
  const double kept = static_cast<double>(d - s.backup_workers) / d;
  r.throughput_samples_per_s *= kept;
  r.scaling_efficiency *= kept;
  r.notes.push_back(fmt::format("{} backup worker(s): every data-parallel collective starts when the first {} of the "
                                "{} replicas are ready and drops the rest; throughput counts {} replicas' samples",
                                s.backup_workers, d - s.backup_workers, d, d - s.backup_workers));
}

double window_time_s(const Plan& p, const std::vector<TaskTiming>& timing) {
  switch (p.window.kind) {
  case IterationWindow::Kind::makespan:
    return makespan_of(timing);
  case IterationWindow::Kind::between_tasks:
    return timing[p.window.to_task].end_s - timing[p.window.from_task].end_s;
  case IterationWindow::Kind::between_iterations: {
    const auto ends = iteration_ends(p.graph, timing);
    return ends.back() - ends[ends.size() - 2];
  }
  }
  return 0;
}

namespace {

// The iteration time, its breakdown and the critical path of r.window.
void read_window(RunResult& r) {
  switch (r.window.kind) {
  case IterationWindow::Kind::makespan:
    r.iteration_time_s = makespan_of(r.timing);
    r.critical_path_s = r.graph.critical_path().length_s;
    r.breakdown = breakdown_of(r.graph, r.timing, r.iteration_time_s);
    return;
  case IterationWindow::Kind::between_tasks: {
    const std::size_t before = r.window.from_task, last = r.window.to_task;
    r.iteration_time_s = r.timing[last].end_s - r.timing[before].end_s;
    r.breakdown = breakdown_in(r.graph, r.timing, r.timing[before].end_s, r.timing[last].end_s);
    const auto longest = longest_finish(r.graph);
    r.critical_path_s = longest[last] - longest[before];
    return;
  }
  case IterationWindow::Kind::between_iterations: {
    const auto ends = iteration_ends(r.graph, r.timing);
    const double from = ends[ends.size() - 2], to = ends.back();
    r.iteration_time_s = to - from;
    r.breakdown = breakdown_in(r.graph, r.timing, from, to);
    const auto path_ends = iteration_ends(r.graph, longest_finish(r.graph));
    r.critical_path_s = path_ends.back() - path_ends[path_ends.size() - 2];
    return;
  }
  }
}

// Where read_window read a data-parallel iteration: the makespan, or between the last two iterations' ends.
std::pair<double, double> window_bounds(const RunResult& r) {
  if (r.window.kind == IterationWindow::Kind::between_iterations) {
    const auto ends = iteration_ends(r.graph, r.timing);
    return {ends[ends.size() - 2], ends.back()};
  }
  return {0.0, r.iteration_time_s};
}

// ps-async: the workers' mean iteration, from the aggregate throughput; worker 0's timeline is padded with idle.
// (ps-ssp: the timeline is ps-sync's lockstep iteration at worker 0's speed.)
void mean_async_iteration(const Scenario& s, RunResult& r) {
  const auto& async = *r.parameter_server->async;
  r.iteration_time_s = r.workers * s.batch_per_gpu / async.aggregate_throughput_samples_per_s;
  auto& b = r.breakdown;
  b.exposed_communication_s =
      std::min(b.exposed_communication_s, std::max(0.0, r.iteration_time_s - b.compute_s - b.compression_s));
  b.idle_s = std::max(0.0, r.iteration_time_s - b.compute_s - b.compression_s - b.exposed_communication_s);
}

// What the plan knows: the DAG (with the durations the engine timed), groups, reports and planned figures.
RunResult result_of(Plan&& p, Timings& t) {
  RunResult r;
  r.engine = p.engine;
  r.workers = p.workers;
  r.data_parallel = p.data_parallel;
  r.groups = std::move(p.groups);
  r.graph = std::move(p.graph);
  for (const auto& [v, seconds] : t.durations)
    r.graph.task(v).duration_s = seconds;
  r.window = p.window;
  r.communication_bytes_per_worker = p.communication_bytes_per_worker;
  r.peak_memory_bytes_per_gpu = p.peak_memory_bytes_per_gpu;
  r.memory = p.memory;
  r.single_gpu_iteration_s = p.single_gpu_iteration_s;
  r.compute_source = std::move(p.compute_source);
  r.notes = std::move(p.notes);
  r.parameter_server = std::move(p.parameter_server);
  if (r.parameter_server && t.async_workers)
    r.parameter_server->async = std::move(t.async_workers);
  r.pipeline = std::move(p.pipeline);
  r.sharding = std::move(p.sharding);
  r.timing = std::move(t.timing);
  r.replicas = std::move(t.replicas);
  r.links = std::move(t.links);
  r.sim = t.sim;
  return r;
}

} // namespace

RunResult finalize(const Scenario& s, Plan&& p, Timings&& t) {
  const ComputeCosts costs = p.costs;
  const std::vector<FoldedTensor> folded = std::move(p.folded_tensor);
  RunResult r = result_of(std::move(p), t);
  if (r.pipeline) {
    finalize_pipeline(s, folded, r);
    if (r.sharding) // a flushing schedule (sharding refuses the others): the iteration is the makespan
      time_sharding(r, 0, r.iteration_time_s, *r.sharding);
  } else {
    read_window(r);
    if (r.sharding) {
      const auto [from, to] = window_bounds(r);
      time_sharding(r, from, to, *r.sharding);
    }
    if (r.parameter_server && r.parameter_server->async)
      mean_async_iteration(s, r);
    r.throughput_samples_per_s = r.workers * s.batch_per_gpu / r.iteration_time_s;
    r.scaling_efficiency = r.single_gpu_iteration_s / r.iteration_time_s;
  }
  count_backup_workers(s, r);
  set_model_flops_utilisation(s, r);
  note_host_bound(s, costs, r);
  if (t.samples) { // averaged in: throughput and efficiency follow the mean iteration
    r.variability = std::move(t.samples->report);
    r.variability->deterministic_s = r.iteration_time_s;
    record_samples(*s.variability, r, t.samples->breakdown_sum, t.samples->timed);
  }
  if (t.async_variability)
    r.variability = std::move(t.async_variability);
  r.notes.insert(r.notes.end(), std::make_move_iterator(t.notes.begin()), std::make_move_iterator(t.notes.end()));
  return r;
}

dag::IterationGraph unrolled_ps_sync(const Scenario& s, const Plan& p, int iterations) {
  auto g = dag::build_ps_sync(s.model, p.costs.worker, p.groups, iterations);
  g.place(worker_placement(s));
  (void)cost_communication(s, *p.allreduce, g);
  add_host_tasks(g, HostTimes(p.costs.worker));
  return g;
}

} // namespace ddlsim::sim
