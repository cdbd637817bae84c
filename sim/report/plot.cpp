// Sweep plots: results.csv (RFC 4180) -> gnuplot figures. Each figure is written as <base>.dat (the numbers, in
// display units, one gnuplot `index` block per line) and <base>.gp (a self-contained script that finds the .dat
// beside itself), then gnuplot runs a copy of the script that writes the images under temporary names, which are
// renamed into place, so an interrupted sweep never leaves a truncated image. Same table, same .dat and .gp bytes.
#include "sim/report/plot.hpp"

#include "core/error.hpp"
#include "core/io.hpp"
#include "core/json.hpp"
#include "core/units.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <utility>

namespace ddlsim::sim {
namespace {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------------------------------
// CSV

struct Record {
  int line = 0; // physical line (1-based) where the record starts
  std::vector<std::string> cells;
};

[[noreturn]] void csv_error(const std::string& file, int line, const std::string& what) {
  throw InputError(file, "", fmt::format("line {}: {}", line, what));
}

// Splits RFC 4180 text into records. Line ends are LF or CRLF (also inside quoted cells, where CRLF becomes LF);
// a lone CR is ordinary text. Blank lines are skipped, so a trailing newline or two do not make ragged rows.
std::vector<Record> split_records(std::string_view text, const std::string& file) {
  if (text.starts_with("\xEF\xBB\xBF")) // UTF-8 byte order mark, as spreadsheet exports write it
    text.remove_prefix(3);
  const std::size_t n = text.size();
  const auto at_line_end = [&](std::size_t k) {
    return text[k] == '\n' || (text[k] == '\r' && (k + 1 == n || text[k + 1] == '\n'));
  };
  std::vector<Record> records;
  std::size_t i = 0;
  int line = 1;
  while (i < n) {
    Record rec{line, {}};
    bool quoted_any = false;
    for (;;) {
      std::string cell;
      if (i < n && text[i] == '"') {
        quoted_any = true;
        const int opened = line;
        ++i;
        for (;;) {
          if (i >= n)
            csv_error(file, opened, "unterminated quoted cell: the '\"' that opens it is never closed");
          const char c = text[i++];
          if (c == '"') {
            if (i < n && text[i] == '"') {
              cell += '"';
              ++i;
              continue;
            }
            break;
          }
          if (c == '\r' && i < n && text[i] == '\n')
            continue;
          if (c == '\n')
            ++line;
          cell += c;
        }
        if (i < n && text[i] != ',' && !at_line_end(i))
          csv_error(file, line,
                    fmt::format("cell {} has text after its closing quote; inside a quoted cell write '\"' as '\"\"'",
                                rec.cells.size() + 1));
      } else {
        const std::size_t start = i;
        while (i < n && text[i] != ',' && !at_line_end(i)) {
          if (text[i] == '"')
            csv_error(file, line,
                      fmt::format("cell {} contains '\"' but does not start with one; quote the whole cell and "
                                  "write '\"' as '\"\"'",
                                  rec.cells.size() + 1));
          ++i;
        }
        cell.assign(text.substr(start, i - start));
      }
      rec.cells.push_back(std::move(cell));
      if (i < n && text[i] == ',') {
        ++i;
        continue;
      }
      if (i < n) { // at a line end: CRLF or LF
        if (text[i] == '\r')
          ++i;
        if (i < n && text[i] == '\n')
          ++i;
        ++line;
      }
      break;
    }
    const bool blank = !quoted_any && rec.cells.size() == 1 && rec.cells.front().empty();
    if (!blank)
      records.push_back(std::move(rec));
  }
  return records;
}

// ---------------------------------------------------------------------------------------------------------------
// Table access

std::string available_columns(const ResultsTable& t) {
  std::string out;
  for (const auto& c : t.columns)
    out += (out.empty() ? "" : ", ") + c;
  return out;
}

// Hand-built tables (tests, the sweep runner) get the same checks as parsed ones, so a bad table is an InputError
// and never an out-of-range access.
void validate(const ResultsTable& t) {
  if (t.column("point") < 0 || t.column("status") < 0)
    throw InputError(
        t.file, "",
        fmt::format("not a results table: it needs the columns 'point' and 'status' (has: {})", available_columns(t)));
  for (std::size_t r = 0; r < t.rows.size(); ++r)
    if (t.rows[r].size() != t.columns.size())
      throw InputError(
          t.file, "",
          fmt::format("row {} has {} cells, but the table has {} columns", r + 1, t.rows[r].size(), t.columns.size()));
}

std::size_t column_index(const ResultsTable& t, std::string_view name, std::string_view role) {
  const int c = t.column(name);
  if (c < 0)
    throw InputError(t.file, "",
                     fmt::format("no column '{}' for {}; available columns: {}", name, role, available_columns(t)));
  return static_cast<std::size_t>(c);
}

// Index of the summary field `name`: the first column of that name after "status" (a swept key may have the same
// name: sweeping "engine", or whole "strategy" objects), or -1.
int summary_field(const ResultsTable& t, std::string_view name) {
  for (auto c = static_cast<std::size_t>(t.column("status")) + 1; c < t.columns.size(); ++c)
    if (t.columns[c] == name)
      return static_cast<int>(c);
  return -1;
}

std::size_t summary_index(const ResultsTable& t, std::string_view name, std::string_view role) {
  const int c = summary_field(t, name);
  if (c < 0)
    throw InputError(
        t.file, "",
        fmt::format("no summary column '{}' for {}; available columns: {}", name, role, available_columns(t)));
  return static_cast<std::size_t>(c);
}

std::vector<std::size_t> ok_rows(const ResultsTable& t) {
  const auto status = static_cast<std::size_t>(t.column("status"));
  std::vector<std::size_t> rows;
  for (std::size_t r = 0; r < t.rows.size(); ++r)
    if (t.rows[r][status] == "ok")
      rows.push_back(r);
  return rows;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

// A plain finite number, the whole cell ("8", "0.85", "1e-3"); std::nullopt otherwise.
std::optional<double> parse_number(std::string_view s) {
  s = trim(s);
  if (s.starts_with('+'))
    s.remove_prefix(1);
  if (s.empty())
    return std::nullopt;
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v))
    return std::nullopt;
  return v;
}

// The sweep point a row stands for, for messages and the .dat files.
double point_of(const ResultsTable& t, std::size_t row) {
  return parse_number(t.rows[row][static_cast<std::size_t>(t.column("point"))]).value_or(static_cast<double>(row));
}

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

// A column over the selected rows, as numbers in a display unit.
struct Measure {
  std::string column;
  std::string name; // "throughput", "inter-node bandwidth", or the column itself
  std::string unit; // "samples/s", "Gb/s"; empty for counts
  std::optional<Dimension> dimension;
  std::vector<double> values; // one per selected row

