// nccl-tests `-J` JSON output (nccl_tests.hpp), as src/util.cu writes it (JSON_FILE_VERSION 1 to 3): "args" (the
// binary first, which names the collective), "config" with "devices" (one entry per process), "results" (one object
// per size: size, count, type, redop, root as a padded string, out_of_place / in_place {time or cpu_time, alg_bw,
// bus_bw, nwrong}), "out_of_bounds", "average_bus_bandwidth". Booleans are written as the strings "true" / "false"
// (jsonBool), a NaN as "nan" (jsonDouble); before 2.17.9 (85ca91d) the key was "average_bus_bandwidith"
// holding "bandwidith".
#include "calibrate/nccl_tests_detail.hpp"
#include "core/error.hpp"
#include "core/json.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cstdint>
#include <limits>

namespace ddlsim::calibrate::detail {
namespace {

constexpr int kNewestVersion = 3; // src/util.cu, JSON_FILE_VERSION

class JsonReader {
public:
  JsonReader(const std::string& origin, const NcclReadOptions& options) : origin_(origin), options_(options) {}

  NcclTestsLog read(const Json& doc);

private:
  [[noreturn]] void fail(const std::string& pointer, const std::string& message) const {
    throw InputError(origin_, pointer, message);
  }
  static std::string at(const std::string& pointer, std::string_view key) { return json_pointer_append(pointer, key); }

  const Json* member(const Json& object, std::string_view key) const {
    const auto it = object.find(key);
    return it == object.end() ? nullptr : &*it;
  }
  const Json& required(const Json& object, std::string_view key, const std::string& pointer) const {
    const Json* value = member(object, key);
    if (!value)
      fail(pointer, fmt::format("missing required key '{}'", key));
    return *value;
  }
  void expect_object(const Json& value, const std::string& pointer) const {
    if (!value.is_object())
      fail(pointer, "expected an object, got " + json_type_phrase(value));
  }
  double number(const Json& value, const std::string& pointer) const {
    if (value.is_number())
      return value.get<double>();
    if (value.is_string())
      fail(pointer, fmt::format("is the string \"{}\", not a number (nccl-tests writes a NaN as \"nan\")",
                                value.get<std::string>()));
    fail(pointer, "expected a number, got " + json_type_phrase(value));
  }
  std::uint64_t unsigned_integer(const Json& value, const std::string& pointer) const {
    if (value.is_number_unsigned() || (value.is_number_integer() && value.get<std::int64_t>() >= 0))
      return value.get<std::uint64_t>();
    fail(pointer, "expected a non-negative integer, got " + json_type_phrase(value));
  }
  // An integer in [min, max]: every count read is range-checked before it is converted or multiplied.
  std::int64_t integer(const Json& value, const std::string& pointer, std::int64_t min, std::int64_t max) const {
    if (value.is_number_integer()) {
      const bool too_big = value.is_number_unsigned() && value.get<std::uint64_t>() > static_cast<std::uint64_t>(max);
      if (!too_big && value.get<std::int64_t>() >= min && value.get<std::int64_t>() <= max)
        return value.get<std::int64_t>();
      fail(pointer, fmt::format("{} is out of range [{}, {}]", value.dump(), min, max));
    }
    fail(pointer, "expected an integer, got " + json_type_phrase(value));
  }
  std::string string(const Json& value, const std::string& pointer) const {
    if (!value.is_string())
      fail(pointer, "expected a string, got " + json_type_phrase(value));
    return value.get<std::string>();
  }
  // A boolean, or the strings "true" / "false" nccl-tests writes for one; "unchecked" (the average bandwidth's
  // "okay" without a threshold) when `unchecked_allowed`, as nullopt.
  std::optional<bool> flag(const Json& value, const std::string& pointer, bool unchecked_allowed) const {
    if (value.is_boolean())
      return value.get<bool>();
    if (value.is_string()) {
      const auto& s = value.get_ref<const std::string&>();
      if (s == "true" || s == "false")
        return s == "true";
      if (unchecked_allowed && s == "unchecked")
        return std::nullopt;
    }
    fail(pointer, fmt::format("expected true or false (or the strings \"true\", \"false\"{}), got {}",
                              unchecked_allowed ? ", \"unchecked\"" : "", value.dump()));
  }

  std::optional<NcclCollective> named_collective(const Json& doc);
  std::vector<DeviceEntry> devices(const Json& config, const std::string& pointer) const;
  NcclTiming timing(const Json& value, const std::string& pointer);
  void footer(const Json& doc);

