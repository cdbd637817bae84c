// Built-in model zoo. Every model is derived from its architecture definition (layer shapes -> parameter
// tensors, FLOPs, activation bytes), following the torchvision / Hugging Face reference implementations.
#pragma once

#include "dag/model.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ddlsim::dag {

/// Names accepted by `model.zoo`, sorted; `ddlsim list models` prints these.
[[nodiscard]] std::vector<std::string> zoo_model_names();

/// Builds a zoo model by name; std::nullopt if the name is unknown.
[[nodiscard]] std::optional<Model> build_zoo_model(std::string_view name);

/// The shape of the zoo's decoder language model `name` (GPT-2, GPT-3, the Llama family, Mistral, Qwen2.5,
/// GPT-NeoX); std::nullopt for any other name (BERT and the vision models included).
[[nodiscard]] std::optional<TransformerSpec> zoo_decoder_spec(std::string_view name);

/// The parametric transformer language model (GPT-2 style: token + position embeddings, `layers` blocks of
/// LayerNorm, attention (fused qkv), LayerNorm, MLP with 4x hidden, final LayerNorm, tied LM head). The model's
/// `transformer` records `spec` and where the blocks are.
[[nodiscard]] Model build_transformer_lm(const TransformerSpec& spec, std::string name = "transformer");

} // namespace ddlsim::dag