  [[nodiscard]] std::string label() const { return unit.empty() ? name : fmt::format("{} ({})", name, unit); }
  // For .dat headers: the label and, where it differs, the source column.
  [[nodiscard]] std::string described() const {
    return column == name ? label() : fmt::format("{} [{}]", label(), column);
  }
};

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

// Reads column `col` over `rows` as plain numbers, or as quantities of one dimension ("10 Gbps", "25 MiB").
// std::nullopt when some cell is neither; `bad` then names the first such cell.
std::optional<Measure> measure(const ResultsTable& t, std::size_t col, const std::vector<std::size_t>& rows,
                               std::string* bad = nullptr) {
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

// Distinct values of a column over `rows`, in order of first appearance (the sweep's own order).
std::vector<std::string> distinct_cells(const ResultsTable& t, std::size_t col, const std::vector<std::size_t>& rows) {
  std::vector<std::string> out;
  for (const std::size_t r : rows)
    if (std::find(out.begin(), out.end(), t.rows[r][col]) == out.end())
      out.push_back(t.rows[r][col]);
  return out;
}

// Swept key columns that take more than one value over `rows`.
std::vector<std::size_t> varying_keys(const ResultsTable& t, const std::vector<std::size_t>& rows) {
  std::vector<std::size_t> out;
  const auto first = static_cast<std::size_t>(t.column("point")) + 1;
  const auto last = static_cast<std::size_t>(t.column("status"));
  for (std::size_t c = first; c < last; ++c)
    if (distinct_cells(t, c, rows).size() > 1)
      out.push_back(c);
  return out;
}

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

// Line styles: a colour-blind-safe palette (Tableau 10) and filled markers.
constexpr std::array<std::string_view, 10> kColors{"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                                   "#b07aa1", "#edc948", "#ff9da7", "#9c755f", "#17becf"};
constexpr std::array<int, 6> kPointTypes{7, 5, 9, 11, 13, 15}; // filled circle, square, triangles, diamond, pentagon

// Rows partitioned by the combination of `keys`, in order of first appearance, with a label and a style per group.
// One key labels "key=value"; several label by their values ("wfbp, resnet50") under a heading naming the keys,
// which keeps a legend narrow. The colour follows one key (the one with the most values that the palette can
// tell apart) and the marker the other keys, so that a strategy x model sweep reads as one colour per strategy and
// one marker per model, and a legend can explain colours and markers separately instead of listing every line.
struct Grouping {
  std::string heading; // "k1, k2" when the labels are values only
  std::vector<std::string> labels;
  std::vector<std::string> identities;        // per group, the raw values (labels could coincide: "a, b" + "c")
  std::vector<std::vector<std::size_t>> rows; // per group, in table order
  std::vector<std::size_t> color, marker;     // per group, indices into the palettes
  std::string color_heading, marker_heading;  // the key(s) that colours and markers stand for
  std::vector<std::string> color_names, marker_names;

  // Whether colours and markers alone identify every group (several keys, each palette large enough).
  [[nodiscard]] bool factorable() const {
    return !marker_heading.empty() && color_names.size() <= kColors.size() && marker_names.size() <= kPointTypes.size();
  }
};

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

// True when, over `rows`, the value of column `a` fixes the value of column `b` (as a sweep's "zip" does).
bool determines(const ResultsTable& t, const std::vector<std::size_t>& rows, std::size_t a, std::size_t b) {
  std::map<std::string, std::string> seen;
  for (const std::size_t r : rows) {
    const auto [it, inserted] = seen.emplace(t.rows[r][a], t.rows[r][b]);
    if (!inserted && it->second != t.rows[r][b])
      return false;
  }
  return true;
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

// ---------------------------------------------------------------------------------------------------------------
// gnuplot text

// A gnuplot single-quoted string: no escapes inside, a quote is written twice.
std::string gp_quote(std::string_view s) {
  std::string out = "'";
  for (const char c : one_line(s))
    out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

// A title as a gnuplot string expression: lines break at each '\n' and wrap to at most `width` characters, after a
// comma where possible (so that "1 Gb/s" stays together), since gnuplot centres a title over the plot area and a
// long one would run off the image's left edge.
std::string gp_title(std::string_view s, std::size_t width = 70) {
  std::vector<std::string> lines;
  std::istringstream paragraphs{std::string(s)};
  for (std::string paragraph; std::getline(paragraphs, paragraph);) {
    lines.emplace_back();
    // Phrases end at ", "; a phrase longer than a line is wrapped at its spaces.
    std::vector<std::string> phrases{""};
    for (const char c : one_line(paragraph)) {
      phrases.back() += c;
      if (c == ',')
        phrases.emplace_back();
    }
    for (auto phrase : phrases) {
      if (!lines.back().empty() && lines.back().size() + phrase.size() > width) {
        lines.emplace_back();
        phrase = std::string(trim(phrase));
      }
      if (lines.back().size() + phrase.size() <= width) {
        lines.back() += phrase;
        continue;
      }
      std::istringstream words{phrase};
      for (std::string word; words >> word;) {
        if (!lines.back().empty() && lines.back().size() + 1 + word.size() > width)
          lines.emplace_back();
        lines.back() += (lines.back().empty() ? "" : " ") + word;
      }
    }
  }
  std::string out;
  for (const auto& line : lines)
    out += (out.empty() ? "" : ".\"\\n\".") + gp_quote(line);
  return out;
}

// A double-quoted string column of a gnuplot data file, which has no escape for '"'.
std::string dat_quote(std::string_view s) {
  std::string out = one_line(s);
  std::replace(out.begin(), out.end(), '"', '\'');
  return "\"" + out + "\"";
}

std::string num(double v) {
  return fmt::format("{:.10g}", v);
}

enum class Format { png, svg };

std::string_view extension(Format f) {
  return f == Format::png ? ".png" : ".svg";
}

struct Size {
  int width_px = 1000;
  int height_px = 650;
};

// What a figure needs besides the terminal: its data, the commands that style it, and the plot command, which
// refers to the data file through the gnuplot variable `data`.
struct Figure {
  std::string base; // file name without extension
  std::string title;
  std::string dat;
  std::string setup;
  std::string plot;
};

// The script for `fig`, writing `outputs` (file names relative to the script's directory). Paths are resolved
// from ARG0, so `gnuplot some/dir/x.gp` works from any working directory and the text names no absolute path.
std::string script_text(const Figure& fig, const std::vector<std::pair<Format, std::string>>& outputs, Size size,
                        std::string_view source) {
  std::string s;
  auto out = std::back_inserter(s);
  fmt::format_to(out, "# {}\n", one_line(fig.title));
  fmt::format_to(out, "# Drawn by ddlsim from {}. Edit and rerun `gnuplot {}.gp` to redraw", one_line(source),
                 one_line(fig.base));
  for (std::size_t i = 0; i < outputs.size(); ++i)
    fmt::format_to(out, "{} {}{}",
                   i == 0                    ? ""
                   : i + 1 == outputs.size() ? " and"
                                             : ",",
                   one_line(fig.base), extension(outputs[i].first));
  s += " from the data beside it.\n\n";
  s += "# The directory of this script (from ARG0), so that it finds its data wherever gnuplot is started.\n"
       "here = exists(\"ARG0\") ? ARG0 : \"\"\n"
       "while (strlen(here) > 0 && here[strlen(here):strlen(here)] ne \"/\") { here = here[1:strlen(here) - 1] }\n";
  fmt::format_to(out, "data = here.{}\n\n", gp_quote(fig.base + ".dat"));
  s += fig.setup;
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const auto& [format, file] = outputs[i];
    s += "\n";
    if (format == Format::png)
      fmt::format_to(out, "set terminal pngcairo size {},{} font 'sans,12'\n", size.width_px, size.height_px);
    else
      fmt::format_to(out, "set terminal svg size {},{} dynamic font 'sans,12'\n", size.width_px, size.height_px);
    s += "set termoption noenhanced  # names print literally (no subscripts from '_')\n";
    fmt::format_to(out, "set output here.{}\n", gp_quote(file));
    s += i == 0 ? fig.plot : std::string("replot\n");
  }
  s += "unset output\n";
  return s;
}

// Removes the files it holds when it goes out of scope (temporaries of one gnuplot run).
class TempFiles {
public:
  TempFiles() = default;
  TempFiles(const TempFiles&) = delete;
  TempFiles& operator=(const TempFiles&) = delete;
  ~TempFiles() {
    for (const auto& p : paths_) {
      std::error_code ignored;
      fs::remove(p, ignored);
    }
  }
  fs::path add(fs::path p) { return paths_.emplace_back(std::move(p)); }

private:
  std::vector<fs::path> paths_;
};

// The last few non-empty lines of gnuplot's output, for an error message.
std::string log_tail(const fs::path& log) {
  std::ifstream in(log);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    if (!trim(line).empty())
      lines.push_back(std::string(trim(line)));
  const std::size_t from = lines.size() > 4 ? lines.size() - 4 : 0;
  std::string out;
  for (std::size_t i = from; i < lines.size(); ++i)
    out += (out.empty() ? "" : " | ") + lines[i];
  return out.empty() ? "no output" : out;
}

// Runs `gnuplot script` (found on PATH, stdin from /dev/null, stdout and stderr into `log`) and waits for it.
// Errors name `shown` (the user-facing .gp), since `script` is a temporary copy.
void run_gnuplot(const fs::path& script, const fs::path& log, const std::string& shown) {
  posix_spawn_file_actions_t actions;
  if (posix_spawn_file_actions_init(&actions) != 0)
    throw std::runtime_error(fmt::format("{}: cannot prepare to run gnuplot", shown));
  struct Destroy {
    posix_spawn_file_actions_t* a;
    ~Destroy() { posix_spawn_file_actions_destroy(a); }
  } destroy{&actions};
  const std::string log_path = log.string();
  if (posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0) != 0 ||
      posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644) !=
          0 ||
      posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO) != 0)
    throw std::runtime_error(fmt::format("{}: cannot prepare to run gnuplot", shown));

  std::string program = "gnuplot";
  std::string argument = script.string();
  std::array<char*, 3> argv{program.data(), argument.data(), nullptr};
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, program.c_str(), &actions, nullptr, argv.data(), environ);
  if (spawned != 0)
    throw std::runtime_error(fmt::format("{}: cannot run gnuplot: {} (plots need gnuplot 5.4 or newer on PATH)", shown,
                                         std::error_code(spawned, std::generic_category()).message()));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      throw std::runtime_error(fmt::format("{}: lost track of gnuplot (pid {})", shown, static_cast<long>(pid)));
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
    return;
  const std::string how = WIFEXITED(status)     ? fmt::format("exit status {}", WEXITSTATUS(status))
                          : WIFSIGNALED(status) ? fmt::format("killed by signal {}", WTERMSIG(status))
                                                : std::string("stopped");
  throw std::runtime_error(fmt::format("{}: gnuplot failed ({}): {}", shown, how, log_tail(log)));
}

