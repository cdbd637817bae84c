// Parallelism beyond data parallelism (docs/scenario.md, "Keys": `parallelism`, `pipeline`; docs/pipelines.md): how
// many pipeline stages and tensor ranks a model replica spans, and the pipeline's schedule, micro-batches and
// partition.
#pragma once

#include "core/json.hpp"
#include "dag/memory.hpp"
#include "dag/pipeline.hpp"

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace ddlsim::sim {

/// The GPUs' split: data = GPUs / (pipeline x tensor). Ranks follow Megatron-LM's order (tensor fastest, then data,
/// then pipeline): GPU j + t (k + d s) is tensor rank j of data-parallel replica k's stage s.
struct Parallelism {
  int data = 1;
  int pipeline = 1;
  int tensor = 1;
  bool sequence_parallel = false;
  /// The global GPU rank of tensor rank `tensor_rank` of replica `replica`'s stage `stage`.
  [[nodiscard]] int gpu(int stage, int replica, int tensor_rank = 0) const {
    return tensor_rank + tensor * (replica + data * stage);
  }
};

/// How the layers are cut into the pipeline's p x v virtual stages.
enum class PartitionKind : std::uint8_t {
  uniform,   ///< equal layer counts (transformer blocks: embeddings first, head last)
  balanced,  ///< the exact min-max partition of forward + backward time
  pipedream, ///< PipeDream's dynamic programme with the activation transfers (SOSP 2019, §3.1)
  explicit_layers,
};
[[nodiscard]] std::string_view partition_name(PartitionKind k);

/// "none", "full", "selective", "except-last" (dag/memory.hpp's recomputation modes, as the scenario spells them).
[[nodiscard]] std::string_view recompute_name(dag::Recompute k);

struct PipelineSpec {
  const dag::PipelineScheduleInfo* schedule = &dag::pipeline_schedule("1f1b");
  int micro_batches = 1;
  int virtual_stages = 1;
  PartitionKind partition = PartitionKind::balanced;
  std::vector<int> layers_per_stage; ///< explicit_layers: one count per virtual stage
  dag::Recompute recompute = dag::Recompute::none;
  dag::WeightPrediction weight_prediction = dag::WeightPrediction::v1; ///< spectrain only
};

struct Scenario;
/// Reads the scenario's `parallelism` and `pipeline` objects (either may be absent) into s.parallelism and
/// s.pipeline, checked against the model, cluster and strategy parsed before them; errors name the JSON path.
void parse_parallelism(std::optional<ObjectReader> parallelism, std::optional<ObjectReader> pipeline, Scenario& s);

} // namespace ddlsim::sim
