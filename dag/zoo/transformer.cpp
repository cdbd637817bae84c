// Transformer language models: the parametric decoder (GPT-2 by default: HF transformers modeling_gpt2.py,
// GPT2LMHeadModel: Conv1D weights (in, out), fused c_attn, tied lm_head; or a Llama-family decoder with grouped-query
// attention, SwiGLU, RMSNorm, rotary positions, untied embeddings and fused attention: HF modeling_llama.py,
// modeling_qwen2.py, modeling_gpt_neox.py) and BERT (modeling_bert.py, BertForPreTraining = BertModel + MLM and
// next-sentence heads; eager attention).
#include "dag/zoo/builder.hpp"
#include "dag/zoo/families.hpp"
#include "dag/zoo/zoo.hpp"

#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace ddlsim::dag {

namespace {

constexpr double kTokenIdBytes = 8; // int64 token ids

void check_positive(int value, const char* what) {
  if (value <= 0) {
    throw std::invalid_argument(std::string("transformer LM: ") + what + " must be positive, got " +
                                std::to_string(value));
  }
}

/// Tags layers [starts[k], starts[k + 1]) as block k (Layer::block); the last entry ends the last block.
void tag_blocks(Model& model, const std::vector<int>& starts) {
  for (std::size_t k = 0; k + 1 < starts.size(); ++k) {
    for (int i = starts[k]; i < starts[k + 1]; ++i) {
      model.layers[static_cast<std::size_t>(i)].block = static_cast<int>(k);
    }
  }
}

} // namespace

namespace {

using detail::kNoLayer;
using detail::Src;

// Module names of a decoder's layers, by the implementation whose names it takes (DecoderNames). An empty `qkv`
// means separate query, key and value projections.
struct NameTable {
  std::string_view embed, positions, block, norm_1, qkv, q, k, v, attention, out, norm_2, fc_1, gate, up, fc_2,
      final_norm, head;
  detail::WeightLayout layout;
};

// HF transformers: modeling_gpt2.py (GPT2LMHeadModel), modeling_llama.py (LlamaForCausalLM; Mistral's and Qwen2's
// modules are named alike), modeling_gpt_neox.py (GPTNeoXForCausalLM). A GELU MLP under Llama's or NeoX's names
// takes up_proj/down_proj or dense_h_to_4h/dense_4h_to_h; a SwiGLU one gate_proj/up_proj/down_proj.
constexpr NameTable kGpt2Names{"transformer.wte",
                               "transformer.wpe",
                               "transformer.h.",
                               "ln_1",
                               "attn.c_attn",
                               "",
                               "",
                               "",
                               "attn",
                               "attn.c_proj",
                               "ln_2",
                               "mlp.c_fc",
                               "mlp.gate_proj",
                               "mlp.c_fc",
                               "mlp.c_proj",
                               "transformer.ln_f",
                               "lm_head",
                               detail::WeightLayout::conv1d};
constexpr NameTable kLlamaNames{"model.embed_tokens",
                                "model.embed_positions",
                                "model.layers.",
                                "input_layernorm",
                                "",
                                "self_attn.q_proj",
                                "self_attn.k_proj",
                                "self_attn.v_proj",
                                "self_attn",
                                "self_attn.o_proj",
                                "post_attention_layernorm",
                                "mlp.up_proj",
                                "mlp.gate_proj",
                                "mlp.up_proj",
                                "mlp.down_proj",
                                "model.norm",
                                "lm_head",
                                detail::WeightLayout::linear};
constexpr NameTable kNeoxNames{"gpt_neox.embed_in",
                               "gpt_neox.embed_positions",
                               "gpt_neox.layers.",
                               "input_layernorm",
                               "attention.query_key_value",
                               "",
                               "",
                               "",
                               "attention",
                               "attention.dense",
                               "post_attention_layernorm",
                               "mlp.dense_h_to_4h",
                               "mlp.gate_proj",
                               "mlp.up_proj",
                               "mlp.dense_4h_to_h",
                               "gpt_neox.final_layer_norm",
                               "embed_out",
                               detail::WeightLayout::linear};

const NameTable& names_of(DecoderNames names) {
  switch (names) {
  case DecoderNames::llama:
    return kLlamaNames;
  case DecoderNames::neox:
    return kNeoxNames;
  case DecoderNames::gpt2:
    break;
  }
  return kGpt2Names;
}

void check_shape(const TransformerSpec& spec) {
  check_positive(spec.layers, "layers");
  check_positive(spec.hidden, "hidden");
  check_positive(spec.heads, "heads");
  check_positive(spec.sequence, "sequence");
  check_positive(spec.vocabulary, "vocabulary");
  check_positive(spec.query_groups(), "kv_heads");
  check_positive(spec.ffn(), "ffn_hidden");
  if (spec.hidden % spec.heads != 0) {
    throw std::invalid_argument("transformer LM: hidden (" + std::to_string(spec.hidden) +
                                ") must be a multiple of heads (" + std::to_string(spec.heads) + ")");
  }
  if (spec.heads % spec.query_groups() != 0) {
    throw std::invalid_argument("transformer LM: kv_heads (" + std::to_string(spec.query_groups()) +
                                ") must divide heads (" + std::to_string(spec.heads) + ")");
  }
}

// Builds one decoder's layers block by block; the options of TransformerSpec pick each part.
class DecoderBuilder {
public:
  DecoderBuilder(const TransformerSpec& spec, std::string name)
      : spec_(spec), names_(names_of(spec.names)), s_(spec.sequence), h_(spec.hidden),
        kv_(std::int64_t{spec.query_groups()} * spec.head_dim()),
        b_(std::move(name), kTokenIdBytes * static_cast<double>(spec.sequence)) {}

