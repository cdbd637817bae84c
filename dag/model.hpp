// The workload of one training iteration on one GPU: an ordered list of layers (forward order), each with
// its parameter tensors in registration order, its forward/backward FLOPs and activation bytes per sample.
// Built-in models derive these from the architecture (dag/zoo/), inline models come from the scenario.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ddlsim::dag {

/// Number format of the gradients (scenario `model.gradient_dtype`). fp16 and bf16 mean mixed precision: weights
/// and activations in 16 bits, fp32 master weights in the optimizer (see dag/memory.hpp).
enum class DType { fp32, fp16, bf16 };

/// Bytes of one element: 4 for fp32, 2 for fp16 and bf16.
[[nodiscard]] double dtype_bytes(DType d);

/// The formats' names, by enumerator (the one name table): "fp32", "fp16", "bf16".
inline constexpr std::array<std::string_view, 3> kDTypeNames{"fp32", "fp16", "bf16"};
[[nodiscard]] constexpr std::string_view dtype_name(DType d) {
  return kDTypeNames.at(static_cast<std::size_t>(d));
}
/// The format named `name` (one of kDTypeNames); fp32 for any other name (callers parse a closed choice first).
[[nodiscard]] constexpr DType find_dtype(std::string_view name) {
  return name == "fp16" ? DType::fp16 : name == "bf16" ? DType::bf16 : DType::fp32;
}

/// One parameter tensor as the framework registers it (e.g. torchvision's `layer1.0.conv1.weight`).
struct ParamTensor {
  std::string name;
  std::vector<std::int64_t> shape; ///< as in PyTorch, e.g. {64, 3, 7, 7}; empty for a scalar
  std::int64_t numel = 0;          ///< product of shape
};

/// One layer: the unit of forward/backward compute in the DAG.
/// FLOPs count multiply and add separately (a multiply-accumulate is 2 FLOPs), per sample.
struct Layer {
  std::string name;                ///< e.g. "layer1.0.conv1"
  std::string kind;                ///< "conv", "linear", "bn", "relu", "pool", "embedding", "attention", ...
  std::vector<ParamTensor> params; ///< registration order; empty for parameter-free layers
  double fwd_flops = 0;            ///< forward FLOPs per sample
  double bwd_flops = 0;            ///< backward FLOPs per sample (input + weight gradients; ~2x forward)
  double activation_bytes = 0;     ///< bytes of this layer's output per sample, fp32
  std::vector<int> inputs;         ///< indices of the layers whose outputs this one reads; empty = the previous layer
  /// The repeated block (transformer layer) this layer belongs to, 0, 1, ... in forward order; -1 outside any block
  /// (embeddings, final norm, head, loss). Pipeline partitioning cuts between blocks (dag/partition.hpp).
  int block = -1;
};

/// The shape of a transformer (GPT-2/GPT-3-style LM or BERT): the quantities of Korthikanti et al.'s activation
/// memory (arXiv:2205.05198) and Megatron's FLOP count. Also the argument of the parametric LM builder (zoo.hpp).
struct TransformerSpec {
  int layers = 12;        ///< L, transformer blocks
  int hidden = 768;       ///< h, hidden size (the MLP is 4h wide)
  int heads = 12;         ///< a, attention heads
  int sequence = 1024;    ///< s, tokens per sample
  int vocabulary = 50257; ///< V, tokens in the vocabulary
};

struct Model {
  std::string name;                  ///< zoo name, e.g. "resnet50"
  std::vector<Layer> layers;         ///< forward execution order
  double input_bytes_per_sample = 0; ///< bytes of one input sample as copied host->device (fp32 image, int64 tokens)
  /// Set for transformer models (zoo LMs, BERT); absent otherwise. Where the blocks lie: Layer::block.
  std::optional<TransformerSpec> transformer;

  [[nodiscard]] std::int64_t param_count() const;
  [[nodiscard]] std::size_t tensor_count() const;
  [[nodiscard]] double fwd_flops_per_sample() const;
};

} // namespace ddlsim::dag
