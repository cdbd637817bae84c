// The standard line figures of a sweep: throughput, speedup and scaling efficiency against the GPU count (with the
// ideal of linear scaling), and a summary field against one swept number (a data rate, a bucket cap), one line per
// combination of the other varying keys.
#include "sim/report/plot_detail.hpp"

#include "core/units.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ddlsim::sim::detail {
namespace {

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

} // namespace

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

namespace {

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

} // namespace

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
  // With variability (docs/variability.md): the median and the 99th percentile of the sampled iterations, p99 dashed
  // in its line's colour; where every point has both.
  const int p50_col = summary_field(t, "iteration_time_percentiles_s.p50");
  const int p99_col = summary_field(t, "iteration_time_percentiles_s.p99");
  if (p50_col >= 0 && p99_col >= 0 && measure(t, static_cast<std::size_t>(p50_col), rows) &&
      measure(t, static_cast<std::size_t>(p99_col), rows)) {
    const Measure p50 = summary_measure(t, "iteration_time_percentiles_s.p50", rows, "the median iteration");
    const Measure p99 = summary_measure(t, "iteration_time_percentiles_s.p99", rows, "the 99th percentile");
    auto medians = blocks_of(groups, rows, workers.values, p50.values, t, "p50");
    auto tails = blocks_of(groups, rows, workers.values, p99.values, t, "p99");
    std::vector<Block> blocks;
    for (std::size_t k = 0; k < medians.size(); ++k) {
      if (!groups.labels[k].empty()) {
        medians[k].title = groups.labels[k] + ", p50";
        tails[k].title = groups.labels[k] + ", p99";
      }
      tails[k].closed_form = true; // dashed, in the median's colour
      blocks.push_back(std::move(medians[k]));
      blocks.push_back(std::move(tails[k]));
    }
    LineFigure f = line_plot("iteration_percentiles", titled(scenario, "iteration time percentiles vs GPUs"), x,
                             x_column, "iteration time [ms]",
                             fmt::format("{}; dashed: {}", p50.described(), p99.described()), std::move(blocks));
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

// A pipeline's bubble against one swept number (the micro-batch count): the measured idle share of the stages'
// compute streams, one line per combination of the other varying keys, each with its closed form dashed in its
// colour ((p - 1)/(m + p - 1), or (p - 1)/(v m + p - 1) interleaved; docs/pipelines.md "Report").
std::vector<std::string> bubble_figure(const ResultsTable& t, const std::vector<std::size_t>& rows, const fs::path& dir,
                                       const std::string& scenario, const Measure& key, std::size_t key_col) {
  const Measure measured = summary_measure(t, "pipeline.bubble_fraction", rows, "the pipeline bubble");
  const Measure closed =
      summary_measure(t, "pipeline.bubble_fraction_closed_form", rows, "the pipeline bubble's closed form");
  const Grouping groups = group_rows(t, label_keys(t, rows, {key_col}), rows);
  auto simulated = blocks_of(groups, rows, key.values, measured.values, t, "simulated");
  auto formula = blocks_of(groups, rows, key.values, closed.values, t, "closed form");
  std::vector<Block> blocks;
  for (std::size_t k = 0; k < simulated.size(); ++k) {
    blocks.push_back(std::move(simulated[k]));
    Block& c = formula[k];
    c.closed_form = true;
    if (!groups.labels[k].empty())
      c.title = groups.labels[k] + ", closed form";
    blocks.push_back(std::move(c));
  }
  LineFigure f =
      line_plot("bubble", titled(scenario, fmt::format("pipeline bubble vs {}", key.name)),
                numeric_axis(key.label(), key.values, 2), key.described(), measured.label(),
                fmt::format("{}; closed-form blocks: {}", measured.described(), closed.described()), std::move(blocks));
  f.legend = legend_of(groups);
  const std::string source = fs::path(t.file).filename().string();
  return render(dir, line_figure(f, source), {Format::png, Format::svg}, Size{}, source);
}

} // namespace ddlsim::sim::detail