// Writes <dir>/<base>.dat and .gp, then runs gnuplot on a temporary copy of the script that writes the images
// under temporary names in `dir`, and renames them into place. Returns the image paths.
std::vector<std::string> render(const fs::path& dir, const Figure& fig, const std::vector<Format>& formats, Size size,
                                std::string_view source) {
  if (!dir.empty())
    fs::create_directories(dir);
  const fs::path gp = dir / (fig.base + ".gp");
  const std::string pid = std::to_string(static_cast<long>(::getpid()));

  std::vector<std::pair<Format, std::string>> finals, temps;
  for (const Format f : formats) {
    finals.emplace_back(f, fig.base + std::string(extension(f)));
    temps.emplace_back(f, fmt::format("{}{}.tmp.{}", fig.base, extension(f), pid));
  }
  write_file_atomic((dir / (fig.base + ".dat")).string(), fig.dat);
  write_file_atomic(gp.string(), script_text(fig, finals, size, source));

  TempFiles temp;
  const fs::path run_script = temp.add(dir / fmt::format("{}.gp.run.{}", fig.base, pid));
  const fs::path log = temp.add(dir / fmt::format("{}.gp.log.{}", fig.base, pid));
  for (const auto& [format, name] : temps)
    temp.add(dir / name);
  write_file_atomic(run_script.string(), script_text(fig, temps, size, source));
  run_gnuplot(run_script, log, gp.string());

  std::vector<std::string> images;
  for (std::size_t i = 0; i < formats.size(); ++i) {
    const fs::path from = dir / temps[i].second, to = dir / finals[i].second;
    std::error_code ec;
    if (fs::file_size(from, ec) == 0 || ec)
      throw std::runtime_error(fmt::format("{}: gnuplot wrote no {} ({})", gp.string(), to.string(), log_tail(log)));
    fs::rename(from, to, ec);
    if (ec)
      throw std::runtime_error(fmt::format("{}: cannot rename into place: {}", to.string(), ec.message()));
    images.push_back(to.string());
  }
  return images;
}

// ---------------------------------------------------------------------------------------------------------------
// Line figures

// More lines than a key can list legibly at 1000 x 650 (two columns below the plot); beyond, the key is left out
// and the title points to the .dat, whose block comments label every line.
constexpr std::size_t kMostKeyEntries = 40;

// A key beside the plot, its text left-aligned after the line samples, so that long labels stay compact.
constexpr std::string_view kKeyOutside = "outside right top Left reverse";

struct Block {
  std::string title;
  std::vector<std::array<double, 3>> points; // x, y, sweep point (NaN for reference lines)
  bool reference = false;                    // an ideal line: dashed, black, no markers
  std::size_t color = 0, marker = 0;         // palette indices of a measured line
};

// True when positive values span more than a factor 8, where a log axis shows them better.
bool wants_log(const std::vector<double>& values) {
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  return lo != values.end() && *lo > 0 && *hi / *lo > 8;
}

struct Axis {
  std::string label;
  bool log = false;
  int log_base = 10;
  std::vector<std::string> categories; // non-empty: categorical, value i drawn at position i
};

Axis numeric_axis(std::string label, const std::vector<double>& values, int log_base) {
  Axis a;
  a.label = std::move(label);
  a.log = wants_log(values);
  a.log_base = log_base;
  return a;
}

// How a line figure's key explains its lines: one entry per line under `title`, or, with many lines, one entry per
// colour and one per marker under their headings, which stays short where a list of every line would not fit.
struct Legend {
  std::string title;
  bool factored = false;
  std::string color_heading, marker_heading;
  std::vector<std::string> color_names, marker_names;
};

Legend legend_of(const Grouping& g) {
  Legend l;
  l.title = g.heading;
  l.factored = g.labels.size() > 8 && g.factorable();
  l.color_heading = g.color_heading;
  l.marker_heading = g.marker_heading;
  l.color_names = g.color_names;
  l.marker_names = g.marker_names;
  return l;
}

struct LineFigure {
  std::string base;
  std::string title;
  Axis x;
  std::string y_label;
  int y_log_base = 0;             // a log y axis with this base; 0 for linear
  std::string x_column, y_column; // .dat header descriptions
  std::vector<Block> blocks;
  // Corners to try for the key, in order of preference: the first one that no line or marker crosses is used.
  std::vector<std::string_view> corners{"top left", "top right", "bottom right", "bottom left"};
  Legend legend;
  Size size;
};

LineFigure line_plot(std::string base, std::string title, Axis x, std::string x_column, std::string y_label,
                     std::string y_column, std::vector<Block> blocks) {
  LineFigure f;
  f.base = std::move(base);
  f.title = std::move(title);
  f.x = std::move(x);
  f.x_column = std::move(x_column);
  f.y_label = std::move(y_label);
  f.y_column = std::move(y_column);
  f.blocks = std::move(blocks);
  return f;
}

// Whether tic labels must slant to stay apart: the longest (at about 7.5 pixels a character) would not fit the
// space of one of `slots` positions across `width_px`.
bool slanted(const std::vector<std::string>& labels, std::size_t slots, double width_px) {
  std::size_t longest = 0;
  for (const auto& l : labels)
    longest = std::max(longest, l.size());
  return 7.5 * static_cast<double>(longest) > 0.9 * width_px / static_cast<double>(std::max<std::size_t>(slots, 1));
}

// Explicit tics at the measured values when they are few and far enough apart to be read, else gnuplot's own.
std::string x_tics(const LineFigure& f) {
  if (!f.x.categories.empty()) {
    std::string tics;
    for (std::size_t i = 0; i < f.x.categories.size(); ++i)
      tics += fmt::format("{}{} {}", i == 0 ? "" : ", ", gp_quote(f.x.categories[i]), i);
    // The plot area is the image less its margins and, at worst, a key beside it.
    const bool slant = slanted(f.x.categories, f.x.categories.size(), 0.75 * (f.size.width_px - 140.0));
    return fmt::format("set xtics ({}){}\n", tics, slant ? " rotate by -30 left" : "");
  }
  std::set<double> values;
  for (const auto& b : f.blocks)
    for (const auto& p : b.points)
      values.insert(p[0]);
  if (values.size() < 2 || values.size() > 12)
    return "";
  const auto pos = [&](double v) { return f.x.log ? std::log(v) : v; };
  const double span = pos(*values.rbegin()) - pos(*values.begin());
  for (auto it = std::next(values.begin()); it != values.end(); ++it)
    if (pos(*it) - pos(*std::prev(it)) < 0.04 * span)
      return "";
  std::string tics;
  for (const double v : values)
    tics += fmt::format("{}'{:.6g}' {}", tics.empty() ? "" : ", ", v, num(v));
  return fmt::format("set xtics ({})\n", tics);
}

