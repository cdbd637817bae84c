// Plots of sweep results (`ddlsim sweep` and `ddlsim plot`: docs/sweeps.md, "What a sweep writes"): reads results.csv
// (RFC 4180) and draws with gnuplot. Every image comes with its data (<base>.dat) and the script that drew it
// (<base>.gp), so a user can restyle a figure and rerun `gnuplot <base>.gp` without ddlsim.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace ddlsim::sim {

/// gnuplot is not on PATH: the plots' data and scripts (.dat, .gp) are written, the images are not. A sweep notes it
/// and goes on; `ddlsim plot` exits 2 with the message.
class GnuplotMissing : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// results.csv as text cells: `point`, one column per swept key, `status`, the summary fields, `error`.
struct ResultsTable {
  std::string file; // path it was read from (for messages)
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows; // every row has columns.size() cells

  /// Index of the first column called `name`, or -1 when absent. A sweep writes each name once (a swept key leaves
  /// out the summary field of its name); in a table of older versions, which wrote both, the swept key comes first.
  [[nodiscard]] int column(std::string_view name) const;
  /// The swept keys: the columns between "point" and "status" (empty when either is missing).
  [[nodiscard]] std::vector<std::string> swept_keys() const;
};

/// Parses RFC 4180 CSV (quoted cells with "" escapes and embedded newlines; LF or CRLF line ends; blank lines
/// skipped). Throws InputError(file, "", "line N: ...") for an unterminated quote, a stray quote, a row whose cell
/// count differs from the header's, or a missing `point` / `status` column.
[[nodiscard]] ResultsTable parse_results_csv(std::string_view text, const std::string& file);
/// Reads and parses `path`; InputError when it cannot be read or parsed.
[[nodiscard]] ResultsTable read_results_csv(const std::string& path);

struct PlotRequest {
  std::string x;     // a column: numbers, quantities with units ("10 Gbps"), or categories (drawn at even spacing)
  std::string y;     // a column of numbers or quantities
  std::string group; // optional column: one line per distinct value
  std::string title; // optional; default "<scenario>: <y> vs <x>"
  int width_px = 1000;
  int height_px = 650;
};

/// One custom plot from the rows whose status is ok. `out` ends in .png or .svg: writes that image, plus beside
/// it `<base>.dat` (one block per group, with a header comment naming the columns and units) and `<base>.gp` (the
/// script that drew the image from the .dat). Returns the image path. Throws InputError(table.file, "", message)
/// for an unknown column (the message lists the available ones), a y column that is not numeric, or a table with
/// no successful rows; InputError("", "", message) for an `out` without a .png / .svg extension or a size out of
/// range; std::runtime_error when gnuplot is missing or fails (naming the script).
std::string make_plot(const ResultsTable& t, const PlotRequest& r, const std::string& out);

/// The standard plots of a sweep, chosen from what was swept (only rows whose status is ok), each as PNG and SVG
/// with its .dat and .gp, in `dir`:
///   - GPU count varies: throughput.*, speedup.*, scaling_efficiency.* vs GPUs (log2 axis beyond a factor 8), one
///     line per combination of the other swept keys, with the ideal linear-scaling reference;
///   - strategy varies: breakdown.*, stacked bars of the iteration time per strategy at the largest GPU count,
///     clustered by the other varying keys;
///   - a data-rate key varies: throughput_vs_bandwidth.* (Gb/s);
///   - another numeric key varies (a bucket cap, a batch size; not one that a zip ties to a plotted or a named key):
///     iteration_time.* vs that key;
///   - a pipeline sweep (pipeline.bubble_fraction filled on every row) with a numeric key (the micro-batch count when
///     swept): bubble.*, the measured bubble and its closed form (dashed, same colour) vs that key.
/// Keys that a zip ties together label lines once (model.zoo, not also the model's gpu.single_gpu_iteration).
/// Returns the image paths written; empty when nothing sensible can be plotted (e.g. a single point).
std::vector<std::string> sweep_plots(const ResultsTable& t, const std::string& dir);

} // namespace ddlsim::sim
