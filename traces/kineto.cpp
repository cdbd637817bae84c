// Kineto trace reader (kineto.hpp): zlib inflates a gzip'd file, nlohmann's SAX interface streams the JSON; each
// traceEvents entry is built as a small DOM, reduced to an Event and dropped.
#include "traces/kineto.hpp"

#include "core/error.hpp"
#include "core/io.hpp"

#include <fmt/format.h>
#include <zlib.h>

#include <map>
#include <utility>

namespace ddlsim::traces {
namespace {

std::string inflate_gzip(const std::string& data, const std::string& path) {
  z_stream zs{};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK)
    throw std::runtime_error("zlib: inflateInit2 failed");
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  std::string out;
  char buffer[1 << 16];
  int rc = Z_OK;
  while (rc == Z_OK) {
    zs.next_out = reinterpret_cast<Bytef*>(buffer);
    zs.avail_out = sizeof buffer;
    rc = inflate(&zs, Z_NO_FLUSH);
    out.append(buffer, sizeof buffer - zs.avail_out);
    if (rc == Z_STREAM_END && zs.avail_in > 0) // another gzip member follows
      rc = inflateReset(&zs);
    if (rc == Z_BUF_ERROR && zs.avail_in == 0)
      break; // input ended before the stream did
  }
  const std::size_t consumed = data.size() - zs.avail_in;
  inflateEnd(&zs);
  if (rc != Z_STREAM_END)
    throw InputError(
        path, "",
        rc == Z_BUF_ERROR || rc == Z_OK
            ? fmt::format("truncated gzip stream (input ends after {} bytes)", data.size())
            : fmt::format("corrupt gzip stream at byte {} ({})", consumed, zs.msg ? zs.msg : "zlib error"));
  return out;
}

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
    dom_.open(std::move(container));
    return true;
  }
  bool close() {
    --depth_;
    if (depth_ == 0)
      return true;
    dom_.close();
    if (building_ && dom_.done()) {
      building_ = false;
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
    if (complete) {
      const auto dur = e.find("dur");
      if (dur == e.end() || !dur->is_number() || dur->get<double>() < 0)
        fail("dur", "missing or not a non-negative number (microseconds)");
      ev.dur_us = dur->get<double>();
    }
    ev.thread = thread_index(e.contains("pid") ? id_text(e["pid"]) : "", e.contains("tid") ? id_text(e["tid"]) : "");
    if (ev.cat == Category::kernel || ev.cat == Category::memcpy || ev.cat == Category::memset)
      t_.threads[static_cast<std::size_t>(ev.thread)].gpu = true;
    if (const auto args = e.find("args"); args != e.end() && args->is_object()) {
      const auto integer = [&](const char* key, std::int64_t& out) { // integers, or floats that fit one
        if (const auto a = args->find(key); a != args->end() && (a->is_number_integer() || a->is_number_float())) {
          const double x = a->get<double>();
          if (a->is_number_integer())
            out = a->get<std::int64_t>();
          else if (x >= -9.2e18 && x <= 9.2e18)
            out = static_cast<std::int64_t>(x);
        }
      };
      integer("correlation", ev.correlation);
      integer("Sequence number", ev.sequence);
      integer("Fwd thread id", ev.fwd_thread);
      integer("In msg nelems", ev.in_nelems);
      integer("Out msg nelems", ev.out_nelems);
      integer("Group size", ev.group_size);
      if (const auto a = args->find(memory ? "Bytes" : "bytes"); a != args->end() && a->is_number())
        ev.bytes = a->get<double>();
      if (const auto a = args->find("dtype"); a != args->end() && a->is_string())
        ev.dtype = a->get<std::string>();
      if (const auto a = args->find("Input Dims"); a != args->end() && a->is_array()) {
        for (const auto& d : *a) {
          std::vector<std::int64_t> dims;
          if (d.is_array())
            for (const auto& x : d)
              if (x.is_number_integer())
                dims.push_back(x.get<std::int64_t>());
          ev.input_dims.push_back(std::move(dims));
        }
      }
      if (const auto a = args->find("Input type"); a != args->end() && a->is_array())
        for (const auto& x : *a)
          ev.input_types.push_back(x.is_string() ? x.get<std::string>() : "");
    }
    t_.events.push_back(std::move(ev));
  }

  KinetoTrace& t_;
  DomBuilder dom_;
  std::map<std::pair<std::string, std::string>, int> thread_ids_;
  std::string top_key_;
  int depth_ = 0;
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

KinetoTrace parse_kineto(const std::string& text, const std::string& origin) {
  KinetoTrace t;
  t.path = origin;
  Reader reader(t);
  const bool ok = Json::sax_parse(text, &reader);
  if (!ok)
    throw InputError(origin, "", "not valid JSON");
  if (const auto it = reader.tops.find("traceEvents"); it != reader.tops.end())
    throw InputError(origin, "/traceEvents",
                     fmt::format("expected an array of events, not {}", json_type_phrase(it->second)));
  if (!reader.saw_events)
    throw InputError(origin, "/traceEvents", "missing: not a Chrome trace (expected {\"traceEvents\": [...]})");
  if (const auto it = reader.tops.find("deviceProperties");
      it != reader.tops.end() && it->second.is_array() && !it->second.empty() && it->second[0].is_object())
    t.device_name = it->second[0].value("name", std::string());
  if (const auto it = reader.tops.find("distributedInfo"); it != reader.tops.end() && it->second.is_object()) {
    const Json& d = it->second;
    if (d.contains("world_size") && d["world_size"].is_number_integer())
      t.world_size = d["world_size"].get<int>();
    if (d.contains("rank") && d["rank"].is_number_integer())
      t.rank = d["rank"].get<int>();
    t.backend = d.value("backend", std::string());
  }
  return t;
}

KinetoTrace read_kineto(const std::string& path) {
  std::string data = read_file(path);
  if (data.size() >= 2 && static_cast<unsigned char>(data[0]) == 0x1f && static_cast<unsigned char>(data[1]) == 0x8b)
    data = inflate_gzip(data, path);
  return parse_kineto(data, path);
}

} // namespace ddlsim::traces
