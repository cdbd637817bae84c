// Memory model of a pipeline stage (dag/memory.hpp): Megatron-Core's bytes per parameter, Korthikanti et al.'s
// activations per transformer layer (arXiv:2205.05198, Table 2) and their Figure 1 figures for GPT models of 22B to
// 1T parameters, and the per-stage breakdown on zoo and hand-built models.
#include "dag/memory.hpp"
#include "dag/zoo/zoo.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

using namespace ddlsim;
using Catch::Matchers::Contains;
using Catch::Matchers::WithinRel;
using dag::ActivationConfig;
using dag::DType;
using dag::Optimizer;
using dag::Recompute;

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kRel = 1e-9;

// A model of `layers` transformer blocks, one Model layer each, with 12h² parameters per block and no other layers:
// the parameter count (12·L·h²) and the activations Korthikanti's Figure 1 assumes.
dag::Model blocks_only(const dag::TransformerSpec& spec) {
  dag::Model model;
  model.name = "blocks";
  const std::int64_t block_params = 12 * static_cast<std::int64_t>(spec.hidden) * spec.hidden;
  for (int i = 0; i < spec.layers; ++i) {
    model.layers.push_back({"block." + std::to_string(i), "block", {{"w", {block_params}, block_params}}, 0, 0, 0, {}});
    model.layers.back().block = i;
  }
  model.transformer = spec;
  return model;
}

// Where the zoo's blocks lie (Layer::block).
int first_block_layer(const dag::Model& m) {
  for (std::size_t i = 0; i < m.layers.size(); ++i)
    if (m.layers[i].block == 0)
      return static_cast<int>(i);
  return -1;
}
long layers_in_block(const dag::Model& m, int k) {
  return std::count_if(m.layers.begin(), m.layers.end(), [k](const dag::Layer& l) { return l.block == k; });
}

// The first stage's chunk-micro-batches in flight at its peak under (interleaved) 1F1B, per chunk: p without
// interleaving; with v chunks the warm-up's 2(p-1) + (v-1)p forwards and one more, virtual micro-batch k sitting in
// chunk (k mod pv) div p (Megatron's schedules.py).
std::vector<int> first_stage_in_flight(int p, int v) {
  std::vector<int> counts(static_cast<std::size_t>(v), 0);
  const int total = v == 1 ? p : 2 * (p - 1) + (v - 1) * p + 1;
  for (int k = 0; k < total; ++k) {
    ++counts[static_cast<std::size_t>(k % (p * v) / p)];
  }
  return counts;
}

} // namespace

TEST_CASE("dag::bytes_per_parameter follows Megatron-Core's distributed-optimizer table", "[dag][memory]") {
  // docs/source/api-guide/dist_optimizer.md: non-distributed fp16 20, bf16 18, fp32 16 for Adam; distributed
  // 4 + 16/d, 6 + 12/d, 8 + 8/d. SGD with momentum keeps one fp32 buffer (4 bytes less than Adam), SGD none (8 less).
  const auto [optimizer, dtype, replicated, sharded] = GENERATE(table<Optimizer, DType, double, double>({
      {Optimizer::adam, DType::fp16, 4, 16},
      {Optimizer::adam, DType::bf16, 6, 12},
      {Optimizer::adam, DType::fp32, 8, 8},
      {Optimizer::sgd_momentum, DType::fp16, 4, 12},
      {Optimizer::sgd_momentum, DType::bf16, 6, 8},
      {Optimizer::sgd_momentum, DType::fp32, 8, 4},
      {Optimizer::sgd, DType::fp16, 4, 8},
      {Optimizer::sgd, DType::bf16, 6, 4},
      {Optimizer::sgd, DType::fp32, 8, 0},
  }));
  const int d = GENERATE(1, 8, 64);
  CAPTURE(static_cast<int>(optimizer), static_cast<int>(dtype), d);
  CHECK(dag::bytes_per_parameter(optimizer, dtype, d) == replicated + sharded / d);
}

