// Probe files to calibration entries (probe.hpp).
#include "calibrate/probe.hpp"

#include "core/error.hpp"
#include "core/json.hpp"
#include "core/units.hpp"

#include <Eigen/Dense>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace ddlsim::calibrate {
namespace {

// The statistic the calibration takes from each measurement: the median sample (robust to the odd slow sample).
double median_time(ObjectReader& m) {
  auto t = m.object("time");
  const double median = t.quantity("median", Dimension::time, 0, true);
  for (const char* key : {"min", "p10", "p90", "max", "mean"})
    (void)t.quantity(key, Dimension::time, 0, true);
  (void)t.number("noise", 0);
  (void)t.integer("samples", 1);
  (void)t.integer("warmup_samples", 0);
  (void)t.choice("stopped_by", {"noise", "timeout"});
  t.finish();
  return median;
}

/// The "device" object: its name and SMs, and as one line the GPU, its compute capability and the software stack
/// measured.
void read_device(ProbeFile& p, ObjectReader& r) {
  auto d = r.object("device");
  const auto name = d.string("name");
  (void)d.string("pci_bus_id");
  const auto cc = d.string("compute_capability");
  p.multiprocessors = static_cast<int>(d.integer("multiprocessors", 0, 1 << 20));
  (void)d.quantity("memory", Dimension::bytes);
  (void)d.quantity("l2_cache", Dimension::bytes);
  (void)d.required("memory_bus_width");
  (void)d.required("clocks");
  const auto driver = d.string("driver");
  const auto cuda = d.string("cuda_runtime");
  const auto cudnn = d.string("cudnn");
  (void)d.string("cublas");
  (void)d.string("cusolver");
  const auto nccl = d.string("nccl");
  d.finish();
  p.device_name = name;
  p.device = fmt::format("{} (sm {}, driver {}, CUDA {}, cuDNN {}, NCCL {})", name, cc, driver, cuda, cudnn, nccl);
}

/// A GEMM's side, required: said missing when it is, not blamed on another one-letter key as a misspelling.
std::int64_t gemm_side(ObjectReader& m, const char* key) {
  const auto side = m.optional_integer(key, 1, kMaxGemmSide);
  if (!side)
    m.fail(key, "missing required key");
  return *side;
}

/// A "gemm" measurement (version 2): one GEMM of the sweep in the file's dtype.
void add_gemm_time(ProbeFile& p, ObjectReader& m) {
  if (p.version < 2)
    m.fail("group", "the \"gemm\" group needs \"version\": 2");
  ProbeFile::GemmPoint g;
  g.m = gemm_side(m, "m");
  g.n = gemm_side(m, "n");
  g.k = gemm_side(m, "k");
  if (m.string("dtype") != p.dtype)
    m.fail("dtype", fmt::format("differs from the file's \"dtype\" ({})", p.dtype));
  g.time_s = median_time(m);
  p.gemm.push_back(g);
}

/// A "layer" measurement: one pass of one layer's kernels, added to that layer's times.
void add_layer_time(ProbeFile& p, ObjectReader& m) {
  const auto name = m.string("layer");
  const auto kernel = m.choice("kernel", {"convolution", "gemm", "batched_gemm", "memory"});
  const auto pass = kernel == "memory" ? m.choice("pass", {"forward", "backward"})
                                       : m.choice("pass", {"forward", "backward_data", "backward_filter"});
  const double t = median_time(m);
  auto it = std::find_if(p.layers.begin(), p.layers.end(), [&](const auto& l) { return l.name == name; });
  if (it == p.layers.end()) {
    p.layers.push_back({});
    it = std::prev(p.layers.end());
    it->name = name;
    it->first = p.layers.size() == 1;
  }
  if (pass == "forward")
    it->forward_s += t;
  else if (pass == "backward_data")
    it->backward_data_s += t;
  else if (pass == "backward_filter")
    it->backward_filter_s += t;
  else
    it->backward_s += t;
}

using CollectiveRows = std::map<std::pair<std::string, double>, std::size_t>; // (collective, bytes) -> row

/// A "collective" measurement: the in-place or out-of-place timing of its (collective, bytes) row.
void add_collective_time(ProbeFile& p, ObjectReader& m, const std::string& path, int ranks, int nodes,
                         CollectiveRows& rows) {
  const auto name = m.string("collective");
  const auto c = find_nccl_collective(name);
  if (!c)
    throw InputError(path, m.path("collective"), fmt::format("unknown collective '{}'", name));
  const double bytes = m.quantity("bytes", Dimension::bytes, 0, true);
  const bool in_place = m.boolean("in_place");
  if (m.integer("ranks", 1) != ranks || m.integer("nodes", 1) != nodes)
    throw InputError(path, m.path("ranks"), "differs from the file's communicator");
  const double t = median_time(m);
  const auto key = std::make_pair(name, bytes);
  auto found = rows.find(key);
  if (found == rows.end()) {
    if (rows.size() == kMaxNcclRows)
      throw InputError(
          path, m.path("bytes"),
          fmt::format("more than {} collective sizes, the most ddlsim reads (calibrate/nccl_tests.hpp)", kMaxNcclRows));
    NcclMeasurement row;
    row.collective = *c;
    row.ranks = ranks;
    row.nodes = nodes;
    row.size_bytes = static_cast<std::uint64_t>(bytes);
    row.count = static_cast<std::uint64_t>(bytes / 4 / (size_is_whole_buffer(*c) ? ranks : 1));
    row.type = "float";
    found = rows.emplace(key, p.collectives.rows.size()).first;
    p.collectives.rows.push_back(row);
  }
  NcclTiming timing;
  timing.time_s = t;
  timing.algbw_Bps = bytes / t;
  timing.busbw_Bps = timing.algbw_Bps * busbw_factor(*c, ranks);
  auto& row = p.collectives.rows[found->second];
  if (in_place)
    row.in_place = timing;
  else
    row.out_of_place = timing;
}

/// The "measurements" array, each entry by its group.
void read_measurements(ProbeFile& p, ObjectReader& r, const std::string& path, int ranks, int nodes) {
  const Json& all = r.required("measurements");
  if (!all.is_array())
    throw InputError(path, "/measurements", "expected an array, got " + json_type_phrase(all));
  CollectiveRows rows;
  for (std::size_t i = 0; i < all.size(); ++i) {
    ObjectReader m(all[i], path, json_pointer_append("/measurements", i));
    const auto group = m.choice("group", {"layer", "gemm", "memory_bandwidth", "launch", "h2d", "selection", "low_rank",
                                          "collective", "overlap"});
    (void)m.optional_string("note");
    if (group == "layer") {
      add_layer_time(p, m);
    } else if (group == "gemm") {
      add_gemm_time(p, m);
    } else if (group == "memory_bandwidth" || group == "h2d") {
      const double bytes = m.quantity("bytes", Dimension::bytes, 0, true);
      const bool pinned = group == "h2d" && m.choice("host_memory", {"pinned", "pageable"}) == "pinned";
      const double t = median_time(m);
      (group == "memory_bandwidth" ? p.memory : pinned ? p.h2d_pinned : p.h2d_pageable).push_back({bytes, t});
    } else if (group == "launch") {
      p.launch_s = median_time(m);
    } else if (group == "selection") {
      const auto algorithm = m.choice("algorithm", {"radix_sort", "radix_select", "sampling", "threshold"});
      const auto elements = static_cast<double>(m.integer("elements", 1));
      const auto selected = static_cast<double>(m.integer("selected", 1));
      p.selection[algorithm].push_back({elements, selected, median_time(m)});
    } else if (group == "low_rank") {
      (void)m.integer("n", 1);
      (void)m.integer("m", 1);
      (void)m.integer("rank", 1);
      (void)m.choice("step", {"p_matmul", "q_matmul", "orthogonalise"});
      (void)median_time(m);
      ++p.low_rank;
    } else if (group == "overlap") {
      const auto which = m.choice("case", {"alone", "with_allreduce"});
      (void)m.integer("ranks", 1);
      (void)m.integer("nodes", 1);
      (which == "alone" ? p.overlap_alone_s : p.overlap_with_allreduce_s) = median_time(m);
    } else { // collective
      add_collective_time(p, m, path, ranks, nodes, rows);
    }
    m.finish();
  }
}

} // namespace