// Tics at 1, 2 and 5 times the powers of ten in [lo, hi] on a log axis of base 10 spanning less than about four
// decades, where gnuplot would label only one or two decades; empty (gnuplot's own) otherwise.
std::string log_tics(char axis, double lo, double hi, int base) {
  if (base != 10 || !(lo > 0) || !(hi > lo))
    return "";
  std::vector<double> tics;
  for (int e = static_cast<int>(std::floor(std::log10(lo))); e <= static_cast<int>(std::ceil(std::log10(hi))); ++e)
    for (const double m : {1.0, 2.0, 5.0}) {
      const double v = m * std::pow(10.0, e);
      if (v >= lo && v <= hi)
        tics.push_back(v);
    }
  if (tics.size() < 3 || tics.size() > 12)
    return "";
  std::string list;
  for (const double v : tics)
    list += fmt::format("{}'{:g}' {}", list.empty() ? "" : ", ", v, num(v));
  return fmt::format("set {}tics ({})\n", axis, list);
}

// An axis range, set explicitly so that the script does not depend on gnuplot's autoscaling and the key can be
// placed where the data is not.
struct Range {
  double lo = 0, hi = 1;
  bool log = false;

  // Where `v` falls, as a fraction of the axis (0 at lo, 1 at hi).
  [[nodiscard]] double fraction(double v) const {
    return log ? (std::log(v) - std::log(lo)) / (std::log(hi) - std::log(lo)) : (v - lo) / (hi - lo);
  }
};

// The x range: the data with a margin, so that the outermost markers are not cut by the border.
Range x_extent(const LineFigure& f) {
  if (!f.x.categories.empty())
    return Range{-0.5, static_cast<double>(f.x.categories.size()) - 0.5, false};
  double lo = INFINITY, hi = -INFINITY;
  for (const auto& b : f.blocks)
    for (const auto& p : b.points)
      lo = std::min(lo, p[0]), hi = std::max(hi, p[0]);
  if (!(lo <= hi))
    return Range{};
  if (f.x.log) {
    const double margin = hi > lo ? std::pow(hi / lo, 0.04) : 1.25;
    return Range{lo / margin, hi * margin, true};
  }
  const double margin = hi > lo ? 0.04 * (hi - lo) : std::max(1.0, 0.1 * std::abs(lo));
  return Range{lo - margin, hi + margin, false};
}

// The y range: from zero for quantities that cannot be negative (so that heights compare honestly), up to the data
// with a margin rather than gnuplot's next tic, which can leave a band of nothing; on a log axis, the data with a
// margin rather than whole decades.
Range y_extent(const LineFigure& f) {
  double lo = INFINITY, hi = -INFINITY;
  for (const auto& b : f.blocks)
    for (const auto& p : b.points)
      if (std::isfinite(p[1]) && (f.y_log_base == 0 || p[1] > 0))
        lo = std::min(lo, p[1]), hi = std::max(hi, p[1]);
  if (!(lo <= hi))
    return Range{};
  if (f.y_log_base > 0) {
    const double margin = hi > lo ? std::pow(hi / lo, 0.05) : 1.25;
    return Range{lo / margin, hi * margin, true};
  }
  if (lo >= 0)
    return Range{0, hi > 0 ? hi * 1.06 : 1, false};
  const double margin = 0.06 * std::max(hi - lo, 1e-12);
  return Range{lo - margin, hi + margin, false};
}

// The key: inside, with an opaque box, in the first of `f.corners` that no line or marker of the data crosses
// (judged from the key's size estimated from its text), else outside on the right; below in columns when the lines
// are too many for one column.
std::string key_position(const LineFigure& f, const Range& x, const Range& y) {
  std::size_t entries = f.legend.title.empty() ? 0 : 1, longest = f.legend.title.size();
  for (const auto& b : f.blocks)
    ++entries, longest = std::max(longest, b.title.size());
  if (!f.legend.factored && entries > kMostKeyEntries)
    return "off"; // the title says where the labels are
  if (f.legend.factored || entries > 8 || longest > 45)
    return std::string(entries > 20 && !f.legend.factored ? "below Left reverse" : kKeyOutside);
  // About 7.5 pixels per character and 19 per line at 12 points; the plot area is the image less its margins.
  const double width = (7.5 * static_cast<double>(longest) + 80) / (f.size.width_px - 140.0);
  const double height = (19.0 * static_cast<double>(entries) + 14) / (f.size.height_px - 130.0);
  std::vector<std::pair<double, double>> marks; // the data as fractions of the plot area
  for (const auto& b : f.blocks) {
    std::set<double> xs;
    for (const auto& p : b.points)
      xs.insert(p[0]);
    const bool lines = b.reference || xs.size() == b.points.size();
    for (std::size_t i = 0; i < b.points.size(); ++i) {
      const auto& p = b.points[i];
      if (!std::isfinite(p[1]) || (y.log && p[1] <= 0))
        continue;
      const double x0 = x.fraction(p[0]), y0 = y.fraction(p[1]);
      marks.emplace_back(x0, y0);
      const bool next =
          i + 1 < b.points.size() && std::isfinite(b.points[i + 1][1]) && !(y.log && b.points[i + 1][1] <= 0);
      if (!lines || !next)
        continue;
      const double x1 = x.fraction(b.points[i + 1][0]), y1 = y.fraction(b.points[i + 1][1]);
      for (int k = 1; k < 32; ++k) { // the segment to the next point, straight on the plot
        const double u = k / 32.0;
        marks.emplace_back(x0 + u * (x1 - x0), y0 + u * (y1 - y0));
      }
    }
  }
  for (const auto corner : f.corners) {
    const bool top = corner.starts_with("top"), left = corner.ends_with("left");
    const double x0 = left ? 0 : 1 - width, y0 = top ? 1 - height : 0;
    const bool free = std::none_of(marks.begin(), marks.end(), [&](const auto& m) {
      return m.first >= x0 - 0.02 && m.first <= x0 + width + 0.02 && m.second >= y0 - 0.03 &&
             m.second <= y0 + height + 0.03;
    });
    if (free)
      return fmt::format("{} box opaque", corner);
  }
  return std::string(kKeyOutside);
}