TEST_CASE("dag::bytes_per_parameter's non-distributed column is Megatron-Core's", "[dag][memory]") {
  CHECK(dag::bytes_per_parameter(Optimizer::adam, DType::fp16) == 20);
  CHECK(dag::bytes_per_parameter(Optimizer::adam, DType::bf16) == 18);
  CHECK(dag::bytes_per_parameter(Optimizer::adam, DType::fp32) == 16);
  CHECK(dag::bytes_per_parameter(Optimizer::sgd, DType::fp32) == 8);
  REQUIRE_THROWS_WITH(dag::bytes_per_parameter(Optimizer::adam, DType::bf16, 0),
                      "memory model: distributed-optimizer shards must be positive, got 0");
}

TEST_CASE("dag::memory reproduces Korthikanti et al.'s Figure 1 for 22B to 1T GPT models", "[dag][memory]") {
  // Korthikanti et al. 2022, Figure 1 / Table 3: s = 2048, t = 8, 18 bytes per parameter (bf16 with Adam),
  // 12·L·h²/(t·p) parameters per GPU. The first 1F1B stage holds p micro-batches of L/p layers; interleaving with v
  // chunks multiplies that by 1 + (p-1)/(p·v). Activations: tensor parallelism only sbh(10 + 24/t + 5as/(ht)) per
  // layer; sequence parallelism with selective recomputation 34·sbh/t.
  const auto [L, h, a, p, v, b, model_state_gib, tensor_gib, selective_gib] =
      GENERATE(table<int, int, int, int, int, int, double, double, double>({
          {48, 6144, 64, 1, 1, 4, 45.5625, 59.25, 9.5625},                   // 22B
          {96, 12288, 96, 8, 3, 1, 45.5625, 66.84375, 12.3515625},           // 175B
          {105, 20480, 128, 35, 3, 1, 31.640625, 114.0234375, 23.076171875}, // 530B
          {128, 25600, 160, 64, 1, 1, 32.958984375, 131.25, 26.5625},        // 1T
      }));
  constexpr int t = 8;
  const dag::TransformerSpec spec{L, h, a, 2048, 50257};
  CAPTURE(L, h, a, t, p, v, b);
  const ActivationConfig tensor{b, t, false, Recompute::none, DType::bf16};
  const ActivationConfig selective{b, t, true, Recompute::selective, DType::bf16};

  SECTION("closed forms: layers L/p, p micro-batches, the interleaved factor") {
    const double params = 12.0 * L * h * h / (t * p);
    CHECK_THAT(params * dag::bytes_per_parameter(Optimizer::adam, DType::bf16) / kGiB,
               WithinRel(model_state_gib, kRel));
    const double in_flight = p * dag::interleaved_activation_factor(p, v);
    const double layers = static_cast<double>(L) / p;
    CHECK_THAT(dag::transformer_stage_activation_bytes(spec, layers, in_flight, tensor) / kGiB,
               WithinRel(tensor_gib, kRel));
    CHECK_THAT(dag::transformer_stage_activation_bytes(spec, layers, in_flight, selective) / kGiB,
               WithinRel(selective_gib, kRel));
  }

  SECTION("stage_memory of the first stage, chunk by chunk as the interleaved schedule holds them") {
    // Stage 0 holds virtual stages 0, p, 2p, ... of L/(p·v) layers each: for p = 8, v = 3, 31 = 15 + 8 + 8
    // chunk-micro-batches; for p = 35, v = 3, 139 = 69 + 35 + 35; without interleaving p in one chunk.
    const int chunk_layers = L / (p * v);
    const std::vector<int> in_flight = first_stage_in_flight(p, v);
    dag::StageMemoryInput input;
    for (int c = 0; c < v; ++c) {
      const int first = c * p * chunk_layers;
      input.chunks.push_back({first, first + chunk_layers - 1, in_flight[static_cast<std::size_t>(c)]});
    }
    input.optimizer = Optimizer::adam;
    const dag::Model model = blocks_only(spec);
    input.activations = tensor;
    const dag::StageMemory with_tensor = dag::stage_memory(model, input);
    input.activations = selective;
    const dag::StageMemory with_selective = dag::stage_memory(model, input);
    CHECK_THAT(with_tensor.parameters, WithinRel(12.0 * L * h * h / (t * p), kRel));
    CHECK_THAT(with_tensor.model_state_bytes / kGiB, WithinRel(model_state_gib, kRel));
    CHECK(with_tensor.weight_version_bytes == 0);
    CHECK_THAT(with_tensor.activation_bytes / kGiB, WithinRel(tensor_gib, kRel));
    CHECK_THAT(with_tensor.total_bytes() / kGiB, WithinRel(model_state_gib + tensor_gib, kRel));
    CHECK_THAT(with_selective.model_state_bytes / kGiB, WithinRel(model_state_gib, kRel));
    CHECK_THAT(with_selective.activation_bytes / kGiB, WithinRel(selective_gib, kRel));
  }
}

