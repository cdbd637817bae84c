// `ddlsim calibrate` (calibrate.hpp).
#include "sim/cli/calibrate.hpp"

#include "calibrate/measured.hpp"
#include "calibrate/nccl_tests.hpp"
#include "calibrate/probe.hpp"
#include "core/error.hpp"
#include "core/io.hpp"
#include "core/units.hpp"
#include "dag/calibration.hpp"
#include "sim/cli/import_trace.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace ddlsim::sim {

int calibrate_command(const CalibrateRequest& request) {
  const auto& named = request.collectives;
  if (named.size() > 1 && named.size() != request.nccl_tests.size())
    throw InputError("", "--collective",
                     fmt::format("give one --collective for every log, or one for all of them ({} for {} logs)",
                                 named.size(), request.nccl_tests.size()));
  std::vector<calibrate::NcclTestsLog> logs;
  for (std::size_t i = 0; i < request.nccl_tests.size(); ++i) {
    calibrate::NcclReadOptions options;
    options.ranks = request.ranks;
    if (!named.empty() && named[named.size() == 1 ? 0 : i] != "auto") {
      const auto& name = named[named.size() == 1 ? 0 : i];
      options.collective = calibrate::find_nccl_collective(name);
      if (!options.collective)
        throw InputError("", "--collective",
                         fmt::format("unknown nccl-tests collective '{}' (expected all_reduce, all_gather, "
                                     "reduce_scatter, broadcast, reduce, alltoall, sendrecv, gather or scatter)",
                                     name));
    }
    try {
      logs.push_back(calibrate::read_nccl_tests(request.nccl_tests[i], options));
    } catch (const InputError& e) {
      if (options.collective || e.detail().find("does not name its collective") == std::string::npos)
        throw;
      throw InputError(e.file(), e.pointer(), e.detail() + " with --collective (e.g. --collective all_reduce)");
    }
  }
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
  const auto probe_notes = calibrate::add_probe_calibration(c, probes);
  write_file_atomic(request.out, dag::calibration_json(c).dump(2) + "\n");

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