Figure line_figure(const LineFigure& f, std::string_view source) {
  Figure fig{f.base, f.title, {}, {}, {}};
  auto dat = std::back_inserter(fig.dat);
  fmt::format_to(dat, "# {}\n# Data of {}.gp, written by ddlsim from {}; one block per line (gnuplot `index N`).\n",
                 one_line(f.title), one_line(f.base), one_line(source));
  fmt::format_to(dat, "# columns: 1 = {}, 2 = {}, 3 = sweep point (reference lines: columns 1-2 only)\n",
                 one_line(f.x_column), one_line(f.y_column));
  if (!f.legend.title.empty())
    fmt::format_to(dat, "# blocks are labelled by the values of: {}\n", one_line(f.legend.title));
  if (!f.x.categories.empty()) {
    fig.dat += "# x positions:";
    for (std::size_t i = 0; i < f.x.categories.size(); ++i)
      fmt::format_to(dat, "{} {} = {}", i == 0 ? "" : ",", i, one_line(f.x.categories[i]));
    fig.dat += "\n";
  }
  for (std::size_t b = 0; b < f.blocks.size(); ++b) {
    const Block& block = f.blocks[b];
    fmt::format_to(dat, "{}# block {}: {}\n", b == 0 ? "\n" : "\n\n", b, one_line(block.title));
    for (const auto& p : block.points) {
      if (block.reference)
        fmt::format_to(dat, "{} {}\n", num(p[0]), num(p[1]));
      else
        fmt::format_to(dat, "{} {} {}\n", num(p[0]), num(p[1]), num(p[2]));
    }
  }

  auto setup = std::back_inserter(fig.setup);
  const Range x = x_extent(f), y = y_extent(f);
  const std::string key = key_position(f, x, y);
  const auto lines = std::count_if(f.blocks.begin(), f.blocks.end(), [](const Block& b) { return !b.reference; });
  fmt::format_to(setup, "set title {}\n",
                 gp_title(key == "off" ? fmt::format("{}\n({} lines: too many to label; {}.dat names each)", f.title,
                                                     lines, f.base)
                                       : f.title));
  fmt::format_to(setup, "set xlabel {}\nset ylabel {}\n", gp_quote(f.x.label), gp_quote(f.y_label));
  fig.setup += "set grid\n";
  fmt::format_to(setup, "set key {}{}\n", key,
                 f.legend.title.empty() || f.legend.factored || key == "off" ? ""
                                                                             : " title " + gp_quote(f.legend.title));
  if (f.x.log)
    fmt::format_to(setup, "set logscale x {}\n", f.x.log_base);
  fmt::format_to(setup, "set xrange [{}:{}]\n", num(x.lo), num(x.hi));
  fig.setup += x_tics(f);
  if (y.log)
    fmt::format_to(setup, "set logscale y {}\nset format y '%g'\n", f.y_log_base);
  fmt::format_to(setup, "set yrange [{}:{}]\n", num(y.lo), num(y.hi));
  if (y.log)
    fig.setup += log_tics('y', y.lo, y.hi, f.y_log_base);

  std::vector<std::string> measured, legend, reference;
  for (std::size_t b = 0; b < f.blocks.size(); ++b) {
    const Block& block = f.blocks[b];
    if (block.reference) {
      reference.push_back(fmt::format("data index {} using 1:2 with lines lw 2 dt 2 lc rgb 'black' title {}", b,
                                      gp_quote(block.title)));
      continue;
    }
    // A line through points that share an x would zigzag; such blocks are drawn as markers only.
    std::set<double> xs;
    for (const auto& p : block.points)
      xs.insert(p[0]);
    measured.push_back(fmt::format("data index {} using 1:2 with {} lw 2 pt {} ps 1.3 lc rgb '{}' {}", b,
                                   xs.size() == block.points.size() ? "linespoints" : "points",
                                   kPointTypes[block.marker % kPointTypes.size()],
                                   kColors[block.color % kColors.size()],
                                   f.legend.factored ? std::string("notitle") : "title " + gp_quote(block.title)));
  }
  if (f.legend.factored) { // headings are entries without a sample; a blank entry separates the two lists
    legend.push_back(fmt::format("keyentry with lines lt nodraw title {}", gp_quote(f.legend.color_heading)));
    for (std::size_t i = 0; i < f.legend.color_names.size(); ++i)
      legend.push_back(fmt::format("keyentry with lines lw 2 lc rgb '{}' title {}", kColors[i % kColors.size()],
                                   gp_quote(f.legend.color_names[i])));
    legend.push_back("keyentry with lines lt nodraw title ' '");
    legend.push_back(fmt::format("keyentry with lines lt nodraw title {}", gp_quote(f.legend.marker_heading)));
    for (std::size_t i = 0; i < f.legend.marker_names.size(); ++i)
      legend.push_back(fmt::format("keyentry with points pt {} ps 1.3 lc rgb '#555555' title {}",
                                   kPointTypes[i % kPointTypes.size()], gp_quote(f.legend.marker_names[i])));
  }
  fig.plot = "plot ";
  bool first = true;
  for (const auto* clauses : {&measured, &legend, &reference})
    for (const auto& clause : *clauses) {
      fig.plot += (first ? "" : ", \\\n     ") + clause;
      first = false;
    }
  fig.plot += "\n";
  return fig;
}

// `base` when the measured y values are positive and span more than a factor 8 (on a log x axis, where a log y
// axis shows linear scaling as a straight line and small and large models alike), else 0 (linear).
int y_log_base(const LineFigure& f, int base) {
  double lo = INFINITY, hi = 0;
  for (const auto& b : f.blocks)
    for (const auto& p : b.points)
      if (!b.reference)
        lo = std::min(lo, p[1]), hi = std::max(hi, p[1]);
  return f.x.log && lo > 0 && hi / lo > 8 ? base : 0;
}

// One block per group: (x, y, point) sorted by x, ties in table order.
std::vector<Block> blocks_of(const Grouping& g, const std::vector<std::size_t>& rows, const std::vector<double>& x,
                             const std::vector<double>& y, const ResultsTable& t, std::string_view single_title) {
  std::map<std::size_t, std::size_t> index; // table row -> position in `rows`
  for (std::size_t i = 0; i < rows.size(); ++i)
    index[rows[i]] = i;
  std::vector<Block> blocks;
  for (std::size_t k = 0; k < g.labels.size(); ++k) {
    Block b;
    b.title = g.labels[k].empty() ? std::string(single_title) : g.labels[k];
    b.color = g.color[k];
    b.marker = g.marker[k];
    for (const std::size_t r : g.rows[k]) {
      const std::size_t i = index.at(r);
      b.points.push_back({x[i], y[i], point_of(t, r)});
    }
    std::stable_sort(b.points.begin(), b.points.end(), [](const auto& a, const auto& c) { return a[0] < c[0]; });
    blocks.push_back(std::move(b));
  }
  return blocks;
}

// The swept keys that change `workers` when changed alone, all other varying keys fixed (cluster.nodes, and
// cluster.gpus_per_node when zipped with it or swept beside it).
std::vector<std::size_t> keys_changing_gpus(const ResultsTable& t, const std::vector<std::size_t>& rows,
                                            std::size_t workers) {
  const auto keys = varying_keys(t, rows);
  std::vector<std::size_t> changing;
  for (const std::size_t k : keys) {
    std::map<std::string, std::set<std::string>> workers_by_rest;
    bool changes = false;
    for (const std::size_t r : rows) {
      std::string rest;
      for (const std::size_t o : keys)
        if (o != k)
          rest += t.rows[r][o] + '\x1f';
      auto& w = workers_by_rest[rest];
      w.insert(t.rows[r][workers]);
      changes = changes || w.size() > 1;
    }
    if (changes)
      changing.push_back(k);
  }
  return changing;
}

// The swept keys the GPU axis runs along: those that change the GPU count. If lines along all of them would have
// two points at one GPU count (nodes x GPUs per node as a product: 2 x 4 and 4 x 2), the key with the fewest values
// (the later column on a tie) tells lines apart instead, until every line has one point per GPU count.
std::vector<std::size_t> gpu_keys(const ResultsTable& t, const std::vector<std::size_t>& rows, std::size_t workers) {
  std::vector<std::size_t> along = keys_changing_gpus(t, rows, workers);
  while (!along.empty()) {
    const Grouping g = group_rows(t, label_keys(t, rows, along), rows);
    const bool one_point_per_count = std::all_of(g.rows.begin(), g.rows.end(), [&](const auto& members) {
      std::set<std::string> counts;
      for (const std::size_t r : members)
        if (!counts.insert(t.rows[r][workers]).second)
          return false;
      return true;
    });
    if (one_point_per_count)
      break;
    const auto fewest = std::min_element(along.rbegin(), along.rend(), [&](std::size_t a, std::size_t b) {
      return distinct_cells(t, a, rows).size() < distinct_cells(t, b, rows).size();
    });
    along.erase(std::next(fewest).base());
  }
  return along;
}

