// Sizes and combinations a run cannot simulate, refused when the scenario is read (sim/spec/limits.hpp).
#include "sim/spec/limits.hpp"

#include "core/error.hpp"
#include "dag/partition.hpp"
#include "sim/network/lowering/evaluate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace ddlsim::sim {

namespace {

// Partitions of the gradient tensors, each a group with its own tasks: ByteScheduler's `partition` (parameters per
// partition) and BytePS's `partition_bytes` (ps-sync's mode "byteps"). Measured on the release build (the quickstart,
// ResNet-50 on 8 GPUs, bytescheduler): 25,500 partitions 0.9 s and 150 MB, 85,000 4.7 s and 370 MB, growing faster
// than linearly; 2.5 million (partition 10) ran out of memory. Refused beyond kMaxPartitions.
constexpr double kMaxPartitions = 100000;

void check_partitions(const Scenario& s, const std::string& file) {
  const auto* bytescheduler = std::get_if<dag::ByteSchedulerOptions>(&s.strategy.options);
  const auto* ps = s.strategy.parameter_server();
  const bool byteps = bytescheduler == nullptr && ps != nullptr && ps->byteps;
  if (bytescheduler == nullptr && !byteps)
    return;
  const double element_bytes = dag::dtype_bytes(s.gradient_dtype);
  double partitions = 0;
  for (const auto& layer : s.model.layers)
    for (const auto& t : layer.params)
      partitions += bytescheduler != nullptr
                        ? std::ceil(static_cast<double>(t.numel) / static_cast<double>(bytescheduler->partition))
                        : std::ceil(static_cast<double>(t.numel) * element_bytes / ps->partition_bytes);
  if (partitions > kMaxPartitions)
    throw InputError(file, bytescheduler != nullptr ? "/strategy/partition" : "/strategy/partition_bytes",
                     fmt::format("cuts the gradients into {:.0f} partitions, each a group with its own tasks; the "
                                 "limit is {:.0f} (85,000 took ~5 s and 370 MB, and the cost grows faster than "
                                 "linearly): use larger partitions",
                                 partitions, kMaxPartitions));
}

// flow.granularity "per-message" times every message of a collective as a flow: a ring allreduce over n GPUs sends
// 2 n (n - 1) of them (a 1 GiB allreduce on 1,024 GPUs: 2.1 M flows, 2.0 s; docs/benchmarks.md), and the plan holds
// them all. Refused beyond kMaxMessageFlows per collective (~35 s and ~2 GiB each at those rates: 4,096 GPUs).
constexpr double kMaxMessageFlows = 33554432; // 2^25

void check_message_flows(const Scenario& s, const std::string& file, double gpus) {
  if (!s.flow_per_message || s.engine != Engine::flow)
    return;
  const double flows = 2 * gpus * (gpus - 1);
  if (flows > kMaxMessageFlows)
    throw InputError(file, "/flow/granularity",
                     fmt::format("\"per-message\" on {:.0f} GPUs times ~{:.3g} flows per allreduce (2 n (n - 1); "
                                 "1,024 GPUs: 2.1 M flows, 2.0 s); the limit is {:.0f} (4,096 GPUs): use "
                                 "\"aggregated\", which times the same links and sharing",
                                 gpus, flows, kMaxMessageFlows));
}

// The planners that try every group of consecutive gradient tensors (dag::GroupSearch: OMGS, and MG-WFBP where the
// allreduce's cost is not affine in its payload: two sockets, NVLS across nodes) time n (n + 1) / 2 candidates for n
// tensors with a collective's cost model (#31 R28). Measured on the release build (workloads of one tensor per layer,
// 2026-11-27): a candidate timed with a closed form or a LinearLoweringCost ~12-18 ns plus ~1 ns per term of it (OMGS
// on 2 x 4 GPUs, 30,000 tensors: 4.5e8 candidates, 8.1 s; 100,000 tensors, 5e9 candidates, took 104 s in #31); with
// an allreduce lowered for every candidate (two sockets) ~70 ns more and ~37 ns per flow of the lowering (2 x 4 GPUs,
// 8 flows: 365 ns; 8 x 4, 32 flows: 1.26 us). The constants below round those up. Refused beyond kMaxSearchSeconds.
constexpr double kMaxSearchSeconds = 60;
constexpr double kSearchSecondsPerCandidate = 20e-9;
constexpr double kSearchSecondsPerTerm = 2e-9;
constexpr double kSearchSecondsPerLowering = 80e-9;
constexpr double kSearchSecondsPerFlow = 40e-9;

struct SearchCost {
  double seconds_per_candidate = 0; ///< 0: the search is linear
  std::string what;                 ///< what times a candidate, for the message
};

SearchCost search_cost(const Scenario& s) {
  const Network net = s.cluster.network();
  if (s.strategy.entry().traits.group_search == dag::GroupSearch::allgather) {
    const LinearLoweringCost allgather(collective_lowering(s, Collective::allgather), net.shape(), net);
    const auto terms = static_cast<double>(allgather.terms());
    return {kSearchSecondsPerCandidate + kSearchSecondsPerTerm * terms,
            fmt::format("the allgather's cost ({:.0f} terms)", terms)};
  }
  const auto allreduce = allreduce_model(s, net);
  if (allreduce->affine())
    return {};
  const double flows = allreduce->evaluation_flows();
  if (flows == 0)
    return {kSearchSecondsPerCandidate, "the allreduce's cost (not affine in its payload)"};
  return {kSearchSecondsPerCandidate + kSearchSecondsPerLowering + kSearchSecondsPerFlow * flows,
          fmt::format("the allreduce lowered anew ({:.0f} flows)", flows)};
}

void check_group_search(const Scenario& s, const std::string& file, double gpus) {
  if (s.strategy.entry().traits.group_search == dag::GroupSearch::none || gpus < 2)
    return;
  const auto n = static_cast<double>(s.model.tensor_count());
  const double candidates = n * (n + 1) / 2;
  const auto cost = search_cost(s);
  const double seconds = candidates * cost.seconds_per_candidate;
  if (seconds <= kMaxSearchSeconds)
    return;
  const double most = std::floor(std::sqrt(2 * kMaxSearchSeconds / cost.seconds_per_candidate));
  const bool allgather = s.strategy.entry().traits.group_search == dag::GroupSearch::allgather;
  throw InputError(file, s.model_pointer,
                   fmt::format("{:.0f} gradient tensors: strategy '{}' tries every group of consecutive tensors, "
                               "{:.3g} candidates each timed with {} (~{:.0f} ns each): ~{:.0f} s; the limit is {:.0f} "
                               "s, about {:.0f} tensors here: use fewer, larger tensors, or {}",
                               n, s.strategy.kind(), candidates, cost.what, cost.seconds_per_candidate * 1e9, seconds,
                               kMaxSearchSeconds, most,
                               allgather ? "a strategy that plans in linear time (lags, mg-wfbp, ddp)"
                                         : "an allreduce whose cost is affine (any but two sockets and NVLS across "
                                           "nodes), where mg-wfbp plans in linear time"));
}

// ps-async's queue model (sim/analytic/ps_async.hpp, on either engine) takes every worker through its iterations,
// each a push and a pull of one shard per server and three events more: (2 S + 3) events per worker and iteration,
// kAsyncPsWarmup + kAsyncPsMeasured iterations of the slowest worker and up to 1 + spread times as many for the
// fastest. Measured on the release build (2026-11-27): 1,024 workers x 1,024 servers 2.3e8 events in 17 s (74 ns
// each), 65,536 workers x 1 server with a 0.5 spread ~4.3e7 events in 4.5 s (~100 ns); the analytic engine's 2^24
// pairs took ~14 min (#31 R24). Refused beyond kMaxSearchSeconds at kAsyncPsSecondsPerEvent.
constexpr double kAsyncPsSecondsPerEvent = 100e-9;

void check_async_events(const Scenario& s, const std::string& file, double gpus) {
  const auto* ps = s.strategy.parameter_server();
  if (!s.strategy.asynchronous() || ps == nullptr || ps->staleness_bound >= 0)
    return;
  const int servers = std::max(ps->servers, 1);
  const double iterations = (kAsyncPsWarmup + kAsyncPsMeasured) * (1 + ps->worker_speed_spread);
  const double per_worker = (2.0 * servers + 3) * iterations;
  const double events = gpus * per_worker;
  const double seconds = events * kAsyncPsSecondsPerEvent;
  if (seconds <= kMaxSearchSeconds)
    return;
  throw InputError(file, "/strategy/servers",
                   fmt::format("{} servers x {:.0f} workers: ps-async's queue model simulates ~{:.3g} events ((2 S + "
                               "3) per worker and iteration, up to {:.0f} iterations each), ~{:.0f} s; the limit is "
                               "{:.0f} s (~{:.0f} workers with {} servers): use fewer servers or workers",
                               servers, gpus, events, iterations, seconds, kMaxSearchSeconds,
                               std::floor(kMaxSearchSeconds / kAsyncPsSecondsPerEvent / per_worker), servers));
}

// PipeDream's partition (`pipeline.partition` "pipedream": a cut costs its activations' transfer, so the balanced
// partition's binary search does not apply) tries every start of every stage but the first: (S - 1) (u - S + 1)
// (u - S + 2) / 2 candidates for S virtual stages over u units (layers, or a transformer's blocks). Measured on the
// release build (2026-11-27): 10^5 layers on 8 stages, 3.5e10 candidates, 29 s (0.84 ns each). Refused beyond
// kMaxSearchSeconds (#31 R28).
constexpr double kPartitionSecondsPerCandidate = 1.2e-9;

void check_pipedream_partition(const Scenario& s, const std::string& file) {
  if (!s.pipeline || s.pipeline->partition != PartitionKind::pipedream)
    return;
  const double stages = static_cast<double>(s.parallelism.pipeline) * s.pipeline->virtual_stages;
  const auto units = static_cast<double>(dag::unit_starts(s.model).size());
  const double candidates = (stages - 1) * (units - stages + 1) * (units - stages + 2) / 2;
  const double seconds = candidates * kPartitionSecondsPerCandidate;
  if (seconds <= kMaxSearchSeconds)
    return;
  throw InputError(file, "/pipeline/partition",
                   fmt::format("\"pipedream\" tries every cut for each of {:.0f} stages over {:.0f} units (layers, or "
                               "blocks): {:.3g} candidates, ~{:.0f} s at ~{:.1f} ns each; the limit is {:.0f} s: use "
                               "\"balanced\" (the same split when transfers are free, in O(S u log u)) or fewer layers",
                               stages, units, candidates, seconds, kPartitionSecondsPerCandidate * 1e9,
                               kMaxSearchSeconds));
}

} // namespace

