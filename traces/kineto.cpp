// Kineto trace reader (kineto.hpp): zlib inflates a gzip'd file, nlohmann's SAX interface streams the JSON; each
// traceEvents entry is built as a small DOM, reduced to an Event and dropped.
#include "traces/kineto.hpp"

#include "core/error.hpp"
#include "core/io.hpp"
#include "core/units.hpp"

#include <fmt/format.h>
#include <zlib.h>

#include <cmath>
#include <istream>
#include <map>
#include <streambuf>
#include <utility>

namespace ddlsim::traces {
namespace {

constexpr double kMaxTimestampUs = 9007199254740992.0;       // 2^53 us: times within it are exact to the microsecond
constexpr std::int64_t kMaxElements = std::int64_t{1} << 50; // the most elements of a tensor (dag/workload.cpp)
// The most values (numbers, strings, arrays, objects) one event may hold: a profiler's largest, an optimizer's foreach
// operator over thousands of tensors, holds some 10^4-10^5 in its Input Dims.
constexpr std::size_t kMaxValuesPerEvent = std::size_t{1} << 22;

// The longest duration ddlsim reads (1e7 s), in microseconds.
double max_duration_us() {
  return quantity_range(Dimension::time).largest * 1e6;
}

// A gzip'd file's text, inflated as the parser reads it (every member of a multi-member file, in order) and never
// more than `limit` bytes of it: a gzip bomb is an input error naming the limit, not an exhausted memory.
class InflatingBuffer : public std::streambuf {
public:
  InflatingBuffer(const std::string& data, std::string path, std::size_t limit)
      : data_size_(data.size()), path_(std::move(path)), limit_(limit) {
    if (inflateInit2(&zs_, 16 + MAX_WBITS) != Z_OK)
      throw std::runtime_error("zlib: inflateInit2 failed");
    zs_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
    zs_.avail_in = static_cast<uInt>(data.size());
  }
  InflatingBuffer(const InflatingBuffer&) = delete;
  InflatingBuffer& operator=(const InflatingBuffer&) = delete;
  ~InflatingBuffer() override { inflateEnd(&zs_); }

  /// Inflates the next block and drops it; false at the end of the last member.
  bool skip_block() {
    const bool more = underflow() != traits_type::eof();
    setg(buffer_, buffer_, buffer_);
    return more;
  }

protected:
  int_type underflow() override {
    while (!ended_) {
      zs_.next_out = reinterpret_cast<Bytef*>(buffer_);
      zs_.avail_out = sizeof buffer_;
      int rc = inflate(&zs_, Z_NO_FLUSH);
      const std::size_t produced = sizeof buffer_ - zs_.avail_out;
      if (rc == Z_STREAM_END && zs_.avail_in > 0) // another gzip member follows
        rc = inflateReset(&zs_);
      else if (rc == Z_STREAM_END)
        ended_ = true;
      if (rc != Z_OK && rc != Z_STREAM_END)
        fail(rc);
      inflated_ += produced;
      if (inflated_ > limit_)
        throw InputError(
            path_, "",
            fmt::format("decompresses to more than {} MiB, more than any ddlsim input (a gzip bomb?)", limit_ >> 20));
      if (produced > 0) {
        setg(buffer_, buffer_, buffer_ + produced);
        return traits_type::to_int_type(buffer_[0]);
      }
    }
    return traits_type::eof();
  }

private:
  [[noreturn]] void fail(int rc) const {
    if (rc == Z_BUF_ERROR) // no progress possible: the input ended before the stream did
      throw InputError(path_, "", fmt::format("truncated gzip stream (input ends after {} bytes)", data_size_));
    throw InputError(path_, "",
                     fmt::format("corrupt gzip stream at byte {} ({})", data_size_ - zs_.avail_in,
                                 zs_.msg != nullptr ? zs_.msg : "zlib error"));
  }

