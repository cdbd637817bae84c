// Memory per GPU as a framework holds it (see memory.hpp): the tensors a memory model counts, the loss's logits, the
// caching allocator's fragmentation and the fixed reserve; the defaults and their sources are in dag/memory.hpp.
#include "sim/plan/memory.hpp"

#include "dag/sharding.hpp"

namespace ddlsim::sim {

MemoryPerGpu framework_memory(const Scenario& s, MemoryPerGpu tensors, bool computes_loss) {
  MemoryPerGpu m = tensors;
  m.logits_bytes = computes_loss && s.model.transformer
                       ? dag::loss_logits_bytes(*s.model.transformer, s.batch_per_gpu, s.parallelism.tensor)
                       : 0;
  m.fragmentation_bytes = s.memory.fragmentation * m.tensor_bytes();
  m.reserve_bytes = s.memory.reserve_bytes;
  m.fits = std::nullopt;
  if (s.gpu.memory_bytes > 0)
    m.fits = m.total_bytes() <= s.gpu.memory_bytes;
  return m;
}

double whole_model_activation_bytes(const Scenario& s) {
  const auto& model = s.model;
  const double input = s.batch_per_gpu * model.input_bytes_per_sample;
  if (model.layers.empty())
    return input;
  const dag::StageMemoryInput whole{.chunks = {{.first_layer = 0,
                                                .last_layer = static_cast<int>(model.layers.size()) - 1,
                                                .in_flight_micro_batches = 1}},
                                    .activations = {.micro_batch = s.batch_per_gpu,
                                                    .tensor_parallel = 1,
                                                    .sequence_parallel = false,
                                                    .recompute = dag::Recompute::none,
                                                    .dtype = s.gradient_dtype},
                                    .optimizer = s.optimizer,
                                    .optimizer_shards = 1,
                                    .extra_weight_versions = 0};
  return dag::stage_memory(model, whole).activation_bytes + input;
}

MemoryPerGpu data_parallel_memory(const Scenario& s, double largest_group_bytes) {
  const double params = static_cast<double>(s.model.param_count());
  const auto state = dag::zero_state_per_parameter(s.optimizer, s.gradient_dtype, 0, 1);
  MemoryPerGpu m;
  m.weights_bytes = state.weights * params;
  m.gradients_bytes = state.gradients * params;
  m.optimizer_bytes = state.optimizer * params;
  m.activation_bytes = whole_model_activation_bytes(s);
  m.buffer_bytes = largest_group_bytes;
  return framework_memory(s, m, true);
}

double tied_output_copy_parameters(const Scenario& s) {
  const auto& model = s.model;
  if (!model.transformer || !model.transformer->tied_embeddings || s.parallelism.pipeline == 1)
    return 0;
  return static_cast<double>(model.transformer->vocabulary) * model.transformer->hidden;
}

MemoryPerGpu stage_memory_per_gpu(const Scenario& s, const dag::StageMemory& stage, int optimizer_shards,
                                  bool computes_loss) {
  const auto state = dag::megatron_state_per_parameter(s.optimizer, s.gradient_dtype, optimizer_shards);
  const double params = stage.parameters + (computes_loss ? tied_output_copy_parameters(s) / s.parallelism.tensor : 0);
  MemoryPerGpu m;
  m.weights_bytes = params * state.weights;
  m.gradients_bytes = params * state.gradients;
  m.optimizer_bytes = params * state.optimizer;
  m.activation_bytes = stage.activation_bytes;
  m.buffer_bytes = stage.weight_version_bytes;
  return framework_memory(s, m, computes_loss);
}

MemoryPerGpu complete_sharding_memory(const Scenario& s, ShardingReport& r, bool computes_loss) {
  MemoryPerGpu m;
  m.weights_bytes = r.weights_bytes;
  m.gradients_bytes = r.gradients_bytes;
  m.optimizer_bytes = r.optimizer_bytes;
  m.activation_bytes = r.activation_bytes;
  m.buffer_bytes = r.gathered_bytes + r.reduce_buffer_bytes;
  m = framework_memory(s, m, computes_loss);
  r.logits_bytes = m.logits_bytes;
  r.fragmentation_bytes = m.fragmentation_bytes;
  r.reserve_bytes = m.reserve_bytes;
  r.fits = m.fits;
  return m;
}

} // namespace ddlsim::sim
