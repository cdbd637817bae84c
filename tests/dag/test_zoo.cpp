// Tests of the built-in model zoo against the reference implementations: torchvision's per-tensor parameter
// lists (tests/data/shared/model_zoo/*_params.csv), published parameter counts (torchvision docs, HF model cards) and
// published forward GMACs (torchvision docs' "GFLOPS" column, https://pytorch.org/vision/stable/models.html,
// which counts multiply-accumulates; we count a MAC as 2 FLOPs and add normalisation/activation/pool/loss ops).
#include "dag/zoo/zoo.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using Catch::Matchers::WithinRel;
using ddlsim::dag::build_transformer_lm;
using ddlsim::dag::build_zoo_model;
using ddlsim::dag::Model;
using ddlsim::dag::ParamTensor;
using ddlsim::dag::TransformerSpec;

namespace {

Model zoo(const std::string& name) {
  auto model = build_zoo_model(name);
  REQUIRE(model.has_value());
  return *model;
}

std::vector<ParamTensor> flat_params(const Model& model) {
  std::vector<ParamTensor> out;
  for (const auto& layer : model.layers) {
    out.insert(out.end(), layer.params.begin(), layer.params.end());
  }
  return out;
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  std::string part;
  while (std::getline(stream, part, sep)) {
    parts.push_back(part);
  }
  return parts;
}

/// `index,name,shape,numel` with shape like `64x3x7x7`.
std::vector<ParamTensor> read_param_csv(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.is_open());
  std::vector<ParamTensor> tensors;
  std::string line;
  std::getline(in, line); // header
  REQUIRE(line == "index,name,shape,numel");
  while (std::getline(in, line)) {
    if (line.empty()) {
      continue;
    }
    const auto fields = split(line, ',');
    REQUIRE(fields.size() == 4);
    REQUIRE(std::stoul(fields[0]) == tensors.size());
    ParamTensor t;
    t.name = fields[1];
    for (const auto& dim : split(fields[2], 'x')) {
      t.shape.push_back(std::stoll(dim));
    }
    t.numel = std::stoll(fields[3]);
    tensors.push_back(t);
  }
  return tensors;
}

std::int64_t params_with_prefix(const Model& model, const std::vector<std::string>& prefixes, bool keep) {
  std::int64_t total = 0;
  for (const auto& t : flat_params(model)) {
    const bool match =
        std::any_of(prefixes.begin(), prefixes.end(), [&](const std::string& p) { return t.name.rfind(p, 0) == 0; });
    if (match == keep) {
      total += t.numel;
    }
  }
  return total;
}

double as_double(std::int64_t v) {
  return static_cast<double>(v);
}

} // namespace

TEST_CASE("dag::zoo lists sorted unique names that all build", "[zoo]") {
  const auto names = ddlsim::dag::zoo_model_names();
  REQUIRE(names.size() == 47);
  CHECK(std::is_sorted(names.begin(), names.end()));
  CHECK(std::adjacent_find(names.begin(), names.end()) == names.end());
  for (const char* required :
       {"alexnet",         "vgg11",          "vgg16",          "vgg19",           "resnet18",
        "resnet34",        "resnet50",       "resnet101",      "resnet152",       "resnext50_32x4d",
        "wide_resnet50_2", "googlenet",      "inception_v3",   "densenet121",     "bert-base",
        "bert-large",      "gpt2",           "gpt2-medium",    "gpt2-large",      "gpt2-xl",
        "gpt3-175b",       "resnet20-cifar", "resnet56-cifar", "resnet110-cifar", "vgg16-cifar",
        "lstm-ptb"}) {
    CAPTURE(required);
    CHECK(std::find(names.begin(), names.end(), required) != names.end());
  }
  for (const auto& name : names) {
    CAPTURE(name);
    const auto model = build_zoo_model(name);
    REQUIRE(model.has_value());
    CHECK(model->name == name);
  }
  CHECK_FALSE(build_zoo_model("resnet-50").has_value());
  CHECK_FALSE(build_zoo_model("").has_value());
  CHECK_FALSE(build_zoo_model("ResNet50").has_value());
}