ProbeFile read_probe(const std::string& path) {
  return parse_probe(load_json_file(path), path);
}

ProbeFile parse_probe(const Json& doc, const std::string& path) {
  ObjectReader r(doc, path, "");
  if (r.string("format") != "ddlsim-probe")
    throw InputError(path, "/format", "expected \"ddlsim-probe\" (the output of ddlsim-probe)");
  const auto version = r.integer("version");
  if (version != 1 && version != 2)
    throw InputError(path, "/version", "unknown probe file version (this ddlsim reads versions 1 and 2)");
  ProbeFile p;
  p.path = path;
  p.version = static_cast<int>(version);
  (void)r.string("generator");
  {
    auto plan = r.object("plan");
    (void)plan.string("file");
    (void)plan.string("scenario");
    (void)plan.string("model");
    (void)plan.string("gpu");
    p.batch_per_gpu = plan.integer("batch_per_gpu", 1, 1 << 24); // what a calibration holds (dag/calibration.cpp)
    plan.finish();
  }
  p.dtype = r.choice("dtype", {"fp32", "fp16", "bf16"});
  read_device(p, r);
  int ranks = 0, nodes = 0;
  {
    auto c = r.object("communicator");
    ranks = static_cast<int>(c.integer("ranks", 1, kMaxRanks));
    nodes = static_cast<int>(c.integer("nodes", 1, ranks));
    (void)c.integer("processes", 1);
    c.finish();
  }
  (void)r.required("timing");

  read_measurements(p, r, path, ranks, nodes);
  if (const Json* failed = r.optional("failed")) {
    if (!failed->is_array())
      throw InputError(path, "/failed", "expected an array, got " + json_type_phrase(*failed));
    for (std::size_t i = 0; i < failed->size(); ++i) {
      ObjectReader f((*failed)[i], path, json_pointer_append("/failed", i));
      (void)f.string("group");
      const auto what = f.string("what");
      p.failed.push_back(what + ": " + f.string("error"));
      f.finish();
    }
  }
  r.finish();
  // a size measured on one side only: both columns are that measurement (the faster of the two is then it)
  for (auto& row : p.collectives.rows) {
    if (!row.out_of_place)
      row.out_of_place = row.in_place;
    else if (!(row.in_place.time_s > 0))
      row.in_place = *row.out_of_place;
  }
  return p;
}

