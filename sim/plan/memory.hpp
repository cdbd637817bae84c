// What a framework holds on a GPU beside the tensors a strategy's memory model counts (docs/memory.md): the loss's
// logits on the GPU that computes the loss, the caching allocator's fragmentation and a fixed reserve (CUDA context,
// NCCL buffers, cuBLAS workspaces). Every memory report (data parallelism, pipeline stages, sharding) ends here.
#pragma once

#include "dag/memory.hpp"
#include "sim/plan/result.hpp"
#include "sim/spec/scenario.hpp"

namespace ddlsim::sim {

/// `tensors` (weights to buffers, as a memory model counts them) completed with what the framework holds:
/// logits_bytes = dag::loss_logits_bytes(model.transformer, b, t) when `computes_loss` and the model is a transformer
/// (a language model or BERT: the loss over the vocabulary), else 0; fragmentation_bytes = memory.fragmentation ×
/// tensor_bytes(); reserve_bytes = memory.reserve, once per GPU; fits when the GPU's memory is known.
[[nodiscard]] MemoryPerGpu framework_memory(const Scenario& s, MemoryPerGpu tensors, bool computes_loss);

/// The activations one GPU holds for the backward when it runs the whole model on its batch, as pure data
/// parallelism and sharded data parallelism do: the model as one pipeline stage of one micro-batch of b samples
/// (dag::stage_memory: a transformer's blocks by Korthikanti's formulas, the other layers' outputs, in the training
/// format, no recomputation), and the model's input for the batch.
[[nodiscard]] double whole_model_activation_bytes(const Scenario& s);

/// Pure data parallelism (every rank computes the loss): the model state by ZeRO's accounting of its stage 0
/// (dag::zero_state_per_parameter: fp32 SGD with momentum 12 bytes per parameter, fp32 Adam 16, mixed-precision Adam
/// 2 + 2 + 12 = 16), as `sharding.stage` 0 counts it, whole_model_activation_bytes, and the largest gradient group's
/// buffer; then framework_memory.
[[nodiscard]] MemoryPerGpu data_parallel_memory(const Scenario& s, double largest_group_bytes);

/// Parameters the last pipeline stage holds beside its layers' own: a language model whose output layer is tied to
/// the word embeddings (TransformerSpec::tied_embeddings) keeps a copy of them, V·h, on the last stage,
/// with gradients and optimizer state, when the first stage is another GPU (Megatron-LM's initialize_word_embeddings,
/// megatron/model/module.py; their gradients are allreduced between the two stages); 0 otherwise.
[[nodiscard]] double tied_output_copy_parameters(const Scenario& s);

/// One pipeline stage's GPU from dag::stage_memory: its parameters (and, on the stage that computes the loss, the
/// tied copy of the word embeddings over t) at Megatron-Core's bytes per parameter by part (`optimizer_shards` as
/// stage_memory counted them), extra weight versions as buffers, its activations; the stage that holds the model's
/// last layer computes the loss.
[[nodiscard]] MemoryPerGpu stage_memory_per_gpu(const Scenario& s, const dag::StageMemory& stage, int optimizer_shards,
                                                bool computes_loss);

/// Completes a sharding report's memory (its tensors as ZeRO's or Megatron-Core's accounting counts them) with
/// framework_memory: sets its logits, fragmentation, reserve and fits, and returns the whole.
MemoryPerGpu complete_sharding_memory(const Scenario& s, ShardingReport& r, bool computes_loss);

} // namespace ddlsim::sim