  Model build() && {
    Src residual = embeddings();
    std::vector<int> block_starts;
    for (int layer = 0; layer < spec_.layers; ++layer) {
      block_starts.push_back(b_.last() + 1);
      residual = block(std::string(names_.block) + std::to_string(layer) + ".", residual);
    }
    block_starts.push_back(b_.last() + 1);
    head(residual);
    Model model = std::move(b_).finish();
    tag_blocks(model, block_starts);
    model.transformer = spec_;
    return model;
  }

private:
  [[nodiscard]] detail::LinearSpec linear_spec(bool qkv) const {
    const bool bias = spec_.bias == LinearBias::all || (qkv && spec_.bias == LinearBias::qkv);
    return {bias, names_.layout};
  }

  Src norm(std::string_view name, Src in) {
    return spec_.norm == Norm::rmsnorm ? b_.rmsnorm(std::string(name), in, s_, h_)
                                       : b_.layernorm(std::string(name), in, s_, h_);
  }

  Src embeddings() {
    const Src tokens = b_.embedding(std::string(names_.embed), s_, spec_.vocabulary, h_);
    Src out = tokens;
    if (spec_.position == Position::learned) { // GPT-2: n_positions = sequence
      out = b_.embedding(std::string(names_.positions), s_, s_, h_);
      b_.residual_add(s_ * h_, tokens); // inputs_embeds + position_embeds
    }
    if (spec_.dropout) {
      b_.dropout(s_ * h_);
    }
    return out;
  }

  // The attention half: its norm, projections, core and output projection (no residual add).
  Src attention(const std::string& p, Src residual) {
    const Src ln = norm(p + std::string(names_.norm_1), residual);
    Src q = kNoLayer, k = kNoLayer, v = kNoLayer;
    const bool rope = spec_.position == Position::rope; // rotary embeddings on the queries and keys
    if (!names_.qkv.empty()) {
      q = k = v = b_.linear(p + std::string(names_.qkv), ln, s_, h_, h_ + 2 * kv_, linear_spec(true));
      if (rope) {
        b_.rotary(s_ * (h_ + kv_));
      }
    } else {
      q = b_.linear(p + std::string(names_.q), ln, s_, h_, h_, linear_spec(true));
      if (rope) {
        b_.rotary(s_ * h_);
      }
      k = b_.linear(p + std::string(names_.k), ln, s_, h_, kv_, linear_spec(true));
      if (rope) {
        b_.rotary(s_ * kv_);
      }
      v = b_.linear(p + std::string(names_.v), ln, s_, h_, kv_, linear_spec(true));
      for (const Src kv : {k, v}) {
        b_.layer(kv).tensor_shards = spec_.query_groups();
      }
    }
    const std::string core = p + std::string(names_.attention);
    const Src context = spec_.attention == AttentionKernel::flash
                            ? b_.flash_attention(core + ".sdpa", q, k, v, s_, h_, true)
                            : b_.attention(core, q, k, v, s_, h_, spec_.heads, spec_.dropout);
    const Src out = b_.linear(p + std::string(names_.out), context, s_, h_, h_, linear_spec(false));
    if (spec_.dropout) {
      b_.dropout(s_ * h_); // resid_dropout
    }
    return out;
  }

