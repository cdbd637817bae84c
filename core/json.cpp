// Strict JSON reading with JSON-pointer error messages (see json.hpp).
#include "core/json.hpp"

#include "core/io.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <utility>

namespace ddlsim {

std::string json_pointer_append(std::string_view pointer, std::string_view key) {
  std::string out(pointer);
  out += '/';
  for (char c : key) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

std::string json_pointer_append(std::string_view pointer, std::size_t index) {
  return std::string(pointer) + "/" + std::to_string(index);
}

namespace {

// Line and column (from 1) of byte `offset` of `text`, which editors understand.
std::pair<std::size_t, std::size_t> line_column(std::string_view text, std::size_t offset) {
  std::size_t line = 1, column = 1;
  for (std::size_t i = 0; i < std::min(offset, text.size()); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return {line, column};
}

// The offset of the first number outside a string whose value overflows a double (nlohmann's out_of_range.406 does
// not say where), or npos.
std::size_t overflowing_number(std::string_view text) {
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
      continue;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
      std::size_t j = i + 1;
      while (j < text.size() && (std::isdigit(static_cast<unsigned char>(text[j])) != 0 || text[j] == '.' ||
                                 text[j] == 'e' || text[j] == 'E' || text[j] == '+' || text[j] == '-'))
        ++j;
      const std::string token(text.substr(i, j - i));
      if (!std::isfinite(std::strtod(token.c_str(), nullptr)))
        return i;
      i = j - 1;
    }
  }
  return std::string_view::npos;
}

// What nlohmann's parser lets through and strict JSON does not: duplicate keys (RFC 8259 says names "SHOULD be
// unique"; nlohmann keeps the last, silently) and nesting deeper than kMaxJsonDepth (which would exhaust the stack
// of anything that walks the document recursively). A SAX handler that checks every event, tracking the JSON pointer
// of the value being parsed so that the error can name it, then hands the event to nlohmann's own DOM builder. Not
// Json::parse with a callback: its builder scans the enclosing array for a discarded value at the end of every
// object, quadratic in an array of objects (a workload of 100,000 layers: 68 % of `check`'s 5.9 s; #31 R28).
class StrictSax {
public:
  StrictSax(Json& root, std::string origin, std::string base, std::size_t max_values, bool allow_exceptions)
      : dom_(root, allow_exceptions), origin_(std::move(origin)), base_(std::move(base)), max_values_(max_values) {}

  bool null() { return value() && dom_.null(); }
  bool boolean(bool b) { return value() && dom_.boolean(b); }
  bool number_integer(Json::number_integer_t n) { return value() && dom_.number_integer(n); }
  bool number_unsigned(Json::number_unsigned_t n) { return value() && dom_.number_unsigned(n); }
  bool number_float(Json::number_float_t x, const Json::string_t& text) {
    return value() && dom_.number_float(x, text);
  }
  bool string(Json::string_t& s) { return value() && dom_.string(s); }
  bool binary(Json::binary_t& b) { return value() && dom_.binary(b); }
  bool start_object(std::size_t size) { return open(false) && dom_.start_object(size); }
  bool start_array(std::size_t size) { return open(true) && dom_.start_array(size); }
  bool end_object() { return close() && dom_.end_object(); }
  bool end_array() { return close() && dom_.end_array(); }
  bool key(Json::string_t& k) {
    auto& f = frames_.back();
    f.key = k;
    if (!f.keys.insert(f.key).second)
      throw InputError(origin_, pointer(), "invalid JSON: duplicate key (each key may appear once in an object)");
    return dom_.key(k);
  }
  // Throws the parser's exception (parse_error, out_of_range) where exceptions are allowed.
  template <class Exception> bool parse_error(std::size_t at, const std::string& token, const Exception& e) {
    return dom_.parse_error(at, token, e);
  }
  [[nodiscard]] bool errored() const { return dom_.is_errored(); }

private:
  struct Frame {
    bool array;
    std::size_t index;
    std::string key;
    std::set<std::string, std::less<>> keys;
  };
  void count() {
    if (++values_ > max_values_)
      throw InputError(origin_, pointer(),
                       fmt::format("more than {} JSON values, more than any ddlsim input holds", max_values_));
  }
  bool value() {
    count();
    element_done();
    return true;
  }
  bool open(bool array) {
    count();
    if (frames_.size() >= static_cast<std::size_t>(kMaxJsonDepth))
      throw InputError(origin_, pointer(), fmt::format("invalid JSON: nested deeper than {} levels", kMaxJsonDepth));
    frames_.push_back({array, 0, {}, {}});
    return true;
  }
  bool close() {
    frames_.pop_back();
    element_done();
    return true;
  }
  void element_done() {
    if (!frames_.empty() && frames_.back().array)
      ++frames_.back().index;
  }
  [[nodiscard]] std::string pointer() const {
    std::string p = base_;
    for (const auto& f : frames_)
      p = f.array ? json_pointer_append(p, f.index) : json_pointer_append(p, f.key);
    return p;
  }

  nlohmann::detail::json_sax_dom_parser<Json> dom_;
  std::string origin_;
  std::string base_;
  std::size_t max_values_;
  std::size_t values_ = 0;
  std::vector<Frame> frames_;
};

} // namespace

std::optional<Json> parse_json_value(std::string_view text, const std::string& origin, const std::string& pointer) {
  Json value;
  StrictSax strict(value, origin, pointer, kMaxJsonValues, /*allow_exceptions=*/false);
  if (!Json::sax_parse(text.begin(), text.end(), &strict) || strict.errored())
    return std::nullopt;
  return value;
}

Json parse_json_text(std::string_view text, const std::string& origin, std::size_t max_values) {
  try {
    Json value;
    StrictSax strict(value, origin, "", max_values, /*allow_exceptions=*/true);
    Json::sax_parse(text.begin(), text.end(), &strict);
    return value;
  } catch (const Json::out_of_range&) {
    const auto at = overflowing_number(text);
    if (at == std::string_view::npos)
      throw InputError(origin, "", "invalid JSON: a number is out of range");
    const auto [line, column] = line_column(text, at);
    throw InputError(origin, "",
                     fmt::format("invalid JSON at line {}, column {}: the number is beyond the range of a double "
                                 "(about 1.8e308)",
                                 line, column));
  } catch (const Json::parse_error& e) {
    const auto [line, column] = line_column(text, e.byte == 0 ? 0 : e.byte - 1);
    std::string what = e.what();
    // nlohmann's message is "[json.exception.parse_error.101] parse error at line 1, column 2: syntax error ..."
    const auto colon = what.find("syntax error");
    const std::string reason = colon == std::string::npos ? what : what.substr(colon);
    throw InputError(origin, "", fmt::format("invalid JSON at line {}, column {}: {}", line, column, reason));
  }
}

Json load_json_file(const std::string& path) {
  return parse_json_text(read_file(path), path);
}
std::string json_type_phrase(const Json& j) {
  switch (j.type()) {
  case Json::value_t::null:
    return "null";
  case Json::value_t::object:
    return "an object";
  case Json::value_t::array:
    return "an array";
  case Json::value_t::string:
    return "a string";
  case Json::value_t::boolean:
    return "a boolean";
  case Json::value_t::number_integer:
  case Json::value_t::number_unsigned:
    return "an integer";
  case Json::value_t::number_float:
    return "a number";
  default:
    return "an unsupported value";
  }
}

ObjectReader::ObjectReader(const Json& value, std::string file, std::string pointer)
    : value_(&value), file_(std::move(file)), pointer_(std::move(pointer)) {
  if (!value.is_object())
    throw InputError(file_, pointer_, "expected an object, got " + json_type_phrase(value));
}

bool ObjectReader::has(std::string_view key) const {
  return value_->contains(key);
}

void ObjectReader::fail(std::string_view key, const std::string& message) const {
  throw InputError(file_, path(key), message);
}
void ObjectReader::fail_here(const std::string& message) const {
  throw InputError(file_, pointer_, message);
}

const Json* ObjectReader::optional(std::string_view key) {
  asked_.emplace(key);
  const auto it = value_->find(key);
  if (it == value_->end())
    return nullptr;
  read_.emplace(key);
  return &*it;
}

const Json& ObjectReader::required(std::string_view key) {
  const Json* v = optional(key);
  if (v != nullptr)
    return *v;
  // A missing key is often a misspelled one: blame the key the user wrote.
  for (const auto& [present, unused] : value_->items()) {
    if (asked_.contains(present) || edit_distance(present, key) > 2)
      continue;
    throw InputError(file_, path(present), fmt::format("unknown key (did you mean '{}'?)", key));
  }
  fail(key, "missing required key");
}

ObjectReader ObjectReader::object(std::string_view key) {
  return {required(key), file_, path(key)};
}

std::optional<ObjectReader> ObjectReader::optional_object(std::string_view key) {
  const Json* v = optional(key);
  if (v == nullptr)
    return std::nullopt;
  return ObjectReader(*v, file_, path(key));
}

std::optional<std::string> ObjectReader::optional_string(std::string_view key) {
  const Json* v = optional(key);
  if (v == nullptr)
    return std::nullopt;
  if (!v->is_string())
    fail(key, "expected a string, got " + json_type_phrase(*v));
  return v->get<std::string>();
}

std::string ObjectReader::string(std::string_view key) {
  required(key);
  return *optional_string(key);
}

std::optional<std::string> ObjectReader::optional_choice(std::string_view key,
                                                         const std::vector<std::string>& allowed) {
  auto s = optional_string(key);
  if (!s)
    return s;
  for (const auto& a : allowed)
    if (a == *s)
      return s;
  fail(key, fmt::format("unknown value '{}'{} (expected one of: {})", clip_user_text(*s), did_you_mean(*s, allowed),
                        fmt::join(allowed, ", ")));
}

std::string ObjectReader::choice(std::string_view key, const std::vector<std::string>& allowed) {
  required(key);
  return *optional_choice(key, allowed);
}

std::optional<double> ObjectReader::optional_number(std::string_view key, double min, double max) {
  const Json* v = optional(key);
  if (v == nullptr)
    return std::nullopt;
  if (!v->is_number()) {
    if (v->is_string())
      fail(key, fmt::format("expected a plain number without unit, got \"{}\"", v->get<std::string>()));
    fail(key, "expected a number, got " + json_type_phrase(*v));
  }
  const double x = v->get<double>();
  if (!(x >= min && x <= max))
    fail(key, fmt::format("{} is out of range [{}, {}]", x, min, max));
  return x;
}

double ObjectReader::number(std::string_view key, double min, double max) {
  required(key);
  return *optional_number(key, min, max);
}

std::optional<std::int64_t> ObjectReader::optional_integer(std::string_view key, std::int64_t min, std::int64_t max) {
  const Json* v = optional(key);
  if (v == nullptr)
    return std::nullopt;
  if (!v->is_number_integer())
    fail(key, "expected an integer, got " + json_type_phrase(*v));
  const auto x = v->get<std::int64_t>();
  if (v->is_number_unsigned() && v->get<std::uint64_t>() > static_cast<std::uint64_t>(max))
    fail(key, fmt::format("{} is out of range [{}, {}]", v->get<std::uint64_t>(), min, max));
  if (x < min || x > max)
    fail(key, fmt::format("{} is out of range [{}, {}]", x, min, max));
  return x;
}

std::int64_t ObjectReader::integer(std::string_view key, std::int64_t min, std::int64_t max) {
  required(key);
  return *optional_integer(key, min, max);
}

std::optional<bool> ObjectReader::optional_boolean(std::string_view key) {
  const Json* v = optional(key);
  if (v == nullptr)
    return std::nullopt;
  if (!v->is_boolean())
    fail(key, "expected true or false, got " + json_type_phrase(*v));
  return v->get<bool>();
}

bool ObjectReader::boolean(std::string_view key) {
  required(key);
  return *optional_boolean(key);
}

double parse_quantity_at(const Json& value, Dimension d, const std::string& file, const std::string& pointer,
                         double min, bool min_exclusive) {
  if (value.is_number())
    throw InputError(file, pointer,
                     fmt::format("{} has no unit; write a {} string such as {}", value.dump(), dimension_name(d),
                                 dimension_example(d)));
  if (!value.is_string())
    throw InputError(file, pointer,
                     fmt::format("expected a {} string, got {}", dimension_name(d), json_type_phrase(value)));
  double x = 0;
  try {
    x = parse_quantity(value.get<std::string>(), d);
  } catch (const std::invalid_argument& e) {
    throw InputError(file, pointer, e.what());
  }
  if (const auto range = quantity_range_error(x, d, value.get<std::string>()); !range.empty())
    throw InputError(file, pointer, range);
  if (min_exclusive ? !(x > min) : !(x >= min))
    throw InputError(file, pointer,
                     fmt::format("{} must be {} {}", value.get<std::string>(),
                                 min_exclusive ? "greater than" : "at least", min == 0 ? "0" : fmt::format("{}", min)));
  return x;
}

std::optional<double> ObjectReader::optional_quantity(std::string_view key, Dimension d, double min,
                                                      bool min_exclusive) {
  const Json* v = optional(key);
  if (v == nullptr)
    return std::nullopt;
  return parse_quantity_at(*v, d, file_, path(key), min, min_exclusive);
}

double ObjectReader::quantity(std::string_view key, Dimension d, double min, bool min_exclusive) {
  required(key);
  return *optional_quantity(key, d, min, min_exclusive);
}

void ObjectReader::finish() const {
  for (const auto& [key, unused] : value_->items()) {
    if (read_.contains(key))
      continue;
    const std::string near = near_names(key, std::vector<std::string>(asked_.begin(), asked_.end()));
    throw InputError(
        file_, path(key),
        fmt::format("unknown key ({}allowed here: {})", near.empty() ? "" : near + " ", fmt::join(asked_, ", ")));
  }
}

} // namespace ddlsim
