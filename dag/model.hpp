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
  /// The most tensor-parallel ranks that hold distinct parts of this layer: a key or value projection of g query
  /// groups splits over at most g ranks and is replicated beyond (t > g); 0 = splits over any t.
  int tensor_shards = 0;
  /// Of fwd_flops, the element-wise operations folded into this layer (activation, dropout, residual add, loss;
  /// dag/zoo/builder.hpp), and the bytes per sample they read and write (fp32, as activation_bytes): 0 for layers
  /// that fold none, and for inline and workload models.
  double elementwise_flops = 0;
  double elementwise_bytes = 0;
  /// Of bwd_flops, the folded operations' gradients: 2x elementwise_flops in a layer with weights, 1x without.
  double elementwise_bwd_flops = 0;
};

/// A decoder's MLP: GPT's `gelu` (fc1 to ffn_hidden, GELU, fc2) or Llama's `swiglu` (gate and up projections to
/// ffn_hidden, silu(gate) x up, down projection: Shazeer 2020, arXiv:2002.05202).
enum class Mlp : std::uint8_t { gelu, swiglu };
/// A transformer's normalisation: LayerNorm (weight and bias) or RMSNorm (weight only; Zhang & Sennrich 2019).
enum class Norm : std::uint8_t { layernorm, rmsnorm };
/// Where positions enter: a learned table added to the token embeddings (GPT-2), or rotary embeddings applied to
/// queries and keys in every block (RoPE: Su et al. 2021, arXiv:2104.09864), which have no parameters.
enum class Position : std::uint8_t { learned, rope };
/// How attention's core runs: `eager` materialises the heads·s² scores and their softmax (three layers: scores,
/// softmax, context); `flash` is one fused kernel (FlashAttention 2/3, cuDNN SDPA) that keeps no scores.
enum class AttentionKernel : std::uint8_t { eager, flash };
/// Which linear layers add a bias: every one (GPT-2, GPT-NeoX), none (Llama, Mistral), or the query, key and value
/// projections only (Qwen2).
enum class LinearBias : std::uint8_t { all, none, qkv };
/// Whose module names (and fused projections) a decoder's layers take: HF GPT2LMHeadModel (fused c_attn, Conv1D
/// weights), HF LlamaForCausalLM (separate q/k/v projections; Mistral and Qwen2 share it) or HF GPTNeoXForCausalLM
/// (fused query_key_value).
enum class DecoderNames : std::uint8_t { gpt2, llama, neox };

/// The options' names as scenarios write them, by enumerator.
inline constexpr std::array<std::string_view, 2> kMlpNames{"gelu", "swiglu"};
inline constexpr std::array<std::string_view, 2> kNormNames{"layernorm", "rmsnorm"};
inline constexpr std::array<std::string_view, 2> kPositionNames{"learned", "rope"};
inline constexpr std::array<std::string_view, 2> kAttentionNames{"eager", "flash"};
inline constexpr std::array<std::string_view, 3> kLinearBiasNames{"all", "none", "qkv"};

/// The shape of a transformer (GPT-2/GPT-3-style LM, a Llama-family decoder, or BERT): the quantities of Korthikanti
/// et al.'s activation memory (arXiv:2205.05198) and Megatron's FLOP count. Also the argument of the parametric LM
/// builder (zoo.hpp). The defaults after `vocabulary` describe GPT-2.
struct TransformerSpec {
  int layers = 12;        ///< L, transformer blocks
  int hidden = 768;       ///< h, hidden size
  int heads = 12;         ///< a, attention (query) heads
  int sequence = 1024;    ///< s, tokens per sample
  int vocabulary = 50257; ///< V, tokens in the vocabulary
  int kv_heads = 0;       ///< key/value heads (grouped-query attention, 1 = multi-query); 0 = heads
  Mlp mlp = Mlp::gelu;
  int ffn_hidden = 0; ///< the MLP's inner width; 0 = 4h
  Norm norm = Norm::layernorm;
  Position position = Position::learned;
  bool tied_embeddings = true; ///< the LM head reuses the token embedding's weight
  AttentionKernel attention = AttentionKernel::eager;
  LinearBias bias = LinearBias::all;
  bool dropout = true;            ///< dropout after embeddings, attention probabilities and both residual branches
  bool parallel_residual = false; ///< GPT-NeoX: x + attn(ln1(x)) + mlp(ln2(x)) instead of two sequential halves
  DecoderNames names = DecoderNames::gpt2;

  [[nodiscard]] int query_groups() const { return kv_heads > 0 ? kv_heads : heads; }
  [[nodiscard]] int ffn() const { return ffn_hidden > 0 ? ffn_hidden : 4 * hidden; }
  [[nodiscard]] int head_dim() const { return hidden / heads; }
  /// Weight elements of one block's matrix multiplications (no biases or norms): q and o h², k and v h·g·d each
  /// (g query groups of d = h/a), the MLP 2 (gelu) or 3 (swiglu) h·ffn.
  [[nodiscard]] double block_matmul_params() const;
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
