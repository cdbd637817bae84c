// What a plot draws, taken from a results table: columns read as numbers in display units (ddlsim's own columns by
// name, swept quantities such as "10 Gbps" by their dimension), rows grouped into lines with a label, colour and
// marker each, the keys worth a label, and titles.
#include "sim/report/plot_detail.hpp"

#include "core/error.hpp"
#include "core/json.hpp"
#include "core/units.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ddlsim::sim::detail {
namespace {

// ---------------------------------------------------------------------------------------------------------------
// Columns as plotted numbers

// Display names and units of the columns ddlsim writes; values are multiplied by `factor` for display.
struct KnownColumn {
  std::string_view column;
  std::string_view name;
  std::string_view unit;
  double factor;
};
constexpr std::array kKnownColumns{
    KnownColumn{"point", "sweep point", "", 1},
    KnownColumn{"workers", "GPUs", "", 1},
    KnownColumn{"iteration_time_s", "iteration time", "ms", 1e3},
    KnownColumn{"throughput_samples_per_s", "throughput", "samples/s", 1},
    KnownColumn{"scaling_efficiency", "scaling efficiency", "%", 100},
    KnownColumn{"breakdown_s.compute", "compute time", "ms", 1e3},
    KnownColumn{"breakdown_s.compression", "compression time", "ms", 1e3},
    KnownColumn{"breakdown_s.exposed_communication", "exposed communication time", "ms", 1e3},
    KnownColumn{"breakdown_s.idle", "idle time", "ms", 1e3},
    KnownColumn{"communication_bytes_per_worker", "communication per worker", "MiB", 1.0 / 1048576},
    KnownColumn{"peak_memory_bytes_per_gpu", "peak memory per GPU", "GiB", 1.0 / 1073741824},
    KnownColumn{"sim.wall_s", "simulation wall time", "s", 1},
    KnownColumn{"sim.events", "simulated events", "", 1},
    KnownColumn{"sim.flows", "simulated flows", "", 1},
    KnownColumn{"single_gpu_iteration_s", "single-GPU iteration time", "ms", 1e3},
    KnownColumn{"critical_path_s", "critical path", "ms", 1e3},
    KnownColumn{"parallelism.data", "data-parallel replicas", "", 1},
    KnownColumn{"parallelism.pipeline", "pipeline stages", "", 1},
    KnownColumn{"parallelism.tensor", "tensor-parallel ranks", "", 1},
    KnownColumn{"pipeline.stages", "pipeline stages", "", 1},
    KnownColumn{"pipeline.micro_batches", "micro-batches", "", 1},
    KnownColumn{"pipeline.virtual_stages", "virtual stages per GPU", "", 1},
    KnownColumn{"pipeline.bubble_fraction", "pipeline bubble", "%", 100},
    KnownColumn{"pipeline.bubble_fraction_closed_form", "pipeline bubble (closed form)", "%", 100},
    KnownColumn{"model_flops_utilisation", "model FLOPs utilisation", "%", 100},
    KnownColumn{"iteration_time_percentiles_s.p50", "median iteration time", "ms", 1e3},
    KnownColumn{"iteration_time_percentiles_s.p90", "p90 iteration time", "ms", 1e3},
    KnownColumn{"iteration_time_percentiles_s.p99", "p99 iteration time", "ms", 1e3},
    KnownColumn{"variability.deterministic_iteration_s", "iteration time without variability", "ms", 1e3},
    KnownColumn{"backup_workers", "backup workers", "", 1},
    KnownColumn{"cluster.nodes", "nodes", "", 1},
    KnownColumn{"cluster.gpus_per_node", "GPUs per node", "", 1},
    KnownColumn{"model.batch_per_gpu", "batch per GPU", "", 1},
    // Swept quantities: the unit comes from the values ("10 Gbps" -> Gb/s).
    KnownColumn{"cluster.inter_node.bandwidth", "inter-node bandwidth", "", 1},
    KnownColumn{"cluster.intra_node.bandwidth", "intra-node bandwidth", "", 1},
    KnownColumn{"cluster.inter_node.latency", "inter-node latency", "", 1},
    KnownColumn{"cluster.intra_node.latency", "intra-node latency", "", 1},
};

const KnownColumn* known_column(std::string_view column) {
  const auto it = std::find_if(kKnownColumns.begin(), kKnownColumns.end(),
                               [&](const KnownColumn& k) { return k.column == column; });
  return it == kKnownColumns.end() ? nullptr : &*it;
}

// A display unit for base-unit values of dimension `d` whose largest magnitude is `max_abs`.
std::pair<std::string_view, double> display_unit(Dimension d, double max_abs) {
  switch (d) {
  case Dimension::bandwidth:
    return {"Gb/s", 8e-9}; // networks are specified in bits per second
  case Dimension::time:
    if (max_abs >= 1)
      return {"s", 1};
    if (max_abs >= 1e-3)
      return {"ms", 1e3};
    if (max_abs >= 1e-6)
      return {"us", 1e6};
    return {"ns", 1e9};
  case Dimension::bytes:
    if (max_abs >= 1073741824)
      return {"GiB", 1.0 / 1073741824};
    if (max_abs >= 1048576)
      return {"MiB", 1.0 / 1048576};
    if (max_abs >= 1024)
      return {"KiB", 1.0 / 1024};
    return {"B", 1};
  case Dimension::inverse_bandwidth:
    return {"ns/B", 1e9};
  case Dimension::flops:
    return {"GFLOP", 1e-9};
  case Dimension::flop_rate:
    return {"TFLOP/s", 1e-12};
  }
  return {"", 1};
}

std::optional<double> parse_as(std::string_view cell, Dimension d) {
  try {
    const double v = parse_quantity(trim(cell), d);
    return std::isfinite(v) ? std::optional<double>(v) : std::nullopt;
  } catch (const std::invalid_argument&) {
    return std::nullopt;
  }
}

} // namespace