  z_stream zs_{};
  std::size_t data_size_;
  std::string path_;
  std::size_t limit_;
  std::size_t inflated_ = 0;
  bool ended_ = false;
  char buffer_[1 << 16];
};

Category category_of(std::string_view cat) {
  if (cat == "cpu_op" || cat == "Operator")
    return Category::cpu_op;
  if (cat == "user_annotation")
    return Category::user_annotation;
  if (cat == "python_function")
    return Category::python;
  if (cat == "cuda_runtime" || cat == "Runtime" || cat == "cuda_driver")
    return Category::runtime;
  if (cat == "kernel" || cat == "Kernel")
    return Category::kernel;
  if (cat == "gpu_memcpy" || cat == "Memcpy")
    return Category::memcpy;
  if (cat == "gpu_memset" || cat == "Memset")
    return Category::memset;
  return Category::other;
}

std::string id_text(const Json& j) {
  if (j.is_string())
    return j.get<std::string>();
  if (j.is_number_integer())
    return std::to_string(j.get<std::int64_t>());
  if (j.is_number())
    return fmt::format("{}", j.get<double>());
  return "";
}

// A small DOM builder for one JSON value, fed by SAX callbacks.
class DomBuilder {
public:
  void scalar(Json v) {
    if (stack_.empty())
      root_ = std::move(v);
    else
      place(std::move(v));
  }
  void open(Json container) {
    Json* p = nullptr;
    if (stack_.empty()) {
      root_ = std::move(container);
      p = &root_;
    } else {
      p = &place(std::move(container));
    }
    stack_.push_back(p);
  }
  void close() { stack_.pop_back(); }
  void key(const std::string& k) { key_ = k; }
  [[nodiscard]] bool done() const { return stack_.empty(); }
  Json take() { return std::move(root_); }

private:
  Json& place(Json v) {
    Json& top = *stack_.back();
    if (top.is_array()) {
      top.push_back(std::move(v));
      return top.back();
    }
    return top[key_] = std::move(v);
  }
  Json root_;
  std::vector<Json*> stack_;
  std::string key_;
};

class Reader {
public:
  explicit Reader(KinetoTrace& t) : t_(t) {}

  // ---- nlohmann SAX interface ----
  bool null() { return scalar(nullptr); }
  bool boolean(bool v) { return scalar(v); }
  bool number_integer(Json::number_integer_t v) { return scalar(v); }
  bool number_unsigned(Json::number_unsigned_t v) { return scalar(v); }
  bool number_float(Json::number_float_t v, const std::string&) { return scalar(v); }
  bool string(std::string& v) { return scalar(v); }
  bool binary(Json::binary_t&) { return scalar(nullptr); }
  bool start_object(std::size_t) { return open(Json::object()); }
  bool start_array(std::size_t) {
    if (depth_ == 1 && !building_ && top_key_ == "traceEvents") {
      in_events_ = true;
      saw_events = true;
      ++depth_;
      return true;
    }
    return open(Json::array());
  }
  bool key(std::string& k) {
    if (depth_ == 1)
      top_key_ = k;
    else
      dom_.key(k);
    return true;
  }
  bool end_object() { return close(); }
  bool end_array() {
    if (in_events_ && depth_ == 2 && !building_) {
      in_events_ = false;
      --depth_;
      return true;
    }
    return close();
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) {
    std::string what = e.what();
    if (const auto p = what.find("syntax error"); p != std::string::npos)
      what = what.substr(p);
    throw InputError(t_.path, in_events_ ? fmt::format("/traceEvents/{}", t_.event_count) : "",
                     fmt::format("not valid JSON at byte {}: {}", position, what));
  }

