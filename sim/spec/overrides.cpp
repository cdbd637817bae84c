// `--set key.path=VALUE` on a raw scenario document, and which overrides make a run a what-if of the measured one
// (overrides.hpp).
#include "sim/spec/overrides.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <string_view>

namespace ddlsim::sim {

// The JSON pointer of a dotted key ("cluster.nodes" -> "/cluster/nodes"), each part escaped (RFC 6901).
std::string dotted_key_pointer(std::string_view key) {
  std::string pointer;
  for (std::size_t start = 0;;) {
    const auto dot = key.find('.', start);
    pointer = json_pointer_append(pointer, key.substr(start, dot == std::string_view::npos ? dot : dot - start));
    if (dot == std::string_view::npos)
      return pointer;
    start = dot + 1;
  }
}

void apply_override(Json& doc, const std::string& dotted_key, const Json& value, const std::string& origin) {
  if (dotted_key.empty())
    throw InputError(origin, "", "empty key in override");
  Json* node = &doc;
  std::string pointer;
  std::size_t start = 0;
  while (true) {
    const auto dot = dotted_key.find('.', start);
    const std::string part = dotted_key.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (part.empty())
      throw InputError(origin, "", fmt::format("malformed key '{}' in override", dotted_key));
    if (!node->is_object())
      throw InputError(origin, pointer, fmt::format("cannot set '{}': {} is not an object", dotted_key, pointer));
    pointer = json_pointer_append(pointer, part);
    node = &(*node)[part];
    if (dot == std::string::npos)
      break;
    if (node->is_null())
      *node = Json::object();
    start = dot + 1;
  }
  *node = value;
}

namespace {

// Whether `s` is well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, at most U+10FFFF).
bool valid_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const int extra = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xE ? 2 : (c >> 3) == 0x1E ? 3 : -1;
    if (extra < 0 || i + static_cast<std::size_t>(extra) >= s.size() + (extra == 0 ? 1u : 0u))
      return false; // a stray continuation byte, an invalid lead byte, or a sequence cut short
    std::uint32_t code = extra == 0 ? c : c & (0x3Fu >> extra);
    for (int k = 1; k <= extra; ++k) {
      const auto d = static_cast<unsigned char>(s[i + static_cast<std::size_t>(k)]);
      if ((d >> 6) != 0x2)
        return false;
      code = (code << 6) | (d & 0x3Fu);
    }
    static constexpr std::uint32_t kSmallest[] = {0, 0x80, 0x800, 0x10000};
    if (code < kSmallest[extra] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF))
      return false;
    i += static_cast<std::size_t>(extra) + 1;
  }
  return true;
}

// Removes a dotted key from `doc` where it is present (nothing to do where a part of it is missing).
void remove_key(Json& doc, const std::string& dotted_key) {
  Json* node = &doc;
  std::size_t start = 0;
  for (auto dot = dotted_key.find('.'); dot != std::string::npos; dot = dotted_key.find('.', start)) {
    const std::string part = dotted_key.substr(start, dot - start);
    if (!node->is_object() || !node->contains(part))
      return;
    node = &(*node)[part];
    start = dot + 1;
  }
  if (node->is_object())
    node->erase(dotted_key.substr(start));
}

} // namespace

void apply_override(Json& doc, const std::string& assignment, const std::string& origin) {
  if (!valid_utf8(assignment))
    throw InputError(origin, "", "an override (--set) is not valid UTF-8 text");
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw InputError(origin, "", fmt::format("override '{}' is not of the form key.path=VALUE", assignment));
  const std::string key = assignment.substr(0, eq);
  const std::string text = assignment.substr(eq + 1);
  // not JSON: a plain string, e.g. strategy.kind=mg-wfbp
  Json value = parse_json_value(text, origin, dotted_key_pointer(key)).value_or(Json(text));
  if (value.is_null()) { // key=null removes the key: its default applies
    remove_key(doc, key);
    return;
  }
  apply_override(doc, key, value, origin);
}

// The keys of `overrides` that change, from `original` to `doc`, what a scenario's `measured` run was: all but how
// it is simulated (engine, flow, variability), its name, description and sweep, and `measured` itself.
std::vector<std::string> what_if_keys(const Json& original, const Json& doc,
                                      const std::vector<std::string>& overrides) {
  static const std::set<std::string, std::less<>> kHow{"engine",      "flow",  "variability", "name",
                                                       "description", "sweep", "measured"};
  std::vector<std::string> keys;
  for (const auto& o : overrides) {
    const std::string key = o.substr(0, o.find('='));
    if (kHow.contains(key.substr(0, key.find('.'))) || std::find(keys.begin(), keys.end(), key) != keys.end())
      continue;
    const Json::json_pointer at(dotted_key_pointer(key));
    const bool before = original.contains(at), after = doc.contains(at);
    if (before != after || (before && original.at(at) != doc.at(at)))
      keys.push_back(key);
  }
  return keys;
}

} // namespace ddlsim::sim
