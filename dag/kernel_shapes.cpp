// Kernel shapes read back from a model's layers (kernel_shapes.hpp).
#include "dag/kernel_shapes.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <tuple>
#include <utility>

namespace ddlsim::dag {
namespace {

// The side of a square of `area` elements, if it is one.
std::optional<std::int64_t> square_side(std::int64_t area) {
  if (area <= 0)
    return std::nullopt;
  const auto side = static_cast<std::int64_t>(std::llround(std::sqrt(static_cast<double>(area))));
  if (side * side != area)
    return std::nullopt;
  return side;
}

// Stride and padding of a window of `window` over `in` that gives `out` (floor((in + 2 p - window) / s) + 1), the
// stride in / out rounded, the smallest padding; nullopt when none fits.
std::optional<std::pair<std::int64_t, std::int64_t>> stride_and_padding(std::int64_t in, std::int64_t out,
                                                                        std::int64_t window) {
  if (out <= 0)
    return std::nullopt;
  const std::int64_t stride =
      std::max<std::int64_t>(1, std::llround(static_cast<double>(in) / static_cast<double>(out)));
  for (std::int64_t pad = 0; pad <= window; ++pad)
    if (in + 2 * pad >= window && (in + 2 * pad - window) / stride + 1 == out)
      return std::pair{stride, pad};
  return std::nullopt;
}

std::int64_t elements(double bytes) {
  return static_cast<std::int64_t>(std::llround(bytes / 4));
}

} // namespace

std::string_view layer_kernel_name(LayerKernel::Kind kind) {
  switch (kind) {
  case LayerKernel::Kind::convolution:
    return "convolution";
  case LayerKernel::Kind::gemm:
    return "gemm";
  case LayerKernel::Kind::batched_gemm:
    return "batched_gemm";
  case LayerKernel::Kind::memory:
    return "memory";
  }
  return "memory";
}

std::vector<LayerKernel> layer_kernels(const Model& model, int batch) {
  const std::size_t count = model.layers.size();
  // Producers of each layer (its inputs, else the previous layer; none for the first: the model's input).
  const auto producers = [&](std::size_t l) {
    std::vector<std::size_t> out;
    for (const int i : model.layers[l].inputs)
      out.push_back(static_cast<std::size_t>(i));
    if (out.empty() && l > 0)
      out.push_back(l - 1);
    return out;
  };
  // Channels flowing out of each layer (0: unknown); an image model's input has 3.
  std::vector<std::int64_t> channels(count, 0);
  const std::int64_t input_channels = model.transformer ? 0 : 3;
  for (std::size_t l = 0; l < count; ++l) {
    const auto& layer = model.layers[l];
    const auto from = producers(l);
    const std::int64_t in = from.empty() ? input_channels : channels[from.front()];
    if (layer.kind == "conv" && !layer.params.empty() && layer.params.front().shape.size() == 4)
      channels[l] = layer.params.front().shape[0];
    else if (layer.kind == "bn" && !layer.params.empty() && layer.params.front().shape.size() == 1)
      channels[l] = layer.params.front().shape[0];
    else if (layer.kind == "concat") {
      std::int64_t sum = 0;
      for (const auto p : from)
        sum = channels[p] > 0 && sum >= 0 ? sum + channels[p] : -1;
      channels[l] = std::max<std::int64_t>(sum, 0);
    } else if (layer.params.empty())
      channels[l] = in;
  }
  const double b = batch;
  std::vector<LayerKernel> out;
  for (std::size_t l = 0; l < count; ++l) {
    const auto& layer = model.layers[l];
    if (layer.fwd_flops <= 0 && layer.params.empty())
      continue;
    const auto from = producers(l);
    double in_bytes = from.empty() ? model.input_bytes_per_sample : 0;
    for (const auto p : from)
      in_bytes += model.layers[p].activation_bytes;
    LayerKernel k;
    k.layer = static_cast<int>(l);
    k.bytes = b * (in_bytes + layer.activation_bytes);
    const auto fallback = [&](std::string why) {
      k.kind = LayerKernel::Kind::memory;
      k.why = std::move(why);
      out.push_back(k);
    };
    if (layer.kind == "conv") {
      if (layer.params.empty() || layer.params.front().shape.size() != 4) {
        fallback("a convolution without a [K, C/g, R, S] weight");
        continue;
      }
      const auto& wshape = layer.params.front().shape;
      const std::int64_t c_in = from.empty() ? input_channels : channels[from.front()];
      k.k = wshape[0];
      k.r = wshape[2];
      k.s = wshape[3];
      k.c = c_in > 0 && c_in % wshape[1] == 0 ? c_in : wshape[1];
      k.groups = k.c / wshape[1];
      const auto hw_in = square_side(
          elements(from.empty() ? model.input_bytes_per_sample : model.layers[from.front()].activation_bytes) / k.c);
      const auto hw_out = square_side(elements(layer.activation_bytes) / k.k);
      if (!hw_in || !hw_out) {
        fallback("a convolution whose input or output is not a square image");
        continue;
      }
      const auto sh = stride_and_padding(*hw_in, *hw_out, k.r), sw = stride_and_padding(*hw_in, *hw_out, k.s);
      if (!sh || !sw) {
        fallback(fmt::format("no stride and padding take {} to {} with a {}x{} window", *hw_in, *hw_out, k.r, k.s));
        continue;
      }
      k.kind = LayerKernel::Kind::convolution;
      k.n = batch;
      k.h = k.w = *hw_in;
      std::tie(k.stride_h, k.pad_h) = *sh;
      std::tie(k.stride_w, k.pad_w) = *sw;
      out.push_back(k);
      continue;
    }
    if (layer.kind == "linear" && !layer.params.empty() && layer.params.front().shape.size() == 2) {
      const auto& weight = layer.params.front();
      const bool bias = layer.params.size() > 1 && layer.params[1].shape.size() == 1;
      const std::int64_t features = bias ? layer.params[1].shape[0] : weight.shape[0];
      const std::int64_t outputs = elements(layer.activation_bytes);
      if (features <= 0 || weight.numel % features != 0 || outputs % features != 0) {
        fallback("a linear layer whose weight does not match its output");
        continue;
      }
      k.kind = LayerKernel::Kind::gemm;
      k.gemm_m = batch * (outputs / features);
      k.gemm_n = features;
      k.gemm_k = weight.numel / features;
      out.push_back(k);
      continue;
    }
    if (layer.kind == "linear") {
      fallback("a linear layer without one 2-D weight (a group of operations, or tied weights)");
      continue;
    }
    if (layer.kind == "attention") {
      if (!model.transformer) {
        fallback("attention without the model's transformer shape");
        continue;
      }
      const auto& t = *model.transformer;
      const std::int64_t head = t.hidden / t.heads;
      k.kind = LayerKernel::Kind::batched_gemm;
      k.count = static_cast<std::int64_t>(batch) * t.heads;
      // Q K^T gives heads x s x s scores per sample; the scores times V give s x hidden
      const bool scores = elements(layer.activation_bytes) == std::int64_t{t.heads} * t.sequence * t.sequence;
      k.gemm_m = t.sequence;
      k.gemm_n = scores ? t.sequence : head; // Q K^T: s x s over the head; then the scores times V: s x head
      k.gemm_k = scores ? head : t.sequence;
      out.push_back(k);
      continue;
    }
    if (layer.kind == "flash_attention" && model.transformer) {
      // the fused kernel's Q K^T over each head (its P V has the same shape and FLOPs), keys not repeated for GQA
      const auto& t = *model.transformer;
      k.kind = LayerKernel::Kind::batched_gemm;
      k.count = static_cast<std::int64_t>(batch) * t.heads;
      k.gemm_m = t.sequence;
      k.gemm_n = t.sequence;
      k.gemm_k = t.hidden / t.heads;
      out.push_back(k);
      continue;
    }
    if (layer.kind == "lstm") {
      fallback("an LSTM (cuDNN's RNN kernels), timed as its memory traffic");
      continue;
    }
    out.push_back(k); // normalisation, pooling, softmax, embedding, concatenation: memory-bound
  }
  return out;
}

} // namespace ddlsim::dag