TEST_CASE("dag::transformer_layer_activation_bytes matches Korthikanti's Table 2 in every mode", "[dag][memory]") {
  const auto [h, a, s, b] = GENERATE(table<int, int, int, int>({{768, 12, 1024, 8}, {12288, 96, 2048, 1}}));
  const int t = GENERATE(1, 2, 8);
  const dag::TransformerSpec spec{24, h, a, s, 50257};
  const double sbh = static_cast<double>(s) * b * h, as_h = static_cast<double>(a) * s / h;
  CAPTURE(h, a, s, b, t);
  const auto bytes = [&](bool sequence_parallel, Recompute recompute, DType dtype) {
    return dag::transformer_layer_activation_bytes(spec, {b, t, sequence_parallel, recompute, dtype});
  };
  SECTION("16-bit activations: the paper's figures") {
    const DType dtype = GENERATE(DType::fp16, DType::bf16);
    // Tensor parallelism: sbh(10 + 24/t + 5as/(ht)); for t = 1 this is sbh(34 + 5as/h).
    CHECK_THAT(bytes(false, Recompute::none, dtype), WithinRel(sbh * (10 + 24.0 / t + 5 * as_h / t), kRel));
    // Sequence parallelism: sbh(34 + 5as/h)/t.
    CHECK_THAT(bytes(true, Recompute::none, dtype), WithinRel(sbh * (34 + 5 * as_h) / t, kRel));
    // Selective recomputation: sbh(10 + 24/t); with sequence parallelism 34·sbh/t.
    CHECK_THAT(bytes(false, Recompute::selective, dtype), WithinRel(sbh * (10 + 24.0 / t), kRel));
    CHECK_THAT(bytes(true, Recompute::selective, dtype), WithinRel(34 * sbh / t, kRel));
    // Full recomputation: the layer input, 2sbh, whatever the parallelism; a recomputed except-last micro-batch too.
    CHECK_THAT(bytes(false, Recompute::full, dtype), WithinRel(2 * sbh, kRel));
    CHECK_THAT(bytes(true, Recompute::full, dtype), WithinRel(2 * sbh, kRel));
    CHECK_THAT(bytes(true, Recompute::except_last, dtype), WithinRel(2 * sbh, kRel));
  }
  SECTION("fp32 activations: 4-byte elements, 1-byte dropout masks") {
    // 34 = 16·2 (two-byte elements) + 2 (masks), 5 = 2·2 + 1, so at 4 bytes: 66 and 9; unsplit 10 -> 18, 24 -> 48.
    CHECK_THAT(bytes(false, Recompute::none, DType::fp32), WithinRel(sbh * (18 + 48.0 / t + 9 * as_h / t), kRel));
    CHECK_THAT(bytes(true, Recompute::none, DType::fp32), WithinRel(sbh * (66 + 9 * as_h) / t, kRel));
    CHECK_THAT(bytes(true, Recompute::selective, DType::fp32), WithinRel(66 * sbh / t, kRel));
    CHECK_THAT(bytes(false, Recompute::full, DType::fp32), WithinRel(4 * sbh, kRel));
  }
  SECTION("bad sizes are rejected by name") {
    REQUIRE_THROWS_WITH(dag::transformer_layer_activation_bytes(spec, {0, t, false, Recompute::none, DType::fp16}),
                        "memory model: micro-batch size must be positive, got 0");
    REQUIRE_THROWS_WITH(dag::transformer_layer_activation_bytes(spec, {b, 0, false, Recompute::none, DType::fp16}),
                        "memory model: tensor-parallel size must be positive, got 0");
  }
}

