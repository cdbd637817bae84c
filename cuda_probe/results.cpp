// The probe's outputs (results.hpp).
#include "cuda_probe/results.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <unistd.h>

namespace ddlsim::probe {
namespace {

using Json = nlohmann::ordered_json;

// Whole numbers as integers ("4096 B", "1980000000 Hz"), others with the shortest digits that read back to the same
// double (fmt's "{}", as ddlsim writes calibrations: "0.0001 s", "1.25e-05 s").
std::string shortest(double x) {
  if (x == std::floor(x) && std::abs(x) < 1e15)
    return fmt::format("{:.0f}", x);
  return fmt::format("{}", x);
}

Json statistics_json(const Statistics& s) {
  Json j;
  j["median"] = quantity(s.median_s, "s");
  j["min"] = quantity(s.min_s, "s");
  j["p10"] = quantity(s.p10_s, "s");
  j["p90"] = quantity(s.p90_s, "s");
  j["max"] = quantity(s.max_s, "s");
  j["mean"] = quantity(s.mean_s, "s");
  j["noise"] = s.noise;
  j["samples"] = s.samples;
  j["warmup_samples"] = s.warmup_samples;
  j["stopped_by"] = s.stopped_by;
  return j;
}

Json measurement_json(const ProbeResults& r, const ProbeResults::Entry& e) {
  const Measurement& m = e.measurement;
  Json j;
  j["group"] = group_name(m.group);
  switch (m.group) {
  case Group::layer: {
    const LayerKernel& l = r.plan.layers.at(static_cast<std::size_t>(m.layer));
    j["layer"] = l.name;
    j["kernel"] = l.kernel == KernelKind::convolution    ? "convolution"
                  : l.kernel == KernelKind::gemm         ? "gemm"
                  : l.kernel == KernelKind::batched_gemm ? "batched_gemm"
                                                         : "memory";
    j["pass"] = m.pass;
    break;
  }
  case Group::gemm:
    j["m"] = m.gemm.m;
    j["n"] = m.gemm.n;
    j["k"] = m.gemm.k;
    j["dtype"] = dtype_name(r.options.dtype);
    break;
  case Group::memory_bandwidth:
    j["bytes"] = quantity(m.bytes, "B");
    break;
  case Group::launch:
    break;
  case Group::h2d:
    j["bytes"] = quantity(m.bytes, "B");
    j["host_memory"] = m.pinned ? "pinned" : "pageable";
    break;
  case Group::selection:
    j["algorithm"] = m.algorithm;
    j["elements"] = m.elements;
    j["selected"] = m.selected;
    break;
  case Group::low_rank:
    j["n"] = m.matrix.n;
    j["m"] = m.matrix.m;
    j["rank"] = m.matrix.rank;
    j["step"] = m.step;
    break;
  case Group::collective:
    j["collective"] = m.collective;
    j["bytes"] = quantity(m.bytes, "B");
    j["in_place"] = m.in_place;
    j["ranks"] = m.ranks;
    j["nodes"] = m.nodes;
    break;
  case Group::overlap:
    j["case"] = m.overlap_case;
    j["ranks"] = m.ranks;
    j["nodes"] = m.nodes;
    break;
  }
  j["time"] = statistics_json(e.result.stats);
  if (!e.result.note.empty())
    j["note"] = e.result.note;
  return j;
}

// nccl-tests' time column (src/common.cu: "%7.0f" from 10 ms, "%7.1f" from 100 us, else "%7.2f").
std::string time_column(double us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, us >= 10000.0 ? "%7.0f" : us >= 100.0 ? "%7.1f" : "%7.2f", us);
  return buf;
}

} // namespace

std::string quantity(double value, const char* unit) {
  return shortest(value) + " " + unit;
}

std::string probe_json(const ProbeResults& r) {
  Json j;
  j["format"] = "ddlsim-probe";
  j["version"] = kProbeFormatVersion;
  j["generator"] = r.generator;
  j["plan"] = {{"file", r.plan.file},
               {"scenario", r.plan.scenario},
               {"model", r.plan.model},
               {"gpu", r.plan.gpu},
               {"batch_per_gpu", r.plan.batch_per_gpu}};
  j["dtype"] = dtype_name(r.options.dtype);
  const auto& d = r.device;
  Json device;
  device["name"] = d.name;
  device["pci_bus_id"] = d.pci_bus_id;
  device["compute_capability"] =
      std::to_string(d.compute_capability_major) + "." + std::to_string(d.compute_capability_minor);
  device["multiprocessors"] = d.multiprocessors;
  device["memory"] = quantity(d.memory_bytes, "B");
  device["l2_cache"] = quantity(d.l2_bytes, "B");
  device["memory_bus_width"] = quantity(d.memory_bus_bits, "bit");
  Json clocks;
  clocks["max_sm"] = quantity(d.max_sm_clock_hz, "Hz");
  clocks["max_memory"] = quantity(d.max_memory_clock_hz, "Hz");
  // current clocks when NVML could be read (null: unknown)
  clocks["sm"] = d.sm_clock_hz > 0 ? Json(quantity(d.sm_clock_hz, "Hz")) : Json(nullptr);
  clocks["memory"] = d.memory_clock_hz > 0 ? Json(quantity(d.memory_clock_hz, "Hz")) : Json(nullptr);
  device["clocks"] = std::move(clocks);
  device["driver"] = d.driver_version;
  device["cuda_runtime"] = d.runtime_version;
  device["cudnn"] = d.cudnn_version;
  device["cublas"] = d.cublas_version;
  device["cusolver"] = d.cusolver_version;
  device["nccl"] = d.nccl_version;
  j["device"] = std::move(device);
  j["communicator"] = {{"ranks", r.options.ranks}, {"nodes", r.options.nodes}, {"processes", r.processes}};
  j["timing"] = {{"clock", "CUDA events (launch: host steady clock)"},
                 {"statistic", "median"},
                 {"l2_flush", "before each kernel sample, outside the timed region"},
                 {"warmup", quantity(r.rule.warmup_s, "s")},
                 {"min_samples", r.rule.min_samples},
                 {"min_time", quantity(r.rule.min_time_s, "s")},
                 {"max_noise", r.rule.max_noise},
                 {"timeout", quantity(r.rule.timeout_s, "s")}};
  Json all = Json::array();
  for (const auto& e : r.entries)
    all.push_back(measurement_json(r, e));
  j["measurements"] = std::move(all);
  Json failed = Json::array();
  for (const auto& f : r.failures)
    failed.push_back({{"group", group_name(f.measurement.group)}, {"what", f.measurement.label}, {"error", f.error}});
  j["failed"] = std::move(failed);
  return j.dump(2) + "\n";
}