  // The MLP half: its norm and layers (no residual add).
  Src mlp(const std::string& p, Src in) {
    const Src ln = norm(p + std::string(names_.norm_2), in);
    const std::int64_t f = spec_.ffn();
    Src inner = kNoLayer;
    if (spec_.mlp == Mlp::swiglu) {
      const Src gate = b_.linear(p + std::string(names_.gate), ln, s_, h_, f, linear_spec(false));
      inner = b_.linear(p + std::string(names_.up), ln, s_, h_, f, linear_spec(false));
      b_.swiglu(s_ * f, gate);
    } else {
      inner = b_.linear(p + std::string(names_.fc_1), ln, s_, h_, f, linear_spec(false));
      b_.gelu(s_ * f); // gelu_new
    }
    const Src out = b_.linear(p + std::string(names_.fc_2), inner, s_, f, h_, linear_spec(false));
    if (spec_.dropout) {
      b_.dropout(s_ * h_);
    }
    return out;
  }

  Src block(const std::string& p, Src residual) {
    const Src attn_out = attention(p, residual);
    if (spec_.parallel_residual) { // x + attn(ln_1(x)) + mlp(ln_2(x))
      const Src mlp_out = mlp(p, residual);
      b_.residual_add(s_ * h_, attn_out);
      b_.residual_add(s_ * h_, residual);
      return mlp_out;
    }
    b_.residual_add(s_ * h_, residual); // residual + attn_output
    const Src mlp_out = mlp(p, attn_out);
    b_.residual_add(s_ * h_, attn_out);
    return mlp_out;
  }

  void head(Src residual) {
    const Src ln_f = norm(names_.final_norm, residual);
    const detail::LinearSpec spec{false, spec_.tied_embeddings ? detail::WeightLayout::tied : names_.layout};
    b_.linear(std::string(names_.head), ln_f, s_, h_, spec_.vocabulary, spec); // tied: to the token embedding
    b_.cross_entropy(s_ * spec_.vocabulary);
  }

  TransformerSpec spec_;
  const NameTable& names_;
  std::int64_t s_, h_, kv_;
  detail::ModelBuilder b_;
};

} // namespace

// GPT-2 (the defaults) has per block ln_1, attn.c_attn, attn.scores, attn.softmax, attn.context, attn.c_proj
// (+ dropout + residual), ln_2, mlp.c_fc (+ GELU), mlp.c_proj (+ dropout + residual); its position table has
// `sequence` rows (GPT-2: n_positions = n_ctx = 1024). The loss is cross-entropy over all `sequence` logits (HF shifts
// by one token; the difference is ignored). Parameters: (V + S)·h + L·(12h² + 13h) + 2h. A Llama-family decoder:
// V·h (+ V·h untied) + L·(2h² + 2h·g·d + 3h·f + 2h) + h with RMSNorm, no biases, g query groups of d = h/a channels,
// SwiGLU width f (Touvron et al. 2023, arXiv:2307.09288; HF modeling_llama.py).
Model build_transformer_lm(const TransformerSpec& spec, std::string name) {
  check_shape(spec);
  return DecoderBuilder(spec, std::move(name)).build();
}

