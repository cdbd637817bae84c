// Planning sharded data parallelism (scenario `sharding`, stage >= 1; docs/sharding.md): the reduce groups (the
// strategy's, over the shard group's reduce-scatter), stage 3's units, the DAG (dag/sharding.hpp), HSDP's two
// communicators, the memory per GPU by ZeRO's accounting, and after timing the exposed gathers and reductions; with a
// pipeline or tensor parallelism (stage 1), the report and note (the plan itself: sim/plan/pipeline.cpp).
#pragma once

#include "dag/memory.hpp"
#include "sim/plan/prepare.hpp"

#include <optional>
#include <vector>

namespace ddlsim::sim {

/// The global ranks of copy 0's shard group (GPUs 0 .. s-1) and of its replica group (0, s, 2s, ...: one GPU per
/// shard group, the whole data-parallel group when s = d... of one GPU).
[[nodiscard]] std::vector<int> shard_group_ranks(const Scenario& s);
[[nodiscard]] std::vector<int> replica_group_ranks(const Scenario& s);

/// prepare() for a sharded scenario without a pipeline: p.groups (reduce groups, launch order), p.graph (one worker's
/// iteration, not yet placed), p.sharding (schedule and memory) and p.peak_memory_bytes_per_gpu, and the notes.
/// `input`: what the strategy plans a compressed exchange with (exchanges_compressed), as without sharding.
void plan_sharded(const Scenario& s, const dag::StrategyInput& input, Plan& p);

/// prepare() for `sharding.stage` 0 given without a pipeline: the schedule is data parallelism's, and p.sharding
/// reports its memory per GPU by ZeRO's accounting (which p.peak_memory_bytes_per_gpu then follows), so that it
/// compares with the sharded stages', and its allreduces.
void report_unsharded(const Scenario& s, Plan& p);

/// After IterationGraph::place: with HSDP (s < d), the reduce-scatters and gathers go over the shard group and the
/// allreduces over the replica group; the DAG's copies are the replica group's members x the shard group's (its
/// tensor peers in IterationGraph's terms: consecutive ranks). Nothing to do when s = d.
void place_shard_groups(const Scenario& s, dag::IterationGraph& g);

/// Counts each collective kind of iteration 0 and the bytes GPU 0 sends in it (`sent`: cost_communication's by task).
/// `device` given (a pipeline's): only that GPU's collectives on its communication stream (its data-parallel ones, not
/// its tensor group's on the compute stream).
void count_sharded_traffic(const dag::IterationGraph& g, const std::vector<double>& sent, ShardingReport& report,
                           std::optional<dag::Device> device = std::nullopt);

/// prepare_pipeline's part for a sharded pipeline (stage 1, Megatron-Core's distributed optimizer): p.sharding for
/// stage 0's GPU `gpu` (its collectives and bytes in p.graph, `sent` by task; its memory by part from `stage0`, the
/// stage's memory by Megatron-Core's accounting; `reduce_groups` its groups) and the note on the schedule.
void report_pipeline_sharding(const Scenario& s, const dag::StageMemory& stage0, int reduce_groups, dag::Device gpu,
                              const std::vector<double>& sent, Plan& p);

/// The exposed gather and reduction time on GPU 0 over the iteration's window [from, to) (a pipeline's: GPU 0 is
/// stage 0's).
void time_sharding(const RunResult& r, double from, double to, ShardingReport& report);

} // namespace ddlsim::sim
