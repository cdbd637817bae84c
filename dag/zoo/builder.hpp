// Layer builder shared by the model zoo: turns PyTorch module definitions (Conv2d, BatchNorm2d, Linear, HF Conv1D,
// LayerNorm, Embedding, pooling, attention) into `Layer`s with parameter tensors, FLOPs, output bytes and inputs.
// Shapes and parameter layouts follow torch.nn (pytorch/torch/nn/modules/*.py) and HF transformers' Conv1D.
//
// FLOPs per sample (a multiply-accumulate is 2 FLOPs; a transcendental counts as 1 FLOP):
//   conv2d      2·Cout·Hout·Wout·(Cin/groups)·kh·kw, + Cout·Hout·Wout bias adds when the conv has a bias
//   linear      rows·(2·in·out + out·bias)            (rows = tokens for transformers, 1 for classifiers)
//   batchnorm   kNormFlops per element (training mode: batch mean 1, variance 3, normalise 2, affine 2)
//   layernorm   kNormFlops per element (same breakdown over the feature dimension)
//   rmsnorm     kRmsNormFlops per element (square 1, mean 1, scale by the reciprocal root 1, weight 1)
//   relu 1, residual add 1, dropout 2 (mask compare + scale), gelu 8 (tanh or erf form), tanh 1 per element
//   swiglu      silu(gate)·up: sigmoid 3 (exp, add, divide) + the product with gate 1 + the product with up 1 = 5 per
//               element of the MLP's inner width
//   rotary      3 per element of the queries and keys (x·cos + rotate_half(x)·sin: two products and a sum)
//   max pool    k·k comparisons per output element; avg pool k·k adds per output element;
//               adaptive avg pool: one add per input element + one divide per output element
//   lstm        per token and layer (torch.nn.LSTM, gates i, f, g, o of size H over input size I):
//               gates 2·4H·(I + H) + two bias adds 2·4H + sum of the two products 4H; activations 4H (3H sigmoid,
//               H tanh, 1 each); cell c' = f·c + i·g 3H; output h' = o·tanh(c') 2H: 2·4H·(I + H) + 21H in all
//   softmax / log-softmax 5 per element (max, subtract, exp, sum, divide/log); embedding lookup and concat 0
//   attention   scores = QK^T 2·s²·h + scale 1 + mask 1 per score; softmax 5 + dropout 2 per score;
//               context = AV 2·s²·h (eager attention: the heads·s² scores are materialised)
//   flash attention  one fused kernel (FlashAttention-2: Dao 2023, arXiv:2307.08691, §3): its matmuls only, as the
//               paper counts them: QK^T and PV 4·s²·h forward, halved when causal (the kernel skips the tiles above
//               the diagonal: the paper's causal FLOP count), and 2.5x that backward (five matmuls: S = QK^T
//               recomputed, dV, dP, dQ, dK); no scores are stored
// Backward: 2x forward for layers that use weights (input gradient + weight gradient; the first conv keeps 2x
// although it needs no input gradient), 1x forward for parameter-free layers, except that activation-activation
// matmuls (attention's QK^T and AV) cost 2x (gradient with respect to both operands).
//
// Granularity: one layer per leaf module with parameters (conv, bn, linear, layernorm, embedding), plus one
// parameter-free layer per pooling, concatenation and attention step (scores, softmax, context). Element-wise
// ops that keep the shape (ReLU, GELU, tanh, dropout, residual add, flatten, the training loss) are folded into
// the preceding layer: their FLOPs are added to it and its output is theirs; what they read and write is recorded
// (Layer::elementwise_bytes: 2 elements per op, 3 for a residual add and SwiGLU's product; a dropout's 1-byte mask
// left out), as they run as kernels of their own in PyTorch's eager mode.
//
// activation_bytes: the layer's output per sample, fp32 (4·numel). `inputs`: the layers whose outputs a layer
// reads (including the second operand of a folded residual add); empty when that is just the previous layer.
#pragma once

#include "dag/model.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace ddlsim::dag::detail {

