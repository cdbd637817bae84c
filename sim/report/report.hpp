// Reports of one run (docs/outputs.md, "summary.json" and "The other files"): summary.json, tasks.csv, timeline.json
// (Chrome trace event format, loads in Perfetto and chrome://tracing), and a short human summary for the terminal.
#pragma once

#include "core/json.hpp"
#include "sim/plan/result.hpp"
#include "sim/spec/scenario.hpp"

#include <string>

namespace ddlsim::sim {

[[nodiscard]] OrderedJson summary_json(const Scenario& s, const RunResult& r);
[[nodiscard]] std::string tasks_csv(const Scenario& s, const RunResult& r);
[[nodiscard]] OrderedJson timeline_json(const Scenario& s, const RunResult& r);
[[nodiscard]] std::string links_csv(const RunResult& r);
[[nodiscard]] std::string human_summary(const Scenario& s, const RunResult& r);

/// Writes summary.json, tasks.csv, links.csv (flow engine) and (unless `trace` is false) timeline.json into
/// `dir`, each atomically.
void write_reports(const std::string& dir, const Scenario& s, const RunResult& r, bool trace);

} // namespace ddlsim::sim