  std::map<std::string, Json> tops; // top-level keys other than traceEvents
  bool saw_events = false;

private:
  bool scalar(Json v) {
    if (depth_ == 0)
      throw InputError(t_.path, "", "expected a JSON object with \"traceEvents\" (a Chrome trace)");
    if (in_events_ && depth_ == 2 && !building_)
      throw InputError(t_.path, fmt::format("/traceEvents/{}", t_.event_count++),
                       fmt::format("expected an event object, not {}", json_type_phrase(v)));
    if (!building_ && depth_ == 1) {
      tops[top_key_] = std::move(v);
      return true;
    }
    grow();
    dom_.scalar(std::move(v));
    return true;
  }
  bool open(Json container) {
    if (depth_ == 0) {
      if (!container.is_object())
        throw InputError(t_.path, "", "expected a JSON object with \"traceEvents\" (a Chrome trace)");
      depth_ = 1;
      return true;
    }
    if (!building_) {
      if (in_events_ && depth_ == 2 && !container.is_object())
        throw InputError(t_.path, fmt::format("/traceEvents/{}", t_.event_count),
                         "expected an event object, not an array");
      building_ = true;
    }
    ++depth_;
    grow();
    dom_.open(std::move(container));
    return true;
  }
  // Bounds what one event (or top-level value) inflates to in memory: its nesting and its number of values.
  void grow() {
    const auto where = [&] {
      return in_events_ ? fmt::format("/traceEvents/{}", t_.event_count) : json_pointer_append("", top_key_);
    };
    if (depth_ > kMaxJsonDepth)
      throw InputError(t_.path, where(), fmt::format("nested deeper than {} levels", kMaxJsonDepth));
    if (++values_ > kMaxValuesPerEvent)
      throw InputError(t_.path, where(), fmt::format("more than {} values in one event", kMaxValuesPerEvent));
  }
  bool close() {
    --depth_;
    if (depth_ == 0)
      return true;
    dom_.close();
    if (building_ && dom_.done()) {
      building_ = false;
      values_ = 0;
      if (in_events_)
        add_event(dom_.take(), t_.event_count++);
      else
        tops[top_key_] = dom_.take();
    }
    return true;
  }

  int thread_index(const std::string& pid, const std::string& tid) {
    const auto [it, inserted] = thread_ids_.try_emplace({pid, tid}, static_cast<int>(t_.threads.size()));
    if (inserted)
      t_.threads.push_back({pid, tid, "", false});
    return it->second;
  }

  // The arguments the import uses; counts and sizes are range-checked (`at`: the JSON pointer of args).
  void read_args(const Json& args, const std::string& at, bool memory, Event& ev) const {
    const auto fail = [&](const std::string& key, const std::string& what) {
      throw InputError(t_.path, json_pointer_append(at, key), what);
    };
    const auto id = [&](const char* key, std::int64_t& out) { // integers, or floats that fit one
      if (const auto a = args.find(key); a != args.end() && a->is_number()) {
        const double x = a->get<double>();
        if (a->is_number_integer())
          out = a->get<std::int64_t>();
        else if (x >= -9.2e18 && x <= 9.2e18)
          out = static_cast<std::int64_t>(x);
      }
    };
    const auto count = [&](const char* key, std::int64_t& out, double max, std::string_view max_text) {
      if (const auto a = args.find(key); a != args.end()) { // an integer, or a float that holds one
        if (!a->is_number() || !(a->get<double>() >= 0 && a->get<double>() <= max))
          fail(key, fmt::format("expected a count from 0 to {}, not {}", max_text,
                                a->is_number() ? a->dump() : json_type_phrase(*a)));
        out = static_cast<std::int64_t>(a->get<double>());
      }
    };
    id("correlation", ev.correlation);
    id("Sequence number", ev.sequence);
    id("Fwd thread id", ev.fwd_thread);
    count("In msg nelems", ev.in_nelems, static_cast<double>(kMaxElements), "2^50");
    count("Out msg nelems", ev.out_nelems, static_cast<double>(kMaxElements), "2^50");
    count("Group size", ev.group_size, kMaxWorldSize, std::to_string(kMaxWorldSize));
    const char* bytes_key = memory ? "Bytes" : "bytes"; // an allocation's "Bytes" < 0 frees
    if (const auto a = args.find(bytes_key); a != args.end()) {
      const double max = quantity_range(Dimension::bytes).largest;
      if (!a->is_number() || !(a->get<double>() >= (memory ? -max : 0) && a->get<double>() <= max))
        fail(bytes_key, fmt::format("expected a size in bytes from {} to 2^50 (1 PiB), not {}", memory ? "-2^50" : "0",
                                    a->is_number() ? a->dump() : json_type_phrase(*a)));
      ev.bytes = a->get<double>();
    }
    if (const auto a = args.find("dtype"); a != args.end() && a->is_string())
      ev.dtype = a->get<std::string>();
    if (const auto a = args.find("Input Dims"); a != args.end() && a->is_array())
      for (std::size_t k = 0; k < a->size(); ++k)
        ev.input_dims.push_back(tensor_shape((*a)[k], json_pointer_append(json_pointer_append(at, "Input Dims"), k)));
    if (const auto a = args.find("Input type"); a != args.end() && a->is_array())
      for (const auto& x : *a)
        ev.input_types.push_back(x.is_string() ? x.get<std::string>() : "");
  }