inline constexpr double kNormFlops = 8;             // batchnorm / layernorm, per element
inline constexpr double kRmsNormFlops = 4;          // rmsnorm, per element
inline constexpr double kSwigluFlops = 5;           // silu(gate)·up, per element
inline constexpr double kRotaryFlops = 3;           // rotary embedding, per element of q and k
inline constexpr double kFlashBackwardFactor = 2.5; // FlashAttention-2's backward: 5 matmuls to the forward's 2
inline constexpr double kReluFlops = 1;             // per element
inline constexpr double kAddFlops = 1;              // residual add, per element
inline constexpr double kDropoutFlops = 2;          // mask compare + scale, per element
inline constexpr double kGeluFlops = 8;             // per element
inline constexpr double kTanhFlops = 1;             // per element
inline constexpr double kSoftmaxFlops = 5;          // softmax or log-softmax, per element
inline constexpr double kFloatBytes = 4;            // fp32 activations

/// The layer that produced a tensor (index in forward order); kNoLayer for the model input or a tensor that
/// no layer produced (token ids, position ids).
using Src = int;
inline constexpr Src kNoLayer = -1;

/// A feature map of one sample (channels x height x width) and the layer that produced it.
struct Chw {
  std::int64_t c = 0;
  std::int64_t h = 0;
  std::int64_t w = 0;
  Src src = kNoLayer;
  [[nodiscard]] std::int64_t numel() const { return c * h * w; }
};

/// torch.nn.Conv2d arguments (square kernels via `square`).
struct ConvSpec {
  std::int64_t kh = 1, kw = 1;
  std::int64_t sh = 1, sw = 1;
  std::int64_t ph = 0, pw = 0;
  std::int64_t groups = 1;
  bool bias = false;
  [[nodiscard]] static ConvSpec square(std::int64_t k, std::int64_t stride = 1, std::int64_t pad = 0) {
    return ConvSpec{k, k, stride, stride, pad, pad, 1, false};
  }
};

/// torch.nn.MaxPool2d / AvgPool2d arguments (square window).
struct PoolSpec {
  std::int64_t k = 2;
  std::int64_t stride = 2;
  std::int64_t pad = 0;
  bool ceil_mode = false;
};

/// How a linear layer stores its weight.
enum class WeightLayout {
  linear, ///< torch.nn.Linear: weight (out, in)
  conv1d, ///< HF transformers Conv1D (GPT-2): weight (in, out)
  tied,   ///< weight (and bias) registered elsewhere (GPT-2 lm_head, BERT MLM decoder): no tensors of its own
};

struct LinearSpec {
  bool bias = true; ///< adds a bias (FLOPs; a `.bias` tensor unless the layout is `tied`)
  WeightLayout layout = WeightLayout::linear;
};

/// torch.nn.LSTM arguments (batch-first or not makes no difference here; no projection, unidirectional).
struct LstmSpec {
  std::int64_t input_size = 0;
  std::int64_t hidden = 0;
  std::int64_t layers = 1;
  bool dropout = false; ///< nn.LSTM(dropout > 0): dropout on every layer's output except the last
};

/// Output size of a convolution / pooling window along one dimension (PyTorch's formula, incl. ceil_mode).
[[nodiscard]] std::int64_t window_out(std::int64_t in, std::int64_t k, std::int64_t stride, std::int64_t pad,
                                      bool ceil_mode = false);

/// Appends layers in forward order; element-wise ops fold into the most recent layer.
class ModelBuilder {
public:
  ModelBuilder(std::string model_name, double input_bytes_per_sample);

  // Leaf modules with parameters. `name` is the module path; tensors are named `name.weight`, `name.bias`.
  Chw conv2d(const std::string& name, Chw in, std::int64_t out_channels, const ConvSpec& spec);
  Chw batchnorm2d(const std::string& name, Chw in);
  /// Applied to `rows` independent vectors (tokens) produced by `in`.
  Src linear(const std::string& name, Src in, std::int64_t rows, std::int64_t in_features, std::int64_t out_features,
             const LinearSpec& spec = {});
  Src layernorm(const std::string& name, Src in, std::int64_t rows, std::int64_t features);
  /// RMSNorm (a weight, no bias), kind "rmsnorm".
  Src rmsnorm(const std::string& name, Src in, std::int64_t rows, std::int64_t features);
  /// torch.nn.LSTM over a sequence of `rows` tokens produced by `in`: one layer holding, per layer k,
  /// `name.weight_ih_lk` (4H, I), `name.weight_hh_lk` (4H, H), `name.bias_ih_lk` (4H), `name.bias_hh_lk` (4H).
  Src lstm(const std::string& name, Src in, std::int64_t rows, const LstmSpec& spec);
  /// A lookup of `rows` ids that no layer produced (token or position ids).
  Src embedding(const std::string& name, std::int64_t rows, std::int64_t num_embeddings, std::int64_t dim);