dag::SelectionCurve fit_selection(const std::vector<ProbeFile::SelectionPoint>& points) {
  // Minimise sum ((fixed + e m + s k - t) / t)^2 over the subsets of {fixed, per_selected} left free (per_element
  // always), keeping the best fit whose coefficients are all >= 0.
  dag::SelectionCurve best;
  double best_error = std::numeric_limits<double>::infinity();
  for (int mask = 0; mask < 4; ++mask) {
    const bool fixed = mask & 1, selected = mask & 2;
    const int n = 1 + fixed + selected;
    if (static_cast<int>(points.size()) < n)
      continue;
    Eigen::MatrixXd a(points.size(), n);
    Eigen::VectorXd b(points.size());
    for (std::size_t i = 0; i < points.size(); ++i) {
      const auto& p = points[i];
      const auto row = static_cast<Eigen::Index>(i);
      int col = 0;
      a(row, col++) = p.elements / p.time_s;
      if (fixed)
        a(row, col++) = 1 / p.time_s;
      if (selected)
        a(row, col++) = p.selected / p.time_s;
      b(row) = 1;
    }
    // scale the columns so that the solve is well conditioned (elements ~1e7 against 1)
    Eigen::VectorXd scale = a.colwise().norm().transpose();
    for (Eigen::Index j = 0; j < n; ++j)
      if (scale(j) > 0)
        a.col(j) /= scale(j);
    Eigen::VectorXd x = a.colPivHouseholderQr().solve(b);
    for (Eigen::Index j = 0; j < n; ++j)
      if (scale(j) > 0)
        x(j) /= scale(j);
    if ((x.array() < 0).any())
      continue;
    double error = 0;
    dag::SelectionCurve c;
    int col = 0;
    c.per_element_s = x(col++);
    c.fixed_s = fixed ? x(col++) : 0;
    c.per_selected_s = selected ? x(col++) : 0;
    for (const auto& p : points) {
      const double r = (c.seconds(p.elements, p.selected) - p.time_s) / p.time_s;
      error += r * r;
    }
    if (error < best_error * (1 - 1e-12)) {
      best_error = error;
      best = c;
    }
  }
  if (!std::isfinite(best_error))
    throw std::invalid_argument("fit_selection: no points");
  return best;
}

