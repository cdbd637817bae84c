// Transformer language models: the parametric GPT-2-style LM (HF transformers modeling_gpt2.py,
// GPT2LMHeadModel: Conv1D weights (in, out), fused c_attn, tied lm_head) and BERT (modeling_bert.py,
// BertForPreTraining = BertModel + MLM and next-sentence heads). Eager attention (scores materialised).
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

// Layers per block: ln_1, attn.c_attn, attn.scores, attn.softmax, attn.context, attn.c_proj (+ dropout +
// residual), ln_2, mlp.c_fc (+ GELU), mlp.c_proj (+ dropout + residual). Position table size = `sequence` (GPT-2:
// n_positions = n_ctx = 1024). The loss is cross-entropy over all `sequence` logits (HF shifts by one token; the
// difference is ignored). Parameters: (V + S)·h + L·(12h² + 13h) + 2h.
Model build_transformer_lm(const TransformerSpec& spec, std::string name) {
  check_positive(spec.layers, "layers");
  check_positive(spec.hidden, "hidden");
  check_positive(spec.heads, "heads");
  check_positive(spec.sequence, "sequence");
  check_positive(spec.vocabulary, "vocabulary");
  if (spec.hidden % spec.heads != 0) {
    throw std::invalid_argument("transformer LM: hidden (" + std::to_string(spec.hidden) +
                                ") must be a multiple of heads (" + std::to_string(spec.heads) + ")");
  }
  const std::int64_t s = spec.sequence;
  const std::int64_t h = spec.hidden;
  const std::int64_t v = spec.vocabulary;
  using detail::LinearSpec;
  using detail::Src;
  using detail::WeightLayout;
  constexpr LinearSpec conv1d{true, WeightLayout::conv1d};

  detail::ModelBuilder b(std::move(name), kTokenIdBytes * static_cast<double>(s));
  const Src wte = b.embedding("transformer.wte", s, v, h);
  Src residual = b.embedding("transformer.wpe", s, s, h);
  b.residual_add(s * h, wte); // inputs_embeds + position_embeds
  b.dropout(s * h);           // drop
  std::vector<int> block_starts;
  for (int layer = 0; layer < spec.layers; ++layer) {
    block_starts.push_back(b.last() + 1);
    const std::string p = "transformer.h." + std::to_string(layer);
    const Src ln_1 = b.layernorm(p + ".ln_1", residual, s, h);
    const Src qkv = b.linear(p + ".attn.c_attn", ln_1, s, h, 3 * h, conv1d);
    const Src context = b.attention(p + ".attn", qkv, qkv, qkv, s, h, spec.heads);
    const Src attn_out = b.linear(p + ".attn.c_proj", context, s, h, h, conv1d);
    b.dropout(s * h);                // resid_dropout
    b.residual_add(s * h, residual); // residual + attn_output
    residual = attn_out;
    const Src ln_2 = b.layernorm(p + ".ln_2", residual, s, h);
    const Src fc = b.linear(p + ".mlp.c_fc", ln_2, s, h, 4 * h, conv1d);
    b.gelu(s * 4 * h); // gelu_new
    const Src mlp_out = b.linear(p + ".mlp.c_proj", fc, s, 4 * h, h, conv1d);
    b.dropout(s * h);
    b.residual_add(s * h, residual);
    residual = mlp_out;
  }
  block_starts.push_back(b.last() + 1);
  const Src ln_f = b.layernorm("transformer.ln_f", residual, s, h);
  b.linear("lm_head", ln_f, s, h, v, {false, WeightLayout::tied}); // tied to transformer.wte.weight
  b.cross_entropy(s * v);
  Model model = std::move(b).finish();
  tag_blocks(model, block_starts);
  model.transformer = spec;
  return model;
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
