// Sweep plots, the API of plot.hpp: make_plot draws one custom line figure from two columns of results.csv, and
// sweep_plots chooses the standard figures from what a sweep varied. Same table, same .dat and .gp bytes.
#include "sim/report/plot.hpp"

#include "core/error.hpp"
#include "core/units.hpp"
#include "sim/report/plot_detail.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

// The parts live beside this file: results_table.cpp (the table), plot_data.cpp (columns as numbers, groups,
// labels), gnuplot.cpp (scripts and rendering), line_figure.cpp, plot_lines.cpp and plot_breakdown.cpp (figures);
// plot_detail.hpp declares what they share.
namespace ddlsim::sim {

using namespace detail;

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

  // Backup workers: throughput against b, whose peak is the b to run with (docs/variability.md).
  for (const std::size_t k : numbers)
    if (t.columns[k] == "strategy.backup_workers") {
      const Measure throughput = summary_measure(t, "throughput_samples_per_s", rows, "throughput");
      add(key_figure(t, rows, dir, scenario, *measure(t, k, rows), k, throughput, "throughput_vs_backup_workers", ""));
    }

  // Pipelines: the measured bubble beside its closed form, against the micro-batch count where it is swept, else
  // against the numeric key of the iteration-time plot.
  const int bubble = summary_field(t, "pipeline.bubble_fraction");
  const int closed = summary_field(t, "pipeline.bubble_fraction_closed_form");
  if (bubble >= 0 && closed >= 0 && measure(t, static_cast<std::size_t>(bubble), rows) &&
      measure(t, static_cast<std::size_t>(closed), rows)) {
    std::optional<std::size_t> axis;
    for (const std::size_t k : axes)
      if (t.columns[k] == "pipeline.micro_batches")
        axis = k;
    if (!axis)
      axis = most_values(axes);
    if (axis)
      add(bubble_figure(t, rows, dir, scenario, *measure(t, *axis, rows), *axis));
  }
  return images;
}

} // namespace ddlsim::sim