  // One argument's "Input Dims": its sizes, each 0 to 2^50 and their non-zero ones' product at most 2^50 (so that no
  // product of sizes overflows); a non-tensor argument (a scalar, a list of tensors) has none.
  std::vector<std::int64_t> tensor_shape(const Json& d, const std::string& at) const {
    std::vector<std::int64_t> dims;
    if (!d.is_array())
      return dims;
    double elements = 1;
    for (const auto& x : d) {
      if (!x.is_number_integer())
        continue;
      const bool fits =
          x.is_number_unsigned() ? x.get<std::uint64_t>() <= std::uint64_t{kMaxElements} : x.get<std::int64_t>() >= 0;
      elements *= fits ? std::max(1.0, x.get<double>()) : 0; // sizes 0 too: no product of the others overflows
      if (!fits || elements > static_cast<double>(kMaxElements))
        throw InputError(t_.path, at,
                         fits ? "a tensor of more than 2^50 elements"
                              : fmt::format("expected sizes from 0 to 2^50, not {}", x.dump()));
      dims.push_back(x.get<std::int64_t>());
    }
    return dims;
  }

  void add_event(const Json& e, std::size_t index) {
    const std::string at = fmt::format("/traceEvents/{}", index);
    const auto fail = [&](const std::string& key, const std::string& what) {
      throw InputError(t_.path, key.empty() ? at : at + "/" + key, what);
    };
    const auto ph_it = e.find("ph");
    if (ph_it == e.end() || !ph_it->is_string())
      fail("ph", "missing or not a string (the event's phase: \"X\", \"i\", ...)");
    const std::string ph = ph_it->get<std::string>();
    const std::string name = e.contains("name") && e["name"].is_string() ? e["name"].get<std::string>() : "";
    if (ph == "M") {
      if (name == "thread_name" && e.contains("args") && e["args"].is_object() && e["args"].contains("name") &&
          e.contains("pid") && e.contains("tid")) {
        const int th = thread_index(id_text(e["pid"]), id_text(e["tid"]));
        t_.threads[static_cast<std::size_t>(th)].name = id_text(e["args"]["name"]);
      }
      return;
    }
    const bool complete = ph == "X";
    const bool memory = ph == "i" && name == "[memory]";
    if (!complete && !memory)
      return; // flows, counters, other instants
    Event ev;
    ev.index = index;
    ev.name = name;
    const auto cat = e.find("cat");
    ev.cat = memory ? Category::memory : category_of(cat != e.end() && cat->is_string() ? cat->get<std::string>() : "");
    if (!memory && ev.cat == Category::other)
      return;
    const auto ts = e.find("ts");
    if (ts == e.end() || !ts->is_number())
      fail("ts", "missing or not a number (microseconds)");
    ev.ts_us = ts->get<double>();
    if (std::abs(ev.ts_us) > kMaxTimestampUs)
      fail("ts", fmt::format("{} us is out of range: a time stamp is within 2^53 us (285 years) of 0", ev.ts_us));
    if (complete) {
      const auto dur = e.find("dur");
      if (dur == e.end() || !dur->is_number() || dur->get<double>() < 0)
        fail("dur", "missing or not a non-negative number (microseconds)");
      ev.dur_us = dur->get<double>();
      if (ev.dur_us > max_duration_us())
        fail("dur", fmt::format("{} us is out of range: a duration is at most 1e13 us (1e7 s, 116 days)", ev.dur_us));
    }
    ev.thread = thread_index(e.contains("pid") ? id_text(e["pid"]) : "", e.contains("tid") ? id_text(e["tid"]) : "");
    if (ev.cat == Category::kernel || ev.cat == Category::memcpy || ev.cat == Category::memset)
      t_.threads[static_cast<std::size_t>(ev.thread)].gpu = true;
    if (const auto args = e.find("args"); args != e.end() && args->is_object())
      read_args(*args, at + "/args", memory, ev);
    t_.events.push_back(std::move(ev));
  }