TEST_CASE("dag::transformer_stage_activation_bytes: layers x per layer x in flight, except-last keeps one",
          "[dag][memory]") {
  const dag::TransformerSpec spec{24, 1024, 16, 512, 50257};
  const double sbh = 512.0 * 4 * 1024, as_h = 16.0 * 512 / 1024;
  const double stored = sbh * (34 + 5 * as_h); // t = 1, 16-bit
  const double layers = GENERATE(1.0, 6.0, 24.0);
  const double in_flight = GENERATE(1.0, 4.0, 8.0);
  CAPTURE(layers, in_flight);
  const auto bytes = [&](Recompute recompute) {
    return dag::transformer_stage_activation_bytes(spec, layers, in_flight, {4, 1, false, recompute, DType::bf16});
  };
  CHECK_THAT(bytes(Recompute::none), WithinRel(layers * in_flight * stored, kRel));
  CHECK_THAT(bytes(Recompute::full), WithinRel(layers * in_flight * 2 * sbh, kRel));
  // torchgpipe's except_last: every micro-batch but the last keeps its layer inputs, the last everything.
  CHECK_THAT(bytes(Recompute::except_last), WithinRel(layers * ((in_flight - 1) * 2 * sbh + stored), kRel));
  SECTION("nothing in flight holds nothing; negative counts are rejected") {
    CHECK(dag::transformer_stage_activation_bytes(spec, layers, 0,
                                                  {4, 1, false, Recompute::except_last, DType::bf16}) == 0);
    REQUIRE_THROWS_WITH(dag::transformer_stage_activation_bytes(spec, layers, -1, {}),
                        "memory model: micro-batches in flight must not be negative, got -1");
  }
}

TEST_CASE("dag::interleaved_activation_factor is 1 + (p-1)/(pv), and 1 without interleaving", "[dag][memory]") {
  // Interleaved 1F1B's first stage holds 2(p-1) + (v-1)p + 1 = pv + p - 1 chunk-micro-batches of L/(pv) layers:
  // (pv + p - 1)/(pv) stage-micro-batches per micro-batch of the non-interleaved schedule's p.
  const auto [p, v] = GENERATE(table<int, int>({{4, 2}, {8, 3}, {35, 3}, {2, 4}}));
  CAPTURE(p, v);
  CHECK_THAT(dag::interleaved_activation_factor(p, v), WithinRel((p * v + p - 1.0) / (p * v), kRel));
  CHECK(dag::interleaved_activation_factor(p, 1) == 1);
  CHECK(dag::interleaved_activation_factor(4, 2) == 1.375);
  REQUIRE_THROWS_WITH(dag::interleaved_activation_factor(0, 2),
                      "memory model: pipeline stages must be positive, got 0");
  REQUIRE_THROWS_WITH(dag::interleaved_activation_factor(4, 0), "memory model: virtual stages must be positive, got 0");
}

