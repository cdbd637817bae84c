// The Llama-family decoders of the zoo (issue #33, items 1-3): parameter totals against the published counts, FLOPs per
// token against the architecture's count, fused attention's layers and activation memory.
#include "dag/memory.hpp"
#include "dag/zoo/zoo.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

using namespace ddlsim;
using Catch::Matchers::WithinRel;
using ddlsim::dag::Model;
using ddlsim::dag::TransformerSpec;

namespace {

Model decoder(const std::string& name) {
  auto model = dag::build_zoo_model(name);
  REQUIRE(model);
  return std::move(*model);
}

const dag::Layer& decoder_layer(const Model& m, const std::string& name) {
  for (const auto& l : m.layers)
    if (l.name == name)
      return l;
  FAIL("no layer " << name);
  return m.layers.front();
}

// Training FLOPs per token of the model's layers: forward + backward over the sequence.
double decoder_flops_per_token(const Model& m) {
  double total = 0;
  for (const auto& l : m.layers)
    total += l.fwd_flops + l.bwd_flops;
  return total / m.transformer->sequence;
}

// Weights that multiply activations per token: every block's matmuls and the LM head (the token embedding is a
// lookup; tied or not, the head's h·V multiply).
double decoder_matmul_params(const TransformerSpec& t) {
  return t.layers * t.block_matmul_params() + static_cast<double>(t.hidden) * t.vocabulary;
}

} // namespace

