// Registry of the built-in model zoo: maps torchvision / Hugging Face model names and the CIFAR-10 / Penn Treebank
// benchmark models (cifar.cpp, lstm.cpp) to the family builders.
// GPT-2 sizes are HF's gpt2* configs; GPT-3 sizes are Brown et al. 2020, "Language Models are Few-Shot
// Learners", Table 2.1 (dense attention modelled throughout; 13B with d_model 5120 = 40 heads x 128).
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

constexpr std::array<LmEntry, 8> kLanguageModels{{
    {"gpt2", {12, 768, 12, 1024, 50257}},
    {"gpt2-medium", {24, 1024, 16, 1024, 50257}},
    {"gpt2-large", {36, 1280, 20, 1024, 50257}},
    {"gpt2-xl", {48, 1600, 25, 1024, 50257}},
    {"gpt3-2.7b", {32, 2560, 32, 2048, 50257}},
    {"gpt3-6.7b", {32, 4096, 32, 2048, 50257}},
    {"gpt3-13b", {40, 5120, 40, 2048, 50257}},
    {"gpt3-175b", {96, 12288, 96, 2048, 50257}},
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

std::optional<Model> build_zoo_model(std::string_view name) {
  for (const LmEntry& lm : kLanguageModels) {
    if (lm.name == name) {
      return build_transformer_lm(lm.spec, std::string(name));
    }
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