TEST_CASE("dag::zoo transformers carry their shape and where their blocks are", "[dag][memory][zoo]") {
  SECTION("GPT-2-style LMs: wte, wpe, then 9 layers a block from ln_1 to mlp.c_proj") {
    const auto [name, L, h, a, s] = GENERATE(table<std::string, int, int, int, int>({
        {"gpt2", 12, 768, 12, 1024},
        {"gpt2-xl", 48, 1600, 25, 1024},
        {"gpt3-175b", 96, 12288, 96, 2048}, // Brown et al. 2020, Table 2.1
    }));
    CAPTURE(name);
    const dag::Model m = *dag::build_zoo_model(name);
    REQUIRE(m.transformer.has_value());
    const dag::TransformerSpec& shape = *m.transformer;
    CHECK(shape.layers == L);
    CHECK(shape.hidden == h);
    CHECK(shape.heads == a);
    CHECK(shape.sequence == s);
    CHECK(shape.vocabulary == 50257);
    CHECK(first_block_layer(m) == 2);
    CHECK(layers_in_block(m, 0) == 9);
    CHECK(layers_in_block(m, L - 1) == 9);
    const auto block_end = static_cast<std::size_t>(2 + L * 9);
    CHECK(m.layers[2].name == "transformer.h.0.ln_1");
    CHECK(m.layers[block_end - 1].name == "transformer.h." + std::to_string(L - 1) + ".mlp.c_proj");
    CHECK(m.layers[block_end].name == "transformer.ln_f");
  }
  SECTION("BERT: embeddings and their LayerNorm, then 11 layers a block") {
    const auto [name, L, h, a] =
        GENERATE(table<std::string, int, int, int>({{"bert-base", 12, 768, 12}, {"bert-large", 24, 1024, 16}}));
    CAPTURE(name);
    const dag::Model m = *dag::build_zoo_model(name);
    REQUIRE(m.transformer.has_value());
    const dag::TransformerSpec& shape = *m.transformer;
    CHECK(shape.layers == L);
    CHECK(shape.hidden == h);
    CHECK(shape.heads == a);
    CHECK(shape.sequence == 128);     // phase-1 pre-training
    CHECK(shape.vocabulary == 30522); // bert-*-uncased
    CHECK(layers_in_block(m, 0) == 11);
    CHECK(layers_in_block(m, L - 1) == 11);
    const auto first = static_cast<std::size_t>(first_block_layer(m));
    const auto block_end = first + static_cast<std::size_t>(L * 11);
    CHECK(m.layers[first].name == "bert.encoder.layer.0.attention.self.query");
    CHECK(m.layers[block_end - 1].name == "bert.encoder.layer." + std::to_string(L - 1) + ".output.LayerNorm");
    CHECK(m.layers[block_end].name == "bert.pooler.dense");
  }
  SECTION("the parametric LM and CNNs") {
    const dag::Model lm = dag::build_transformer_lm({3, 64, 4, 16, 100});
    REQUIRE(lm.transformer.has_value());
    CHECK(lm.transformer->layers == 3);
    CHECK(layers_in_block(lm, 2) == 9);
    CHECK_FALSE(dag::build_zoo_model("resnet50")->transformer.has_value());
  }
}