std::vector<std::string> add_probe_calibration(dag::Calibration& c, const std::vector<ProbeFile>& probes) {
  std::vector<std::string> notes;
  for (const auto& p : probes) {
    if (!p.layers.empty()) {
      if (!c.layers.empty()) {
        notes.push_back(
            fmt::format("{}: its {} layers are not used: the calibration has layers already", p.path, p.layers.size()));
      } else {
        c.batch_per_gpu = static_cast<int>(p.batch_per_gpu);
        for (const auto& l : p.layers) {
          dag::LayerTime t;
          t.forward_s = l.forward_s;
          // autograd computes no gradient for the batch, so the first layer runs no backward-data kernel
          t.backward_s = (l.first ? 0 : l.backward_data_s) + l.backward_filter_s + l.backward_s;
          c.layers[l.name] = t;
        }
        notes.push_back(fmt::format("{}: {} layers at batch {} ({}, {}); the first layer's backward is its weight "
                                    "gradient only",
                                    p.path, p.layers.size(), p.batch_per_gpu, p.dtype, p.device));
      }
    }
    for (const auto& [algorithm, points] : p.selection) {
      const char* name = algorithm == "radix_select" ? "sort"
                         : algorithm == "sampling"   ? "sampling"
                         : algorithm == "threshold"  ? "threshold"
                                                     : nullptr;
      if (!name) {
        notes.push_back(fmt::format("{}: {} measured ({} points), kept in the probe file: no strategy selects by a "
                                    "full sort",
                                    p.path, algorithm, points.size()));
        continue;
      }
      if (c.selection.count(name)) {
        notes.push_back(fmt::format("{}: selection '{}' given already; this one is not used", p.path, name));
        continue;
      }
      const auto curve = fit_selection(points);
      double worst = 0;
      for (const auto& pt : points)
        worst = std::max(worst, std::abs(curve.seconds(pt.elements, pt.selected) - pt.time_s) / pt.time_s);
      c.selection[name] = curve;
      notes.push_back(fmt::format("{}: selection '{}' from {} ({} points, worst fit error {:.1f} %)", p.path, name,
                                  algorithm, points.size(), 100 * worst));
    }
    if (!p.h2d_pinned.empty() && !c.host.h2d_bandwidth) {
      const auto largest = std::max_element(p.h2d_pinned.begin(), p.h2d_pinned.end(),
                                            [](const auto& a, const auto& b) { return a.bytes < b.bytes; });
      c.host.h2d_bandwidth = largest->bytes / largest->time_s;
      std::string pageable;
      if (!p.h2d_pageable.empty()) {
        const auto big = std::max_element(p.h2d_pageable.begin(), p.h2d_pageable.end(),
                                          [](const auto& a, const auto& b) { return a.bytes < b.bytes; });
        pageable = fmt::format(", from pageable memory {:.2f} GB/s (a DataLoader without pin_memory: edit "
                               "host.h2d_bandwidth)",
                               big->bytes / big->time_s / 1e9);
      }
      notes.push_back(fmt::format("{}: host-to-device copies {:.2f} GB/s from pinned memory at {}{}", p.path,
                                  *c.host.h2d_bandwidth / 1e9, format_bytes(largest->bytes), pageable));
    }
    if (p.launch_s)
      notes.push_back(fmt::format("{}: a CUDA kernel launch costs the host {:.2f} us; not used as host.launch, "
                                  "which is a framework's whole per-operator time (measure it with --kineto)",
                                  p.path, *p.launch_s * 1e6));
    if (!p.memory.empty()) {
      double best = 0;
      for (const auto& b : p.memory)
        best = std::max(best, b.bytes / b.time_s);
      notes.push_back(fmt::format("{}: memory bandwidth up to {:.0f} GB/s (a scenario's gpu.memory_bandwidth)", p.path,
                                  best / 1e9));
    }
    if (p.overlap_alone_s && p.overlap_with_allreduce_s && !c.compute_slowdown) {
      // The analytic engine slows compute by this while a collective runs beside it (sim/plan/schedule.hpp); a
      // GEMM measured faster beside the allreduce (noise) is no slowdown.
      const double ratio = *p.overlap_with_allreduce_s / *p.overlap_alone_s;
      c.compute_slowdown = std::clamp(ratio - 1, 0.0, 10.0);
      notes.push_back(fmt::format("{}: compute beside an allreduce takes {:.3f} x its time alone "
                                  "(overlap.compute_slowdown {:.3f})",
                                  p.path, ratio, *c.compute_slowdown));
    }
    for (const auto& f : p.failed)
      notes.push_back(fmt::format("{}: failed on the GPU, not measured: {}", p.path, f));
    if (p.low_rank > 0)
      notes.push_back(fmt::format("{}: {} PowerSGD kernel measurements kept in the probe file (not yet a "
                                  "calibration entry)",
                                  p.path, p.low_rank));
  }
  return notes;
}

} // namespace ddlsim::calibrate