  // Parameter-free layers.
  Chw pool2d(const std::string& name, Chw in, const PoolSpec& spec);
  Chw max_pool2d(const std::string& name, Chw in, const PoolSpec& spec);
  Chw avg_pool2d(const std::string& name, Chw in, const PoolSpec& spec);
  Chw adaptive_avg_pool2d(const std::string& name, Chw in, std::int64_t out_h, std::int64_t out_w);
  /// torch.cat along channels (a copy).
  Chw concat(const std::string& name, std::span<const Chw> parts);
  /// Eager multi-head scaled dot-product attention on projected q, k, v (`prefix` is the attention module's
  /// path): `prefix.scores` (QK^T, scale, mask), `prefix.softmax` (softmax, dropout), `prefix.context` (AV,
  /// head merge). Returns the context layer.
  /// Without `dropout`, the softmax's output is not dropped out.
  Src attention(const std::string& prefix, Src q, Src k, Src v, std::int64_t seq, std::int64_t hidden,
                std::int64_t heads, bool dropout = true);
  /// Fused attention (FlashAttention, cuDNN SDPA) over `hidden` query channels, one layer `name` of kind
  /// "flash_attention" whose output is the context (s, hidden); `causal` halves its FLOPs (see the file comment).
  Src flash_attention(const std::string& name, Src q, Src k, Src v, std::int64_t seq, std::int64_t hidden, bool causal);

  // Element-wise ops folded into the last layer; `numel` is the element count per sample.
  void relu(std::int64_t numel);
  /// Adds the output of `other` (kNoLayer: a tensor no layer produced) to the last layer's output.
  void residual_add(std::int64_t numel, Src other);
  void dropout(std::int64_t numel);
  void gelu(std::int64_t numel);
  void tanh(std::int64_t numel);
  /// silu(gate)·x on `numel` elements, where the last layer computed x and `gate` the gate.
  void swiglu(std::int64_t numel, Src gate);
  /// Rotary embeddings on `numel` query and key elements.
  void rotary(std::int64_t numel);
  /// Cross-entropy on `numel` logits (log-softmax + NLL); the layer's output stays the logits.
  void cross_entropy(std::int64_t numel);

  /// Merges every layer added until end_group() into one layer `name` of `kind` (a module whose children are
  /// not simulated separately, e.g. HF BertLMPredictionHead): tensors keep their order, FLOPs add up, the output
  /// is the last part's, inputs are the parts' inputs from outside the group. `in` is what the group reads.
  void begin_group(const std::string& name, std::string kind, Src in);
  Src end_group();
  /// A tensor registered directly on the current layer (or group), e.g. BertLMPredictionHead's `bias`.
  void parameter(std::string name, std::vector<std::int64_t> shape);

  /// The most recent layer.
  [[nodiscard]] Src last() const;
  /// A layer already added, e.g. to set its Layer::tensor_shards.
  [[nodiscard]] Layer& layer(Src src);

  /// Returns the model; throws std::logic_error if two layers share a name or a layer's inputs are invalid.
  [[nodiscard]] Model finish() &&;

private:
  Src push(const std::string& name, std::string kind, std::vector<Src> reads, bool uses_weights);
  /// Adds an element-wise op's FLOPs and the `elements` it reads and writes to the last layer.
  void fold(double flops, double elements);
  static void add_param(Layer& layer, std::string name, std::vector<std::int64_t> shape);

  Model model_;
  std::vector<std::vector<Src>> reads_; ///< per layer: the layers it reads (kNoLayer entries dropped)
  std::vector<bool> uses_weights_;      ///< per layer: backward also computes a weight gradient (2x forward)
  std::size_t group_start_ = 0;         ///< index of the open group's layer
  bool in_group_ = false;
};

} // namespace ddlsim::dag::detail
