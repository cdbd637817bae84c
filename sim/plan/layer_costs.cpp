// Shape-aware layer times (layer_costs.hpp).
#include "sim/plan/layer_costs.hpp"

#include "dag/kernel_shapes.hpp"
#include "sim/plan/gemm_efficiency.hpp"
#include "sim/plan/tensor_parallel.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>

namespace ddlsim::sim {
namespace {

// Fused attention's ceilings, fractions of the 16-bit peak: FlashAttention-2 reaches 50-73 % of the A100's (Dao,
// arXiv:2307.08691, abstract: forward pass), FlashAttention-3 75 % of the H100's in fp16 (Shah et al.,
// arXiv:2407.08608, abstract: 740 TFLOP/s). Taken for the backward pass too, for Blackwell (FA3's) and for the
// GPUs before Ampere and AMD's (FA2's): assumed, not measured there.
constexpr double kFlashAttention2Ceiling = 0.73;
constexpr double kFlashAttention3Ceiling = 0.75;
// Query rows per thread block of FlashAttention-2 and -3 at head dimension 128 (kBlockM in their kernel traits).
constexpr std::int64_t kFlashQueryBlock = 128;

// The calibration's fitted GEMM ceiling (dag::GemmCeilingFit) for `format` on the scenario's GPU, or nullptr: none,
// fitted in another format or on another GPU.
const dag::GemmCeilingFit* calibrated_ceiling(const Scenario& s, ComputeDtype format) {
  if (!s.gpu.calibration || !s.gpu.calibration->gemm)
    return nullptr;
  const auto& fit = *s.gpu.calibration->gemm;
  if (fit.dtype != compute_dtype_name(format) || (!fit.gpu.empty() && fit.gpu != s.gpu.preset->name))
    return nullptr;
  return &fit;
}

// Where the main loop's ceiling in `format` comes from: the calibration's fit, else the preset's measurement.
std::string ceiling_source(const Scenario& s, ComputeDtype format, const GemmCeiling& measured) {
  const auto* fit = calibrated_ceiling(s, format);
  if (fit == nullptr)
    return std::string(measured.source);
  std::string errors;
  if (fit->points && fit->mean_relative_error)
    errors = fmt::format(": fitted to {} measured GEMMs, mean error {:.1f} %", *fit->points,
                         100 * *fit->mean_relative_error);
  return fmt::format("calibration {}{}", gemm_entry_place(s), errors);
}

// Why the calibration's fitted ceiling times no GEMM of the scenario (empty when it times some, or there is none).
std::string unused_ceiling(const Scenario& s) {
  if (!s.gpu.calibration || !s.gpu.calibration->gemm)
    return "";
  const auto& fit = *s.gpu.calibration->gemm;
  const bool fp8 = s.compute_dtype == ComputeDtype::fp8;
  if (calibrated_ceiling(s, sixteen_bit_format(s)) || (fp8 && calibrated_ceiling(s, ComputeDtype::fp8)))
    return "";
  const std::string where =
      fmt::format("; the calibration's {} GEMM ceiling ({}) is not used: ", fit.dtype, gemm_entry_place(s));
  if (!fit.gpu.empty() && fit.gpu != s.gpu.preset->name)
    return where + fmt::format("it was fitted on the {}, this scenario's GPU is the {}", fit.gpu, s.gpu.preset->name);
  return where + fmt::format("this scenario's GEMMs run in {}{}", compute_dtype_name(sixteen_bit_format(s)),
                             fp8 ? " and fp8" : "");
}

GemmDevice gemm_device(const Scenario& s, bool fp8) {
  const GpuPreset& p = *s.gpu.preset;
  const ComputeDtype format = fp8 ? ComputeDtype::fp8 : sixteen_bit_format(s);
  GemmDevice d{.peak_flops = peak_of(p.peaks, format),
               .ceiling = 1,
               .bandwidth = s.gpu.memory_bandwidth,
               .units = p.compute_units,
               .in_bytes = element_bytes(format),
               .out_bytes = fp8 ? 2.0 : element_bytes(format)}; // FP8 GEMMs write 16-bit outputs
  const auto* fit = calibrated_ceiling(s, format);
  d.ceiling = fit ? fit->ceiling : mainloop_ceiling(fp8 ? p.fp8_gemm : p.bf16_gemm, d);
  return d;
}

GemmDevice attention_device(const Scenario& s) {
  GemmDevice d = gemm_device(s, false);
  d.ceiling = s.gpu.preset->compute_capability >= 90 ? kFlashAttention3Ceiling : kFlashAttention2Ceiling;
  return d;
}

std::int64_t shard(std::int64_t n, int t) {
  return (n + t - 1) / t;
}

// One tensor-parallel rank's share of a layer's GEMM (the whole GEMM without tensor parallelism), Megatron-LM's split
// (tensor_roles: the linear after attention's core and a block's last linear are row-parallel, K split; the others
// column-parallel, N split over tensor_split's ranks, the LM head vocabulary-parallel; attention by heads), and the
// ranks the layer's work divides over.
struct RankGemm {
  GemmShape shape;
  int split = 1;
};
RankGemm rank_gemm(const Scenario& s, std::size_t l, GemmShape g, const std::vector<TensorRole>& roles) {
  const int t = s.parallelism.tensor;
  if (t == 1)
    return {g, 1};
  const auto& layer = s.model.layers[l];
  if (layer.kind != "linear") {
    g.count = shard(g.count, t); // attention: the heads
    return {g, t};
  }
  const int split = tensor_split(layer, t);
  if (roles[l] == TensorRole::row)
    g.k = shard(g.k, split);
  else
    g.n = shard(g.n, split);
  return {g, split};
}

// The backward's two GEMMs of C = A B: dA = dC B^T and dB = A^T dC.
double backward_gemms_s(const GemmShape& g, const GemmDevice& d) {
  return gemm_time_s({.m = g.m, .n = g.k, .k = g.n, .count = g.count}, d) +
         gemm_time_s({.m = g.k, .n = g.n, .k = g.m, .count = g.count}, d);
}

// A convolution as cuDNN's implicit GEMM per group: M = N P Q, N = K / g, K = C / g R S; its data gradient
// M = N H W, N = C / g, K = K / g R S; its weight gradient M = K / g, N = C / g R S, K = N P Q.
struct ConvGemms {
  GemmShape forward, data_grad, weight_grad;
};
ConvGemms conv_gemms(const dag::LayerKernel& k) {
  const std::int64_t p = (k.h + 2 * k.pad_h - k.r) / k.stride_h + 1, q = (k.w + 2 * k.pad_w - k.s) / k.stride_w + 1;
  const std::int64_t c = k.c / k.groups, filters = k.k / k.groups, window = k.r * k.s;
  return {.forward = {.m = k.n * p * q, .n = filters, .k = c * window, .count = k.groups},
          .data_grad = {.m = k.n * k.h * k.w, .n = c, .k = filters * window, .count = k.groups},
          .weight_grad = {.m = filters, .n = c * window, .k = k.n * p * q, .count = k.groups}};
}

// A GEMM of positive sizes (a shape read back from a workload may be empty, or a window larger than its input).
bool positive(const GemmShape& g) {
  return g.m > 0 && g.n > 0 && g.k > 0 && g.count > 0;
}

// Fused attention (FlashAttention-2/3): one thread block per kFlashQueryBlock queries of a head, in waves over the
// compute units, each looping over the keys at the attention ceiling and writing its rows of the output; `flops` the
// layer's (causal masking's halving included by the model).
double flash_attention_s(const GemmShape& heads, double flops, const GemmDevice& d) {
  const std::int64_t blocks = heads.count * ((heads.m + kFlashQueryBlock - 1) / kFlashQueryBlock);
  const std::int64_t waves = (blocks + d.units - 1) / d.units;
  const double per_block_s = flops / static_cast<double>(blocks) / (d.ceiling * d.peak_flops / d.units) +
                             static_cast<double>(kFlashQueryBlock * heads.n) * d.out_bytes / (d.bandwidth / d.units);
  const double traffic_s = 4.0 * static_cast<double>(heads.count * heads.m * heads.n) * d.in_bytes / d.bandwidth;
  return std::max(static_cast<double>(waves) * per_block_s, traffic_s);
}

// Bytes a memory-bound layer moves per pass: its input and output activations and its weights, at the training
// format's width (the model's activation bytes are fp32's).
double memory_bytes(const Scenario& s, std::size_t l, double in_bytes_per_sample) {
  const auto& layer = s.model.layers[l];
  double params = 0;
  for (const auto& p : layer.params)
    params += static_cast<double>(p.numel);
  const double width = element_bytes(sixteen_bit_format(s)) / 4.0;
  return width * (s.batch_per_gpu * (in_bytes_per_sample + layer.activation_bytes) + 4.0 * params);
}

struct PassTimes {
  double fwd_s = 0, bwd_s = 0;
};

// The element-wise kernels folded into a layer (Layer::elementwise_bytes, dag/zoo/builder.hpp) in the training
// format at the bandwidth: the forward's, and twice that in backward (each gradient reads the output's gradient and
// what the op kept, and writes the input's).
PassTimes elementwise(const Scenario& s, std::size_t l) {
  const double width = element_bytes(sixteen_bit_format(s)) / 4.0;
  const double fwd = width * s.batch_per_gpu * s.model.layers[l].elementwise_bytes / s.gpu.memory_bandwidth;
  return {.fwd_s = fwd, .bwd_s = 2 * fwd};
}

// A layer's FLOPs without its folded element-wise ones.
double own_fwd_flops(const dag::Layer& layer) {
  return layer.fwd_flops - layer.elementwise_flops;
}
double own_bwd_flops(const dag::Layer& layer) {
  return layer.bwd_flops - layer.elementwise_bwd_flops;
}

// A layer whose kernels are GEMMs (a linear layer, eager attention's batched GEMMs), timed per rank and scaled to
// its own FLOPs.
PassTimes gemm_layer(const Scenario& s, std::size_t l, const dag::LayerKernel& k,
                     const std::vector<TensorRole>& roles) {
  const auto& layer = s.model.layers[l];
  const GemmDevice d = gemm_device(s, runs_in_fp8(s, layer));
  const GemmShape whole{.m = k.gemm_m, .n = k.gemm_n, .k = k.gemm_k, .count = k.count};
  const auto [rank, split] = rank_gemm(s, l, whole, roles);
  const double t = split, flops = s.batch_per_gpu * own_fwd_flops(layer);
  // scaled to the layer's own FLOPs (1 where they agree with the kernel's; the backward runs two GEMMs of its size),
  // then its element-wise kernels
  const double bwd_flops = s.batch_per_gpu * own_bwd_flops(layer);
  const PassTimes e = elementwise(s, l);
  return {.fwd_s = t * gemm_time_s(rank, d) * flops / whole.flops() + e.fwd_s,
          .bwd_s = t * backward_gemms_s(rank, d) * bwd_flops / (2 * whole.flops()) + e.bwd_s};
}

PassTimes conv_layer(const Scenario& s, std::size_t l, const dag::LayerKernel& k) {
  const auto& layer = s.model.layers[l];
  const GemmDevice d = gemm_device(s, false);
  const ConvGemms g = conv_gemms(k);
  const double fwd_scale = s.batch_per_gpu * own_fwd_flops(layer) / g.forward.flops();
  const double bwd_flops = g.data_grad.flops() + g.weight_grad.flops();
  const double bwd_scale = s.batch_per_gpu * own_bwd_flops(layer) / bwd_flops;
  const PassTimes e = elementwise(s, l);
  return {.fwd_s = gemm_time_s(g.forward, d) * fwd_scale + e.fwd_s,
          .bwd_s = (gemm_time_s(g.data_grad, d) + gemm_time_s(g.weight_grad, d)) * bwd_scale + e.bwd_s};
}

PassTimes flash_layer(const Scenario& s, std::size_t l) {
  const auto& layer = s.model.layers[l];
  const auto& tf = *s.model.transformer;
  const int t = s.parallelism.tensor;
  const GemmShape heads{.m = tf.sequence,
                        .n = tf.hidden / tf.heads,
                        .k = tf.sequence,
                        .count = shard(std::int64_t{s.batch_per_gpu} * tf.heads, t)};
  const GemmDevice d = attention_device(s);
  const double b = s.batch_per_gpu;
  return {.fwd_s = t * flash_attention_s(heads, b * layer.fwd_flops / t, d),
          .bwd_s = t * flash_attention_s(heads, b * layer.bwd_flops / t, d)};
}

// A layer without a GEMM shape: its memory traffic at the bandwidth, and its FLOPs (if any: a linear layer whose
// shape could not be read back) at the GEMM ceiling.
PassTimes memory_layer(const Scenario& s, std::size_t l) {
  const auto& layer = s.model.layers[l];
  const GemmDevice d = gemm_device(s, runs_in_fp8(s, layer));
  const double bytes = memory_bytes(s, l, input_activation_bytes(s.model, l)), rate = d.ceiling * d.peak_flops;
  const double b = s.batch_per_gpu;
  const PassTimes e = elementwise(s, l);
  return {.fwd_s = std::max(b * own_fwd_flops(layer) / rate, bytes / d.bandwidth) + e.fwd_s,
          .bwd_s = std::max(b * own_bwd_flops(layer) / rate, 2 * bytes / d.bandwidth) + e.bwd_s};
}

PassTimes layer_time(const Scenario& s, std::size_t l, const dag::LayerKernel* k,
                     const std::vector<TensorRole>& roles) {
  const auto& layer = s.model.layers[l];
  if (layer.kind == "flash_attention" && s.model.transformer)
    return flash_layer(s, l);
  if (k == nullptr || layer.fwd_flops <= 0)
    return memory_layer(s, l);
  switch (k->kind) {
  case dag::LayerKernel::Kind::gemm:
  case dag::LayerKernel::Kind::batched_gemm:
    // a shape read back as empty (a workload's layer of no outputs) is no GEMM: its traffic only
    return positive({.m = k->gemm_m, .n = k->gemm_n, .k = k->gemm_k, .count = k->count}) ? gemm_layer(s, l, *k, roles)
                                                                                         : memory_layer(s, l);
  case dag::LayerKernel::Kind::convolution:
    // a depthwise convolution (one channel per group) is no GEMM: cuDNN runs it as a memory-bound kernel
    return k->c == k->groups || !positive(conv_gemms(*k).forward) ? memory_layer(s, l) : conv_layer(s, l, *k);
  case dag::LayerKernel::Kind::memory:
    break;
  }
  return memory_layer(s, l);
}

} // namespace

std::string gemm_entry_place(const Scenario& s) {
  const auto& c = *s.gpu.calibration;
  return fmt::format("{} {}", c.origin == "<inline>" ? s.file : c.origin, c.gemm_pointer);
}

double input_activation_bytes(const dag::Model& m, std::size_t l) {
  if (m.layers[l].inputs.empty())
    return l == 0 ? m.input_bytes_per_sample : m.layers[l - 1].activation_bytes;
  double sum = 0;
  for (int i : m.layers[l].inputs)
    sum += m.layers[static_cast<std::size_t>(i)].activation_bytes;
  return sum;
}

bool runs_in_fp8(const Scenario& s, const dag::Layer& layer) {
  return s.compute_dtype == ComputeDtype::fp8 && layer.kind == "linear" && layer.block >= 0;
}

CastBytes fp8_cast_bytes(const Scenario& s, std::size_t l) {
  const auto& layer = s.model.layers[l];
  if (!runs_in_fp8(s, layer))
    return {};
  double weights = 0;
  for (const auto& p : layer.params)
    weights += static_cast<double>(p.numel);
  // elements: the input and output activations (fp32 bytes / 4 in the model) per sample, the weights once per pass
  const double in = input_activation_bytes(s.model, l) / 4.0, out = layer.activation_bytes / 4.0, b = s.batch_per_gpu;
  return {.forward = kFp8CastBytesPerElement * (b * in + weights), .backward = kFp8CastBytesPerElement * b * out};
}

LayerTimes shape_aware_layer_times(const Scenario& s) {
  assert(s.gpu.preset && "the shape-aware model reads the preset's compute units and ceilings");
  const std::size_t layers = s.model.layers.size();
  std::vector<const dag::LayerKernel*> kernel(layers, nullptr);
  const auto kernels = dag::layer_kernels(s.model, s.batch_per_gpu);
  for (const auto& k : kernels)
    kernel[static_cast<std::size_t>(k.layer)] = &k;
  const auto roles = tensor_roles(s.model);
  LayerTimes out;
  out.fwd_s.assign(layers, 0);
  out.bwd_s.assign(layers, 0);
  for (std::size_t l = 0; l < layers; ++l) {
    const PassTimes t = layer_time(s, l, kernel[l], roles);
    const CastBytes cast = fp8_cast_bytes(s, l);
    out.fwd_s[l] = t.fwd_s + cast.forward / s.gpu.memory_bandwidth;
    out.bwd_s[l] = t.bwd_s + cast.backward / s.gpu.memory_bandwidth;
  }
  return out;
}

std::string shape_aware_note(const Scenario& s) {
  const GpuPreset& p = *s.gpu.preset;
  const GemmDevice gemm = gemm_device(s, false), attention = attention_device(s);
  std::string fp8;
  if (s.compute_dtype == ComputeDtype::fp8) {
    const GemmDevice d = gemm_device(s, true);
    fp8 = fmt::format("; the blocks' linear layers in fp8 at up to {:.1f} % of {:g} TFLOP/s ({})", 100 * d.ceiling,
                      d.peak_flops / 1e12, ceiling_source(s, ComputeDtype::fp8, p.fp8_gemm));
  }
  return fmt::format("compute: shape-aware model (no gpu.efficiency): {}'s {} compute units, {}x{} output tiles in "
                     "waves; {} GEMMs' main loop at up to {:.1f} % of {:g} TFLOP/s ({}){}{}; fused attention at "
                     "{:.0f} %; memory-bound kernels at {:g} GB/s (docs/engines.md, \"Shape-aware compute "
                     "efficiency\")",
                     p.name, p.compute_units, kTileLong, kTileShort, compute_dtype_name(sixteen_bit_format(s)),
                     100 * gemm.ceiling, gemm.peak_flops / 1e12, ceiling_source(s, sixteen_bit_format(s), p.bf16_gemm),
                     fp8, unused_ceiling(s), 100 * attention.ceiling, s.gpu.memory_bandwidth / 1e9);
}

} // namespace ddlsim::sim
