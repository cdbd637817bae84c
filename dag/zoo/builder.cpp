// Layer builder shared by the model zoo: parameter tensors, FLOPs, output bytes and inputs of PyTorch modules.
// Formulas and the FLOP conventions are documented in builder.hpp; shapes follow torch.nn and HF Conv1D.
#include "dag/zoo/builder.hpp"

#include <algorithm>
#include <cassert>
#include <set>
#include <stdexcept>
#include <utility>

namespace ddlsim::dag::detail {

namespace {

double as_double(std::int64_t v) {
  return static_cast<double>(v);
}

} // namespace

std::int64_t window_out(std::int64_t in, std::int64_t k, std::int64_t stride, std::int64_t pad, bool ceil_mode) {
  assert(stride > 0 && k > 0 && "window_out: kernel and stride must be positive");
  const std::int64_t span = in + 2 * pad - k;
  assert(span >= 0 && "window_out: window larger than the padded input");
  std::int64_t out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
  // PyTorch (pooling_output_shape): with ceil_mode the last window must start inside the input or left padding.
  if (ceil_mode && (out - 1) * stride >= in + pad) {
    --out;
  }
  return out;
}

ModelBuilder::ModelBuilder(std::string model_name, double input_bytes_per_sample) {
  model_.name = std::move(model_name);
  model_.input_bytes_per_sample = input_bytes_per_sample;
}

Src ModelBuilder::push(const std::string& name, std::string kind, std::vector<Src> reads, bool uses_weights) {
  Layer layer;
  layer.name = name;
  layer.kind = std::move(kind);
  model_.layers.push_back(std::move(layer));
  std::erase(reads, kNoLayer);
  reads_.push_back(std::move(reads));
  uses_weights_.push_back(uses_weights);
  return last();
}

Src ModelBuilder::last() const {
  assert(!model_.layers.empty() && "last: no layer yet");
  return static_cast<Src>(model_.layers.size() - 1);
}

Layer& ModelBuilder::layer(Src src) {
  assert(src >= 0 && static_cast<std::size_t>(src) < model_.layers.size() && "layer: no such layer");
  return model_.layers[static_cast<std::size_t>(src)];
}

void ModelBuilder::fold(double flops, double elements) {
  assert(!model_.layers.empty() && "an element-wise op needs a preceding layer to fold into");
  Layer& layer = model_.layers.back();
  layer.fwd_flops += flops;
  layer.elementwise_flops += flops;
  layer.elementwise_bytes += kFloatBytes * elements;
  const double backward = uses_weights_.back() ? 2 * flops : flops;
  layer.bwd_flops += backward;
  layer.elementwise_bwd_flops += backward;
}

void ModelBuilder::add_param(Layer& layer, std::string name, std::vector<std::int64_t> shape) {
  std::int64_t numel = 1;
  for (const std::int64_t d : shape) {
    numel *= d;
  }
  layer.params.push_back(ParamTensor{std::move(name), std::move(shape), numel});
}

Chw ModelBuilder::conv2d(const std::string& name, Chw in, std::int64_t out_channels, const ConvSpec& spec) {
  assert(in.c % spec.groups == 0 && out_channels % spec.groups == 0 && "conv2d: channels not divisible by groups");
  Chw out{out_channels, window_out(in.h, spec.kh, spec.sh, spec.ph), window_out(in.w, spec.kw, spec.sw, spec.pw)};
  out.src = push(name, "conv", {in.src}, true);
  Layer& layer = model_.layers.back();
  add_param(layer, name + ".weight", {out_channels, in.c / spec.groups, spec.kh, spec.kw});
  if (spec.bias) {
    add_param(layer, name + ".bias", {out_channels});
  }
  const double macs = as_double(out.numel()) * as_double(in.c / spec.groups * spec.kh * spec.kw);
  layer.fwd_flops = 2 * macs + (spec.bias ? as_double(out.numel()) : 0.0);
  layer.bwd_flops = 2 * layer.fwd_flops;
  layer.activation_bytes = kFloatBytes * as_double(out.numel());
  return out;
}

Chw ModelBuilder::batchnorm2d(const std::string& name, Chw in) {
  Chw out = in;
  out.src = push(name, "bn", {in.src}, true);
  Layer& layer = model_.layers.back();
  add_param(layer, name + ".weight", {in.c});
  add_param(layer, name + ".bias", {in.c});
  layer.fwd_flops = kNormFlops * as_double(in.numel());
  layer.bwd_flops = 2 * layer.fwd_flops;
  layer.activation_bytes = kFloatBytes * as_double(in.numel());
  return out;
}

Src ModelBuilder::linear(const std::string& name, Src in, std::int64_t rows, std::int64_t in_features,
                         std::int64_t out_features, const LinearSpec& spec) {
  const Src src = push(name, "linear", {in}, true);
  Layer& layer = model_.layers.back();
  switch (spec.layout) {
  case WeightLayout::linear:
    add_param(layer, name + ".weight", {out_features, in_features});
    break;
  case WeightLayout::conv1d:
    add_param(layer, name + ".weight", {in_features, out_features});
    break;
  case WeightLayout::tied:
    break;
  }
  if (spec.bias && spec.layout != WeightLayout::tied) {
    add_param(layer, name + ".bias", {out_features});
  }
  const double per_row =
      2 * as_double(in_features) * as_double(out_features) + (spec.bias ? as_double(out_features) : 0.0);
  layer.fwd_flops = as_double(rows) * per_row;
  layer.bwd_flops = 2 * layer.fwd_flops;
  layer.activation_bytes = kFloatBytes * as_double(rows * out_features);
  return src;
}

Src ModelBuilder::layernorm(const std::string& name, Src in, std::int64_t rows, std::int64_t features) {
  const Src src = push(name, "layernorm", {in}, true);
  Layer& layer = model_.layers.back();
  add_param(layer, name + ".weight", {features});
  add_param(layer, name + ".bias", {features});
  layer.fwd_flops = kNormFlops * as_double(rows * features);
  layer.bwd_flops = 2 * layer.fwd_flops;
  layer.activation_bytes = kFloatBytes * as_double(rows * features);
  return src;
}

Src ModelBuilder::rmsnorm(const std::string& name, Src in, std::int64_t rows, std::int64_t features) {
  const Src src = push(name, "rmsnorm", {in}, true);
  Layer& layer = model_.layers.back();
  add_param(layer, name + ".weight", {features});
  layer.fwd_flops = kRmsNormFlops * as_double(rows * features);
  layer.bwd_flops = 2 * layer.fwd_flops;
  layer.activation_bytes = kFloatBytes * as_double(rows * features);
  return src;
}

Src ModelBuilder::lstm(const std::string& name, Src in, std::int64_t rows, const LstmSpec& spec) {
  assert(spec.input_size > 0 && spec.hidden > 0 && spec.layers > 0 && "lstm: sizes must be positive");
  const Src src = push(name, "lstm", {in}, true);
  Layer& layer = model_.layers.back();
  const std::int64_t h = spec.hidden;
  double per_token = 0;
  for (std::int64_t k = 0; k < spec.layers; ++k) {
    const std::int64_t in_size = k == 0 ? spec.input_size : h;
    const std::string l = "_l" + std::to_string(k);
    add_param(layer, name + ".weight_ih" + l, {4 * h, in_size});
    add_param(layer, name + ".weight_hh" + l, {4 * h, h});
    add_param(layer, name + ".bias_ih" + l, {4 * h});
    add_param(layer, name + ".bias_hh" + l, {4 * h});
    const double gates = 2 * as_double(4 * h) * as_double(in_size + h) + 3 * as_double(4 * h);
    const double activations = as_double(4 * h);             // 3H sigmoid + H tanh
    const double cell = 3 * as_double(h) + 2 * as_double(h); // f·c + i·g, then o·tanh(c)
    per_token += gates + activations + cell;
    if (spec.dropout && k + 1 < spec.layers) {
      per_token += kDropoutFlops * as_double(h);
    }
  }
  layer.fwd_flops = as_double(rows) * per_token;
  layer.bwd_flops = 2 * layer.fwd_flops;
  layer.activation_bytes = kFloatBytes * as_double(rows * h); // the last layer's hidden states
  return src;
}

Src ModelBuilder::embedding(const std::string& name, std::int64_t rows, std::int64_t num_embeddings, std::int64_t dim) {
  const Src src = push(name, "embedding", {}, true);
  Layer& layer = model_.layers.back();
  add_param(layer, name + ".weight", {num_embeddings, dim});
  layer.activation_bytes = kFloatBytes * as_double(rows * dim); // a gather: no FLOPs
  return src;
}

// Max and average pooling cost the same here: k*k operations per output element, backward the same.
Chw ModelBuilder::pool2d(const std::string& name, Chw in, const PoolSpec& spec) {
  Chw out{in.c, window_out(in.h, spec.k, spec.stride, spec.pad, spec.ceil_mode),
          window_out(in.w, spec.k, spec.stride, spec.pad, spec.ceil_mode)};
  out.src = push(name, "pool", {in.src}, false);
  Layer& layer = model_.layers.back();
  layer.fwd_flops = as_double(spec.k * spec.k) * as_double(out.numel());
  layer.bwd_flops = layer.fwd_flops;
  layer.activation_bytes = kFloatBytes * as_double(out.numel());
  return out;
}

Chw ModelBuilder::max_pool2d(const std::string& name, Chw in, const PoolSpec& spec) {
  return pool2d(name, in, spec);
}

Chw ModelBuilder::avg_pool2d(const std::string& name, Chw in, const PoolSpec& spec) {
  return pool2d(name, in, spec);
}

Chw ModelBuilder::adaptive_avg_pool2d(const std::string& name, Chw in, std::int64_t out_h, std::int64_t out_w) {
  Chw out{in.c, out_h, out_w};
  out.src = push(name, "pool", {in.src}, false);
  Layer& layer = model_.layers.back();
  layer.fwd_flops = as_double(in.numel()) + as_double(out.numel());
  layer.bwd_flops = layer.fwd_flops;
  layer.activation_bytes = kFloatBytes * as_double(out.numel());
  return out;
}

Chw ModelBuilder::concat(const std::string& name, std::span<const Chw> parts) {
  assert(!parts.empty() && "concat: no inputs");
  Chw out{0, parts.front().h, parts.front().w};
  std::vector<Src> reads;
  for (const Chw& p : parts) {
    assert(p.h == out.h && p.w == out.w && "concat: spatial sizes differ");
    out.c += p.c;
    reads.push_back(p.src);
  }
  out.src = push(name, "concat", std::move(reads), false);
  model_.layers.back().activation_bytes = kFloatBytes * as_double(out.numel()); // a copy: no FLOPs
  return out;
}

Src ModelBuilder::attention(const std::string& prefix, Src q, Src k, Src v, std::int64_t seq, std::int64_t hidden,
                            std::int64_t heads, bool dropout) {
  assert(heads > 0 && hidden % heads == 0 && "attention: hidden not divisible by heads");
  const double s = as_double(seq);
  const double scores = as_double(heads) * s * s;
  const double matmul = 2 * s * s * as_double(hidden); // QK^T or AV over all heads

  push(prefix + ".scores", "attention", {q, k}, false);
  Layer* layer = &model_.layers.back();
  layer->fwd_flops = matmul + scores * (1 /*scale*/ + 1 /*mask*/);
  layer->bwd_flops = 2 * matmul + scores * 2;
  layer->activation_bytes = kFloatBytes * scores;

  // the probabilities' dropout is a kernel of its own (Megatron-LM fuses scale, mask and softmax, not the dropout)
  push(prefix + ".softmax", "softmax", {last()}, false);
  layer = &model_.layers.back();
  layer->fwd_flops = scores * kSoftmaxFlops;
  layer->bwd_flops = layer->fwd_flops;
  layer->activation_bytes = kFloatBytes * scores;
  if (dropout)
    fold(kDropoutFlops * scores, 2 * scores);

  const Src context = push(prefix + ".context", "attention", {last(), v}, false);
  layer = &model_.layers.back();
  layer->fwd_flops = matmul;
  layer->bwd_flops = 2 * matmul;
  layer->activation_bytes = kFloatBytes * s * as_double(hidden); // heads merged back into (s, hidden)
  return context;
}

Src ModelBuilder::flash_attention(const std::string& name, Src q, Src k, Src v, std::int64_t seq, std::int64_t hidden,
                                  bool causal) {
  const double s = as_double(seq);
  const Src src = push(name, "flash_attention", {q, k, v}, false);
  Layer& layer = model_.layers.back();
  layer.fwd_flops = 4 * s * s * as_double(hidden) * (causal ? 0.5 : 1.0);
  layer.bwd_flops = kFlashBackwardFactor * layer.fwd_flops;
  layer.activation_bytes = kFloatBytes * s * as_double(hidden);
  return src;
}

void ModelBuilder::relu(std::int64_t numel) {
  fold(kReluFlops * as_double(numel), 2 * as_double(numel));
}

void ModelBuilder::residual_add(std::int64_t numel, Src other) {
  fold(kAddFlops * as_double(numel), 3 * as_double(numel));
  if (other != kNoLayer) {
    reads_.back().push_back(other);
  }
}

void ModelBuilder::dropout(std::int64_t numel) {
  fold(kDropoutFlops * as_double(numel), 2 * as_double(numel));
}

void ModelBuilder::gelu(std::int64_t numel) {
  fold(kGeluFlops * as_double(numel), 2 * as_double(numel));
}

void ModelBuilder::tanh(std::int64_t numel) {
  fold(kTanhFlops * as_double(numel), 2 * as_double(numel));
}

void ModelBuilder::swiglu(std::int64_t numel, Src gate) {
  fold(kSwigluFlops * as_double(numel), 3 * as_double(numel));
  reads_.back().push_back(gate);
}

void ModelBuilder::rotary(std::int64_t numel) {
  fold(kRotaryFlops * as_double(numel), 2 * as_double(numel));
}

void ModelBuilder::cross_entropy(std::int64_t numel) {
  fold(kSoftmaxFlops * as_double(numel), 2 * as_double(numel));
}

void ModelBuilder::begin_group(const std::string& name, std::string kind, Src in) {
  assert(!in_group_ && "begin_group: groups do not nest");
  push(name, std::move(kind), {in}, false);
  group_start_ = model_.layers.size() - 1;
  in_group_ = true;
}

Src ModelBuilder::end_group() {
  assert(in_group_ && "end_group without begin_group");
  const Src head = static_cast<Src>(group_start_);
  Layer& group = model_.layers[group_start_];
  std::vector<Src>& reads = reads_[group_start_];
  for (std::size_t i = group_start_ + 1; i < model_.layers.size(); ++i) {
    Layer& part = model_.layers[i];
    for (ParamTensor& t : part.params) {
      group.params.push_back(std::move(t));
    }
    group.fwd_flops += part.fwd_flops;
    group.elementwise_flops += part.elementwise_flops;
    group.elementwise_bytes += part.elementwise_bytes;
    group.elementwise_bwd_flops += part.elementwise_bwd_flops;
    group.bwd_flops += part.bwd_flops;
    group.activation_bytes = part.activation_bytes; // the group's output is its last part's
    for (const Src r : reads_[i]) {
      if (r < head) {
        reads.push_back(r); // reads from outside the group; reads of earlier parts are internal
      }
    }
    uses_weights_[group_start_] = uses_weights_[group_start_] || uses_weights_[i];
  }
  model_.layers.resize(group_start_ + 1);
  reads_.resize(group_start_ + 1);
  uses_weights_.resize(group_start_ + 1);
  in_group_ = false;
  return head;
}

void ModelBuilder::parameter(std::string name, std::vector<std::int64_t> shape) {
  assert(!model_.layers.empty() && "parameter: no layer to register the tensor on");
  uses_weights_.back() = true;
  add_param(model_.layers.back(), std::move(name), std::move(shape));
}

Model ModelBuilder::finish() && {
  assert(!in_group_ && "finish: a group is still open");
  std::set<std::string> names;
  for (std::size_t i = 0; i < model_.layers.size(); ++i) {
    Layer& layer = model_.layers[i];
    if (!names.insert(layer.name).second) {
      throw std::logic_error("model zoo: duplicate layer name '" + layer.name + "' in " + model_.name);
    }
    std::vector<Src> inputs;
    for (const Src r : reads_[i]) {
      if (r < 0 || static_cast<std::size_t>(r) >= i) {
        throw std::logic_error("model zoo: layer '" + layer.name + "' reads a layer that does not precede it");
      }
      if (std::find(inputs.begin(), inputs.end(), r) == inputs.end()) {
        inputs.push_back(r);
      }
    }
    if (inputs.empty() && i > 0) {
      throw std::logic_error("model zoo: layer '" + layer.name + "' reads no earlier layer");
    }
    const bool just_previous = inputs.size() == 1 && static_cast<std::size_t>(inputs.front()) + 1 == i;
    layer.inputs = just_previous ? std::vector<int>{} : std::move(inputs);
  }
  return std::move(model_);
}

} // namespace ddlsim::dag::detail