  const std::string& origin_;
  const NcclReadOptions& options_;
  NcclTestsLog log_;
  std::size_t wrong_rows_ = 0;
  std::string first_wrong_;
};

std::optional<NcclCollective> JsonReader::named_collective(const Json& doc) {
  const Json* args = member(doc, "args");
  if (!args)
    return std::nullopt;
  if (!args->is_array())
    fail("/args", "expected an array, got " + json_type_phrase(*args));
  if (args->empty())
    return std::nullopt;
  return find_nccl_collective(string((*args)[0], "/args/0"));
}

std::vector<DeviceEntry> JsonReader::devices(const Json& config, const std::string& pointer) const {
  std::vector<DeviceEntry> listing;
  const Json* list = member(config, "devices");
  if (!list)
    return listing;
  const std::string list_pointer = at(pointer, "devices");
  if (!list->is_array())
    fail(list_pointer, "expected an array, got " + json_type_phrase(*list));
  if (list->size() > static_cast<std::size_t>(kMaxRanks))
    fail(list_pointer,
         fmt::format("{} devices, more than the {} ranks a communicator has here", list->size(), kMaxRanks));
  for (std::size_t i = 0; i < list->size(); ++i) {
    const Json& d = (*list)[i];
    const std::string p = json_pointer_append(list_pointer, i);
    expect_object(d, p);
    DeviceEntry e;
    e.rank = static_cast<int>(integer(required(d, "rank", p), at(p, "rank"), 0, kMaxRanks - 1));
    if (const Json* g = member(d, "group"))
      e.group = static_cast<int>(integer(*g, at(p, "group"), 0, std::numeric_limits<int>::max()));
    e.host = string(required(d, "hostname", p), at(p, "hostname"));
    listing.push_back(std::move(e));
  }
  return listing;
}

NcclTiming JsonReader::timing(const Json& value, const std::string& pointer) {
  expect_object(value, pointer);
  NcclTiming t;
  const char* time_key = member(value, "time") ? "time" : "cpu_time"; // cpu_time with -C 1
  const double time_us = number(required(value, time_key, pointer), at(pointer, time_key));
  if (!(time_us > 0))
    fail(at(pointer, time_key), fmt::format("is {} us; a time must be > 0", time_us));
  t.time_s = time_us * 1e-6;
  for (const auto& [key, out] : {std::pair{"alg_bw", &t.algbw_Bps}, std::pair{"bus_bw", &t.busbw_Bps}}) {
    const double gbps = number(required(value, key, pointer), at(pointer, key));
    if (gbps < 0)
      fail(at(pointer, key), fmt::format("is {} GB/s; a bandwidth must be >= 0", gbps));
    *out = gbps * 1e9;
  }
  if (const Json* wrong = member(value, "nwrong"); wrong && !wrong->is_null()) {
    t.wrong = number(*wrong, at(pointer, "nwrong"));
    if (*t.wrong > 0 && wrong_rows_++ == 0)
      first_wrong_ = pointer;
  }
  return t;
}

void JsonReader::footer(const Json& doc) {
  if (const Json* oob = member(doc, "out_of_bounds")) {
    expect_object(*oob, "/out_of_bounds");
    const Json* okay = member(*oob, "okay");
    const bool ok = !okay || flag(*okay, "/out_of_bounds/okay", false).value_or(true);
    const Json* count = member(*oob, "count");
    if (!ok || (count && unsigned_integer(*count, "/out_of_bounds/count") > 0))
      log_.notes.push_back("/out_of_bounds: nccl-tests reports out-of-bounds values (validation FAILED)");
  }
  for (const char* key : {"average_bus_bandwidth", "average_bus_bandwidith"}) {
    const Json* avg = member(doc, key);
    if (!avg)
      continue;
    const std::string p = std::string("/") + key;
    expect_object(*avg, p);
    for (const char* bw : {"bandwidth", "bandwidith"})
      if (const Json* v = member(*avg, bw); v && !(v->is_string() && v->get<std::string>() == "nan"))
        (void)number(*v, at(p, bw)); // "nan" when no size ran
    if (const Json* okay = member(*avg, "okay"); okay && flag(*okay, at(p, "okay"), true) == false)
      log_.notes.push_back(p + ": nccl-tests reports the average bus bandwidth below its threshold (check FAILED)");
  }
}

NcclTestsLog JsonReader::read(const Json& doc) {
  if (!doc.is_object())
    fail("", "expected a JSON object (nccl-tests -J output), got " + json_type_phrase(doc));
  if (const Json* version = member(doc, "version")) {
    const auto v = unsigned_integer(*version, "/version");
    if (v > kNewestVersion)
      log_.notes.push_back(
          fmt::format("/version: {} is newer than the newest this reader knows ({}); read as that", v, kNewestVersion));
  }

  const auto named = named_collective(doc);
  if (named && options_.collective && *named != *options_.collective)
    fail("/args/0", fmt::format("the binary is {}_perf, but {} was asked for", nccl_collective_name(*named),
                                nccl_collective_name(*options_.collective)));
  if (!named && !options_.collective)
    fail("/args/0", "the command line does not name an nccl-tests benchmark this reader knows (all_reduce_perf, "
                    "all_gather_perf, ...); pass the collective");
  const NcclCollective collective = named ? *named : *options_.collective;

  std::vector<DeviceEntry> listing;
  std::int64_t per_entry = 1; // threads x GPUs per process: at most kMaxRanks x kMaxRanks before the check
  if (const Json* config = member(doc, "config")) {
    expect_object(*config, "/config");
    for (const char* key : {"nthreads", "ngpus"})
      if (const Json* v = member(*config, key)) {
        per_entry *= integer(*v, at("/config", key), 1, kMaxRanks);
        if (per_entry > kMaxRanks)
          fail(at("/config", key), fmt::format("nthreads x ngpus is {}, more than the {} ranks a communicator has here",
                                               per_entry, kMaxRanks));
      }
    listing = devices(*config, "/config");
  }
  const Communicator comm =
      resolve_communicator(listing, static_cast<int>(per_entry), false, options_, origin_, "/config/devices");

  const Json& results = required(doc, "results", "");
  if (!results.is_array())
    fail("/results", "expected an array, got " + json_type_phrase(results));
  if (results.empty())
    fail("/results", "no results (did the run stop before its first size?)");
  if (results.size() > options_.max_rows)
    fail("/results", fmt::format("{} results, more than the {} ddlsim reads from one log (calibrate/nccl_tests.hpp)",
                                 results.size(), options_.max_rows));
  std::optional<std::string> busbw_note;
  const Resolution resolution{0.5e-6, 0.5e-6}; // "%lf": six decimals of GB/s
  for (std::size_t i = 0; i < results.size(); ++i) {
    const Json& r = results[i];
    const std::string p = json_pointer_append("/results", i);
    expect_object(r, p);
    NcclMeasurement m;
    m.collective = collective;
    m.ranks = comm.ranks;
    m.nodes = comm.nodes;
    m.size_bytes = unsigned_integer(required(r, "size", p), at(p, "size"));
    m.count = unsigned_integer(required(r, "count", p), at(p, "count"));
    m.type = string(required(r, "type", p), at(p, "type"));
    if (const Json* redop = member(r, "redop"))
      m.redop = string(*redop, at(p, "redop"));
    if (const Json* root = member(r, "root")) {
      if (root->is_number_integer()) {
        m.root = static_cast<int>(integer(*root, at(p, "root"), -1, kMaxRanks - 1));
      } else {
        const std::string text = string(*root, at(p, "root")); // "%6i": "    -1"
        const auto first = text.find_first_not_of(' ');
        const char* begin = text.data() + (first == std::string::npos ? text.size() : first);
        const auto [end, ec] = std::from_chars(begin, text.data() + text.size(), m.root);
        if (ec != std::errc{} || end != text.data() + text.size() || begin == end)
          fail(at(p, "root"), fmt::format("\"{}\" is not an integer", text));
      }
    }
    if (const Json* oop = member(r, "out_of_place"); oop && !oop->is_null())
      m.out_of_place = timing(*oop, at(p, "out_of_place"));
    m.in_place = timing(required(r, "in_place", p), at(p, "in_place"));
    check_size(m, origin_, p);
    if (const auto range = out_of_range(m))
      fail(p, *range);
    if (!busbw_note) {
      if (m.out_of_place)
        if (auto note = busbw_mismatch(m, *m.out_of_place, resolution))
          busbw_note = fmt::format("{}: out-of-place {}", p, *note);
      if (auto note = busbw_mismatch(m, m.in_place, resolution); note && !busbw_note)
        busbw_note = fmt::format("{}: in-place {}", p, *note);
    }
    log_.rows.push_back(std::move(m));
  }
  if (busbw_note)
    log_.notes.push_back(*busbw_note);
  if (wrong_rows_ > 0)
    log_.notes.push_back(fmt::format("{}: validation failed (nwrong > 0) in {} result(s)", first_wrong_, wrong_rows_));
  footer(doc);
  return std::move(log_);
}

} // namespace

NcclTestsLog parse_json(std::string_view text, const std::string& origin, const NcclReadOptions& options) {
  return JsonReader(origin, options).read(parse_json_text(text, origin));
}

} // namespace ddlsim::calibrate::detail
