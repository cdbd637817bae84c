// Calibration files (dag/calibration.hpp), read strictly: unknown keys and missing units are errors with a path.
#include "dag/calibration.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

#include <iterator>
#include <string>
#include <vector>

namespace ddlsim::dag {

namespace {

constexpr Collective kMeasurable[] = {Collective::allreduce, Collective::allgather, Collective::reduce_scatter,
                                      Collective::broadcast, Collective::point_to_point};

MeasuredCollective parse_collective(ObjectReader r) {
  MeasuredCollective m;
  std::vector<std::string> names;
  for (const auto c : kMeasurable)
    names.emplace_back(collective_name(c));
  const auto name = r.choice("collective", names);
  for (const auto c : kMeasurable)
    if (collective_name(c) == name)
      m.collective = c;
  m.ranks = static_cast<int>(r.integer("ranks", 1, 1 << 30));
  m.nodes = static_cast<int>(r.optional_integer("nodes", 0, 1 << 30).value_or(0));
  m.source = r.optional_string("source").value_or("");
  const auto point = [&](const Json& row, const std::string& at) {
    if (!row.is_array() || row.size() != 2)
      throw InputError(r.file(), at, "expected [size, time], e.g. [\"8 B\", \"123.5 us\"]");
    return MeasuredCollective::Point{
        parse_quantity_at(row[0], Dimension::bytes, r.file(), json_pointer_append(at, 0)),
        parse_quantity_at(row[1], Dimension::time, r.file(), json_pointer_append(at, 1), 0, true)};
  };
  const Json& table = r.required("table");
  if (!table.is_array())
    r.fail("table", "expected an array of [size, time]");
  for (std::size_t i = 0; i < table.size(); ++i) {
    m.table.push_back(point(table[i], json_pointer_append(r.path("table"), i)));
    if (i > 0 && m.table[i].size_bytes <= m.table[i - 1].size_bytes)
      throw InputError(r.file(), json_pointer_append(r.path("table"), i), "sizes must increase");
  }
  if (m.table.empty())
    r.fail("table", "a measured collective needs at least one [size, time]");
  if (const Json* segments = r.optional("segments")) {
    const std::string at = r.path("segments");
    if (!segments->is_array())
      throw InputError(r.file(), at, "expected an array of segments");
    for (std::size_t i = 0; i < segments->size(); ++i) {
      ObjectReader g((*segments)[i], r.file(), json_pointer_append(at, i));
      MeasuredCollective::Segment seg;
      seg.first_size_bytes = g.quantity("first_size", Dimension::bytes);
      if (!m.segments.empty() && seg.first_size_bytes <= m.segments.back().last_size_bytes)
        g.fail("first_size", "segments must be in size order, each after the last_size of the one before");
      seg.last_size_bytes = g.quantity("last_size", Dimension::bytes, seg.first_size_bytes);
      seg.alpha_s = g.quantity("alpha", Dimension::time, -1e300);
      seg.beta_s_per_byte = g.quantity("beta", Dimension::inverse_bandwidth, -1e300);
      seg.points = static_cast<int>(g.integer("points", 1, 1 << 30));
      seg.mean_relative_error = g.number("mean_relative_error", 0);
      seg.max_relative_error = g.number("max_relative_error", 0);
      g.finish();
      m.segments.push_back(seg);
    }
  }
  r.finish();
  return m;
}

GemmCeilingFit parse_gemm(ObjectReader g) {
  GemmCeilingFit f;
  f.dtype = g.choice("dtype", std::vector<std::string>(std::begin(kGemmFitDtypes), std::end(kGemmFitDtypes)));
  f.ceiling = g.number("ceiling", 0, 1);
  if (!(f.ceiling > 0))
    g.fail("ceiling", "expected a fraction of the peak above 0 and at most 1");
  f.gpu = g.optional_string("gpu").value_or("");
  if (const auto points = g.optional_integer("points", 1, 1 << 30))
    f.points = static_cast<int>(*points);
  f.mean_relative_error = g.optional_number("mean_relative_error", 0);
  f.max_relative_error = g.optional_number("max_relative_error", 0);
  f.source = g.optional_string("source").value_or("");
  g.finish();
  return f;
}

OrderedJson gemm_json(const GemmCeilingFit& f) {
  OrderedJson j;
  j["dtype"] = f.dtype;
  j["ceiling"] = f.ceiling;
  if (!f.gpu.empty())
    j["gpu"] = f.gpu;
  if (f.points)
    j["points"] = *f.points;
  if (f.mean_relative_error)
    j["mean_relative_error"] = *f.mean_relative_error;
  if (f.max_relative_error)
    j["max_relative_error"] = *f.max_relative_error;
  if (!f.source.empty())
    j["source"] = f.source;
  return j;
}

// Base units with the shortest digits that read back to the same double (fmt's "{}").
std::string seconds(double s) {
  return fmt::format("{} s", s);
}
std::string bytes(double b) {
  return fmt::format("{} B", b);
}

} // namespace

Calibration parse_calibration(const Json& doc, const std::string& file, const std::string& pointer) {
  ObjectReader r(doc, file, pointer);
  Calibration c;
  c.origin = file;
  r.optional_string("format");
  c.version = static_cast<int>(r.optional_integer("version", 1, 2).value_or(1));
  c.source = r.optional_string("source").value_or("");
  if (!r.has("layers") && !r.has("selection") && !r.has("collectives") && !r.has("host") && !r.has("optimizer") &&
      !r.has("overlap") && !r.has("gemm"))
    r.fail_here(c.version == 1 ? "a calibration gives \"layers\", \"selection\" or both"
                               : "a calibration gives \"layers\", \"selection\", \"collectives\", \"host\", "
                                 "\"optimizer\", \"overlap\", \"gemm\" or some of them");
  for (const char* key : {"collectives", "host", "optimizer", "overlap", "gemm"})
    if (c.version == 1 && r.has(key))
      r.fail(key, fmt::format("\"{}\" needs \"version\": 2", key));
  if (r.has("host")) {
    auto h = r.object("host");
    c.host.launch_s = h.optional_quantity("launch", Dimension::time);
    c.host.iteration_s = h.optional_quantity("iteration", Dimension::time);
    c.host.data_loading_s = h.optional_quantity("data_loading", Dimension::time);
    c.host.prefetch = h.optional_boolean("prefetch");
    c.host.h2d_bandwidth = h.optional_quantity("h2d_bandwidth", Dimension::bandwidth, 0, true);
    h.finish();
  }
  if (r.has("optimizer")) {
    auto o = r.object("optimizer");
    c.optimizer.gpu_s = o.optional_quantity("gpu", Dimension::time);
    c.optimizer.host_s = o.optional_quantity("host", Dimension::time);
    o.finish();
  }
  if (r.has("overlap")) {
    auto o = r.object("overlap");
    c.compute_slowdown = o.number("compute_slowdown", 0.0, 10.0);
    o.finish();
  }
  if (r.has("gemm")) {
    c.gemm_pointer = r.path("gemm");
    c.gemm = parse_gemm(r.object("gemm"));
  }
  if (const Json* list = r.optional("collectives")) {
    const std::string at = r.path("collectives");
    if (!list->is_array())
      throw InputError(file, at, "expected an array of measured collectives");
    for (std::size_t i = 0; i < list->size(); ++i)
      c.collectives.push_back(parse_collective(ObjectReader((*list)[i], file, json_pointer_append(at, i))));
  }
  if (r.has("layers")) {
    c.batch_per_gpu = static_cast<int>(r.integer("batch_per_gpu", 1, 1 << 24));
    auto layers = r.object("layers");
    for (const auto& [name, value] : layers.json().items()) {
      auto l = layers.object(name);
      auto& t = c.layers[name];
      t.forward_s = l.quantity("forward", Dimension::time);
      t.backward_s = l.quantity("backward", Dimension::time);
      if (c.version >= 2) {
        t.forward_host_s = l.optional_quantity("forward_host", Dimension::time);
        t.backward_host_s = l.optional_quantity("backward_host", Dimension::time);
      }
      l.finish();
    }
    layers.finish();
  } else {
    r.optional_integer("batch_per_gpu", 1, 1 << 24);
  }
  if (r.has("selection")) {
    c.selection_pointer = r.path("selection");
    auto curves = r.object("selection");
    for (const auto& [name, value] : curves.json().items()) {
      if (name != "sort" && name != "sampling" && name != "threshold")
        curves.fail(name, "unknown selection (expected one of: sort, sampling, threshold)");
      auto k = curves.object(name);
      // time = fixed + per_element x m + per_selected x k, per selection call
      c.selection[name] = {k.optional_quantity("fixed", Dimension::time).value_or(0),
                           k.quantity("per_element", Dimension::time),
                           k.optional_quantity("per_selected", Dimension::time).value_or(0)};
      k.finish();
    }
    curves.finish();
  }
  r.finish();
  return c;
}

OrderedJson calibration_json(const Calibration& c) {
  OrderedJson j;
  j["format"] = "ddlsim-calibration";
  j["version"] = 2;
  if (!c.source.empty())
    j["source"] = c.source;
  if (!c.layers.empty()) {
    j["batch_per_gpu"] = c.batch_per_gpu;
    OrderedJson layers = OrderedJson::object();
    for (const auto& [name, t] : c.layers) {
      OrderedJson l = {{"forward", seconds(t.forward_s)}, {"backward", seconds(t.backward_s)}};
      if (t.forward_host_s)
        l["forward_host"] = seconds(*t.forward_host_s);
      if (t.backward_host_s)
        l["backward_host"] = seconds(*t.backward_host_s);
      layers[name] = std::move(l);
    }
    j["layers"] = std::move(layers);
  }
  OrderedJson host = OrderedJson::object();
  if (c.host.launch_s)
    host["launch"] = seconds(*c.host.launch_s);
  if (c.host.iteration_s)
    host["iteration"] = seconds(*c.host.iteration_s);
  if (c.host.data_loading_s)
    host["data_loading"] = seconds(*c.host.data_loading_s);
  if (c.host.prefetch)
    host["prefetch"] = *c.host.prefetch;
  if (c.host.h2d_bandwidth)
    host["h2d_bandwidth"] = fmt::format("{} B/s", *c.host.h2d_bandwidth);
  if (!host.empty())
    j["host"] = std::move(host);
  OrderedJson optimizer = OrderedJson::object();
  if (c.optimizer.gpu_s)
    optimizer["gpu"] = seconds(*c.optimizer.gpu_s);
  if (c.optimizer.host_s)
    optimizer["host"] = seconds(*c.optimizer.host_s);
  if (!optimizer.empty())
    j["optimizer"] = std::move(optimizer);
  if (c.compute_slowdown)
    j["overlap"] = {{"compute_slowdown", *c.compute_slowdown}};
  if (c.gemm)
    j["gemm"] = gemm_json(*c.gemm);
  if (!c.selection.empty()) {
    OrderedJson curves = OrderedJson::object();
    for (const auto& [name, k] : c.selection)
      curves[name] = {{"fixed", seconds(k.fixed_s)},
                      {"per_element", seconds(k.per_element_s)},
                      {"per_selected", seconds(k.per_selected_s)}};
    j["selection"] = std::move(curves);
  }
  if (!c.collectives.empty()) {
    OrderedJson list = OrderedJson::array();
    for (const auto& m : c.collectives) {
      OrderedJson e;
      e["collective"] = collective_name(m.collective);
      e["ranks"] = m.ranks;
      e["nodes"] = m.nodes;
      if (!m.source.empty())
        e["source"] = m.source;
      OrderedJson table = OrderedJson::array();
      for (const auto& p : m.table)
        table.push_back({bytes(p.size_bytes), seconds(p.time_s)});
      e["table"] = std::move(table);
      OrderedJson segments = OrderedJson::array();
      for (const auto& g : m.segments)
        segments.push_back({{"first_size", bytes(g.first_size_bytes)},
                            {"last_size", bytes(g.last_size_bytes)},
                            {"alpha", seconds(g.alpha_s)},
                            {"beta", fmt::format("{} s/B", g.beta_s_per_byte)},
                            {"points", g.points},
                            {"mean_relative_error", g.mean_relative_error},
                            {"max_relative_error", g.max_relative_error}});
      e["segments"] = std::move(segments);
      list.push_back(std::move(e));
    }
    j["collectives"] = std::move(list);
  }
  return j;
}

} // namespace ddlsim::dag
