// A line figure as gnuplot data and commands: one .dat block per line, explicit axis ranges and tics, and a key
// placed in the first corner that no line or marker crosses (else beside the plot), or one entry per colour and per
// marker where there are many lines.
#include "sim/report/plot_detail.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
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

// More lines than a key can list legibly at 1000 x 650 (two columns below the plot); beyond, the key is left out
// and the title points to the .dat, whose block comments label every line.
constexpr std::size_t kMostKeyEntries = 40;

// True when positive values span more than a factor 8, where a log axis shows them better.
bool wants_log(const std::vector<double>& values) {
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  return lo != values.end() && *lo > 0 && *hi / *lo > 8;
}

} // namespace

Axis numeric_axis(std::string label, const std::vector<double>& values, int log_base) {
  Axis a;
  a.label = std::move(label);
  a.log = wants_log(values);
  a.log_base = log_base;
  return a;
}

// Whether tic labels must slant to stay apart: the longest (at about 7.5 pixels a character) would not fit the
// space of one of `slots` positions across `width_px`.
bool slanted(const std::vector<std::string>& labels, std::size_t slots, double width_px) {
  std::size_t longest = 0;
  for (const auto& l : labels)
    longest = std::max(longest, l.size());
  return 7.5 * static_cast<double>(longest) > 0.9 * width_px / static_cast<double>(std::max<std::size_t>(slots, 1));
}

namespace {

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
    const bool lines = b.reference || b.closed_form || xs.size() == b.points.size();
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

} // namespace

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
    if (block.closed_form) {
      measured.push_back(fmt::format("data index {} using 1:2 with lines lw 2 dt 2 lc rgb '{}' {}", b,
                                     kColors[block.color % kColors.size()],
                                     f.legend.factored ? std::string("notitle") : "title " + gp_quote(block.title)));
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

} // namespace ddlsim::sim::detail