TEST_CASE("dag::stage_memory on zoo transformers: blocks by Korthikanti, embeddings and heads by their outputs",
          "[dag][memory]") {
  SECTION("GPT-3 175B, a middle 1F1B stage of p = 8 (stage 3: 12 blocks, p - 3 = 5 micro-batches), t = 8") {
    const dag::Model m = *dag::build_zoo_model("gpt3-175b");
    const double s = 2048, h = 12288, a = 96, t = 8, b = 2;
    const bool sequence_parallel = GENERATE(false, true);
    CAPTURE(sequence_parallel);
    dag::StageMemoryInput input;
    input.chunks = {{2 + 36 * 9, 2 + 48 * 9 - 1, 5}};
    input.activations = {2, 8, sequence_parallel, Recompute::none, DType::bf16};
    input.optimizer = Optimizer::adam;
    input.optimizer_shards = 16;
    input.extra_weight_versions = 2;
    const dag::StageMemory memory = dag::stage_memory(m, input);
    // Per block 12h² + 13h parameters (weights 12h², biases 9h, two LayerNorms 4h).
    const double params = 12 * (12 * h * h + 13 * h) / t;
    CHECK(memory.parameters == params);
    CHECK_THAT(memory.model_state_bytes, WithinRel(params * (6 + 12.0 / 16), kRel));
    CHECK_THAT(memory.weight_version_bytes, WithinRel(params * 2 * 2, kRel));
    const double per_layer =
        sequence_parallel ? s * b * h * (34 + 5 * a * s / h) / t : s * b * h * (10 + 24 / t + 5 * a * s / (h * t));
    CHECK_THAT(memory.activation_bytes, WithinRel(12 * 5 * per_layer, kRel));
    CHECK_THAT(memory.total_bytes(),
               WithinRel(memory.model_state_bytes + memory.weight_version_bytes + memory.activation_bytes, kRel));
  }
  SECTION("GPT-2, a first stage with the embeddings and 6 blocks, 4 micro-batches, fp16") {
    const dag::Model m = *dag::build_zoo_model("gpt2");
    const double s = 1024, h = 768, a = 12, b = 8, n = 4, V = 50257;
    const double sbh = s * b * h;
    const auto recompute = GENERATE(Recompute::none, Recompute::full, Recompute::except_last);
    CAPTURE(static_cast<int>(recompute));
    dag::StageMemoryInput input;
    input.chunks = {{0, 2 + 6 * 9 - 1, 4}};
    input.activations = {8, 1, false, recompute, DType::fp16};
    input.optimizer = Optimizer::sgd_momentum;
    const dag::StageMemory memory = dag::stage_memory(m, input);
    // wte V·h, wpe s·h, 6 blocks of 12h² + 13h; 16 bytes each for fp16 with momentum.
    const double params = V * h + s * h + 6 * (12 * h * h + 13 * h);
    CHECK(memory.parameters == params);
    CHECK(memory.model_state_bytes == params * 16);
    // The embeddings' outputs (s·h each, kept in 16 bits) are never recomputed.
    const double embeddings = n * b * 2 * (2 * s * h);
    const double stored = sbh * (34 + 5 * a * s / h);
    const double blocks = recompute == Recompute::none   ? 6 * n * stored
                          : recompute == Recompute::full ? 6 * n * 2 * sbh
                                                         : 6 * ((n - 1) * 2 * sbh + stored);
    CHECK_THAT(memory.activation_bytes, WithinRel(blocks + embeddings, kRel));
  }
  SECTION("the last stage's LM head keeps 1/t of the logits (vocabulary-parallel), the final norm all of its output") {
    const dag::Model m = *dag::build_zoo_model("gpt2");
    const double s = 1024, h = 768, V = 50257;
    const int last = static_cast<int>(m.layers.size()) - 1, t = GENERATE(1, 4);
    CAPTURE(t);
    const ActivationConfig config{2, t, false, Recompute::none, DType::bf16};
    const auto heads = [&](int first) {
      return dag::stage_memory(m, {.chunks = {{first, last, 1}}, .activations = config}).activation_bytes;
    };
    // the last layer alone (the LM head) and with the final norm before it; 2 bytes an element, 2 samples
    CHECK_THAT(heads(last), WithinRel(2 * 2 * s * V / t, kRel));
    CHECK_THAT(heads(last - 1), WithinRel(2 * 2 * s * V / t + 2 * 2 * s * h, kRel));
  }
  SECTION("a block split between two stages counts on each by its share of layers") {
    const dag::Model m = *dag::build_zoo_model("gpt2");
    const ActivationConfig config{1, 1, false, Recompute::none, DType::bf16};
    const double per_block = dag::transformer_layer_activation_bytes(*m.transformer, config);
    // Layers [2, 14]: block 0 (9 layers) and 4 of block 1's 9.
    const dag::StageMemory memory = dag::stage_memory(m, {.chunks = {{2, 14, 1}}, .activations = config});
    CHECK_THAT(memory.activation_bytes, WithinRel(per_block * 13 / 9, kRel));
  }
}