// "ideal (linear)", and which group it is the ideal of where the groups' single-GPU throughputs differ: named by
// the label keys that change it (model.zoo), not by those that do not (strategy.kind).
std::string ideal_title(const ResultsTable& t, const std::vector<std::size_t>& keys, const Grouping& g,
                        const std::vector<Block>& ideal) {
  std::vector<double> per_gpu; // mean ideal throughput per GPU of each group
  for (const auto& b : ideal) {
    double sum = 0;
    std::size_t n = 0;
    for (const auto& p : b.points)
      if (std::isfinite(p[1]) && p[0] > 0)
        sum += p[1] / p[0], ++n;
    per_gpu.push_back(n > 0 ? sum / static_cast<double>(n) : NAN);
  }
  std::string which;
  for (std::size_t k = 0; k < keys.size(); ++k) {
    bool matters = false;
    for (std::size_t a = 0; a < g.rows.size() && !matters; ++a)
      for (std::size_t b = a + 1; b < g.rows.size() && !matters; ++b) {
        const auto& ra = t.rows[g.rows[a].front()];
        const auto& rb = t.rows[g.rows[b].front()];
        bool others_equal = ra[keys[k]] != rb[keys[k]];
        for (std::size_t o = 0; o < keys.size() && others_equal; ++o)
          others_equal = o == k || ra[keys[o]] == rb[keys[o]];
        matters = others_equal && !(std::abs(per_gpu[a] - per_gpu[b]) <= 1e-9 * std::abs(per_gpu[a]));
      }
    if (matters)
      which += fmt::format("{}{}={}", which.empty() ? " for " : ", ", t.columns[keys[k]],
                           legend_value(t.rows[g.rows.front().front()][keys[k]]));
  }
  return "ideal (linear)" + which;
}

// throughput, speedup and scaling efficiency vs GPUs, the GPU count running `along` those keys (gpu_keys).
std::vector<std::string> gpu_figures(const ResultsTable& t, const std::vector<std::size_t>& rows, const fs::path& dir,
                                     const std::string& scenario, const std::vector<std::size_t>& along) {
  const Measure workers = summary_measure(t, "workers", rows, "the GPU count");
  const Measure throughput = summary_measure(t, "throughput_samples_per_s", rows, "throughput");
  const Measure efficiency = summary_measure(t, "scaling_efficiency", rows, "scaling efficiency");
  const auto keys = label_keys(t, rows, along);
  const Grouping groups = group_rows(t, keys, rows);

  std::vector<double> speedup, percent, ideal;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const double e = efficiency.values[i] / 100;
    speedup.push_back(workers.values[i] * e);
    percent.push_back(efficiency.values[i]);
    ideal.push_back(e > 0 ? throughput.values[i] / e : NAN);
  }
  std::vector<double> gpu_counts(workers.values);
  std::sort(gpu_counts.begin(), gpu_counts.end());
  gpu_counts.erase(std::unique(gpu_counts.begin(), gpu_counts.end()), gpu_counts.end());

  const Axis x = numeric_axis("GPUs", gpu_counts, 2);
  const std::string x_column = "GPUs [workers]";
  std::vector<std::string> images;
  const auto draw = [&](const LineFigure& f) {
    const auto written = render(dir, line_figure(f, fs::path(t.file).filename().string()), {Format::png, Format::svg},
                                Size{}, fs::path(t.file).filename().string());
    images.insert(images.end(), written.begin(), written.end());
  };

  { // throughput, with the first group's ideal: workers x its single-GPU throughput
    LineFigure f =
        line_plot("throughput", titled(scenario, "throughput vs GPUs"), x, x_column, throughput.label(),
                  throughput.described(), blocks_of(groups, rows, workers.values, throughput.values, t, "simulated"));
    const auto ideal_blocks = blocks_of(groups, rows, workers.values, ideal, t, "");
    Block reference;
    reference.title = ideal_title(t, keys, groups, ideal_blocks);
    reference.reference = true;
    for (const auto& p : ideal_blocks.front().points)
      if (std::isfinite(p[1]))
        reference.points.push_back({p[0], p[1], NAN});
    f.blocks.push_back(std::move(reference));
    f.legend = legend_of(groups);
    f.y_log_base = y_log_base(f, 10);
    draw(f);
  }
  { // speedup, against y = x
    LineFigure f = line_plot("speedup", titled(scenario, "speedup vs GPUs"), x, x_column, "speedup over one GPU",
                             "speedup over one GPU = workers x scaling_efficiency",
                             blocks_of(groups, rows, workers.values, speedup, t, "simulated"));
    Block reference;
    reference.title = "ideal (linear)";
    reference.reference = true;
    for (const double n : gpu_counts)
      reference.points.push_back({n, n, NAN});
    f.blocks.push_back(std::move(reference));
    f.legend = legend_of(groups);
    f.y_log_base = y_log_base(f, 2);
    draw(f);
  }
  { // scaling efficiency in percent, against 100 %
    LineFigure f =
        line_plot("scaling_efficiency", titled(scenario, "scaling efficiency vs GPUs"), x, x_column, efficiency.label(),
                  efficiency.described(), blocks_of(groups, rows, workers.values, percent, t, "simulated"));
    Block reference;
    reference.title = "ideal (linear)";
    reference.reference = true;
    for (const double n : gpu_counts)
      reference.points.push_back({n, 100, NAN});
    f.blocks.push_back(std::move(reference));
    f.corners = {"bottom left", "top right", "bottom right", "top left"};
    f.legend = legend_of(groups);
    draw(f);
  }
  return images;
}

// y vs one swept key (a data rate or another number), one line per combination of the other varying keys; the key
// inside in `corner`, or outside when `corner` is empty.
std::vector<std::string> key_figure(const ResultsTable& t, const std::vector<std::size_t>& rows, const fs::path& dir,
                                    const std::string& scenario, const Measure& key, std::size_t key_col,
                                    const Measure& y, const std::string& base, std::string_view corner) {
  const Grouping groups = group_rows(t, label_keys(t, rows, {key_col}), rows);
  LineFigure f =
      line_plot(base, titled(scenario, fmt::format("{} vs {}", y.name, key.name)),
                numeric_axis(key.label(), key.values, key.dimension == Dimension::bytes ? 2 : 10), key.described(),
                y.label(), y.described(), blocks_of(groups, rows, key.values, y.values, t, "simulated"));
  std::erase(f.corners, corner);
  if (corner.empty())
    f.corners.clear();
  else
    f.corners.insert(f.corners.begin(), corner);
  f.legend = legend_of(groups);
  const std::string source = fs::path(t.file).filename().string();
  return render(dir, line_figure(f, source), {Format::png, Format::svg}, Size{}, source);
}

// ---------------------------------------------------------------------------------------------------------------
// Breakdown bars

