// Memory per GPU of a pipeline stage (see memory.hpp). Sources: Megatron-Core, docs/source/api-guide/dist_optimizer.md
// (bytes per parameter: non-distributed fp16 20, bf16 18, fp32 16 for Adam; distributed 4 + 16/d, 6 + 12/d,
// 8 + 8/d); Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models", arXiv:2205.05198,
// §4 and Table 2 (activations per transformer layer) and §4.2.3 (interleaved schedule).
#include "dag/memory.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace ddlsim::dag {

namespace {

constexpr double kFp32Bytes = 4;
constexpr double kMaskBytes = 1; // a dropout mask element (torch.bool / uint8)

void require(bool condition, const std::string& message) {
  if (!condition) {
    throw std::invalid_argument("memory model: " + message);
  }
}

void check_config(const ActivationConfig& config) {
  require(config.micro_batch > 0, fmt::format("micro-batch size must be positive, got {}", config.micro_batch));
  require(config.tensor_parallel > 0,
          fmt::format("tensor-parallel size must be positive, got {}", config.tensor_parallel));
}

// Per block and micro-batch with no recomputation, or with selective recomputation (memory.hpp). Activations are in
// the training format (dtype_bytes: 2 bytes an element for fp16/bf16, 4 for fp32).
double stored_block_bytes(const TransformerSpec& shape, const ActivationConfig& config) {
  const double s = shape.sequence, b = config.micro_batch, h = shape.hidden, a = shape.heads;
  const double t = config.tensor_parallel, e = dtype_bytes(config.dtype);
  const double mask = shape.dropout ? kMaskBytes : 0;
  // Outside the tensor-parallel regions: the two norms' inputs (2e), the QKV and first-MLP inputs (2e) and
  // the two dropout masks after the attention projection and the MLP; split by t with sequence parallelism.
  const double replicated = 4 * e + 2 * mask;
  // Inside them: Q (e), K and V (e each, g/a of it with g key/value heads), the projection's input (e), and the
  // MLP's: GeLU's input and output (e·f/h each: 8e at f = 4h), or SwiGLU's gate and up outputs and their product
  // (3e·f/h: Megatron-Core's fused bias-SwiGLU keeps its input and recomputes the rest).
  const double kv = static_cast<double>(shape.query_groups()) / a;
  const double mlp = (shape.mlp == Mlp::swiglu ? 3 : 2) * (shape.ffn() / h) * e;
  const double split = e + 2 * kv * e + e + mlp;
  // Per attention score (a·s² per sample): softmax output (e), its dropout mask and the dropout's output (e); none
  // when fused attention recomputes them in its backward (FlashAttention), as selective recomputation does.
  const bool no_scores = config.recompute == Recompute::selective || shape.attention == AttentionKernel::flash;
  const double per_score = shape.dropout ? 2 * e + kMaskBytes : e;
  const double scores = no_scores ? 0 : per_score * a * s / h;
  return s * b * h * ((config.sequence_parallel ? replicated / t : replicated) + split / t + scores / t);
}

std::string range_text(const StageChunk& chunk) {
  return fmt::format("[{}, {}]", chunk.first_layer, chunk.last_layer);
}

// What a recomputed chunk keeps per sample: the outputs of earlier layers that its layers read (in the training
// format), and the model's input sample (as copied to the device) when it holds layer 0.
double chunk_input_bytes(const Model& model, const StageChunk& chunk, double element_scale) {
  double bytes = chunk.first_layer == 0 ? model.input_bytes_per_sample : 0;
  std::vector<bool> read(static_cast<std::size_t>(chunk.first_layer), false);
  for (int i = chunk.first_layer; i <= chunk.last_layer; ++i) {
    const auto& inputs = model.layers[static_cast<std::size_t>(i)].inputs;
    if (inputs.empty() && i > 0 && i - 1 < chunk.first_layer) {
      read[static_cast<std::size_t>(i - 1)] = true;
    }
    for (const int j : inputs) {
      if (j < chunk.first_layer) {
        read[static_cast<std::size_t>(j)] = true;
      }
    }
  }
  for (std::size_t j = 0; j < read.size(); ++j) {
    if (read[j]) {
      bytes += model.layers[j].activation_bytes * element_scale;
    }
  }
  return bytes;
}

double chunk_activation_bytes(const Model& model, const StageChunk& chunk, const ActivationConfig& config) {
  const double n = chunk.in_flight_micro_batches;
  if (n == 0) {
    return 0;
  }
  const double b = config.micro_batch;
  const double element_scale = dtype_bytes(config.dtype) / kFp32Bytes; // activation_bytes is fp32
  const auto layer_outputs = [&](int first, int last) {
    double bytes = 0;
    for (int i = first; i <= last; ++i) {
      bytes += model.layers[static_cast<std::size_t>(i)].activation_bytes * element_scale;
    }
    return bytes;
  };
  if (model.transformer) {
    // Layers of block k carry Layer::block = k; a block split between chunks counts by its share of layers.
    std::vector<int> block_layers(static_cast<std::size_t>(model.transformer->layers), 0);
    for (const auto& layer : model.layers)
      if (layer.block >= 0 && layer.block < model.transformer->layers)
        ++block_layers[static_cast<std::size_t>(layer.block)];
    // the LM head's output, the logits (s V elements a sample), is vocabulary-parallel: 1/t of it on each rank
    const double logits = kFp32Bytes * static_cast<double>(model.transformer->sequence) *
                          static_cast<double>(model.transformer->vocabulary);
    double blocks = 0, other = 0;
    for (int i = chunk.first_layer; i <= chunk.last_layer; ++i) {
      const auto& layer = model.layers[static_cast<std::size_t>(i)];
      if (layer.block >= 0 && layer.block < model.transformer->layers)
        blocks += 1.0 / block_layers[static_cast<std::size_t>(layer.block)];
      else
        other += layer_outputs(i, i) / (layer.activation_bytes == logits ? config.tensor_parallel : 1);
    }
    return transformer_stage_activation_bytes(*model.transformer, blocks, n, config) + n * b * other;
  }
  require(config.tensor_parallel == 1, "tensor parallelism needs a transformer model");
  require(config.recompute != Recompute::selective, "selective recomputation needs a transformer model");
  const double outputs = b * layer_outputs(chunk.first_layer, chunk.last_layer);
  const double input = b * chunk_input_bytes(model, chunk, element_scale);
  switch (config.recompute) {
  case Recompute::full:
    return n * input + outputs; // checkpoints, and the micro-batch being recomputed
  case Recompute::except_last:
    return (n - 1) * input + outputs;
  case Recompute::none:
  case Recompute::selective:
    break;
  }
  return n * outputs;
}

} // namespace