TEST_CASE("dag::stage_memory on other models: layer outputs, torchgpipe-style checkpoints", "[dag][memory]") {
  // Four layers with fp32 outputs of 100, 200, 300 and 400 bytes per sample; the third reads the first two (a skip
  // connection), the model's input sample is 50 bytes. Each layer has 10 parameters.
  dag::Model m;
  m.name = "toy";
  m.input_bytes_per_sample = 50;
  for (int i = 0; i < 4; ++i) {
    m.layers.push_back({"l" + std::to_string(i), "linear", {{"w", {10}, 10}}, 0, 0, 100.0 * (i + 1), {}});
  }
  m.layers[2].inputs = {0, 1};
  const double b = 2, n = 3;
  const auto activations = [&](int first, int last, Recompute recompute, DType dtype) {
    return dag::stage_memory(m, {.chunks = {{first, last, 3}}, .activations = {2, 1, false, recompute, dtype}})
        .activation_bytes;
  };
  SECTION("no recomputation: n·b·outputs, scaled to the training format") {
    CHECK(activations(2, 3, Recompute::none, DType::fp32) == n * b * 700);
    CHECK(activations(2, 3, Recompute::none, DType::fp16) == n * b * 350);
  }
  SECTION("full: n inputs (what the chunk reads from before it) and one micro-batch being recomputed") {
    CHECK(activations(2, 3, Recompute::full, DType::fp32) == n * b * (100 + 200) + b * 700);
    CHECK(activations(1, 3, Recompute::full, DType::fp32) == n * b * 100 + b * 900);
    CHECK(activations(0, 1, Recompute::full, DType::fp16) == n * b * 50 + b * 150); // the input sample as copied
  }
  SECTION("except_last: n - 1 inputs and the last micro-batch's outputs") {
    CHECK(activations(2, 3, Recompute::except_last, DType::fp32) == (n - 1) * b * 300 + b * 700);
  }
  SECTION("weights and extra versions") {
    const dag::StageMemory memory = dag::stage_memory(m, {.chunks = {{0, 1, 1}, {3, 3, 1}},
                                                          .activations = {1, 1, false, Recompute::none, DType::fp32},
                                                          .optimizer = Optimizer::adam,
                                                          .extra_weight_versions = 3});
    CHECK(memory.parameters == 30);
    CHECK(memory.model_state_bytes == 30 * 16);
    CHECK(memory.weight_version_bytes == 30 * 3 * 4);
    CHECK(memory.activation_bytes == 100 + 200 + 400);
    CHECK(memory.total_bytes() == 30 * 16 + 30 * 3 * 4 + 700);
  }
  SECTION("bad placements and transformer-only options are rejected by name") {
    const auto on = [&](std::vector<dag::StageChunk> chunks, ActivationConfig config = {}, int extra_versions = 0) {
      return dag::stage_memory(
          m, {.chunks = std::move(chunks), .activations = config, .extra_weight_versions = extra_versions});
    };
    REQUIRE_THROWS_WITH(on({}), "memory model: a stage needs at least one chunk of layers");
    REQUIRE_THROWS_WITH(on({{2, 4, 1}}), "memory model: chunk [2, 4] is not a layer range of toy (4 layers)");
    REQUIRE_THROWS_WITH(on({{2, 1, 1}}), "memory model: chunk [2, 1] is not a layer range of toy (4 layers)");
    REQUIRE_THROWS_WITH(on({{0, 2, 1}, {2, 3, 1}}), "memory model: chunk [2, 3] overlaps another chunk at layer 2");
    REQUIRE_THROWS_WITH(on({{0, 1, -1}}), "memory model: chunk [0, 1] has a negative micro-batch count");
    REQUIRE_THROWS_WITH(on({{0, 1, 1}}, {}, -1), "memory model: extra weight versions must not be negative, got -1");
    REQUIRE_THROWS_WITH(on({{0, 1, 1}}, {1, 2, false, Recompute::none, DType::fp32}),
                        "memory model: tensor parallelism needs a transformer model");
    REQUIRE_THROWS_WITH(on({{0, 1, 1}}, {1, 1, false, Recompute::selective, DType::fp32}),
                        "memory model: selective recomputation needs a transformer model");
  }
}