// Reads column `col` over `rows` as plain numbers, or as quantities of one dimension ("10 Gbps", "25 MiB").
// std::nullopt when some cell is neither; `bad` then names the first such cell.
std::optional<Measure> measure(const ResultsTable& t, std::size_t col, const std::vector<std::size_t>& rows,
                               std::string* bad) {
  Measure m;
  m.column = t.columns[col];
  const KnownColumn* known = known_column(m.column);
  m.name = known ? std::string(known->name) : m.column;

  const auto first_bad = [&](const auto& parses) {
    for (const std::size_t r : rows)
      if (!parses(t.rows[r][col]))
        return r;
    return t.rows.size();
  };
  const auto describe_bad = [&](std::size_t r) {
    if (bad != nullptr)
      *bad = t.rows[r][col].empty() ? fmt::format("an empty cell at point {}", point_of(t, r))
                                    : fmt::format("'{}' at point {}", t.rows[r][col], point_of(t, r));
  };

  const std::size_t not_number = first_bad([](std::string_view c) { return parse_number(c).has_value(); });
  if (not_number == t.rows.size()) {
    double factor = 1;
    if (known) {
      m.unit = known->unit;
      factor = known->factor;
    } else if (m.column.ends_with("_s")) { // summary convention: a suffix _s is seconds
      m.unit = "ms";
      factor = 1e3;
    } else if (m.column.ends_with(".peak_memory_bytes")) { // pipeline.per_stage.<i>.peak_memory_bytes
      m.unit = "GiB";
      factor = 1.0 / 1073741824;
    }
    for (const std::size_t r : rows)
      m.values.push_back(*parse_number(t.rows[r][col]) * factor);
    return m;
  }
  // Quantities: the first cell that is not a plain number picks the dimension; every cell must then parse as it.
  constexpr std::array kDimensions{Dimension::bandwidth, Dimension::time,  Dimension::bytes,
                                   Dimension::flop_rate, Dimension::flops, Dimension::inverse_bandwidth};
  for (const Dimension d : kDimensions) {
    if (!parse_as(t.rows[not_number][col], d))
      continue;
    if (first_bad([&](std::string_view c) { return parse_as(c, d).has_value(); }) != t.rows.size())
      break;
    std::vector<double> base;
    double max_abs = 0;
    for (const std::size_t r : rows) {
      base.push_back(*parse_as(t.rows[r][col], d));
      max_abs = std::max(max_abs, std::abs(base.back()));
    }
    const auto [unit, factor] = display_unit(d, max_abs);
    m.unit = unit;
    m.dimension = d;
    for (const double v : base)
      m.values.push_back(v * factor);
    return m;
  }
  describe_bad(not_number);
  return std::nullopt;
}

// Column `col` as numbers (see measure), or an InputError naming the first cell that is not one and listing the
// numeric columns.
Measure numeric_column(const ResultsTable& t, std::size_t col, const std::vector<std::size_t>& rows,
                       std::string_view role) {
  const std::string& name = t.columns[col];
  std::string bad;
  auto m = measure(t, col, rows, &bad);
  if (!m) {
    std::string numeric;
    for (std::size_t c = 0; c < t.columns.size(); ++c)
      if (measure(t, c, rows))
        numeric += (numeric.empty() ? "" : ", ") + t.columns[c];
    throw InputError(t.file, "",
                     fmt::format("column '{}' ({}) is not numeric: {}; numeric columns: {}", name, role, bad,
                                 numeric.empty() ? "none" : numeric));
  }
  return *std::move(m);
}

// The summary field `name` as numbers.
Measure summary_measure(const ResultsTable& t, std::string_view name, const std::vector<std::size_t>& rows,
                        std::string_view role) {
  return numeric_column(t, summary_index(t, name, role), rows, role);
}

// ---------------------------------------------------------------------------------------------------------------
// Groups and labels

