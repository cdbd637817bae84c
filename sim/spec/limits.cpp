// Sizes and combinations a run cannot simulate, refused when the scenario is read (sim/spec/limits.hpp).
#include "sim/spec/limits.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

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
}

} // namespace ddlsim::sim
