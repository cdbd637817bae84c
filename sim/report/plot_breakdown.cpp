// The breakdown figure of a sweep that varies the strategy: stacked bars of the iteration time (compute,
// compression, exposed communication, idle) per strategy at the largest GPU count, clustered by the other varying
// keys, with the totals above the bars.
#include "sim/report/plot_detail.hpp"

#include "core/units.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <iterator>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ddlsim::sim::detail {
namespace {

constexpr std::size_t kReadableBars = 24; // more bars than this are too many to read

constexpr std::array<std::pair<std::string_view, std::string_view>, 4> kParts{{
    {"breakdown_s.compute", "#4e79a7"},
    {"breakdown_s.compression", "#b07aa1"},
    {"breakdown_s.exposed_communication", "#e15759"},
    {"breakdown_s.idle", "#bab0ac"},
}};

/// The table rows with a bar, and where in the sweep they stand ("8 GPUs, ...").
struct BarRows {
  std::vector<std::size_t> rows;
  std::string where;
};

BarRows bar_rows(const ResultsTable& t, const std::vector<std::size_t>& all_rows, bool gpus_swept) {
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
  return {std::move(rows), std::move(where)};
}

/// One bar per strategy; when other keys vary too (the model, say), the bars form one cluster per combination of
/// them, so that the strategies of one model stand side by side under the model's name.
struct BarLayout {
  std::vector<std::size_t> bar_keys, cluster_keys;
  Grouping clusters;
  std::string bar_heading, cluster_heading;
};

BarLayout bar_layout(const ResultsTable& t, const std::vector<std::size_t>& rows) {
  const auto keys = label_keys(t, rows, {});
  const auto is_strategy = [&](std::size_t k) { return t.columns[k] == "strategy.kind" || t.columns[k] == "strategy"; };
  BarLayout b;
  for (const std::size_t k : keys)
    (is_strategy(k) ? b.bar_keys : b.cluster_keys).push_back(k);
  b.clusters = group_rows(t, b.cluster_keys, rows);
  for (const std::size_t k : b.bar_keys)
    b.bar_heading += (b.bar_heading.empty() ? "" : ", ") + t.columns[k];
  for (const std::size_t k : b.cluster_keys)
    b.cluster_heading += (b.cluster_heading.empty() ? "" : ", ") + t.columns[k];
  if (b.bar_heading.empty())
    b.bar_heading = "strategy";
  return b;
}

/// Row `r`'s values of the keys `of`, as a label.
std::string values_of(const ResultsTable& t, std::size_t r, const std::vector<std::size_t>& of) {
  std::string label;
  for (const std::size_t k : of)
    label += (label.empty() ? "" : ", ") + legend_value(t.rows[r][k]);
  return label;
}

/// The parts stacked in each bar (their names for the key) and the total above it.
struct BarParts {
  std::vector<Measure> parts;
  std::vector<std::string> names;
  Measure total;
};

/// The .dat's header, which names its columns.
BarParts write_dat_header(Figure& fig, const ResultsTable& t, const std::vector<std::size_t>& rows, const BarLayout& b,
                          const std::string& source) {
  auto dat = std::back_inserter(fig.dat);
  fmt::format_to(dat, "# {}\n# Data of breakdown.gp, written by ddlsim from {}; one row per bar", one_line(fig.title),
                 one_line(source));
  if (!b.cluster_keys.empty())
    fmt::format_to(dat, ", one block (gnuplot `index N`) per value of {}", one_line(b.cluster_heading));
  fmt::format_to(dat, ".\n# columns: 1 = {}", one_line(b.bar_heading));
  BarParts out;
  for (std::size_t p = 0; p < kParts.size(); ++p) {
    out.parts.push_back(summary_measure(t, kParts[p].first, rows, "the iteration time breakdown"));
    fmt::format_to(dat, ", {} = {}", p + 2, out.parts.back().described());
    std::string name = out.parts.back().name;
    out.names.push_back(name.ends_with(" time") ? name.substr(0, name.size() - 5) : name);
  }
  out.total = summary_measure(t, "iteration_time_s", rows, "the iteration time");
  fmt::format_to(dat, ", {} = {}, {} = sweep point\n", kParts.size() + 2, out.total.described(), kParts.size() + 3);
  return out;
}

/// The bars on the x axis: their labels and positions, and where each cluster starts.
struct BarPlaces {
  std::vector<std::string> labels;
  std::vector<std::size_t> positions; // clusters one bar apart: cluster c starts at (bars before it) + c
  std::vector<std::size_t> starts;
};

/// The .dat's rows: one block per cluster, one row per bar.
BarPlaces write_dat_rows(Figure& fig, const ResultsTable& t, const std::vector<std::size_t>& rows, const BarLayout& b,
                         const BarParts& parts) {
  auto dat = std::back_inserter(fig.dat);
  const int strategy = summary_field(t, "strategy");
  std::map<std::size_t, std::size_t> index; // table row -> position in `rows`
  for (std::size_t i = 0; i < rows.size(); ++i)
    index[rows[i]] = i;
  BarPlaces out;
  for (std::size_t c = 0; c < b.clusters.rows.size(); ++c) {
    out.starts.push_back(c == 0 ? 0 : out.starts.back() + b.clusters.rows[c - 1].size() + 1);
    fig.dat += c == 0 ? "\n" : "\n\n";
    if (!b.clusters.labels[c].empty())
      fmt::format_to(dat, "# block {}: {}\n", c, b.clusters.labels[c]);
    for (std::size_t j = 0; j < b.clusters.rows[c].size(); ++j) {
      const std::size_t r = b.clusters.rows[c][j];
      const std::size_t i = index.at(r);
      std::string label = values_of(t, r, b.bar_keys);
      if (label.empty() && strategy >= 0)
        label = one_line(t.rows[r][static_cast<std::size_t>(strategy)]);
      out.positions.push_back(out.starts.back() + j);
      out.labels.push_back(label);
      fig.dat += dat_quote(label);
      for (const auto& p : parts.parts) // appended piecewise: GCC 12 -O3 warns (-Wrestrict) on " " + std::string
        fmt::format_to(dat, " {}", num(p.values[i]));
      fmt::format_to(dat, " {} {}\n", num(parts.total.values[i]), num(point_of(t, r)));
    }
  }
  return out;
}

/// The gnuplot settings: titles, the stacked histogram, room for the totals, the bar labels as tics.
void write_setup(Figure& fig, const BarLayout& b, const BarPlaces& places, bool upright, bool crowded) {
  auto setup = std::back_inserter(fig.setup);
  fmt::format_to(setup, "set title {}\n", gp_title(fig.title));
  // Cluster names print below the bar labels; the axis label goes below them.
  fmt::format_to(setup, "set xlabel {}{}\nset ylabel {}\n",
                 gp_quote(b.cluster_keys.empty()
                              ? b.bar_heading
                              : fmt::format("{} (bars) by {} (groups)", b.bar_heading, b.cluster_heading)),
                 b.cluster_keys.empty() ? "" : " offset 0,-1", gp_quote("iteration time (ms)"));
  fmt::format_to(setup, "set grid ytics\nset key {}\n", kKeyOutside);
  fig.setup += "set style data histograms\n"
               "set style histogram rowstacked\n"
               "set style fill solid 0.9 border rgb 'black'\n"
               "set boxwidth 0.6\n"
               "set yrange [0:*]\n";
  fig.setup += upright ? "set offsets 0, 0, graph 0.16, 0  # room for the totals above the bars\n"
                       : "set offsets 0, 0, graph 0.08, 0  # room for the totals above the bars\n";
  // Bar labels as explicit tics rather than from the data file, whose strings cannot hold a '"'. The plot area is
  // the image less its margins and the key (about 250 pixels).
  std::string tics;
  for (std::size_t i = 0; i < places.labels.size(); ++i)
    tics += fmt::format("{}{} {}", i == 0 ? "" : ", ", gp_quote(places.labels[i]), places.positions[i]);
  fmt::format_to(setup, "set xtics nomirror ({}){}{}\n", tics,
                 slanted(places.labels, places.positions.back() + 1, 1000 - 140 - 250) ? " rotate by -40 left" : "",
                 crowded ? " font ',9'" : "");
  if (crowded)
    fig.setup += "set style histogram rowstacked title font ',9'\n";
}

/// The plot command: one histogram per cluster, a column per part, the totals above the bars unless crowded.
void write_plot(Figure& fig, const ResultsTable& t, const BarLayout& b, const BarParts& parts, const BarPlaces& places,
                bool upright, bool crowded) {
  fig.plot = "plot ";
  for (std::size_t c = 0; c < b.clusters.rows.size(); ++c) {
    auto plot = std::back_inserter(fig.plot);
    fmt::format_to(plot, "{}newhistogram {} at {}", c == 0 ? "" : ", \\\n     ",
                   gp_quote(values_of(t, b.clusters.rows[c].front(), b.cluster_keys)), places.starts[c]);
    for (std::size_t p = 0; p < parts.parts.size(); ++p)
      fmt::format_to(plot, ", \\\n     data index {} using {} {} lc rgb '{}'", c, p + 2,
                     c == 0 ? "title " + gp_quote(parts.names[p]) : std::string("notitle"), kParts[p].second);
    if (!crowded)
      fmt::format_to(
          plot, ", \\\n     data index {0} using ($0 + {1}):{2}:(sprintf('%.4g ms', ${2})) with labels {3} notitle", c,
          places.starts[c], parts.parts.size() + 2, upright ? "rotate by 90 left offset 0,0.5" : "offset 0,0.8");
  }
  fig.plot += "\n";
}

} // namespace

std::vector<std::string> breakdown_figure(const ResultsTable& t, const std::vector<std::size_t>& all_rows,
                                          const fs::path& dir, const std::string& scenario, bool gpus_swept) {
  const auto [rows, where] = bar_rows(t, all_rows, gpus_swept);
  const BarLayout layout = bar_layout(t, rows);
  std::string title = titled(scenario, "iteration time breakdown");
  title += (title.size() + where.size() > 66 ? "\nat " : " at ") + where;
  Figure fig{"breakdown", title, {}, {}, {}};
  const std::string source = fs::path(t.file).filename().string();
  const BarParts parts = write_dat_header(fig, t, rows, layout, source);
  const BarPlaces places = write_dat_rows(fig, t, rows, layout, parts);
  // The totals print above the bars; upright when the bars are too narrow for them, and not at all when even that
  // would not fit (the .dat has them).
  const bool upright = rows.size() > 10;
  const bool crowded = rows.size() > kReadableBars; // smaller type, still legible at 1000 pixels
  write_setup(fig, layout, places, upright, crowded);
  write_plot(fig, t, layout, parts, places, upright, crowded);
  return render(dir, fig, {Format::png, Format::svg}, Size{}, source);
}

} // namespace ddlsim::sim::detail