ModelStateBytes megatron_state_per_parameter(Optimizer optimizer, DType dtype, int optimizer_shards) {
  require(optimizer_shards > 0, fmt::format("distributed-optimizer shards must be positive, got {}", optimizer_shards));
  // State: SGD none, momentum one fp32 buffer, Adam two (Megatron's table counts Adam's 8 bytes).
  const double state = optimizer == Optimizer::adam ? 8 : optimizer == Optimizer::sgd_momentum ? 4 : 0;
  // Weights and the gradients the backward writes are on every data-parallel rank; fp32 master weights and main
  // gradients and the optimizer state are split by the distributed optimizer.
  switch (dtype) {
  case DType::fp32: // fp32 weights (the optimizer updates them directly) and fp32 gradients
    return {.weights = 4, .gradients = 4, .optimizer = state / optimizer_shards};
  case DType::fp16: // fp16 weights and gradients; fp32 master weights and fp32 main gradients
    return {.weights = 2, .gradients = 2, .optimizer = (4 + 4 + state) / optimizer_shards};
  case DType::bf16: // bf16 weights, gradients accumulated in fp32 main-gradient buffers; fp32 master weights
    return {.weights = 2, .gradients = 4, .optimizer = (4 + state) / optimizer_shards};
  }
  return {};
}

double bytes_per_parameter(Optimizer optimizer, DType dtype, int optimizer_shards) {
  return megatron_state_per_parameter(optimizer, dtype, optimizer_shards).total();
}