TEST_CASE("dag::zoo CNNs match torchvision's parameter lists tensor by tensor", "[zoo]") {
  const std::string name = GENERATE("alexnet", "vgg11", "vgg16", "vgg19", "resnet18", "resnet34", "resnet50",
                                    "resnet101", "resnet152", "resnext50_32x4d", "wide_resnet50_2");
  CAPTURE(name);
  const auto expected =
      read_param_csv(std::string(DDLSIM_SOURCE_DIR) + "/tests/data/shared/model_zoo/" + name + "_params.csv");
  const Model model = zoo(name);
  const auto actual = flat_params(model);
  REQUIRE(actual.size() == expected.size());
  REQUIRE(model.tensor_count() == expected.size());
  std::int64_t expected_total = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    CAPTURE(i, expected[i].name);
    CHECK(actual[i].name == expected[i].name);
    CHECK(actual[i].shape == expected[i].shape);
    CHECK(actual[i].numel == expected[i].numel);
    expected_total += expected[i].numel;
  }
  CHECK(model.param_count() == expected_total);
}

TEST_CASE("dag::zoo parameter totals match the published counts", "[zoo]") {
  // torchvision docs (num_params) and HF model cards / named_parameters() sums.
  const auto [name, count] = GENERATE(table<std::string, std::int64_t>({
      {"googlenet", 13'004'888},         // aux_logits=True (torchvision default constructor)
      {"inception_v3", 27'161'264},      // aux_logits=True
      {"densenet121", 7'978'856},        //
      {"densenet161", 28'681'000},       //
      {"densenet169", 14'149'480},       //
      {"densenet201", 20'013'928},       //
      {"vgg13", 133'047'848},            //
      {"resnext101_32x8d", 88'791'336},  //
      {"wide_resnet101_2", 126'886'696}, //
      {"bert-base", 110'106'428},        // BertForPreTraining, bert-base-uncased
      {"bert-large", 336'226'108},       // BertForPreTraining, bert-large-uncased
      {"gpt2", 124'439'808},             // GPT2LMHeadModel (lm_head tied to wte)
      {"gpt2-medium", 354'823'168},      //
      {"gpt2-large", 774'030'080},       //
      {"gpt2-xl", 1'557'611'200},        //
  }));
  CAPTURE(name);
  CHECK(zoo(name).param_count() == count);
}

TEST_CASE("dag::zoo googlenet and inception_v3 without aux classifiers match aux_logits=False", "[zoo]") {
  // torchvision: googlenet 6,624,904 and inception_v3 23,834,568 parameters without the aux heads.
  CHECK(params_with_prefix(zoo("googlenet"), {"aux1.", "aux2."}, false) == 6'624'904);
  CHECK(params_with_prefix(zoo("inception_v3"), {"AuxLogits."}, false) == 23'834'568);

  SECTION("aux heads run in forward order, right after the block that feeds them") {
    const Model g = zoo("googlenet");
    const auto at = [&](const std::string& n) {
      return std::find_if(g.layers.begin(), g.layers.end(), [&](const auto& l) { return l.name == n; }) -
             g.layers.begin();
    };
    CHECK(at("aux1.adaptive_avg_pool2d") == at("inception4a.cat") + 1);
    CHECK(at("aux2.adaptive_avg_pool2d") == at("inception4d.cat") + 1);
  }
}

TEST_CASE("dag::zoo BERT is BertForPreTraining around HF's BertModel", "[zoo]") {
  // BertModel: bert-base-uncased 109,482,240, bert-large-uncased 335,141,888 (incl. pooler).
  CHECK(params_with_prefix(zoo("bert-base"), {"bert."}, true) == 109'482'240);
  CHECK(params_with_prefix(zoo("bert-large"), {"bert."}, true) == 335'141'888);

  const auto tensors = flat_params(zoo("bert-base"));
  REQUIRE(tensors.size() == 5 + 16 * 12 + 2 + 7);
  CHECK(tensors.front().name == "bert.embeddings.word_embeddings.weight");
  CHECK(tensors[1].name == "bert.embeddings.position_embeddings.weight");
  CHECK(tensors[2].name == "bert.embeddings.token_type_embeddings.weight");
  CHECK(tensors[5].name == "bert.encoder.layer.0.attention.self.query.weight");
  CHECK(tensors[5].shape == std::vector<std::int64_t>{768, 768});
  // named_parameters() of BertLMPredictionHead: its own bias first; decoder.weight/bias are tied, not repeated.
  CHECK(tensors[tensors.size() - 7].name == "cls.predictions.bias");
  CHECK(tensors[tensors.size() - 6].name == "cls.predictions.transform.dense.weight");
  CHECK(tensors.back().name == "cls.seq_relationship.bias");
  CHECK(zoo("bert-base").input_bytes_per_sample == 3 * 128 * 8);
}

TEST_CASE("dag::zoo forward FLOPs match the published GMACs", "[zoo]") {
  // torchvision docs, "GFLOPS" column (multiply-accumulates) at 224x224 (inception_v3: 299x299).
  const auto [name, gmacs] = GENERATE(table<std::string, double>({
      {"alexnet", 0.71},          {"vgg11", 7.61},
      {"vgg13", 11.31},           {"vgg16", 15.47},
      {"vgg19", 19.63},           {"resnet18", 1.81},
      {"resnet34", 3.66},         {"resnet50", 4.09},
      {"resnet101", 7.80},        {"resnet152", 11.51},
      {"resnext50_32x4d", 4.23},  {"resnext101_32x8d", 16.41},
      {"wide_resnet50_2", 11.40}, {"wide_resnet101_2", 22.75},
      {"googlenet", 1.50},        {"inception_v3", 5.71},
      {"densenet121", 2.83},      {"densenet161", 7.73},
      {"densenet169", 3.36},      {"densenet201", 4.29},
  }));
  CAPTURE(name);
  const double flops = zoo(name).fwd_flops_per_sample();
  CHECK_THAT(flops, WithinRel(2e9 * gmacs, 0.03));
  CHECK(flops > 2e9 * gmacs * 0.995); // our count adds BN/ReLU/pool/loss on top of the MACs
}

TEST_CASE("dag::zoo resnet50 layers carry the convention's exact costs", "[zoo]") {
  const Model m = zoo("resnet50");
  REQUIRE(m.layers.size() == 109); // 53 conv + 53 bn + maxpool + avgpool + fc
  CHECK(m.input_bytes_per_sample == 3 * 224 * 224 * 4);

  const auto& conv1 = m.layers.front();
  CHECK(conv1.name == "conv1");
  CHECK(conv1.kind == "conv");
  CHECK(conv1.fwd_flops == 2.0 * 64 * 112 * 112 * 3 * 7 * 7); // 2·Cout·Hout·Wout·Cin·kh·kw, no bias
  CHECK(conv1.bwd_flops == 2 * conv1.fwd_flops);
  CHECK(conv1.activation_bytes == 4.0 * 64 * 112 * 112);

  const auto& bn1 = m.layers[1];
  CHECK(bn1.kind == "bn");
  CHECK(bn1.fwd_flops == (8.0 + 1.0) * 64 * 112 * 112); // batchnorm 8 + folded in-place ReLU 1 per element
  CHECK(bn1.activation_bytes == 4.0 * 64 * 112 * 112);  // ReLU(inplace=True) allocates nothing

  const auto& pool = m.layers[2];
  CHECK(pool.name == "maxpool");
  CHECK(pool.kind == "pool");
  CHECK(pool.fwd_flops == 9.0 * 64 * 56 * 56);
  CHECK(pool.bwd_flops == pool.fwd_flops); // parameter-free: 1x
  CHECK(pool.activation_bytes == 4.0 * 64 * 56 * 56);

  const auto& fc = m.layers.back();
  CHECK(fc.name == "fc");
  CHECK(fc.fwd_flops == 2.0 * 2048 * 1000 + 1000 + 5 * 1000); // matmul + bias + log-softmax loss
  CHECK(m.fwd_flops_per_sample() / 1e9 > 8.18);
  CHECK(m.fwd_flops_per_sample() / 1e9 < 8.45);
}

TEST_CASE("dag::zoo GPT-2-style LM parameters follow the closed form", "[zoo]") {
  // Per block 12h² + 13h (c_attn 3h²+3h, c_proj h²+h, c_fc 4h²+4h, mlp.c_proj 4h²+h, two LayerNorms 4h),
  // embeddings (V + S)·h, final LayerNorm 2h; lm_head is tied to wte.
  const auto [layers, hidden, heads, sequence, vocabulary] = GENERATE(table<int, int, int, int, int>({
      {12, 768, 12, 1024, 50257},
      {48, 1600, 25, 1024, 50257},
      {2, 64, 4, 16, 100},
      {1, 8, 1, 1, 3},
      {96, 12288, 96, 2048, 50257},
  }));
  const TransformerSpec spec{layers, hidden, heads, sequence, vocabulary};
  const Model m = build_transformer_lm(spec, "lm");
  const std::int64_t L = layers;
  const std::int64_t h = hidden;
  CAPTURE(L, h, sequence, vocabulary);
  CHECK(m.name == "lm");
  CHECK(m.param_count() == (vocabulary + sequence) * h + L * (12 * h * h + 13 * h) + 2 * h);
  CHECK(m.tensor_count() == static_cast<std::size_t>(2 + 12 * L + 2));
  CHECK(m.layers.size() == static_cast<std::size_t>(2 + 9 * L + 2));
  CHECK(m.input_bytes_per_sample == 8.0 * sequence);
}

TEST_CASE("dag::zoo GPT-2-style LM FLOPs are 2 x params per token plus attention", "[zoo]") {
  const std::string name = GENERATE("gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl", "gpt3-2.7b", "gpt3-175b");
  CAPTURE(name);
  const Model m = zoo(name);
  const auto& first_block = m.layers[2];
  REQUIRE(first_block.name == "transformer.h.0.ln_1");
  const double h = as_double(first_block.params.front().numel);
  const double s = m.input_bytes_per_sample / 8;
  const double L =
      as_double(std::count_if(m.layers.begin(), m.layers.end(), [](const auto& l) { return l.kind == "softmax"; }));
  const double attention = 4 * L * s * s * h; // QK^T + AV, 2·s²·h each per layer
  CHECK_THAT(m.fwd_flops_per_sample(), WithinRel(2 * as_double(m.param_count()) * s + attention, 0.02));
}

TEST_CASE("dag::zoo attention steps follow the convention", "[zoo]") {
  const Model m = zoo("gpt2");
  const auto& c_attn = m.layers[3];
  const auto& scores = m.layers[4];
  const auto& softmax = m.layers[5];
  const auto& context = m.layers[6];
  REQUIRE(c_attn.name == "transformer.h.0.attn.c_attn");
  REQUIRE(scores.name == "transformer.h.0.attn.scores");
  REQUIRE(softmax.name == "transformer.h.0.attn.softmax");
  REQUIRE(context.name == "transformer.h.0.attn.context");
  const double s = 1024, h = 768, a = 12;
  const double matmul = 2 * s * s * h; // QK^T or AV over all heads
  SECTION("scores: QK^T, then scale and causal mask per score; backward differentiates both operands") {
    CHECK(scores.fwd_flops == matmul + 2 * a * s * s);
    CHECK(scores.bwd_flops == 2 * matmul + 2 * a * s * s);
    CHECK(scores.activation_bytes == 4 * a * s * s);
    CHECK(scores.inputs.empty()); // q and k are both slices of c_attn, the previous layer
  }
  SECTION("softmax and dropout per score, parameter-free backward 1x") {
    CHECK(softmax.fwd_flops == (5 + 2) * a * s * s);
    CHECK(softmax.bwd_flops == softmax.fwd_flops);
    CHECK(softmax.activation_bytes == 4 * a * s * s);
  }
  SECTION("context: probabilities x V, heads merged back") {
    CHECK(context.fwd_flops == matmul);
    CHECK(context.bwd_flops == 2 * matmul);
    CHECK(context.activation_bytes == 4 * s * h);
    CHECK(context.inputs == std::vector<int>{5, 3});
  }
}

TEST_CASE("dag::zoo gpt2 entries are build_transformer_lm with HF's configs", "[zoo]") {
  const auto [name, layers, hidden, heads] = GENERATE(table<std::string, int, int, int>({
      {"gpt2", 12, 768, 12},
      {"gpt2-medium", 24, 1024, 16},
      {"gpt2-large", 36, 1280, 20},
      {"gpt2-xl", 48, 1600, 25},
  }));
  CAPTURE(name);
  const Model expected = build_transformer_lm({layers, hidden, heads, 1024, 50257}, name);
  const Model actual = zoo(name);
  REQUIRE(actual.layers.size() == expected.layers.size());
  for (std::size_t i = 0; i < actual.layers.size(); ++i) {
    const auto& a = actual.layers[i];
    const auto& e = expected.layers[i];
    CAPTURE(a.name);
    CHECK(a.name == e.name);
    CHECK(a.fwd_flops == e.fwd_flops);
    CHECK(a.bwd_flops == e.bwd_flops);
    CHECK(a.activation_bytes == e.activation_bytes);
    CHECK(a.params.size() == e.params.size());
  }
  const auto tensors = flat_params(actual);
  CHECK(tensors.front().name == "transformer.wte.weight");
  CHECK(tensors[1].name == "transformer.wpe.weight");
  CHECK(tensors[1].shape == std::vector<std::int64_t>{1024, hidden});
  CHECK(tensors[4].name == "transformer.h.0.attn.c_attn.weight");
  CHECK(tensors[4].shape == std::vector<std::int64_t>{hidden, 3 * hidden}); // Conv1D: (in, out)
  CHECK(tensors.back().name == "transformer.ln_f.bias");
  CHECK(actual.layers.back().name == "lm_head");
  CHECK(actual.layers.back().params.empty()); // tied to transformer.wte.weight
}

TEST_CASE("dag::zoo build_transformer_lm rejects impossible shapes", "[zoo]") {
  using Catch::Matchers::Contains;
  REQUIRE_THROWS_WITH(build_transformer_lm({12, 770, 12, 1024, 50257}), Contains("multiple of heads"));
  REQUIRE_THROWS_WITH(build_transformer_lm({0, 768, 12, 1024, 50257}), Contains("layers must be positive"));
  REQUIRE_THROWS_WITH(build_transformer_lm({12, 768, 12, -1, 50257}), Contains("sequence must be positive"));
}

TEST_CASE("dag::zoo every model is well formed", "[zoo]") {
  const std::string name = GENERATE(from_range(ddlsim::dag::zoo_model_names()));
  CAPTURE(name);
  const Model m = zoo(name);
  CHECK(m.input_bytes_per_sample > 0);
  CHECK(m.fwd_flops_per_sample() > 0);
  CHECK(m.layers.size() <= 1300); // llama3.1-405b: 126 blocks of 10 layers
  std::set<std::string> layer_names;
  std::set<std::string> tensor_names;
  double bwd = 0, fwd = 0;
  for (const auto& layer : m.layers) {
    CAPTURE(layer.name);
    CHECK(layer_names.insert(layer.name).second);
    CHECK_FALSE(layer.kind.empty());
    CHECK(layer.fwd_flops >= 0);
    CHECK(layer.activation_bytes > 0);
    const int index = static_cast<int>(&layer - m.layers.data());
    for (const int in : layer.inputs) {
      CHECK(in >= 0);
      CHECK(in < index);
    }
    CHECK(std::adjacent_find(layer.inputs.begin(), layer.inputs.end()) == layer.inputs.end());
    CHECK(layer.inputs != std::vector<int>{index - 1}); // "just the previous layer" is spelled empty
    if (!layer.params.empty()) {
      CHECK_THAT(layer.bwd_flops, WithinRel(2 * layer.fwd_flops, 1e-12));
    } else {
      CHECK(layer.bwd_flops >= layer.fwd_flops);
    }
    if (layer.kind == "flash_attention") { // FlashAttention-2's backward: 5 matmuls to the forward's 2
      CHECK(layer.bwd_flops == 2.5 * layer.fwd_flops);
    } else {
      bwd += layer.bwd_flops;
      fwd += layer.fwd_flops;
    }
    for (const auto& t : layer.params) {
      CAPTURE(t.name);
      CHECK(tensor_names.insert(t.name).second);
      std::int64_t product = 1;
      for (const auto d : t.shape) {
        CHECK(d > 0);
        product *= d;
      }
      CHECK(t.numel == product);
    }
  }
  CHECK(bwd > 1.9 * fwd);
  CHECK(bwd <= 2 * fwd);
}

TEST_CASE("dag::zoo layer inputs follow the reference dataflow", "[zoo]") {
  const auto index_of = [](const Model& m, const std::string& name) {
    const auto it = std::find_if(m.layers.begin(), m.layers.end(), [&](const auto& l) { return l.name == name; });
    REQUIRE(it != m.layers.end());
    return static_cast<int>(it - m.layers.begin());
  };
  const auto inputs_of = [&](const Model& m, const std::string& name) {
    return m.layers[static_cast<std::size_t>(index_of(m, name))].inputs;
  };

  SECTION("resnet50: the projection reads the block input, the residual add reads both paths") {
    const Model m = zoo("resnet50");
    CHECK(inputs_of(m, "layer1.0.downsample.0") == std::vector<int>{index_of(m, "maxpool")});
    CHECK(inputs_of(m, "layer1.0.downsample.1") ==
          std::vector<int>{index_of(m, "layer1.0.downsample.0"), index_of(m, "layer1.0.bn3")});
    CHECK(inputs_of(m, "layer1.1.bn3") ==
          std::vector<int>{index_of(m, "layer1.1.conv3"), index_of(m, "layer1.0.downsample.1")});
    CHECK(inputs_of(m, "layer1.1.conv1").empty());
  }
  SECTION("googlenet: branches read the block input, the concat reads the branches, aux heads branch off") {
    const Model m = zoo("googlenet");
    CHECK(inputs_of(m, "inception3a.branch2.0.conv") == std::vector<int>{index_of(m, "maxpool2")});
    CHECK(inputs_of(m, "inception3a.cat") ==
          std::vector<int>{index_of(m, "inception3a.branch1.bn"), index_of(m, "inception3a.branch2.1.bn"),
                           index_of(m, "inception3a.branch3.1.bn"), index_of(m, "inception3a.branch4.1.bn")});
    CHECK(inputs_of(m, "inception4b.branch1.conv") == std::vector<int>{index_of(m, "inception4a.cat")});
  }
  SECTION("densenet121: each dense layer concatenates the block input and all earlier growth") {
    const Model m = zoo("densenet121");
    CHECK(inputs_of(m, "features.denseblock1.denselayer1.cat").empty());
    CHECK(inputs_of(m, "features.denseblock1.denselayer3.cat") ==
          std::vector<int>{index_of(m, "features.pool0"), index_of(m, "features.denseblock1.denselayer1.conv2"),
                           index_of(m, "features.denseblock1.denselayer2.conv2")});
    CHECK(inputs_of(m, "features.denseblock4.cat").size() == 17);
  }
  SECTION("bert-base: q, k and v read the same hidden states; the MLM head reads the encoder, NSP the pooler") {
    const Model m = zoo("bert-base");
    const int hidden = index_of(m, "bert.embeddings.LayerNorm");
    CHECK(inputs_of(m, "bert.encoder.layer.0.attention.self.query").empty());
    CHECK(inputs_of(m, "bert.encoder.layer.0.attention.self.value") == std::vector<int>{hidden});
    CHECK(inputs_of(m, "bert.encoder.layer.0.attention.output.dense") ==
          std::vector<int>{index_of(m, "bert.encoder.layer.0.attention.self.context"), hidden});
    CHECK(inputs_of(m, "cls.predictions") == std::vector<int>{index_of(m, "bert.encoder.layer.11.output.LayerNorm")});
    CHECK(inputs_of(m, "cls.seq_relationship") == std::vector<int>{index_of(m, "bert.pooler.dense")});
  }
}

TEST_CASE("dag::zoo every layer output is consumed except the loss heads", "[zoo]") {
  const auto [name, heads] = GENERATE(table<std::string, std::size_t>({
      {"alexnet", 1},
      {"vgg16", 1},
      {"resnet50", 1},
      {"resnext50_32x4d", 1},
      {"densenet121", 1},
      {"googlenet", 3},    // fc, aux1.fc2, aux2.fc2
      {"inception_v3", 2}, // fc, AuxLogits.fc
      {"bert-base", 2},    // cls.predictions, cls.seq_relationship
      {"gpt2", 1},         // lm_head
  }));
  CAPTURE(name);
  const Model m = zoo(name);
  std::vector<bool> read(m.layers.size(), false);
  for (std::size_t i = 0; i < m.layers.size(); ++i) {
    if (m.layers[i].inputs.empty()) {
      if (i > 0) {
        read[i - 1] = true;
      }
    }
    for (const int in : m.layers[i].inputs) {
      read[static_cast<std::size_t>(in)] = true;
    }
  }
  std::vector<std::string> sinks;
  for (std::size_t i = 0; i < m.layers.size(); ++i) {
    if (!read[i]) {
      sinks.push_back(m.layers[i].name);
    }
  }
  CAPTURE(sinks);
  CHECK(sinks.size() == heads);
  CHECK(sinks.back() == m.layers.back().name);
}

TEST_CASE("dag::zoo CIFAR-10 ResNets are He et al.'s 6n+2 networks with option-A shortcuts", "[zoo]") {
  // Exact counts of akamaster/pytorch_resnet_cifar10 (BN included; the paper rounds to 0.27M, 0.85M, 1.7M).
  // Tensors: conv1 + bn1 (3), 3 stages x n blocks x (2 conv + 2 bn = 6), linear (2).
  const auto [name, n, params] = GENERATE(table<std::string, int, std::int64_t>({
      {"resnet20-cifar", 3, 269'722},
      {"resnet56-cifar", 9, 853'018},
      {"resnet110-cifar", 18, 1'727'962},
  }));
  CAPTURE(name);
  const Model m = zoo(name);
  CHECK(m.param_count() == params);
  CHECK(m.tensor_count() == static_cast<std::size_t>(3 + 18 * n + 2));
  CHECK(m.layers.size() == static_cast<std::size_t>(2 + 3 * n * 4 + 2)); // conv1, bn1, blocks, avg pool, linear
  CHECK(m.input_bytes_per_sample == 3 * 32 * 32 * 4);
  const auto tensors = flat_params(m);
  CHECK(tensors.front().name == "conv1.weight");
  CHECK(tensors.front().shape == std::vector<std::int64_t>{16, 3, 3, 3});
  CHECK(tensors.back().name == "linear.bias");
  CHECK(tensors.back().shape == std::vector<std::int64_t>{10});
  CHECK(tensors[tensors.size() - 3].name == "layer3." + std::to_string(n - 1) + ".bn2.bias");

  // Option A: the first block of stages 2 and 3 adds the (strided, zero-padded) block input, no projection.
  const auto at = [&](const std::string& layer) {
    const auto it = std::find_if(m.layers.begin(), m.layers.end(), [&](const auto& l) { return l.name == layer; });
    REQUIRE(it != m.layers.end());
    return static_cast<int>(it - m.layers.begin());
  };
  const auto& bn2 = m.layers[static_cast<std::size_t>(at("layer2.0.bn2"))];
  CHECK(bn2.inputs == std::vector<int>{at("layer2.0.conv2"), at("layer1." + std::to_string(n - 1) + ".bn2")});
  CHECK(bn2.fwd_flops == (8.0 + 1 + 1) * 32 * 16 * 16); // batchnorm + residual add + ReLU per element
  CHECK(m.layers[static_cast<std::size_t>(at("layer2.0.conv1"))].activation_bytes == 4.0 * 32 * 16 * 16);
}

TEST_CASE("dag::zoo vgg16-cifar is kuangliu's VGG('VGG16') with batch norm", "[zoo]") {
  const Model m = zoo("vgg16-cifar");
  CHECK(m.param_count() == 14'728'266);
  CHECK(m.tensor_count() == 13 * 4 + 2);
  CHECK(m.layers.size() == 13 * 2 + 5 + 1 + 1); // conv + bn, 5 max pools, AvgPool2d(1), classifier
  CHECK(m.input_bytes_per_sample == 3 * 32 * 32 * 4);
  const auto tensors = flat_params(m);
  CHECK(tensors.front().name == "features.0.weight");
  CHECK(tensors.front().shape == std::vector<std::int64_t>{64, 3, 3, 3});
  CHECK(tensors[2].name == "features.1.weight"); // BatchNorm2d(64)
  CHECK(tensors[tensors.size() - 3].name == "features.41.bias");
  CHECK(tensors.back().name == "classifier.bias");
  CHECK(tensors[tensors.size() - 2].shape == std::vector<std::int64_t>{10, 512});
  CHECK(m.layers[m.layers.size() - 2].name == "features.44");
  const auto& conv0 = m.layers.front();
  CHECK(conv0.fwd_flops == 2.0 * 64 * 32 * 32 * 3 * 9 + 64 * 32 * 32); // MACs x 2 + bias adds
}

TEST_CASE("dag::zoo lstm-ptb is Zaremba et al.'s large PTB LSTM", "[zoo]") {
  const Model m = zoo("lstm-ptb");
  // Embedding 10000x1500, two LSTM layers of 2·(6000x1500) + 2·6000, Linear(1500, 10000).
  CHECK(m.param_count() == 66'034'000);
  CHECK(m.param_count() == 10000 * 1500 + 2 * (2 * 6000 * 1500 + 2 * 6000) + 1500 * 10000 + 10000);
  CHECK(m.tensor_count() == 1 + 8 + 2);
  REQUIRE(m.layers.size() == 3);
  CHECK(m.input_bytes_per_sample == 35 * 8);

  const auto tensors = flat_params(m);
  CHECK(tensors.front().name == "encoder.weight");
  CHECK(tensors[1].name == "rnn.weight_ih_l0");
  CHECK(tensors[1].shape == std::vector<std::int64_t>{6000, 1500});
  CHECK(tensors[2].name == "rnn.weight_hh_l0");
  CHECK(tensors[3].name == "rnn.bias_ih_l0");
  CHECK(tensors[4].name == "rnn.bias_hh_l0");
  CHECK(tensors[5].name == "rnn.weight_ih_l1");
  CHECK(tensors[8].name == "rnn.bias_hh_l1");
  CHECK(tensors.back().name == "decoder.bias");

  const double s = 35, h = 1500, v = 10000;
  const auto& encoder = m.layers[0];
  const auto& rnn = m.layers[1];
  const auto& decoder = m.layers[2];
  CHECK(encoder.kind == "embedding");
  CHECK(encoder.fwd_flops == 2 * s * h); // the lookup is free; dropout 2 per element
  CHECK(encoder.activation_bytes == 4 * s * h);
  // Per token and layer 2·4H·(I + H) + 21H (see builder.hpp), dropout between the layers and on the output.
  CHECK(rnn.kind == "lstm");
  CHECK(rnn.fwd_flops == s * (2 * (2 * 4 * h * 2 * h + 21 * h) + 2 * h + 2 * h));
  CHECK(rnn.bwd_flops == 2 * rnn.fwd_flops);
  CHECK(rnn.activation_bytes == 4 * s * h);
  CHECK(decoder.fwd_flops == s * (2 * h * v + v + 5 * v)); // matmul + bias + log-softmax loss
  // Forward FLOPs are 2 x the non-embedding parameters per token, within 1%.
  CHECK_THAT(m.fwd_flops_per_sample(), WithinRel(2 * s * (66'034'000 - v * h), 0.01));
}

TEST_CASE("dag::zoo CIFAR-10 models' forward FLOPs match the published MACs", "[zoo]") {
  // Multiply-accumulates per 32x32 image as usually quoted (e.g. Li et al., "Pruning Filters for Efficient
  // ConvNets", ICLR 2017, Table 1/2: VGG-16 3.13e8, ResNet-56 1.25e8, ResNet-110 2.53e8; ResNet-20 4.1e7).
  // Our count is 2 FLOPs per MAC plus BN/ReLU/add/pool/loss on top.
  const auto [name, macs] = GENERATE(table<std::string, double>({
      {"resnet20-cifar", 41e6},
      {"resnet56-cifar", 125e6},
      {"resnet110-cifar", 253e6},
      {"vgg16-cifar", 313e6},
  }));
  CAPTURE(name);
  const double flops = zoo(name).fwd_flops_per_sample();
  CHECK_THAT(flops, WithinRel(2 * macs, 0.04));
  CHECK(flops > 2 * macs * 0.99);
}