std::vector<std::string> breakdown_figure(const ResultsTable& t, const std::vector<std::size_t>& all_rows,
                                          const fs::path& dir, const std::string& scenario, bool gpus_swept) {
  // At the largest GPU count, where communication weighs most: one bar per strategy, not one per GPU count.
  const Measure all_workers = summary_measure(t, "workers", all_rows, "the GPU count");
  const double most = *std::max_element(all_workers.values.begin(), all_workers.values.end());
  std::vector<std::size_t> rows;
  for (std::size_t i = 0; i < all_rows.size(); ++i)
    if (all_workers.values[i] == most)
      rows.push_back(all_rows[i]);
  std::string where =
      fmt::format("{:.6g} GPU{}{}", most, most == 1 ? "" : "s", gpus_swept ? " (the largest GPU count)" : "");
  // Too many bars to read (a bandwidth x strategy x model sweep): swept data rates are held at their slowest, for
  // the same reason (throughput_vs_bandwidth shows the rest), then other numeric keys at their first value swept
  // (iteration_time shows the rest). Names (strategies, models) stay: comparing them is the figure's purpose.
  constexpr std::size_t kReadableBars = 24;
  const auto hold = [&](std::size_t k, const Measure& m, double value, std::string_view why) {
    std::vector<std::size_t> kept;
    for (std::size_t i = 0; i < rows.size(); ++i)
      if (m.values[i] == value)
        kept.push_back(rows[i]);
    rows = std::move(kept);
    where += fmt::format(", {} = {:.6g}{} ({})", t.columns[k], value, m.unit.empty() ? "" : " " + m.unit, why);
  };
  for (const bool rates : {true, false})
    for (const std::size_t k : varying_keys(t, rows)) {
      const auto m = measure(t, k, rows);
      if (rows.size() <= kReadableBars || !m || (m->dimension == Dimension::bandwidth) != rates)
        continue;
      if (rates)
        hold(k, *m, *std::min_element(m->values.begin(), m->values.end()), "the slowest");
      else
        hold(k, *m, m->values.front(), "the first swept");
    }

  constexpr std::array<std::pair<std::string_view, std::string_view>, 4> kParts{{
      {"breakdown_s.compute", "#4e79a7"},
      {"breakdown_s.compression", "#b07aa1"},
      {"breakdown_s.exposed_communication", "#e15759"},
      {"breakdown_s.idle", "#bab0ac"},
  }};
  // One bar per strategy; when other keys vary too (the model, say), the bars form one cluster per combination of
  // them, so that the strategies of one model stand side by side under the model's name.
  const auto keys = label_keys(t, rows, {});
  const auto is_strategy = [&](std::size_t k) { return t.columns[k] == "strategy.kind" || t.columns[k] == "strategy"; };
  std::vector<std::size_t> bar_keys, cluster_keys;
  for (const std::size_t k : keys)
    (is_strategy(k) ? bar_keys : cluster_keys).push_back(k);
  const Grouping clusters = group_rows(t, cluster_keys, rows);
  const int strategy = summary_field(t, "strategy");
  const auto values_of = [&](std::size_t r, const std::vector<std::size_t>& of) {
    std::string label;
    for (const std::size_t k : of)
      label += (label.empty() ? "" : ", ") + legend_value(t.rows[r][k]);
    return label;
  };
  std::string bar_heading, cluster_heading;
  for (const std::size_t k : bar_keys)
    bar_heading += (bar_heading.empty() ? "" : ", ") + t.columns[k];
  for (const std::size_t k : cluster_keys)
    cluster_heading += (cluster_heading.empty() ? "" : ", ") + t.columns[k];
  if (bar_heading.empty())
    bar_heading = "strategy";

  std::string title = titled(scenario, "iteration time breakdown");
  title += (title.size() + where.size() > 66 ? "\nat " : " at ") + where;
  Figure fig{"breakdown", title, {}, {}, {}};
  const std::string source = fs::path(t.file).filename().string();
  auto dat = std::back_inserter(fig.dat);
  fmt::format_to(dat, "# {}\n# Data of breakdown.gp, written by ddlsim from {}; one row per bar", one_line(fig.title),
                 one_line(source));
  if (!cluster_keys.empty())
    fmt::format_to(dat, ", one block (gnuplot `index N`) per value of {}", one_line(cluster_heading));
  fmt::format_to(dat, ".\n# columns: 1 = {}", one_line(bar_heading));
  std::vector<std::string> part_names;
  std::vector<Measure> parts;
  for (std::size_t p = 0; p < kParts.size(); ++p) {
    parts.push_back(summary_measure(t, kParts[p].first, rows, "the iteration time breakdown"));
    fmt::format_to(dat, ", {} = {}", p + 2, parts.back().described());
    std::string name = parts.back().name;
    part_names.push_back(name.ends_with(" time") ? name.substr(0, name.size() - 5) : name);
  }
  const Measure total = summary_measure(t, "iteration_time_s", rows, "the iteration time");
  fmt::format_to(dat, ", {} = {}, {} = sweep point\n", kParts.size() + 2, total.described(), kParts.size() + 3);

  std::map<std::size_t, std::size_t> index; // table row -> position in `rows`
  for (std::size_t i = 0; i < rows.size(); ++i)
    index[rows[i]] = i;
  std::vector<std::string> labels;
  std::vector<std::size_t> positions; // clusters one bar apart: cluster c starts at (bars before it) + c
  std::vector<std::size_t> starts;
  for (std::size_t c = 0; c < clusters.rows.size(); ++c) {
    starts.push_back(c == 0 ? 0 : starts.back() + clusters.rows[c - 1].size() + 1);
    fig.dat += c == 0 ? "\n" : "\n\n";
    if (!clusters.labels[c].empty())
      fmt::format_to(dat, "# block {}: {}\n", c, clusters.labels[c]);
    for (std::size_t j = 0; j < clusters.rows[c].size(); ++j) {
      const std::size_t r = clusters.rows[c][j];
      const std::size_t i = index.at(r);
      std::string label = values_of(r, bar_keys);
      if (label.empty() && strategy >= 0)
        label = one_line(t.rows[r][static_cast<std::size_t>(strategy)]);
      positions.push_back(starts.back() + j);
      labels.push_back(label);
      fig.dat += dat_quote(label);
      for (const auto& p : parts) // appended piecewise: GCC 12 -O3 warns (-Wrestrict) on " " + std::string
        fmt::format_to(dat, " {}", num(p.values[i]));
      fmt::format_to(dat, " {} {}\n", num(total.values[i]), num(point_of(t, r)));
    }
  }

  auto setup = std::back_inserter(fig.setup);
  fmt::format_to(setup, "set title {}\n", gp_title(fig.title));
  // Cluster names print below the bar labels; the axis label goes below them.
  fmt::format_to(setup, "set xlabel {}{}\nset ylabel {}\n",
                 gp_quote(cluster_keys.empty() ? bar_heading
                                               : fmt::format("{} (bars) by {} (groups)", bar_heading, cluster_heading)),
                 cluster_keys.empty() ? "" : " offset 0,-1", gp_quote("iteration time (ms)"));
  fmt::format_to(setup, "set grid ytics\nset key {}\n", kKeyOutside);
  fig.setup += "set style data histograms\n"
               "set style histogram rowstacked\n"
               "set style fill solid 0.9 border rgb 'black'\n"
               "set boxwidth 0.6\n"
               "set yrange [0:*]\n";
  // The totals print above the bars; upright when the bars are too narrow for them, and not at all when even that
  // would not fit (the .dat has them).
  const bool upright = rows.size() > 10;
  const bool crowded = rows.size() > kReadableBars; // smaller type, still legible at 1000 pixels
  fig.setup += upright ? "set offsets 0, 0, graph 0.16, 0  # room for the totals above the bars\n"
                       : "set offsets 0, 0, graph 0.08, 0  # room for the totals above the bars\n";
  // Bar labels as explicit tics rather than from the data file, whose strings cannot hold a '"'. The plot area is
  // the image less its margins and the key (about 250 pixels).
  std::string tics;
  for (std::size_t i = 0; i < labels.size(); ++i)
    tics += fmt::format("{}{} {}", i == 0 ? "" : ", ", gp_quote(labels[i]), positions[i]);
  fmt::format_to(setup, "set xtics nomirror ({}){}{}\n", tics,
                 slanted(labels, positions.back() + 1, 1000 - 140 - 250) ? " rotate by -40 left" : "",
                 crowded ? " font ',9'" : "");
  if (crowded)
    fig.setup += "set style histogram rowstacked title font ',9'\n";

  fig.plot = "plot ";
  for (std::size_t c = 0; c < clusters.rows.size(); ++c) {
    auto plot = std::back_inserter(fig.plot);
    fmt::format_to(plot, "{}newhistogram {} at {}", c == 0 ? "" : ", \\\n     ",
                   gp_quote(values_of(clusters.rows[c].front(), cluster_keys)), starts[c]);
    for (std::size_t p = 0; p < parts.size(); ++p)
      fmt::format_to(plot, ", \\\n     data index {} using {} {} lc rgb '{}'", c, p + 2,
                     c == 0 ? "title " + gp_quote(part_names[p]) : std::string("notitle"), kParts[p].second);
    if (!crowded)
      fmt::format_to(
          plot, ", \\\n     data index {0} using ($0 + {1}):{2}:(sprintf('%.4g ms', ${2})) with labels {3} notitle", c,
          starts[c], parts.size() + 2, upright ? "rotate by 90 left offset 0,0.5" : "offset 0,0.8");
  }
  fig.plot += "\n";
  return render(dir, fig, {Format::png, Format::svg}, Size{}, source);
}

} // namespace

