// Parsing of a decoder's shape (sim/spec/decoder.hpp). The builder (dag/zoo/transformer.cpp) checks the shape again
// and states the formulas; here every mistake gets its key's path.
#include "sim/spec/decoder.hpp"

#include "dag/zoo/zoo.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

namespace ddlsim::sim {

namespace {

template <std::size_t N> std::vector<std::string> choices(const std::array<std::string_view, N>& names) {
  return {names.begin(), names.end()};
}

// The option named `key` (one of `names`), else `current`.
template <typename Enum, std::size_t N>
Enum read_option(ObjectReader& t, std::string_view key, const std::array<std::string_view, N>& names, Enum current) {
  const auto name = t.optional_choice(key, choices(names));
  if (!name)
    return current;
  const auto at = std::find(names.begin(), names.end(), *name) - names.begin();
  return static_cast<Enum>(at);
}

int read_size(ObjectReader& t, std::string_view key, int current, bool required, std::int64_t max) {
  if (required)
    return static_cast<int>(t.integer(key, 1, max));
  return static_cast<int>(t.optional_integer(key, 1, max).value_or(current));
}

void check_decoder(ObjectReader& t, const dag::TransformerSpec& spec) {
  if (spec.hidden % spec.heads != 0)
    t.fail("heads", fmt::format("hidden ({}) must be divisible by heads ({})", spec.hidden, spec.heads));
  if (spec.kv_heads > 0 && spec.heads % spec.kv_heads != 0)
    t.fail("kv_heads", fmt::format("kv_heads ({}) must divide heads ({}): each key/value head serves a whole group "
                                   "of query heads",
                                   spec.kv_heads, spec.heads));
}

} // namespace

std::optional<dag::TransformerSpec> decoder_base(std::string_view zoo) {
  if (zoo == "transformer")
    return dag::TransformerSpec{};
  return dag::zoo_decoder_spec(zoo);
}

dag::TransformerSpec parse_decoder(ObjectReader t, dag::TransformerSpec spec, bool parametric) {
  spec.layers = read_size(t, "layers", spec.layers, parametric, 10000);
  spec.hidden = read_size(t, "hidden", spec.hidden, parametric, 1 << 20);
  spec.heads = read_size(t, "heads", spec.heads, parametric, 1 << 14);
  spec.sequence = read_size(t, "sequence", spec.sequence, parametric, 1 << 24);
  spec.vocabulary = read_size(t, "vocabulary", spec.vocabulary, parametric, 1 << 24);
  spec.kv_heads = read_size(t, "kv_heads", spec.kv_heads, false, 1 << 14);
  spec.mlp = read_option(t, "mlp", dag::kMlpNames, spec.mlp);
  spec.ffn_hidden = read_size(t, "ffn_hidden", spec.ffn_hidden, false, 1 << 24);
  spec.norm = read_option(t, "norm", dag::kNormNames, spec.norm);
  spec.position = read_option(t, "position", dag::kPositionNames, spec.position);
  spec.tied_embeddings = t.optional_boolean("tied_embeddings").value_or(spec.tied_embeddings);
  spec.bias = read_option(t, "bias", dag::kLinearBiasNames, spec.bias);
  spec.dropout = t.optional_boolean("dropout").value_or(spec.dropout);
  spec.parallel_residual = t.optional_boolean("parallel_residual").value_or(spec.parallel_residual);
  check_decoder(t, spec);
  t.finish();
  return spec;
}

} // namespace ddlsim::sim
