// Registry of the built-in model zoo: maps torchvision / Hugging Face model names and the CIFAR-10 / Penn Treebank
// benchmark models (cifar.cpp, lstm.cpp) to the family builders.
// GPT-2 sizes are HF's gpt2* configs; GPT-3 sizes are Brown et al. 2020, "Language Models are Few-Shot
// Learners", Table 2.1 (dense attention modelled throughout; 13B with d_model 5120 = 40 heads x 128).
// The Llama-family decoders take their shapes from each model's Hugging Face config.json (hidden_size,
// num_hidden_layers, num_attention_heads, num_key_value_heads, intermediate_size, vocab_size, tie_word_embeddings,
// attention_bias) and their sequence from the pre-training context their papers give; their parameter totals equal
// the published counts (tests/dag/test_zoo_decoders.cpp names each source).
#include "dag/zoo/zoo.hpp"

#include "dag/zoo/families.hpp"

#include <algorithm>
#include <array>

namespace ddlsim::dag {

namespace {

struct LmEntry {
  std::string_view name;
  TransformerSpec spec;
};

// A Llama-family decoder (Touvron et al. 2023, arXiv:2307.09288, §2.2; HF modeling_llama.py): RMSNorm, rotary
// positions, SwiGLU of width `ffn`, grouped-query attention of `kv` heads, no biases, no dropout, untied embeddings,
// fused attention.
constexpr TransformerSpec llama(int layers, int hidden, int heads, int kv, int ffn, int vocabulary, int sequence) {
  TransformerSpec t{layers, hidden, heads, sequence, vocabulary};
  t.kv_heads = kv;
  t.mlp = Mlp::swiglu;
  t.ffn_hidden = ffn;
  t.norm = Norm::rmsnorm;
  t.position = Position::rope;
  t.tied_embeddings = false;
  t.attention = AttentionKernel::flash;
  t.bias = LinearBias::none;
  t.dropout = false;
  t.names = DecoderNames::llama;
  return t;
}

// Qwen2 (HF modeling_qwen2.py): Llama's blocks with biases on the query, key and value projections.
constexpr TransformerSpec qwen2(int layers, int hidden, int heads, int kv, int ffn, int vocabulary, int sequence) {
  TransformerSpec t = llama(layers, hidden, heads, kv, ffn, vocabulary, sequence);
  t.bias = LinearBias::qkv;
  return t;
}

// GPT-NeoX-20B (Black et al. 2022, arXiv:2204.06745, §2.1; HF modeling_gpt_neox.py): LayerNorm, rotary positions
// (on a quarter of each head's channels: their few FLOPs are counted on all), parallel attention and MLP, a GELU MLP
// of 4h, biases everywhere, untied embeddings, no dropout (its config's hidden and attention dropout are 0).
constexpr TransformerSpec neox(int layers, int hidden, int heads, int vocabulary, int sequence) {
  TransformerSpec t{layers, hidden, heads, sequence, vocabulary};
  t.position = Position::rope;
  t.tied_embeddings = false;
  t.attention = AttentionKernel::flash;
  t.dropout = false;
  t.parallel_residual = true;
  t.names = DecoderNames::neox;
  return t;
}

constexpr std::array<LmEntry, 20> kLanguageModels{{
    {"gpt2", {12, 768, 12, 1024, 50257}},
    {"gpt2-medium", {24, 1024, 16, 1024, 50257}},
    {"gpt2-large", {36, 1280, 20, 1024, 50257}},
    {"gpt2-xl", {48, 1600, 25, 1024, 50257}},
    {"gpt3-2.7b", {32, 2560, 32, 2048, 50257}},
    {"gpt3-6.7b", {32, 4096, 32, 2048, 50257}},
    {"gpt3-13b", {40, 5120, 40, 2048, 50257}},
    {"gpt3-175b", {96, 12288, 96, 2048, 50257}},
    // meta-llama/Llama-2-{7b,13b,70b}-hf; 4k context (Llama 2 paper, §2.2)
    {"llama2-7b", llama(32, 4096, 32, 32, 11008, 32000, 4096)},
    {"llama2-13b", llama(40, 5120, 40, 40, 13824, 32000, 4096)},
    {"llama2-70b", llama(80, 8192, 64, 8, 28672, 32000, 4096)},
    // meta-llama/Meta-Llama-3-{8B,70B}, Llama-3.1-{8B,70B,405B}; pre-trained at 8K tokens before the long-context
    // stage (Dubey et al. 2024, "The Llama 3 Herd of Models", arXiv:2407.21783, §3.4.1)
    {"llama3-8b", llama(32, 4096, 32, 8, 14336, 128256, 8192)},
    {"llama3-70b", llama(80, 8192, 64, 8, 28672, 128256, 8192)},
    {"llama3.1-8b", llama(32, 4096, 32, 8, 14336, 128256, 8192)},
    {"llama3.1-70b", llama(80, 8192, 64, 8, 28672, 128256, 8192)},
    {"llama3.1-405b", llama(126, 16384, 128, 8, 53248, 128256, 8192)},
    // mistralai/Mistral-7B-v0.1 (Jiang et al. 2023, arXiv:2310.06825, Table 1): its sliding window of 4096 tokens
    // covers the whole sequence at s = 4096, where attention is exactly causal (longer sequences are not modelled)
    {"mistral-7b", llama(32, 4096, 32, 8, 14336, 32000, 4096)},
    // Qwen/Qwen2.5-{7B,72B}; pre-trained at 4,096 tokens before the long-context stage (Qwen2.5 technical report,
    // arXiv:2412.15115, §3.1)
    {"qwen2.5-7b", qwen2(28, 3584, 28, 4, 18944, 152064, 4096)},
    {"qwen2.5-72b", qwen2(80, 8192, 64, 8, 29568, 152064, 4096)},
    // EleutherAI/gpt-neox-20b: vocabulary padded to 50,432, 2,048-token context
    {"gpt-neox-20b", neox(44, 6144, 64, 50432, 2048)},
}};

// Built by the family builders in families.hpp (dispatched in build_zoo_model).
constexpr std::array<std::string_view, 27> kFamilyModels{"resnet20-cifar",
                                                         "resnet56-cifar",
                                                         "resnet110-cifar",
                                                         "vgg16-cifar",
                                                         "lstm-ptb",
                                                         "alexnet",
                                                         "vgg11",
                                                         "vgg13",
                                                         "vgg16",
                                                         "vgg19",
                                                         "resnet18",
                                                         "resnet34",
                                                         "resnet50",
                                                         "resnet101",
                                                         "resnet152",
                                                         "resnext50_32x4d",
                                                         "resnext101_32x8d",
                                                         "wide_resnet50_2",
                                                         "wide_resnet101_2",
                                                         "googlenet",
                                                         "inception_v3",
                                                         "densenet121",
                                                         "densenet161",
                                                         "densenet169",
                                                         "densenet201",
                                                         "bert-base",
                                                         "bert-large"};

} // namespace

std::vector<std::string> zoo_model_names() {
  std::vector<std::string> names;
  for (const std::string_view name : kFamilyModels) {
    names.emplace_back(name);
  }
  for (const LmEntry& lm : kLanguageModels) {
    names.emplace_back(lm.name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::optional<TransformerSpec> zoo_decoder_spec(std::string_view name) {
  for (const LmEntry& lm : kLanguageModels) {
    if (lm.name == name) {
      return lm.spec;
    }
  }
  return std::nullopt;
}

std::optional<Model> build_zoo_model(std::string_view name) {
  if (const auto spec = zoo_decoder_spec(name)) {
    return build_transformer_lm(*spec, std::string(name));
  }
  if (name == "alexnet") {
    return detail::build_alexnet();
  }
  if (name == "googlenet") {
    return detail::build_googlenet();
  }
  if (name == "inception_v3") {
    return detail::build_inception_v3();
  }
  if (name == "vgg16-cifar") {
    return detail::build_vgg16_cifar();
  }
  if (name == "lstm-ptb") {
    return detail::build_lstm_ptb();
  }
  if (auto model = detail::build_resnet_cifar(name)) {
    return model;
  }
  if (auto model = detail::build_vgg(name)) {
    return model;
  }
  if (auto model = detail::build_resnet(name)) {
    return model;
  }
  if (auto model = detail::build_densenet(name)) {
    return model;
  }
  return detail::build_bert(name);
}

} // namespace ddlsim::dag