  KinetoTrace& t_;
  DomBuilder dom_;
  std::map<std::pair<std::string, std::string>, int> thread_ids_;
  std::string top_key_;
  int depth_ = 0;
  std::size_t values_ = 0; // in the value being built
  bool in_events_ = false;
  bool building_ = false;
};

} // namespace

int dtype_size(const std::string& type) {
  static constexpr std::pair<std::string_view, int> kSizes[] = {
      {"float", 4},  {"c10::Half", 2}, {"c10::BFloat16", 2}, {"Half", 2},        {"BFloat16", 2},
      {"double", 8}, {"long", 8},      {"long int", 8},      {"int64_t", 8},     {"int", 4},
      {"short", 2},  {"bool", 1},      {"unsigned char", 1}, {"signed char", 1}, {"char", 1},
      {"Float", 4},  {"Double", 8},    {"Long", 8},          {"Int", 4},         {"Byte", 1},
  };
  for (const auto& [n, s] : kSizes)
    if (type == n)
      return s;
  return 0;
}

namespace {

// An integer of the trace's metadata at `pointer` (an object's `key`) in [min, max]; nullopt when absent.
std::optional<std::int64_t> integer_at(const Json& object, const char* key, std::int64_t min, std::int64_t max,
                                       const std::string& path, const std::string& pointer, const char* what) {
  const auto it = object.find(key);
  if (it == object.end())
    return std::nullopt;
  bool in_range = false;
  if (it->is_number_unsigned()) // 2^63 and above do not fit an int64_t
    in_range = it->get<std::uint64_t>() <= static_cast<std::uint64_t>(max) && it->get<std::int64_t>() >= min;
  else if (it->is_number_integer())
    in_range = it->get<std::int64_t>() >= min && it->get<std::int64_t>() <= max;
  if (!in_range)
    throw InputError(path, pointer,
                     fmt::format("expected {} from {} to {}, not {}", what, min, max,
                                 it->is_number() ? it->dump() : json_type_phrase(*it)));
  return it->get<std::int64_t>();
}

// An integer of distributedInfo in [min, max]; nullopt when absent.
std::optional<int> count_at(const Json& info, const char* key, std::int64_t min, std::int64_t max,
                            const std::string& path, const char* what) {
  const auto n = integer_at(info, key, min, max, path, fmt::format("/distributedInfo/{}", key), what);
  return n ? std::optional<int>(static_cast<int>(*n)) : std::nullopt;
}

// A string of the trace's metadata at `pointer`; "" when absent.
std::string string_at(const Json& object, const char* key, const std::string& path, const std::string& pointer) {
  const auto it = object.find(key);
  if (it == object.end())
    return "";
  if (!it->is_string())
    throw InputError(path, pointer, fmt::format("expected a string, not {}", json_type_phrase(*it)));
  return it->get<std::string>();
}

// The first device of deviceProperties: what a scenario of a GPU without a preset takes from it.
DeviceProperties device_properties(const Json& device, const std::string& path) {
  DeviceProperties d;
  d.name = string_at(device, "name", path, "/deviceProperties/0/name");
  constexpr std::int64_t kMiB = std::int64_t{1} << 20;
  if (const auto m = integer_at(device, "totalGlobalMem", kMiB, kMiB << 30, path, "/deviceProperties/0/totalGlobalMem",
                                "a memory size in bytes"))
    d.memory_bytes = static_cast<double>(*m);
  if (const auto n =
          integer_at(device, "numSms", 1, 65536, path, "/deviceProperties/0/numSms", "a number of multiprocessors"))
    d.multiprocessors = static_cast<int>(*n);
  const auto major = integer_at(device, "computeMajor", 0, 99, path, "/deviceProperties/0/computeMajor", "a version");
  const auto minor = integer_at(device, "computeMinor", 0, 9, path, "/deviceProperties/0/computeMinor", "a version");
  if (major && minor)
    d.compute_capability = static_cast<int>(*major * 10 + *minor);
  return d;
}

// The trace's metadata: the first device's name (deviceProperties) and the run's ranks (distributedInfo), checked.
void read_metadata(const std::map<std::string, Json>& tops, KinetoTrace& t) {
  if (const auto it = tops.find("deviceProperties"); it != tops.end()) {
    const Json& devices = it->second;
    if (!devices.is_array() || (!devices.empty() && !devices[0].is_object()))
      throw InputError(t.path, devices.is_array() ? "/deviceProperties/0" : "/deviceProperties",
                       fmt::format("expected {}, not {}", devices.is_array() ? "an object" : "an array of objects",
                                   json_type_phrase(devices.is_array() ? devices[0] : devices)));
    if (!devices.empty())
      t.device = device_properties(devices[0], t.path);
  }
  const auto it = tops.find("distributedInfo");
  if (it == tops.end())
    return;
  const Json& info = it->second;
  if (!info.is_object())
    throw InputError(t.path, "/distributedInfo", fmt::format("expected an object, not {}", json_type_phrase(info)));
  t.world_size = count_at(info, "world_size", 1, kMaxWorldSize, t.path, "a number of ranks");
  t.rank = count_at(info, "rank", 0, t.world_size.value_or(kMaxWorldSize) - 1, t.path, "a rank");
  t.backend = string_at(info, "backend", t.path, "/distributedInfo/backend");
}

template <class Input> KinetoTrace parse(Input&& input, const std::string& origin) {
  KinetoTrace t;
  t.path = origin;
  Reader reader(t);
  if (!Json::sax_parse(std::forward<Input>(input), &reader))
    throw InputError(origin, "", "not valid JSON");
  if (const auto it = reader.tops.find("traceEvents"); it != reader.tops.end())
    throw InputError(origin, "/traceEvents",
                     fmt::format("expected an array of events, not {}", json_type_phrase(it->second)));
  if (!reader.saw_events)
    throw InputError(origin, "/traceEvents", "missing: not a Chrome trace (expected {\"traceEvents\": [...]})");
  read_metadata(reader.tops, t);
  return t;
}

} // namespace

KinetoTrace parse_kineto(const std::string& text, const std::string& origin) {
  return parse(text, origin);
}

KinetoTrace read_kineto(const std::string& path) {
  const std::string data = read_file(path);
  if (data.size() < 2 || static_cast<unsigned char>(data[0]) != 0x1f || static_cast<unsigned char>(data[1]) != 0x8b)
    return parse(data, path);
  // Inflated twice: once to its end without keeping it, so that a gzip bomb or a corrupt stream is refused in a
  // second and before a byte is parsed; then into the parser.
  for (InflatingBuffer probe(data, path, kMaxInputBytes); probe.skip_block();) {
  }
  InflatingBuffer inflated(data, path, kMaxInputBytes);
  std::istream text(&inflated);
  return parse(text, path);
}

} // namespace ddlsim::traces