// Sizes the engines cannot simulate in this machine's memory or in minutes are refused when the scenario is read,
// with an estimate, rather than found out by an allocation failure or a run that never ends (issue #15 D13). The
// per-unit costs were measured on the release build (docs/scenario.md, "Limits").
void check_feasible(const Scenario& s, const std::string& file) {
  const auto gib = [](double bytes) { return bytes / 1073741824.0; };
  const double gpus = static_cast<double>(s.cluster.nodes) * s.cluster.gpus_per_node;
  if (gpus > static_cast<double>(kMaxGpus))
    throw InputError(file, "/cluster",
                     fmt::format("{} nodes x {} GPUs = {:.0f} GPUs; the limit is {} GPUs, about ten times the largest "
                                 "machines (the strategies that keep ~{:.0f} B per GPU would need ~{:.1f} GiB here)",
                                 s.cluster.nodes, s.cluster.gpus_per_node, gpus, kMaxGpus, kPerGpuBytes,
                                 gib(kPerGpuBytes * gpus)));
  const auto& engine = capabilities(s.engine);
  const auto analytic = engine_name(Engine::analytic);
  if (engine.max_hosts > 0) {
    const double hosts = gpus + s.cluster.server_hosts;
    if (hosts > static_cast<double>(engine.max_hosts))
      throw InputError(file, "/cluster",
                       fmt::format("{:.0f} GPUs (and servers) would need ~{:.0f} GiB on the {} engine (~{:.0f} KiB "
                                   "each); its limit is {} ({:.0f} GiB): use the {} engine",
                                   hosts, gib(engine.bytes_per_host * hosts), engine.name, engine.bytes_per_host / 1024,
                                   engine.max_hosts, gib(engine.bytes_per_host * static_cast<double>(engine.max_hosts)),
                                   analytic));
  }
  if (s.variability && !engine.draws_communication && s.variability->of(VariedClass::communication))
    throw InputError(file, "/variability/communication",
                     fmt::format("is not drawn on the {} engine: its collectives take what their flows take; vary "
                                 "compute and data_loading, or use \"engine\": \"{}\"",
                                 engine.name, analytic));
  if (s.variability && !engine.samples_backup_workers && s.backup_workers > 0)
    throw InputError(file, "/strategy/backup_workers",
                     fmt::format("with 'variability' are sampled on the {} engine: the {} engine starts a collective "
                                 "when all its members are ready; use \"engine\": \"{}\"",
                                 analytic, engine.name, analytic));
  if (s.variability && s.strategy.asynchronous() && s.strategy.parameter_server()->staleness_bound < 0)
    throw InputError(file, "/variability",
                     fmt::format("is not sampled for '{}' (its link-queue simulation draws nothing yet): use ps-ssp "
                                 "with a staleness_bound no worker reaches, leave 'variability' out, or give the "
                                 "workers a speed spread",
                                 s.strategy.kind()));
  if (s.backup_workers > 0 && s.backup_workers >= data_parallel_degree(s))
    throw InputError(file, "/strategy/backup_workers",
                     fmt::format("{} backup worker(s) leave no data-parallel replica to wait for: the run has {} "
                                 "(b must be below the data-parallel degree)",
                                 s.backup_workers, data_parallel_degree(s)));
  if (const auto* ps = s.strategy.parameter_server(); ps != nullptr && !ps->byteps) {
    const double pairs = gpus * ps->servers;
    const auto limit = static_cast<double>(engine.max_server_pairs);
    if (pairs > limit)
      throw InputError(
          file, "/strategy/servers",
          engine.bytes_per_server_pair > 0
              ? fmt::format("{} servers x {:.0f} workers = {:.0f} server-worker pairs would need ~{:.1f} GiB "
                            "(~{:.0f} B each); the limit is {:.0f}: use fewer servers (strategy.servers)",
                            ps->servers, gpus, pairs, gib(engine.bytes_per_server_pair * pairs),
                            engine.bytes_per_server_pair, limit)
              : fmt::format("{} servers x {:.0f} workers = {:.0f} server-worker pairs, each a push and a pull of "
                            "every key on the {} engine (64 x 512 took 47 s); the limit is {:.0f}: use fewer "
                            "servers, fewer GPUs, or the {} engine",
                            ps->servers, gpus, pairs, engine.name, limit, analytic));
  }
  check_partitions(s, file);
  check_message_flows(s, file, gpus);
  check_group_search(s, file, gpus);
  check_pipedream_partition(s, file);
  check_async_events(s, file, gpus);
}

} // namespace ddlsim::sim
