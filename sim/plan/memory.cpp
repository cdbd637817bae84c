// Memory per GPU as a framework holds it (see memory.hpp): the tensors a memory model counts, the loss's logits, the
// caching allocator's fragmentation and the fixed reserve; the defaults and their sources are in dag/memory.hpp.
#include "sim/plan/memory.hpp"

namespace ddlsim::sim {

namespace {
constexpr double kFp32Bytes = 4; // data parallelism's weights, gradients and momentum
} // namespace

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

MemoryPerGpu data_parallel_memory(const Scenario& s, double largest_group_bytes) {
  const auto& model = s.model;
  const double params = static_cast<double>(model.param_count());
  double activations = 0;
  for (const auto& l : model.layers)
    activations += l.activation_bytes;
  MemoryPerGpu m;
  m.weights_bytes = kFp32Bytes * params;
  m.gradients_bytes = kFp32Bytes * params;
  m.optimizer_bytes = kFp32Bytes * params; // the momentum buffer
  m.activation_bytes = s.batch_per_gpu * (activations + model.input_bytes_per_sample);
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
