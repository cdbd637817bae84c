// Measured collectives from nccl-tests logs (measured.hpp).
#include "calibrate/measured.hpp"

#include "calibrate/alpha_beta.hpp"
#include "core/units.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <tuple>
#include <utility>

namespace ddlsim::calibrate {

namespace {
// What the alpha-beta segments are fitted to: per size, the out-of-place time (the in-place one where a JSON log
// recorded none), averaged over repeated rows. One series as measured, not the faster of two per size: taking the
// minimum of two noisy samples lowers each size by its own noise, most where NCCL switches protocol, and tilts the
// segments. On the shared H100 2 x 8 allreduce sweep fitted up to 64 MiB, 1 GiB and 8 GiB are predicted +3.2 % and
// +4.1 % off the faster measured time; fitted to the faster column +10.8 % and +13.1 %, to the mean of both columns
// +8.3 % and +10.1 % (tests/calibrate).
std::vector<dag::SizeTime> fit_points(std::span<const NcclMeasurement> rows) {
  std::map<std::uint64_t, std::pair<double, int>> sum;
  for (const auto& r : rows) {
    auto& [total, n] = sum[r.size_bytes];
    total += r.out_of_place ? r.out_of_place->time_s : r.in_place.time_s;
    ++n;
  }
  std::vector<dag::SizeTime> out;
  for (const auto& [size, tn] : sum)
    out.push_back({static_cast<double>(size), tn.first / tn.second});
  return out;
}

using Segment = dag::MeasuredCollective::Segment;

// A fitted segment as a calibration file holds it (core/units.hpp, quantity_range; dag/calibration.cpp reads α as a
// time, β as an inverse bandwidth): an α or β whose magnitude is below the least a file states (1e-15 s, 1e-15 s/B)
// becomes 0 and `zeroed` is set, the errors then measured again on the segment's `points`; nullopt where one is above
// the largest (1e7 s, 1 s/B).
std::optional<Segment> as_written(const dag::AlphaBetaSegment& s, std::span<const dag::SizeTime> points, bool& zeroed) {
  Segment out{s.first_size_bytes,         s.last_size_bytes,     s.alpha_s,           s.beta_s_per_byte,
              static_cast<int>(s.points), s.mean_relative_error, s.max_relative_error};
  bool changed = false;
  const std::pair<double*, Dimension> values[] = {{&out.alpha_s, Dimension::time},
                                                  {&out.beta_s_per_byte, Dimension::inverse_bandwidth}};
  for (const auto& [value, d] : values) {
    const auto range = quantity_range(d);
    if (std::abs(*value) > range.largest || !std::isfinite(*value))
      return std::nullopt;
    if (*value != 0 && std::abs(*value) < range.smallest) {
      *value = 0;
      changed = true;
    }
  }
  if (!changed)
    return out;
  zeroed = true;
  double sum = 0;
  out.max_relative_error = 0;
  for (const auto& p : points)
    if (p.size_bytes >= out.first_size_bytes && p.size_bytes <= out.last_size_bytes) {
      const double err = std::abs(out.alpha_s + out.beta_s_per_byte * p.size_bytes - p.time_s) / p.time_s;
      sum += err;
      out.max_relative_error = std::max(out.max_relative_error, err);
    }
  out.mean_relative_error = sum / out.points;
  return out;
}

// The segments fit_piecewise fits to `points` as a calibration file holds them, or none (with a note saying why).
std::vector<Segment> fitted_segments(const std::string& what, std::span<const dag::SizeTime> points,
                                     std::vector<std::string>& notes) {
  const FitOptions options;
  if (points.size() < options.min_segment_points) {
    notes.push_back(fmt::format("{}: {} sizes, too few for an alpha-beta fit (at least {}); the table alone is kept",
                                what, points.size(), options.min_segment_points));
    return {};
  }
  std::vector<Segment> segments;
  bool zeroed = false;
  const PiecewiseFit fit = fit_piecewise(points, options);
  for (const auto& s : fit.segments()) {
    const auto written = as_written(s, points, zeroed);
    if (!written) {
      notes.push_back(fmt::format("{}: its alpha-beta fit (alpha {} s, beta {} s/B on {} .. {} B) is beyond what a "
                                  "calibration holds (1e7 s, 1 s/B); the table alone is kept",
                                  what, s.alpha_s, s.beta_s_per_byte, s.first_size_bytes, s.last_size_bytes));
      return {};
    }
    segments.push_back(*written);
  }
  if (zeroed)
    notes.push_back(fmt::format("{}: an alpha below 1e-15 s or a beta below 1e-15 s/B, the least a calibration holds, "
                                "is written as 0",
                                what));
  return segments;
}
} // namespace

MeasuredCollectives measured_collectives(const std::vector<NcclTestsLog>& logs,
                                         const std::vector<std::string>& sources) {
  if (logs.size() != sources.size())
    throw std::invalid_argument("measured_collectives: one source per log");
  // Rows of every log, each remembering its log, so that a series names the files it came from.
  std::vector<NcclMeasurement> rows;
  std::map<std::tuple<NcclCollective, int, int>, std::vector<std::string>> origin;
  for (std::size_t i = 0; i < logs.size(); ++i)
    for (const auto& row : logs[i].rows) {
      rows.push_back(row);
      auto& names = origin[{row.collective, row.ranks, row.nodes}];
      if (names.empty() || names.back() != sources[i])
        names.push_back(sources[i]);
    }
  MeasuredCollectives out;
  for (const auto& series : group_by_communicator(rows)) {
    const auto what = fmt::format("{} over {} ranks{}", nccl_collective_name(series.collective), series.ranks,
                                  series.nodes > 0 ? fmt::format(" on {} nodes", series.nodes) : std::string());
    const auto collective = ddlsim_collective(series.collective);
    if (!collective) {
      out.notes.push_back(
          fmt::format("{}: not kept (ddlsim does not simulate {})", what, nccl_collective_name(series.collective)));
      continue;
    }
    dag::MeasuredCollective m;
    m.collective = *collective;
    m.ranks = series.ranks;
    m.nodes = series.nodes;
    m.source = fmt::format("nccl-tests: {}", fmt::join(origin[{series.collective, series.ranks, series.nodes}], ", "));
    const auto points = fastest_per_size(series.rows);
    for (const auto& p : points)
      if (p.time_s > 0) // nccl-tests prints 0-byte rows of an all_gather sweep with a time; a lowering has no 0 B
        m.table.push_back({p.size_bytes, p.time_s});
    std::vector<dag::SizeTime> fitted;
    for (const auto& p : fit_points(series.rows))
      if (p.size_bytes > 0 && p.time_s > 0)
        fitted.push_back(p);
    m.segments = fitted_segments(what, fitted, out.notes);
    out.collectives.push_back(std::move(m));
  }
  return out;
}

} // namespace ddlsim::calibrate