// Text safe for one line of a script or a data file: control characters (newlines in JSON cells) become spaces.
std::string one_line(std::string_view s) {
  std::string out(s);
  std::replace_if(
      out.begin(), out.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20; }, ' ');
  return out;
}

// A swept value as a legend shows it: an object value (a whole `strategy` per point) reads "gtopk (selection=sort)",
// its `kind` first; anything else as it is, on one line.
std::string legend_value(const std::string& value) {
  if (value.empty() || value.front() != '{')
    return one_line(value);
  const Json j = Json::parse(value, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return one_line(value);
  std::string head, rest;
  for (const auto& [key, v] : j.items()) {
    const std::string text = v.is_string() ? v.get<std::string>() : v.dump();
    if (key == "kind")
      head = text;
    else
      rest += fmt::format("{}{}={}", rest.empty() ? "" : ", ", key, text);
  }
  if (head.empty())
    return one_line(rest);
  return one_line(rest.empty() ? head : fmt::format("{} ({})", head, rest));
}

Grouping group_rows(const ResultsTable& t, const std::vector<std::size_t>& keys, const std::vector<std::size_t>& rows) {
  Grouping g;
  std::size_t color_key = 0, most = 0;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const std::size_t n = distinct_cells(t, keys[i], rows).size();
    if (n <= kColors.size() && n > most)
      color_key = i, most = n;
  }
  for (std::size_t i = 0; i < keys.size() && keys.size() > 1; ++i) {
    g.heading += (i == 0 ? "" : ", ") + t.columns[keys[i]];
    if (i == color_key)
      g.color_heading = t.columns[keys[i]];
    else
      g.marker_heading += (g.marker_heading.empty() ? "" : ", ") + t.columns[keys[i]];
  }
  const auto index_of = [](std::vector<std::string>& seen, const std::string& v) {
    const auto it = std::find(seen.begin(), seen.end(), v);
    if (it != seen.end())
      return static_cast<std::size_t>(it - seen.begin());
    seen.push_back(v);
    return seen.size() - 1;
  };
  for (const std::size_t r : rows) {
    std::string label, tail, identity;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      identity += t.rows[r][keys[i]] + '\x1f';
      const std::string value = legend_value(t.rows[r][keys[i]]);
      if (keys.size() == 1)
        label = fmt::format("{}={}", t.columns[keys[i]], value);
      else
        label += (i == 0 ? "" : ", ") + value;
      if (i != color_key)
        tail += (tail.empty() ? "" : ", ") + value;
    }
    const auto it = std::find(g.identities.begin(), g.identities.end(), identity);
    if (it != g.identities.end()) {
      g.rows[static_cast<std::size_t>(it - g.identities.begin())].push_back(r);
      continue;
    }
    g.identities.push_back(identity);
    g.labels.push_back(label);
    g.rows.push_back({r});
    if (keys.size() <= 1) {
      g.color.push_back(g.labels.size() - 1);
      g.marker.push_back(g.labels.size() - 1);
    } else {
      g.color.push_back(index_of(g.color_names, legend_value(t.rows[r][keys[color_key]])));
      g.marker.push_back(index_of(g.marker_names, tail));
    }
  }
  return g;
}

// The varying keys that tell lines (or bars) apart: not the keys the x axis runs `along`, and not a key whose value
// another kept key (or an `along` key) fixes, since it adds nothing to a label but length (a zip of model.zoo with
// gpu.single_gpu_iteration labels by the model alone). Names are preferred to numbers; the result is in column
// order.
std::vector<std::size_t> label_keys(const ResultsTable& t, const std::vector<std::size_t>& rows,
                                    const std::vector<std::size_t>& along) {
  std::vector<std::size_t> candidates;
  for (const std::size_t k : varying_keys(t, rows))
    if (std::find(along.begin(), along.end(), k) == along.end())
      candidates.push_back(k);
  std::stable_partition(candidates.begin(), candidates.end(),
                        [&](std::size_t k) { return !measure(t, k, rows).has_value(); });
  std::vector<std::size_t> kept;
  for (const std::size_t k : candidates) {
    const auto fixes_k = [&](std::size_t j) { return determines(t, rows, j, k); };
    if (std::none_of(along.begin(), along.end(), fixes_k) && std::none_of(kept.begin(), kept.end(), fixes_k))
      kept.push_back(k);
  }
  std::sort(kept.begin(), kept.end());
  return kept;
}

// The scenario name shared by `rows`, for titles; empty when the rows disagree or there is no such column.
std::string common_scenario(const ResultsTable& t, const std::vector<std::size_t>& rows) {
  const int c = summary_field(t, "scenario");
  if (c < 0 || rows.empty())
    return "";
  const auto names = distinct_cells(t, static_cast<std::size_t>(c), rows);
  return names.size() == 1 ? one_line(names.front()) : "";
}

std::string titled(const std::string& scenario, const std::string& what) {
  return scenario.empty() ? what : fmt::format("{}: {}", scenario, what);
}

} // namespace ddlsim::sim::detail
