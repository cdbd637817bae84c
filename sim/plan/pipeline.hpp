// Planning a pipeline (scenario `parallelism.pipeline`, `pipeline`): the stages' layers and costs, each stage's
// gradient groups over its data-parallel group, and the DAG of one replica (dag/pipeline.hpp); after the engine
// has timed it, the pipeline's report (bubble, per-stage compute, idle time, transfers, micro-batches in flight).
#pragma once

#include "dag/partition.hpp"
#include "sim/plan/prepare.hpp"

#include <vector>

namespace ddlsim::sim {

/// The layers of each of the p x v virtual stages under the scenario's partition (dag/partition.hpp).
[[nodiscard]] std::vector<dag::StageSpan> partition_stages(const Scenario& s, const dag::WorkerCosts& costs);

/// prepare() for a scenario with a pipeline: the plan's graph, groups, communication costs, window and report.
void prepare_pipeline(const Scenario& s, Plan& p);
/// finalize() for a pipeline: iteration time, throughput (b m d samples per iteration), breakdown averaged over the
/// stages' GPUs, and result.pipeline's timed figures. `folded_tensor`: the plan's.
void finalize_pipeline(const Scenario& s, const std::vector<FoldedTensor>& folded_tensor, RunResult& r);

} // namespace ddlsim::sim
