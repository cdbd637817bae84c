// `--set key.path=VALUE` overrides of a raw scenario document (docs/contracts.md), and which of them change the run
// that a scenario's `measured` describes.
#pragma once

#include "core/json.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace ddlsim::sim {

/// Applies one `--set key.path=VALUE` override to a raw scenario document. VALUE is parsed as JSON; text that
/// is not valid JSON is taken as a string. Throws InputError naming `origin` (the scenario file).
void apply_override(Json& doc, const std::string& assignment, const std::string& origin);
void apply_override(Json& doc, const std::string& dotted_key, const Json& value, const std::string& origin);

/// The JSON pointer of a dotted key ("cluster.nodes" -> "/cluster/nodes"), each part escaped (RFC 6901).
[[nodiscard]] std::string dotted_key_pointer(std::string_view key);

/// The keys of `overrides` ("key=VALUE") that change, from `original` to `doc`, what a scenario's `measured` run
/// was: all but how it is simulated (engine, flow, variability), its name, description and sweep, and `measured`.
[[nodiscard]] std::vector<std::string> what_if_keys(const Json& original, const Json& doc,
                                                    const std::vector<std::string>& overrides);

} // namespace ddlsim::sim
