// Tensor parallelism inside a pipeline plan (Megatron-LM: Shoeybi et al., arXiv:1909.08053, §3; sequence parallelism:
// Korthikanti et al., arXiv:2205.05198, §4.2.2): which layers open and close a block's tensor-parallel regions, what
// one tensor rank computes and holds, and the parts of a pass between its tensor-group collectives. Internal to
// sim/plan (pipeline.cpp).
#pragma once

#include "dag/pipeline.hpp"
#include "sim/spec/scenario.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace ddlsim::sim {

/// Attention's core: eager attention's score and context matmuls, or a fused attention kernel.
[[nodiscard]] bool is_attention_core(const dag::Layer& layer);

/// Where a transformer block's tensor-group collectives fall: after the row-parallel linear layers (the attention's
/// output projection, the MLP's last layer) in forward, after the column-parallel ones (the first linear of each
/// half: QKV, the MLP's first layer) in backward.
enum class TensorRole : std::uint8_t { none, column_entry, row };

/// Each layer's role (TensorRole::none outside blocks).
[[nodiscard]] std::vector<TensorRole> tensor_roles(const dag::Model& model);

/// The ranks over which a layer's work and weights divide: normalisations are repeated (unless sequence parallelism
/// splits the norm's work, not its weights), a key/value projection of g query groups splits over at most g ranks and
/// is replicated beyond (Layer::tensor_shards), every other layer splits over the t ranks.
[[nodiscard]] int tensor_split(const dag::Layer& layer, int tensor);

/// What one GPU of a tensor group computes of each layer.
[[nodiscard]] dag::WorkerCosts tensor_rank_costs(const Scenario& s, const dag::WorkerCosts& costs);

/// A tensor rank's share of a layer's parameters, in place.
void shard_parameters(dag::Layer& layer, int tensor);

/// A virtual stage's passes cut at their tensor-group collectives.
struct StageParts {
  std::vector<dag::PassPart> forward, backward;
};

/// The forward's parts over layers [first, end): compute up to each tensor-group collective of b s h elements (an
/// allreduce after each row-parallel layer, or with sequence parallelism an allgather before each column-parallel
/// half and a reduce-scatter after its row-parallel layer). Without tensor parallelism (`roles` empty) compute only.
/// `gates` (by layer; empty: none): the rank's parameter gather that the layer's forward waits for (-1: none), which
/// cuts the forward before the layer.
[[nodiscard]] std::vector<dag::PassPart> forward_parts(const Scenario& s, const dag::WorkerCosts& costs,
                                                       const std::vector<TensorRole>& roles, int first, int end,
                                                       const std::vector<int>& gates = {});

/// Both passes' parts (the backward the forward's mirror image).
[[nodiscard]] StageParts tensor_parts(const Scenario& s, const dag::WorkerCosts& costs,
                                      const std::vector<TensorRole>& roles, int first, int end);

/// The run's note on tensor parallelism.
[[nodiscard]] std::string tensor_parallel_note(const Scenario& s);

} // namespace ddlsim::sim
