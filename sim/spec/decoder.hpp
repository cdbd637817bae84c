// Parsing of a decoder language model's shape: `model.transformer` (the parametric decoder, or changes to a zoo
// decoder's shape) and `model.attention` (docs/scenario.md, "Decoder language models").
#pragma once

#include "core/json.hpp"
#include "dag/model.hpp"

#include <optional>
#include <string_view>

namespace ddlsim::sim {

/// `model.transformer` read over `base`: with `parametric` (zoo "transformer") layers, hidden, heads, sequence and
/// vocabulary are required, else every key is optional. Every shape is checked (exit 2 with the key's path).
[[nodiscard]] dag::TransformerSpec parse_decoder(ObjectReader t, dag::TransformerSpec base, bool parametric);

/// The zoo entry's decoder shape when `zoo` names a decoder language model (or "transformer": GPT-2's defaults).
[[nodiscard]] std::optional<dag::TransformerSpec> decoder_base(std::string_view zoo);

} // namespace ddlsim::sim