std::string nccl_tests_text(const ProbeResults& r) {
  // per collective, per size: out-of-place and in-place results
  struct Row {
    const ProbeResults::Entry* out_of_place = nullptr;
    const ProbeResults::Entry* in_place = nullptr;
  };
  std::vector<std::string> order;
  std::map<std::string, std::map<double, Row>> tables;
  for (const auto& e : r.entries) {
    const Measurement& m = e.measurement;
    if (m.group != Group::collective)
      continue;
    if (!tables.count(m.collective))
      order.push_back(m.collective);
    Row& row = tables[m.collective][m.bytes];
    (m.in_place ? row.in_place : row.out_of_place) = &e;
  }
  std::string out;
  char line[512];
  for (const auto& name : order) {
    const auto& rows = tables.at(name);
    const int ranks = r.options.ranks;
    out += "# Collective test starting: " + name + "_perf\n";
    std::snprintf(line, sizeof line,
                  "# nThread 1 nGpus %d minBytes %.0f maxBytes %.0f step: 2(factor) warmup iters: 0 iters: 0 agg "
                  "iters: 1 validation: 0 graph: 0\n",
                  r.processes > 1 ? 1 : ranks, rows.begin()->first, rows.rbegin()->first);
    out += line;
    out += "#\n# Using devices\n";
    for (int rank = 0; rank < ranks; ++rank) {
      const std::string host = r.hosts.empty() ? "localhost" : r.hosts[static_cast<std::size_t>(rank) % r.hosts.size()];
      std::snprintf(line, sizeof line, "#  Rank %2d Group  0 Pid %6d on %s device %2d [%s] %s\n", rank, 0, host.c_str(),
                    r.processes > 1 ? 0 : rank, r.device.pci_bus_id.c_str(), r.device.name.c_str());
      out += line;
    }
    const bool reduces = name == "all_reduce" || name == "reduce_scatter";
    const bool rooted = name == "broadcast";
    out += "#\n"
           "#                                                              out-of-place                       "
           "in-place          \n"
           "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw  "
           " busbw #wrong\n"
           "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  "
           "(GB/s)       \n";
    for (const auto& [bytes, row] : rows) {
      if (!row.out_of_place || !row.in_place)
        continue; // nccl-tests prints both sides; a size measured on one side only is in the JSON
      // nccl-tests' count: elements per rank's buffer (all_gather: the send buffer, reduce_scatter: the receive
      // buffer, i.e. the whole buffer / ranks), float
      const double count = std::floor(bytes / 4 / (partitioned_collective(name) ? ranks : 1));
      std::snprintf(line, sizeof line, "%12.0f  %12.0f  %8s  %6s  %6d", bytes, count, "float", reduces ? "sum" : "none",
                    rooted ? 0 : -1);
      out += line;
      for (const auto* e : {row.out_of_place, row.in_place}) {
        const double t = e->result.stats.median_s;
        const double algbw = bytes / t / 1e9;
        std::snprintf(line, sizeof line, "  %s  %6.2f  %6.2f  %6s", time_column(t * 1e6).c_str(), algbw,
                      algbw * busbw_factor(name, ranks), "N/A");
        out += line;
      }
      out += "\n";
    }
    out += "# Out of bounds values : 0 OK\n#\n";
  }
  return out;
}

void write_file_atomic(const std::string& path, const std::string& text) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw std::runtime_error(path + ": its directory " + dir.string() + " does not exist");
  if (fs::is_directory(target, ec))
    throw std::runtime_error(path + ": is a directory");
  // Appended piece by piece: GCC 12 at -O3 flags `"." + string` with a false -Wrestrict (GCC bug 105329).
  std::string name = ".";
  name += target.filename().string();
  name += ".tmp";
  name += std::to_string(::getpid());
  const fs::path tmp = dir / name;
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out)
      throw std::runtime_error(path + ": cannot write " + tmp.string());
    out << text;
    out.flush();
    if (!out) {
      fs::remove(tmp, ec);
      throw std::runtime_error(path + ": cannot write " + tmp.string());
    }
  }
  fs::rename(tmp, target, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw std::runtime_error(path + ": cannot replace it (" + ec.message() + ")");
  }
}

} // namespace ddlsim::probe