TEST_CASE("dag::zoo decoders: parameter totals equal the published counts", "[zoo][decoder]") {
  // Published totals: the three (Llama 2 7B, Llama 3 8B and 70B, as Hugging Face's safetensors metadata
  // counts them), the others as each model's Hugging Face page / GGUF general.parameter_count give them (Llama 2 13B
  // and 70B, Llama 3.1 405B, Mistral 7B v0.1, Qwen2.5 7B and 72B), and GPT-NeoX-20B's model card (n_parameters).
  const auto [name, published] = GENERATE(table<std::string, std::int64_t>({
      {"llama2-7b", 6'738'415'616},
      {"llama2-13b", 13'015'864'320},
      {"llama2-70b", 68'976'648'192},
      {"llama3-8b", 8'030'261'248},
      {"llama3-70b", 70'553'706'496},
      {"llama3.1-8b", 8'030'261'248},
      {"llama3.1-70b", 70'553'706'496},
      {"llama3.1-405b", 405'853'388'800},
      {"mistral-7b", 7'241'732'096},
      {"qwen2.5-7b", 7'615'616'512},
      {"qwen2.5-72b", 72'706'203'648},
      {"gpt-neox-20b", 20'554'567'680},
  }));
  CAPTURE(name);
  CHECK(decoder(name).param_count() == published);
}

TEST_CASE("dag::zoo decoders: training FLOPs per token are 6N + 12·L·h·s with eager attention, and fused attention's "
          "causal count with flash",
          "[zoo][decoder]") {
  const std::string name =
      GENERATE("llama2-7b", "llama2-70b", "llama3-8b", "llama3.1-405b", "mistral-7b", "qwen2.5-7b", "gpt-neox-20b");
  CAPTURE(name);
  const auto spec = *dag::zoo_decoder_spec(name);
  const double n = decoder_matmul_params(spec), l = spec.layers, h = spec.hidden, s = spec.sequence;
  // Eager attention: QK^T and AV 4·s·h per token forward, 3x that for training: 12·L·h·s (PaLM's count, Chowdhery et
  // al. 2022, Appendix B). The rest (norms, activations, softmax, biases, the loss) stays under 1 %.
  TransformerSpec eager = spec;
  eager.attention = dag::AttentionKernel::eager;
  CHECK_THAT(decoder_flops_per_token(dag::build_transformer_lm(eager, name)), WithinRel(6 * n + 12 * l * h * s, 0.01));
  // Flash: the causal kernel does half the matmuls forward (2·s·h per token) and 2.5x that backward: 7·L·h·s.
  CHECK_THAT(decoder_flops_per_token(decoder(name)), WithinRel(6 * n + 7 * l * h * s, 0.01));
  // GPT-3's eager blocks keep the Megatron count within 1 % too (72·s·L·h²(1 + s/6h + V/12Lh) per sequence).
  const auto gpt = decoder("gpt3-175b");
  const double gl = 96, gh = 12288, gs = 2048, gv = 50257;
  CHECK_THAT(decoder_flops_per_token(gpt),
             WithinRel(72 * gl * gh * gh * (1 + gs / (6 * gh) + gv / (12 * gl * gh)), 0.01));
}

TEST_CASE("dag::zoo decoders: a Llama block's layers (HF names, GQA projections, one fused attention kernel)",
          "[zoo][decoder]") {
  const Model m = decoder("llama3-8b");
  const auto& spec = *m.transformer;
  CHECK(spec.query_groups() == 8);
  CHECK(m.layers.front().name == "model.embed_tokens");
  CHECK(m.layers.back().name == "lm_head");
  CHECK(m.layers.back().params.front().shape == std::vector<std::int64_t>{128256, 4096}); // untied
  const auto& norm = decoder_layer(m, "model.layers.0.input_layernorm");
  CHECK(norm.kind == "rmsnorm");
  CHECK(norm.params.size() == 1); // a weight, no bias
  const auto& k = decoder_layer(m, "model.layers.0.self_attn.k_proj");
  CHECK(k.params.front().shape == std::vector<std::int64_t>{1024, 4096}); // 8 heads x 128
  CHECK(k.tensor_shards == 8);
  CHECK(decoder_layer(m, "model.layers.0.self_attn.q_proj").tensor_shards == 0);
  const auto& core = decoder_layer(m, "model.layers.0.self_attn.sdpa");
  CHECK(core.kind == "flash_attention");
  CHECK(core.params.empty());
  const double s = 8192, h = 4096;
  CHECK(core.fwd_flops == 4 * s * s * h / 2); // causal: half of QK^T and PV
  CHECK(core.bwd_flops == 2.5 * core.fwd_flops);
  CHECK(core.activation_bytes == 4 * s * h); // the context only: no scores
  // SwiGLU: down_proj reads the product of gate and up, folded into up_proj (which reads gate).
  const auto& up = decoder_layer(m, "model.layers.0.mlp.up_proj");
  CHECK(up.inputs.size() == 2);
  for (const auto& l : m.layers) // every layer of a block is in one of its 11: norm, q, k, v, sdpa, o, norm, 3 MLP
    CHECK((l.block >= 0 || l.name.rfind("model.layers.", 0) != 0));
  // Eager attention on request: scores and softmax materialised, as the GPT entries do.
  TransformerSpec eager = spec;
  eager.attention = dag::AttentionKernel::eager;
  const Model e = dag::build_transformer_lm(eager, "e");
  CHECK(decoder_layer(e, "model.layers.0.self_attn.softmax").activation_bytes == 4 * 32 * s * s);
}

TEST_CASE("dag::zoo decoders: Qwen2 has query, key and value biases only; GPT-NeoX runs attention and MLP in "
          "parallel",
          "[zoo][decoder]") {
  const Model q = decoder("qwen2.5-7b");
  CHECK(decoder_layer(q, "model.layers.0.self_attn.k_proj").params.size() == 2);
  CHECK(decoder_layer(q, "model.layers.0.self_attn.o_proj").params.size() == 1);
  CHECK(decoder_layer(q, "model.layers.0.mlp.down_proj").params.size() == 1);
  const Model n = decoder("gpt-neox-20b");
  const auto index = [&](const std::string& name) {
    for (std::size_t i = 0; i < n.layers.size(); ++i)
      if (n.layers[i].name == name)
        return static_cast<int>(i);
    return -1;
  };
  // post_attention_layernorm reads the block's input, not the attention's output.
  const auto& ln_2 = n.layers[static_cast<std::size_t>(index("gpt_neox.layers.1.post_attention_layernorm"))];
  REQUIRE(ln_2.inputs.size() == 1);
  CHECK(ln_2.inputs.front() == index("gpt_neox.layers.0.mlp.dense_4h_to_h"));
  // the block's output adds the attention's output and the input to the MLP's
  const auto& out = n.layers[static_cast<std::size_t>(index("gpt_neox.layers.1.mlp.dense_4h_to_h"))];
  CHECK(std::find(out.inputs.begin(), out.inputs.end(), index("gpt_neox.layers.1.attention.dense")) !=
        out.inputs.end());
  CHECK(std::find(out.inputs.begin(), out.inputs.end(), index("gpt_neox.layers.0.mlp.dense_4h_to_h")) !=
        out.inputs.end());
}

TEST_CASE("dag::zoo decoders: fused attention holds Korthikanti's selective-recomputation activations per block",
          "[zoo][decoder][memory]") {
  using dag::Recompute;
  const int t = GENERATE(1, 2, 8);
  const bool sp = GENERATE(false, true);
  CAPTURE(t, sp);
  // GPT-3 175B's shape, 16-bit: flash without recomputation holds sbh(10 + 24/t) (34·sbh/t with sequence
  // parallelism), what eager attention holds under selective recomputation (Korthikanti et al., Table 2).
  TransformerSpec gpt{96, 12288, 96, 2048, 50257};
  gpt.attention = dag::AttentionKernel::flash;
  const double sbh = 2048.0 * 1 * 12288;
  const double flash = dag::transformer_layer_activation_bytes(gpt, {1, t, sp, Recompute::none, dag::DType::bf16});
  CHECK_THAT(flash, WithinRel(sp ? 34 * sbh / t : sbh * (10 + 24.0 / t), 1e-12));
  TransformerSpec eager = gpt;
  eager.attention = dag::AttentionKernel::eager;
  CHECK(flash == dag::transformer_layer_activation_bytes(eager, {1, t, sp, Recompute::selective, dag::DType::bf16}));
  CHECK(flash < dag::transformer_layer_activation_bytes(eager, {1, t, sp, Recompute::none, dag::DType::bf16}));
  // Llama 3 8B (no dropout, 8 of 32 heads for K and V, SwiGLU of 14336): per element of s·b·h, 2·2 norm inputs
  // + 2·2 QKV and MLP inputs replicated; Q 2, K and V 2·2/4, the projection's input 2, SwiGLU 3·2·14336/4096 split.
  const auto llama = *dag::zoo_decoder_spec("llama3-8b");
  const double lsbh = 8192.0 * 4096, split = 2 + 1 + 2 + 3 * 2 * 14336.0 / 4096;
  CHECK_THAT(dag::transformer_layer_activation_bytes(llama, {1, t, sp, Recompute::none, dag::DType::bf16}),
             WithinRel(lsbh * ((sp ? 8.0 / t : 8.0) + split / t), 1e-12));
}
