// Internals shared by the plot sources (sim/report/*.cpp beside plot.cpp): the types a figure is built from and
// the functions one part offers the others. Not part of the API (plot.hpp); each function is documented where it is
// defined.
#pragma once

#include "core/units.hpp"
#include "sim/report/plot.hpp"

#include <fmt/format.h>

#include <array>
#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ddlsim::sim::detail {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------------------------------
// The table (results_table.cpp)

void validate(const ResultsTable& t);
std::size_t column_index(const ResultsTable& t, std::string_view name, std::string_view role);
int summary_field(const ResultsTable& t, std::string_view name);
std::size_t summary_index(const ResultsTable& t, std::string_view name, std::string_view role);
std::vector<std::size_t> ok_rows(const ResultsTable& t);
std::string_view trim(std::string_view s);
std::optional<double> parse_number(std::string_view s);
double point_of(const ResultsTable& t, std::size_t row);
std::vector<std::string> distinct_cells(const ResultsTable& t, std::size_t col, const std::vector<std::size_t>& rows);
std::vector<std::size_t> varying_keys(const ResultsTable& t, const std::vector<std::size_t>& rows);
bool determines(const ResultsTable& t, const std::vector<std::size_t>& rows, std::size_t a, std::size_t b);

// ---------------------------------------------------------------------------------------------------------------
// Columns as plotted numbers, groups and labels (plot_data.cpp)

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

std::optional<Measure> measure(const ResultsTable& t, std::size_t col, const std::vector<std::size_t>& rows,
                               std::string* bad = nullptr);
Measure numeric_column(const ResultsTable& t, std::size_t col, const std::vector<std::size_t>& rows,
                       std::string_view role);
Measure summary_measure(const ResultsTable& t, std::string_view name, const std::vector<std::size_t>& rows,
                        std::string_view role);

// Line styles: a colour-blind-safe palette (Tableau 10) and filled markers.
inline constexpr std::array<std::string_view, 10> kColors{"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                                          "#b07aa1", "#edc948", "#ff9da7", "#9c755f", "#17becf"};
// Markers: filled circle, square, triangles, diamond, pentagon.
inline constexpr std::array<int, 6> kPointTypes{7, 5, 9, 11, 13, 15};

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

std::string one_line(std::string_view s);
std::string legend_value(const std::string& value);
Grouping group_rows(const ResultsTable& t, const std::vector<std::size_t>& keys, const std::vector<std::size_t>& rows);
std::vector<std::size_t> label_keys(const ResultsTable& t, const std::vector<std::size_t>& rows,
                                    const std::vector<std::size_t>& along);
std::string common_scenario(const ResultsTable& t, const std::vector<std::size_t>& rows);
std::string titled(const std::string& scenario, const std::string& what);

// ---------------------------------------------------------------------------------------------------------------
// gnuplot text and rendering (gnuplot.cpp)

enum class Format { png, svg };

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

std::string gp_quote(std::string_view s);
std::string gp_title(std::string_view s, std::size_t width = 70);
std::string dat_quote(std::string_view s);
std::string num(double v);
std::vector<std::string> render(const fs::path& dir, const Figure& fig, const std::vector<Format>& formats, Size size,
                                std::string_view source);

// ---------------------------------------------------------------------------------------------------------------
// Line figures (line_figure.cpp)

// A key beside the plot, its text left-aligned after the line samples, so that long labels stay compact.
inline constexpr std::string_view kKeyOutside = "outside right top Left reverse";

struct Block {
  std::string title;
  std::vector<std::array<double, 3>> points; // x, y, sweep point (NaN for reference lines)
  bool reference = false;                    // an ideal line: dashed, black, no markers
  bool closed_form = false;                  // a closed form beside a measured line: dashed, in its colour
  std::size_t color = 0, marker = 0;         // palette indices of a measured line
};

struct Axis {
  std::string label;
  bool log = false;
  int log_base = 10;
  std::vector<std::string> categories; // non-empty: categorical, value i drawn at position i
};

// How a line figure's key explains its lines: one entry per line under `title`, or, with many lines, one entry per
// colour and one per marker under their headings, which stays short where a list of every line would not fit.
struct Legend {
  std::string title;
  bool factored = false;
  std::string color_heading, marker_heading;
  std::vector<std::string> color_names, marker_names;
};

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

Axis numeric_axis(std::string label, const std::vector<double>& values, int log_base);
bool slanted(const std::vector<std::string>& labels, std::size_t slots, double width_px);
Figure line_figure(const LineFigure& f, std::string_view source);
std::vector<Block> blocks_of(const Grouping& g, const std::vector<std::size_t>& rows, const std::vector<double>& x,
                             const std::vector<double>& y, const ResultsTable& t, std::string_view single_title);

// ---------------------------------------------------------------------------------------------------------------
// The standard figures of a sweep (plot_lines.cpp, plot_breakdown.cpp)

std::vector<std::size_t> keys_changing_gpus(const ResultsTable& t, const std::vector<std::size_t>& rows,
                                            std::size_t workers);
std::vector<std::size_t> gpu_keys(const ResultsTable& t, const std::vector<std::size_t>& rows, std::size_t workers);
std::vector<std::string> gpu_figures(const ResultsTable& t, const std::vector<std::size_t>& rows, const fs::path& dir,
                                     const std::string& scenario, const std::vector<std::size_t>& along);
std::vector<std::string> key_figure(const ResultsTable& t, const std::vector<std::size_t>& rows, const fs::path& dir,
                                    const std::string& scenario, const Measure& key, std::size_t key_col,
                                    const Measure& y, const std::string& base, std::string_view corner);
std::vector<std::string> bubble_figure(const ResultsTable& t, const std::vector<std::size_t>& rows, const fs::path& dir,
                                       const std::string& scenario, const Measure& key, std::size_t key_col);
std::vector<std::string> breakdown_figure(const ResultsTable& t, const std::vector<std::size_t>& all_rows,
                                          const fs::path& dir, const std::string& scenario, bool gpus_swept);

} // namespace ddlsim::sim::detail
