// `ddlsim calibrate` (calibrate.hpp).
#include "sim/cli/calibrate.hpp"

#include "calibrate/measured.hpp"
#include "calibrate/nccl_tests.hpp"
#include "calibrate/probe.hpp"
#include "core/error.hpp"
#include "core/io.hpp"
#include "core/json.hpp"
#include "core/units.hpp"
#include "dag/calibration.hpp"
#include "sim/cli/calibrate_gemm.hpp"
#include "sim/cli/import_trace.hpp"
#include "sim/spec/scenario.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace ddlsim::sim {
namespace {

static_assert(calibrate::kMaxRanks == kMaxGpus, "--ranks is checked against kMaxGpus (main.cpp)");

// The collective named by --collective: nccl-tests' spelling (all_reduce) or a scenario's (allreduce).
calibrate::NcclCollective named_collective(const std::string& name) {
  if (const auto c = calibrate::find_measured_collective(name))
    return *c;
  throw InputError("", "--collective",
                   fmt::format("unknown collective '{}' (expected all_reduce, all_gather, reduce_scatter, broadcast, "
                               "reduce, alltoall, sendrecv, gather or scatter as nccl-tests names them, or allreduce, "
                               "allgather, point_to_point as scenarios do)",
                               name.substr(0, 200)));
}

// The nccl-tests logs, read with what --collective and --ranks say of each.
std::vector<calibrate::NcclTestsLog> read_logs(const CalibrateRequest& request) {
  const auto& named = request.collectives;
  if (named.size() > 1 && named.size() != request.nccl_tests.size())
    throw InputError("", "--collective",
                     fmt::format("give one --collective for every log, or one for all of them ({} for {} logs)",
                                 named.size(), request.nccl_tests.size()));
  std::vector<calibrate::NcclTestsLog> logs;
  for (std::size_t i = 0; i < request.nccl_tests.size(); ++i) {
    calibrate::NcclReadOptions options;
    options.ranks = request.ranks;
    if (const auto& name = named.empty() ? "auto" : named[named.size() == 1 ? 0 : i]; name != "auto")
      options.collective = named_collective(name);
    try {
      logs.push_back(calibrate::read_nccl_tests(request.nccl_tests[i], options));
    } catch (const InputError& e) {
      if (options.collective || e.detail().find("does not name its collective") == std::string::npos)
        throw;
      throw InputError(e.file(), e.pointer(), e.detail() + " with --collective (e.g. --collective all_reduce)");
    }
  }
  return logs;
}

// Refuses more rows in all the logs together than one log may have (calibrate/nccl_tests.hpp, kMaxNcclRows).
void check_total_rows(const std::vector<calibrate::NcclTestsLog>& logs, const std::vector<std::string>& sources) {
  std::size_t total = 0;
  for (std::size_t i = 0; i < logs.size(); ++i) {
    total += logs[i].rows.size();
    if (total > calibrate::kMaxNcclRows)
      throw InputError(sources[i], "",
                       fmt::format("the logs up to this one have {} rows, more than the {} ddlsim calibrates from "
                                   "at once (calibrate/nccl_tests.hpp)",
                                   total, calibrate::kMaxNcclRows));
  }
}

// The calibration as a file, read back first: what its reader (dag/calibration.hpp) refuses is refused here, naming
// the entry, rather than written.
std::string checked_calibration_text(const dag::Calibration& c, const std::string& out) {
  const std::string text = dag::calibration_json(c).dump(2) + "\n";
  try {
    (void)dag::parse_calibration(parse_json_text(text, out), out, "");
  } catch (const InputError& e) {
    throw InputError(out, e.pointer(),
                     e.detail() +
                         "; not written: the measurements this comes from are beyond what a calibration holds");
  }
  return text;
}

void print_summary(const dag::Calibration& c) {
  for (const auto& m : c.collectives) {
    const auto& last = m.table.back();
    fmt::print("{:<15} {:>5} ranks {:>3} nodes  {:>3} sizes {} .. {}", collective_name(m.collective), m.ranks, m.nodes,
               m.table.size(), format_bytes(m.table.front().size_bytes), format_bytes(last.size_bytes));
    if (!m.segments.empty()) {
      double worst = 0;
      for (const auto& s : m.segments)
        worst = std::max(worst, s.max_relative_error);
      fmt::print("  {} alpha-beta segment{}, worst fit error {:.1f} %", m.segments.size(),
                 m.segments.size() == 1 ? "" : "s", 100 * worst);
    }
    fmt::print("\n");
  }
}

} // namespace

int calibrate_command(const CalibrateRequest& request) {
  std::vector<calibrate::NcclTestsLog> logs = read_logs(request);
  if (request.nccl_tests.empty() && request.kineto.empty() && request.probes.empty())
    throw InputError("", "--nccl-tests",
                     "give nccl-tests logs (--nccl-tests), profiler traces (--kineto) or probe files (--probe)");
  std::vector<calibrate::ProbeFile> probes;
  std::vector<std::string> log_sources = request.nccl_tests;
  for (const auto& path : request.probes) {
    probes.push_back(calibrate::read_probe(path));
    if (!probes.back().collectives.rows.empty()) {
      logs.push_back(probes.back().collectives);
      log_sources.push_back("ddlsim-probe " + path);
    }
  }
  check_total_rows(logs, log_sources);
  calibrate::MeasuredCollectives measured;
  if (!logs.empty()) {
    measured = calibrate::measured_collectives(logs, log_sources);
    if (measured.collectives.empty())
      throw InputError(log_sources.front(), "", "no collective that ddlsim simulates was measured in these logs");
  }

  dag::Calibration c;
  std::vector<std::string> sources;
  if (!request.nccl_tests.empty())
    sources.push_back(fmt::format("--nccl-tests {}", fmt::join(request.nccl_tests, " ")));
  if (!request.kineto.empty())
    sources.push_back(fmt::format("--kineto {}", fmt::join(request.kineto, " ")));
  if (!request.probes.empty())
    sources.push_back(fmt::format("--probe {}", fmt::join(request.probes, " ")));
  c.source = fmt::format("ddlsim calibrate {}", fmt::join(sources, " "));
  c.collectives = measured.collectives;
  add_kineto_calibration(c, request.kineto);
  auto probe_notes = calibrate::add_probe_calibration(c, probes);
  for (auto& note : add_gemm_calibration(c, probes))
    probe_notes.push_back(std::move(note));
  write_file_atomic(request.out, checked_calibration_text(c, request.out));

  print_summary(c);
  for (std::size_t i = 0; i < logs.size(); ++i)
    for (const auto& note : logs[i].notes)
      fmt::print("note: {}: {}\n", log_sources[i], note);
  for (const auto& note : measured.notes)
    fmt::print("note: {}\n", note);
  for (const auto& note : probe_notes)
    fmt::print("probe: {}\n", note);
  fmt::print("wrote {}\n", request.out);
  return 0;
}

} // namespace ddlsim::sim
