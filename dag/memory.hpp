// Memory per GPU of a pipeline stage: weights, gradients and optimizer state at the optimizer's bytes per
// parameter (Megatron-Core's distributed-optimizer table), extra stashed or predicted weight versions, and the
// activations of the micro-batches in flight (transformer layers: Korthikanti et al. 2022, arXiv:2205.05198).
#pragma once

#include "dag/model.hpp"

#include <vector>

namespace ddlsim::dag {

/// The optimizer whose state is counted (scenario `optimizer`).
enum class Optimizer {
  sgd,          ///< no state
  sgd_momentum, ///< one fp32 momentum buffer
  adam,         ///< two fp32 buffers (first and second moments)
};

/// Activation recomputation (scenario `pipeline.recompute`).
enum class Recompute {
  none,        ///< every layer keeps what its backward needs
  full,        ///< transformer blocks keep only their input and recompute the rest in backward
  selective,   ///< transformer blocks recompute the attention core (QK^T, softmax, dropout, AV): Korthikanti §5
  except_last, ///< as `full` for every micro-batch but the last one in flight (torchgpipe's default checkpoint)
};

/// Bytes per parameter of weights + gradients + optimizer state, as Megatron-Core counts them
/// (docs/source/api-guide/dist_optimizer.md): fp32 keeps fp32 weights and gradients; fp16 keeps fp16 weights and
/// gradients plus fp32 master weights and fp32 main gradients; bf16 keeps bf16 weights, fp32 main gradients and fp32
/// master weights. Adam: 16, 20, 18 for fp32, fp16, bf16 (the table's figures). SGD with momentum (one fp32 buffer)
/// and SGD (none) are not in the table; the same accounting gives them 4 and 8 bytes less.
/// `optimizer_shards` is d of Megatron's distributed optimizer (ZeRO-1): master weights, fp16's main gradients and
/// the optimizer state are divided by it (Adam 8 + 8/d, 4 + 16/d, 6 + 12/d); 1 = not distributed.
[[nodiscard]] double bytes_per_parameter(Optimizer optimizer, DType dtype, int optimizer_shards = 1);

/// Model state per parameter, in bytes, by part.
struct ModelStateBytes {
  double weights = 0;
  double gradients = 0;
  double optimizer = 0;
  [[nodiscard]] double total() const { return weights + gradients + optimizer; }
};
/// bytes_per_parameter by part: the weights in the training format; the gradients the backward writes (fp32 main
/// gradients for bf16); the optimizer's part, divided by `optimizer_shards`: fp32 master weights, fp16's fp32 main
/// gradients and the optimizer state. Its total() is bytes_per_parameter's.
[[nodiscard]] ModelStateBytes megatron_state_per_parameter(Optimizer optimizer, DType dtype, int optimizer_shards = 1);

/// What shapes a stage's activation memory.
struct ActivationConfig {
  int micro_batch = 1;            ///< b, samples per micro-batch
  int tensor_parallel = 1;        ///< t, GPUs of the tensor-parallel group
  bool sequence_parallel = false; ///< LayerNorm and dropout activations split over t too (Korthikanti §4.2.2)
  Recompute recompute = Recompute::none;
  DType dtype = DType::fp32; ///< training format: 16-bit activations for fp16/bf16, 32-bit for fp32
};

/// Activation bytes of one transformer block for one micro-batch held for its backward (Korthikanti Table 2, with
/// e bytes per element: e = 2 for fp16/bf16 reproduces the paper, e = 4 for fp32; dropout masks are 1 byte):
///   none       sbh·(4e + 2 + 12e/t + (2e + 1)·as/(ht)) without sequence parallelism,
///              sbh·((4e + 2)/t + 12e/t + (2e + 1)·as/(ht)) with it; at e = 2: sbh(10 + 24/t + 5as/(ht)) and
///              sbh(34 + 5as/h)/t, and sbh(34 + 5as/h) for t = 1;
///   selective  the same without the as/(ht) term: sbh(10 + 24/t), or 34·sbh/t with sequence parallelism; fused
///              attention (`shape.attention` flash) keeps no scores either, so its `none` is this figure;
///   full       e·sbh, the block's input (2sbh at e = 2);
///   except_last  what `full` holds, for a recomputed micro-batch (transformer_stage_activation_bytes adds the last).
/// Other decoders generalise the terms: without dropout no masks, and the scores keep only the softmax's output (e);
/// g key/value heads store K and V at g/a of the size; an MLP of width f stores 2e·f/h (GeLU's input and output) or
/// 3e·f/h (SwiGLU: Megatron-Core's fused kernel keeps gate and up, and the product is the down projection's input).
/// Throws std::invalid_argument when b or t is not positive.
[[nodiscard]] double transformer_layer_activation_bytes(const TransformerSpec& shape, const ActivationConfig& config);

/// Korthikanti's factor on the first stage's activations under the interleaved schedule with v model chunks per
/// GPU: 1 + (p - 1)/(p·v) (§4.2.3); 1 for v = 1, the non-interleaved schedule.
/// Throws std::invalid_argument when p or v is not positive.
[[nodiscard]] double interleaved_activation_factor(int stages, int virtual_stages);

/// Activation bytes of `layers` transformer blocks with `in_flight` micro-batches held at once:
/// layers × per-block bytes × in_flight, except that with `except_last` the last micro-batch (min(in_flight, 1) of
/// them) holds the `none` figure and the others the `full` one. Korthikanti's first stage of the 1F1B schedule is
/// layers = L/p, in_flight = p (× interleaved_activation_factor with interleaving). 0 when in_flight is 0.
/// Throws std::invalid_argument when layers or in_flight is negative.
[[nodiscard]] double transformer_stage_activation_bytes(const TransformerSpec& shape, double layers, double in_flight,
                                                        const ActivationConfig& config);

/// Consecutive layers of a model placed on one GPU (a stage, or one of an interleaved stage's v model chunks).
struct StageChunk {
  int first_layer = 0;             ///< index in Model::layers
  int last_layer = 0;              ///< index in Model::layers, inclusive
  int in_flight_micro_batches = 0; ///< micro-batches whose activations in this chunk are held at the stage's peak
};

/// A stage's placement, schedule and training setup, as stage_memory reads them.
struct StageMemoryInput {
  std::vector<StageChunk> chunks; ///< at least one; they must not overlap
  ActivationConfig activations;   ///< its dtype also sets the weights' format and the optimizer's bytes
  Optimizer optimizer = Optimizer::sgd;
  int optimizer_shards = 1;      ///< d of Megatron's distributed optimizer; 1 = not distributed
  int extra_weight_versions = 0; ///< stashed (PipeDream) or predicted (SpecTrain) copies beside the live one
};

/// Memory of one GPU of a stage, in bytes (and parameters).
struct StageMemory {
  double parameters = 0;           ///< parameters on the GPU: the chunks' parameters / t
  double model_state_bytes = 0;    ///< weights + gradients + optimizer state: parameters × bytes_per_parameter
  double weight_version_bytes = 0; ///< extra weight versions: parameters × versions × weight bytes (4 fp32, else 2)
  double activation_bytes = 0;     ///< activations held at the stage's peak

