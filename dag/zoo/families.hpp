// Builders of the model-zoo families, one per reference source file (torchvision models/*.py, HF modeling_*.py).
// Private to dag/zoo: the public entry points are in zoo.hpp.
#pragma once

#include "dag/model.hpp"

#include <optional>
#include <string_view>

namespace ddlsim::dag::detail {

[[nodiscard]] Model build_alexnet();
/// vgg11, vgg13, vgg16, vgg19 (no batch norm); std::nullopt for other names.
[[nodiscard]] std::optional<Model> build_vgg(std::string_view name);
/// resnet18/34/50/101/152, resnext50_32x4d, resnext101_32x8d, wide_resnet50_2, wide_resnet101_2.
[[nodiscard]] std::optional<Model> build_resnet(std::string_view name);
[[nodiscard]] Model build_googlenet();
[[nodiscard]] Model build_inception_v3();
/// densenet121/161/169/201.
[[nodiscard]] std::optional<Model> build_densenet(std::string_view name);
/// resnet20-cifar, resnet56-cifar, resnet110-cifar (He et al. 2016, Section 4.2, option-A shortcuts).
[[nodiscard]] std::optional<Model> build_resnet_cifar(std::string_view name);
/// vgg16-cifar: VGG-16 with batch norm and a single Linear(512, 10) (kuangliu/pytorch-cifar).
[[nodiscard]] Model build_vgg16_cifar();
/// lstm-ptb: Zaremba et al. 2014's large 2-layer LSTM language model (1500 hidden, 10k words, 35 steps).
[[nodiscard]] Model build_lstm_ptb();
/// bert-base, bert-large (HF BertForPreTraining).
[[nodiscard]] std::optional<Model> build_bert(std::string_view name);

} // namespace ddlsim::dag::detail