// ---------------------------------------------------------------------------------------------------------------
// API

int ResultsTable::column(std::string_view name) const {
  const auto it = std::find(columns.begin(), columns.end(), name);
  return it == columns.end() ? -1 : static_cast<int>(it - columns.begin());
}

std::vector<std::string> ResultsTable::swept_keys() const {
  const int point = column("point"), status = column("status");
  if (point < 0 || status <= point)
    return {};
  return {columns.begin() + point + 1, columns.begin() + status};
}

ResultsTable parse_results_csv(std::string_view text, const std::string& file) {
  auto records = split_records(text, file);
  if (records.empty())
    throw InputError(file, "", "empty file: a results table starts with a header row (point, swept keys, status, ...)");
  ResultsTable t;
  t.file = file;
  t.columns = std::move(records.front().cells);
  const int header_line = records.front().line;
  for (const char* required : {"point", "status"})
    if (t.column(required) < 0)
      csv_error(file, header_line,
                fmt::format("no '{}' column in the header; a results table has point, the swept keys, status, then "
                            "the summary fields",
                            required));
  if (t.column("status") < t.column("point"))
    csv_error(file, header_line, "the 'status' column comes before 'point'; the swept keys lie between them");
  for (std::size_t r = 1; r < records.size(); ++r) {
    if (records[r].cells.size() != t.columns.size())
      csv_error(file, records[r].line,
                fmt::format("{} cells, but the header has {} columns", records[r].cells.size(), t.columns.size()));
    t.rows.push_back(std::move(records[r].cells));
  }
  return t;
}

ResultsTable read_results_csv(const std::string& path) {
  return parse_results_csv(read_file(path), path);
}

std::string make_plot(const ResultsTable& t, const PlotRequest& r, const std::string& out) {
  validate(t);
  const fs::path out_path(out);
  const std::string ext = out_path.extension().string();
  if (ext != ".png" && ext != ".svg")
    throw InputError("", "", fmt::format("plot output '{}' must end in .png or .svg", out));
  if (r.width_px < 100 || r.width_px > 10000 || r.height_px < 100 || r.height_px > 10000)
    throw InputError(
        "", "", fmt::format("plot size {}x{} is out of range (100 to 10000 pixels each way)", r.width_px, r.height_px));
  // Unknown names first, so that a typo is reported before anything about the data.
  const std::size_t x_col = column_index(t, r.x, "x");
  column_index(t, r.y, "y");
  std::vector<std::size_t> group_cols; // none or one (a vector rather than an optional: GCC 12 -O3 false positive)
  if (!r.group.empty())
    group_cols.push_back(column_index(t, r.group, "group"));

  const auto rows = ok_rows(t);
  if (rows.empty())
    throw InputError(t.file, "", "no point with status ok: nothing to plot");
  const Measure y = numeric_column(t, column_index(t, r.y, "y"), rows, "y");

  // x: numbers or quantities on a numeric axis, anything else as categories in order of first appearance.
  LineFigure f;
  std::vector<double> x_values;
  std::string x_name = t.columns[x_col];
  if (auto m = measure(t, x_col, rows)) {
    x_name = m->name;
    f.x = numeric_axis(m->label(), m->values, m->column == "workers" ? 2 : 10);
    f.x_column = m->described();
    x_values = std::move(m->values);
  } else {
    f.x.label = t.columns[x_col];
    f.x.categories = distinct_cells(t, x_col, rows);
    for (const std::size_t row : rows)
      x_values.push_back(static_cast<double>(
          std::find(f.x.categories.begin(), f.x.categories.end(), t.rows[row][x_col]) - f.x.categories.begin()));
    f.x_column = fmt::format("position of {} (see x positions)", t.columns[x_col]);
    for (auto& c : f.x.categories)
      c = one_line(c);
  }
  const Grouping groups = group_rows(t, group_cols, rows);
  f.base = out_path.stem().string();
  f.y_label = y.label();
  f.y_column = y.described();
  f.blocks = blocks_of(groups, rows, x_values, y.values, t, y.name);
  f.title = !r.title.empty() ? r.title : titled(common_scenario(t, rows), fmt::format("{} vs {}", y.name, x_name));
  f.size = Size{r.width_px, r.height_px};
  const std::string source = fs::path(t.file).filename().string();
  const Format format = ext == ".png" ? Format::png : Format::svg;
  return render(out_path.parent_path(), line_figure(f, source), {format}, Size{r.width_px, r.height_px}, source)
      .front();
}

std::vector<std::string> sweep_plots(const ResultsTable& t, const std::string& dir) {
  validate(t);
  const auto rows = ok_rows(t);
  if (rows.size() < 2)
    return {};
  const std::string scenario = common_scenario(t, rows);
  const auto keys = varying_keys(t, rows);
  std::vector<std::string> images;
  const auto add = [&](const std::vector<std::string>& written) {
    images.insert(images.end(), written.begin(), written.end());
  };

  // Keys that the plots above cover (those that change the GPU count, the data rate plotted), so that the
  // iteration-time plot does not repeat them.
  std::vector<std::size_t> plotted;
  const Measure workers = summary_measure(t, "workers", rows, "the GPU count");
  const bool gpus_swept = std::set<double>(workers.values.begin(), workers.values.end()).size() > 1;
  if (gpus_swept) {
    const std::size_t workers_col = summary_index(t, "workers", "the GPU count");
    add(gpu_figures(t, rows, dir, scenario, gpu_keys(t, rows, workers_col)));
    plotted = keys_changing_gpus(t, rows, workers_col);
  }

  // The strategy varies when a strategy key is swept (strategy.kind, or whole strategy objects).
  const int strategy = summary_field(t, "strategy");
  bool strategies = strategy >= 0 && distinct_cells(t, static_cast<std::size_t>(strategy), rows).size() > 1;
  for (const std::size_t k : keys)
    strategies = strategies || t.columns[k] == "strategy.kind" || t.columns[k] == "strategy";
  if (strategies)
    add(breakdown_figure(t, rows, dir, scenario, gpus_swept));

  // A swept data rate (the one with the most values): throughput against it.
  const auto most_values = [&](const std::vector<std::size_t>& candidates) {
    std::optional<std::size_t> best;
    for (const std::size_t k : candidates)
      if (!best || distinct_cells(t, k, rows).size() > distinct_cells(t, *best, rows).size())
        best = k;
    return best;
  };
  std::vector<std::size_t> rates, numbers, names;
  for (const std::size_t k : keys) {
    const auto m = measure(t, k, rows);
    (!m ? names : m->dimension == Dimension::bandwidth ? rates : numbers).push_back(k);
  }
  if (const auto rate = most_values(rates)) {
    const Measure throughput = summary_measure(t, "throughput_samples_per_s", rows, "throughput");
    add(key_figure(t, rows, dir, scenario, *measure(t, *rate, rows), *rate, throughput, "throughput_vs_bandwidth",
                   "bottom right")); // throughput rises with bandwidth, so the bottom right stays clear
    plotted.push_back(*rate);
  }

  // Any other numeric key (a bucket cap, a batch size): iteration time against it. Not a key that a plotted key or a
  // named key fixes (the latency zipped with a bandwidth, the batch size zipped with a model): that is no axis of
  // its own.
  std::vector<std::size_t> axes;
  for (const std::size_t k : numbers) {
    const auto fixes_k = [&](std::size_t j) { return j != k && determines(t, rows, j, k); };
    if (std::find(plotted.begin(), plotted.end(), k) == plotted.end() &&
        std::none_of(plotted.begin(), plotted.end(), fixes_k) && std::none_of(names.begin(), names.end(), fixes_k))
      axes.push_back(k);
  }
  if (const auto axis = most_values(axes)) {
    const Measure iteration = summary_measure(t, "iteration_time_s", rows, "the iteration time");
    add(key_figure(t, rows, dir, scenario, *measure(t, *axis, rows), *axis, iteration, "iteration_time",
                   "")); // its lines may rise or fall: the key goes outside
  }
  return images;
}

} // namespace ddlsim::sim