  /// model_state_bytes + weight_version_bytes + activation_bytes.
  [[nodiscard]] double total_bytes() const;
};

/// The memory of one GPU holding `input.chunks` of `model`. Activations per chunk:
/// - transformer models (`model.transformer` set): the blocks on the chunk (a block split between chunks counts by
///   its share of layers) by transformer_stage_activation_bytes; the other layers (embeddings, final norm, heads)
///   keep their outputs (`activation_bytes` × e/4 × b per micro-batch, not divided by t except the LM head's logits
///   (s·V a sample, vocabulary-parallel: 1/t), never recomputed, as
///   Megatron recomputes transformer layers only);
/// - other models: the layers' outputs (`activation_bytes` × e/4 × b) per micro-batch; recomputation checkpoints
///   the chunk's input (the outputs of earlier layers it reads, or the model's input sample for the first chunk) as
///   torchgpipe does, so `full` holds n inputs plus one micro-batch's outputs while it is recomputed, and
///   `except_last` n − 1 inputs plus the last micro-batch's outputs.
/// Throws std::invalid_argument for an empty or out-of-range chunk, overlapping chunks, a negative count, t > 1 or
/// `selective` on a model that is not a transformer.
[[nodiscard]] StageMemory stage_memory(const Model& model, const StageMemoryInput& input);

// What a framework holds on a GPU besides model state and activations (docs/memory.md).

/// fp32 copies of the logits the loss holds: the logits cast to fp32 for the loss (Megatron-LM's GPT model calls
/// vocab_parallel_cross_entropy(output.float(), ...), megatron/model/gpt_model.py; PyTorch's F.cross_entropy on
/// logits.float()) and the softmax or its gradient beside them (PyTorch's log_softmax keeps its fp32 output for
/// backward next to its input, and its backward writes fp32 gradients next to that output: 2 to 3; Megatron-LM's
/// _VocabParallelCrossEntropy turns the fp32 copy into the softmax and the gradient in place,
/// megatron/mpu/cross_entropy.py, and the cast's backward makes a 16-bit copy beside it: 1.5). 2 lies between.
inline constexpr double kLossLogitCopies = 2;

/// The loss's logits on the GPU that computes it: b·s·V/t elements (the vocabulary split over the tensor group, as
/// Megatron's vocab-parallel cross entropy splits it) × 4 bytes × kLossLogitCopies, for one micro-batch of b samples.
/// Throws std::invalid_argument when b or t is not positive.
[[nodiscard]] double loss_logits_bytes(const TransformerSpec& shape, int micro_batch, int tensor_parallel);

/// A GPU's fixed reserve beside the tensors ddlsim counts (scenario `memory.reserve`), by part:
/// - the CUDA context: about 400 MB with lazy module loading, CUDA >= 11.7 (pytorch/pytorch#109888; PR #86509
///   measured 274 MiB for one kernel loaded lazily and 636 MiB with every kernel loaded);
inline constexpr double kCudaContextBytes = 400.0 * (1 << 20);
/// - cuBLAS and cuBLASLt workspaces: 32 MiB each on Hopper (CUBLAS_WORKSPACE_CONFIG :4096:8 and PyTorch PR #120925
///   after the cuBLAS guide's cublasSetWorkspace recommendation; 8 MiB and 4 MiB before Hopper), Hopper's taken;
inline constexpr double kCublasWorkspaceBytes = 2 * 32.0 * (1 << 20);
/// - NCCL's buffers: NCCL_BUFFSIZE (4 MiB by default, NCCL's environment-variable guide) per channel and peer, for
///   2 peers (a ring's previous and next rank), 16 channels and 2 communicators (the data-parallel and the tensor or
///   pipeline group) assumed.
inline constexpr double kNcclBufferBytes = 4.0 * (1 << 20) * 2 * 16 * 2;
inline constexpr double kDefaultReserveBytes = kCudaContextBytes + kCublasWorkspaceBytes + kNcclBufferBytes;

/// The caching allocator's memory beyond its tensors, as a fraction of the tensors' peak (scenario
/// `memory.fragmentation`): the median (0.209) of max_reserved / max_allocated - 1 over 15 stages of five Megatron-LM
/// GPT runs on V100-SXM2-32GB (fp16, full recomputation; tests/data/memory/megatron-v100.json, 0.17 to 0.24).
inline constexpr double kDefaultFragmentation = 0.21;

} // namespace ddlsim::dag