double transformer_layer_activation_bytes(const TransformerSpec& shape, const ActivationConfig& config) {
  check_config(config);
  if (config.recompute == Recompute::full || config.recompute == Recompute::except_last) {
    const double s = shape.sequence, b = config.micro_batch, h = shape.hidden;
    return dtype_bytes(config.dtype) * s * b * h; // the block's input
  }
  return stored_block_bytes(shape, config);
}

double interleaved_activation_factor(int stages, int virtual_stages) {
  require(stages > 0, fmt::format("pipeline stages must be positive, got {}", stages));
  require(virtual_stages > 0, fmt::format("virtual stages must be positive, got {}", virtual_stages));
  if (virtual_stages == 1) {
    return 1;
  }
  const double p = stages, v = virtual_stages;
  return 1 + (p - 1) / (p * v);
}

double transformer_stage_activation_bytes(const TransformerSpec& shape, double layers, double in_flight,
                                          const ActivationConfig& config) {
  require(layers >= 0, fmt::format("transformer layers on a stage must not be negative, got {}", layers));
  require(in_flight >= 0, fmt::format("micro-batches in flight must not be negative, got {}", in_flight));
  const double per_layer = transformer_layer_activation_bytes(shape, config);
  if (config.recompute != Recompute::except_last) {
    return layers * per_layer * in_flight;
  }
  ActivationConfig last = config;
  last.recompute = Recompute::none;
  const double kept = std::min(in_flight, 1.0); // the last micro-batch, when there is one
  return layers * (per_layer * (in_flight - kept) + stored_block_bytes(shape, last) * kept);
}

double StageMemory::total_bytes() const {
  return model_state_bytes + weight_version_bytes + activation_bytes;
}

StageMemory stage_memory(const Model& model, const StageMemoryInput& input) {
  const ActivationConfig& config = input.activations;
  check_config(config);
  require(!input.chunks.empty(), "a stage needs at least one chunk of layers");
  require(input.extra_weight_versions >= 0,
          fmt::format("extra weight versions must not be negative, got {}", input.extra_weight_versions));
  const int layer_count = static_cast<int>(model.layers.size());
  std::vector<bool> placed(model.layers.size(), false);
  std::int64_t parameters = 0;
  double activations = 0;
  for (const StageChunk& chunk : input.chunks) {
    require(0 <= chunk.first_layer && chunk.first_layer <= chunk.last_layer && chunk.last_layer < layer_count,
            fmt::format("chunk {} is not a layer range of {} ({} layers)", range_text(chunk), model.name, layer_count));
    require(chunk.in_flight_micro_batches >= 0,
            fmt::format("chunk {} has a negative micro-batch count", range_text(chunk)));
    for (int i = chunk.first_layer; i <= chunk.last_layer; ++i) {
      const auto index = static_cast<std::size_t>(i);
      require(!placed[index], fmt::format("chunk {} overlaps another chunk at layer {}", range_text(chunk), i));
      placed[index] = true;
      for (const ParamTensor& tensor : model.layers[index].params) {
        parameters += tensor.numel;
      }
    }
    activations += chunk_activation_bytes(model, chunk, config);
  }
  StageMemory memory;
  memory.parameters = static_cast<double>(parameters) / config.tensor_parallel;
  memory.model_state_bytes =
      memory.parameters * bytes_per_parameter(input.optimizer, config.dtype, input.optimizer_shards);
  memory.weight_version_bytes = memory.parameters * input.extra_weight_versions * dtype_bytes(config.dtype);
  memory.activation_bytes = activations;
  return memory;
}

double loss_logits_bytes(const TransformerSpec& shape, int micro_batch, int tensor_parallel) {
  ActivationConfig config;
  config.micro_batch = micro_batch;
  config.tensor_parallel = tensor_parallel;
  check_config(config);
  const double elements = static_cast<double>(micro_batch) * shape.sequence * shape.vocabulary / tensor_parallel;
  return elements * kFp32Bytes * kLossLogitCopies;
}

} // namespace ddlsim::dag