namespace detail {

namespace {

struct BertConfig {
  int layers = 12;
  int hidden = 768;
  int heads = 12;
  int intermediate = 3072;
};

constexpr int kBertVocabulary = 30522; // bert-base-uncased / bert-large-uncased
constexpr std::int64_t kBertPositions = 512;
constexpr std::int64_t kBertTokenTypes = 2;
constexpr int kBertSequence = 128; // phase-1 pre-training sequence length

} // namespace

// Inputs per sample: input_ids, token_type_ids and attention_mask, int64 each (3·seq·8 bytes).
// The MLM head (BertLMPredictionHead: transform + decoder tied to the word embeddings) is one layer named
// `cls.predictions` so that its own `bias` comes first, as in named_parameters(). Logits for all tokens.
std::optional<Model> build_bert(std::string_view name) {
  BertConfig cfg;
  if (name == "bert-base") {
    cfg = {12, 768, 12, 3072};
  } else if (name == "bert-large") {
    cfg = {24, 1024, 16, 4096};
  } else {
    return std::nullopt;
  }
  const std::int64_t s = kBertSequence;
  const std::int64_t h = cfg.hidden;
  ModelBuilder b(std::string(name), 3 * kTokenIdBytes * static_cast<double>(s));
  b.begin_group("bert.embeddings", "embedding", kNoLayer);
  b.embedding("bert.embeddings.word_embeddings", s, kBertVocabulary, h);
  b.embedding("bert.embeddings.position_embeddings", s, kBertPositions, h);
  b.embedding("bert.embeddings.token_type_embeddings", s, kBertTokenTypes, h);
  b.residual_add(s * h, kNoLayer); // inputs_embeds + token_type_embeddings
  b.residual_add(s * h, kNoLayer); // += position_embeddings
  const Src embeddings = b.end_group();
  Src x = b.layernorm("bert.embeddings.LayerNorm", embeddings, s, h);
  b.dropout(s * h);
  std::vector<int> block_starts;
  for (std::int64_t layer = 0; layer < cfg.layers; ++layer) {
    block_starts.push_back(b.last() + 1);
    const std::string p = "bert.encoder.layer." + std::to_string(layer);
    const Src q = b.linear(p + ".attention.self.query", x, s, h, h);
    const Src k = b.linear(p + ".attention.self.key", x, s, h, h);
    const Src v = b.linear(p + ".attention.self.value", x, s, h, h);
    const Src context = b.attention(p + ".attention.self", q, k, v, s, h, cfg.heads);
    b.linear(p + ".attention.output.dense", context, s, h, h);
    b.dropout(s * h);
    b.residual_add(s * h, x);
    const Src attention = b.layernorm(p + ".attention.output.LayerNorm", b.last(), s, h);
    const Src intermediate = b.linear(p + ".intermediate.dense", attention, s, h, cfg.intermediate);
    b.gelu(s * cfg.intermediate);
    b.linear(p + ".output.dense", intermediate, s, cfg.intermediate, h);
    b.dropout(s * h);
    b.residual_add(s * h, attention);
    x = b.layernorm(p + ".output.LayerNorm", b.last(), s, h);
  }
  block_starts.push_back(b.last() + 1);
  const Src pooled = b.linear("bert.pooler.dense", x, 1, h, h); // first token only
  b.tanh(h);
  b.begin_group("cls.predictions", "linear", x);
  b.parameter("cls.predictions.bias", {kBertVocabulary}); // also the decoder's bias
  const Src transform = b.linear("cls.predictions.transform.dense", x, s, h, h);
  b.gelu(s * h);
  const Src normed = b.layernorm("cls.predictions.transform.LayerNorm", transform, s, h);
  b.linear("cls.predictions.decoder", normed, s, h, kBertVocabulary, {true, WeightLayout::tied});
  b.cross_entropy(s * kBertVocabulary); // masked-LM loss (ignore_index on unmasked tokens)
  b.end_group();
  b.linear("cls.seq_relationship", pooled, 1, h, 2);
  b.cross_entropy(2); // next-sentence loss
  Model model = std::move(b).finish();
  tag_blocks(model, block_starts);
  const TransformerSpec spec{cfg.layers, cfg.hidden, cfg.heads, kBertSequence, kBertVocabulary};
  model.transformer = spec;
  return model;
}

} // namespace detail

} // namespace ddlsim::dag
