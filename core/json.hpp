// Strict JSON reading: every access names its JSON pointer, every unknown key is an error, every dimensional
// value must carry a unit. Scenario, calibration and workload loaders are built on ObjectReader.
#pragma once

#include "core/error.hpp"
#include "core/units.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace ddlsim {

using Json = nlohmann::json;
/// Keeps object keys in insertion order, so that outputs list fields in the order we write them.
using OrderedJson = nlohmann::ordered_json;

/// Appends `key` to a JSON pointer, escaping '~' and '/' (RFC 6901).
[[nodiscard]] std::string json_pointer_append(std::string_view pointer, std::string_view key);
[[nodiscard]] std::string json_pointer_append(std::string_view pointer, std::size_t index);

/// The deepest nesting of arrays and objects a JSON input may have (ddlsim's own files need 8).
inline constexpr int kMaxJsonDepth = 256;

/// The most values (numbers, strings, arrays, objects...) a JSON input may hold: ~40 B each in memory, 1.3 GiB at the
/// bound; the largest of ddlsim's own inputs (a workload of 100,000 layers) holds a few million.
inline constexpr std::size_t kMaxJsonValues = std::size_t{1} << 25;

/// Reads and parses a JSON file; syntax errors become InputError with line and column, and so do duplicate keys,
/// nesting deeper than kMaxJsonDepth and more than kMaxJsonValues values (with the JSON pointer where they occur).
[[nodiscard]] Json load_json_file(const std::string& path);
/// Parses JSON text; `origin` names it in errors. `max_values`: kMaxJsonValues but in tests of the bound.
[[nodiscard]] Json parse_json_text(std::string_view text, const std::string& origin,
                                   std::size_t max_values = kMaxJsonValues);
/// Parses `text` as one JSON value (e.g. the VALUE of `--set key=VALUE`, which lands at `pointer`): nullopt if it
/// is not JSON; duplicate keys and too deep nesting are InputErrors, as in parse_json_text.
[[nodiscard]] std::optional<Json> parse_json_value(std::string_view text, const std::string& origin,
                                                   const std::string& pointer);

/// Type name for messages: "a string", "a number", ...
[[nodiscard]] std::string json_type_phrase(const Json& j);

/// Reads one JSON object strictly. Call finish() when done: keys never read are reported as unknown.
class ObjectReader {
public:
  /// Throws if `value` is not an object.
  ObjectReader(const Json& value, std::string file, std::string pointer);

  [[nodiscard]] bool has(std::string_view key) const;
  [[nodiscard]] const std::string& file() const noexcept { return file_; }
  [[nodiscard]] const std::string& pointer() const noexcept { return pointer_; }
  [[nodiscard]] std::string path(std::string_view key) const { return json_pointer_append(pointer_, key); }
  [[nodiscard]] const Json& json() const noexcept { return *value_; }

  /// The raw value at `key` (marks it read); throws "missing required key" if absent.
  const Json& required(std::string_view key);
  const Json* optional(std::string_view key);

  ObjectReader object(std::string_view key);
  std::optional<ObjectReader> optional_object(std::string_view key);

  std::string string(std::string_view key);
  std::optional<std::string> optional_string(std::string_view key);
  /// A string from a closed set; the message lists the allowed values.
  std::string choice(std::string_view key, const std::vector<std::string>& allowed);
  std::optional<std::string> optional_choice(std::string_view key, const std::vector<std::string>& allowed);

  double number(std::string_view key, double min = -std::numeric_limits<double>::infinity(),
                double max = std::numeric_limits<double>::infinity());
  std::optional<double> optional_number(std::string_view key, double min = -std::numeric_limits<double>::infinity(),
                                        double max = std::numeric_limits<double>::infinity());
  std::int64_t integer(std::string_view key, std::int64_t min = std::numeric_limits<std::int64_t>::min(),
                       std::int64_t max = std::numeric_limits<std::int64_t>::max());
  std::optional<std::int64_t> optional_integer(std::string_view key,
                                               std::int64_t min = std::numeric_limits<std::int64_t>::min(),
                                               std::int64_t max = std::numeric_limits<std::int64_t>::max());
  bool boolean(std::string_view key);
  std::optional<bool> optional_boolean(std::string_view key);

  /// A dimensional quantity "<number> <unit>" in base units, checked against [min, max] (base units).
  /// `min_exclusive` makes the lower bound strict (e.g. bandwidth > 0).
  double quantity(std::string_view key, Dimension d, double min = 0, bool min_exclusive = false);
  std::optional<double> optional_quantity(std::string_view key, Dimension d, double min = 0,
                                          bool min_exclusive = false);

  /// Throws InputError naming the first key that was never read.
  void finish() const;

  [[noreturn]] void fail(std::string_view key, const std::string& message) const;
  [[noreturn]] void fail_here(const std::string& message) const;

private:
  const Json* value_;
  std::string file_;
  std::string pointer_;
  std::set<std::string, std::less<>> read_;  // keys present and read
  std::set<std::string, std::less<>> asked_; // keys this reader knows, present or not
};

/// Parses a dimensional string value at an arbitrary pointer (for array elements).
[[nodiscard]] double parse_quantity_at(const Json& value, Dimension d, const std::string& file,
                                       const std::string& pointer, double min = 0, bool min_exclusive = false);

} // namespace ddlsim
