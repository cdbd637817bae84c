// The `ddlsim` command line (DESIGN.md, "CLI"). Exit 0 on success; bad input exits 2 with one line naming the
// file and JSON path; anything unexpected exits 1 with a message, never a crash.
#include "core/error.hpp"
#include "dag/strategy.hpp"
#include "dag/zoo/zoo.hpp"
#include "sim/collectives.hpp"
#include "sim/engine.hpp"
#include "sim/gpus.hpp"
#include "sim/report.hpp"
#include "sim/scenario.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>

namespace {

using namespace ddlsim;

int run_command(const std::string& scenario_path, const std::string& out_dir, const std::string& engine,
                const std::vector<std::string>& overrides, bool trace) {
  std::vector<std::string> all = overrides;
  if (!engine.empty())
    all.push_back("engine=" + engine);
  const auto scenario = sim::load_scenario(scenario_path, all);
  const auto result = sim::run_scenario(scenario);
  const std::string dir = out_dir.empty() ? (std::filesystem::path("out") / scenario.name).string() : out_dir;
  sim::write_reports(dir, scenario, result, trace);
  fmt::print("{}  reports in {}/ (summary.json, tasks.csv{})\n", sim::human_summary(scenario, result), dir,
             trace ? ", timeline.json" : "");
  return 0;
}

int check_command(const std::string& scenario_path, const std::vector<std::string>& overrides) {
  const auto s = sim::load_scenario(scenario_path, overrides);
  std::size_t points = 1;
  std::vector<bool> counted_group;
  for (const auto& axis : s.sweep) {
    if (axis.zip_group < 0) {
      points *= axis.values.size();
    } else {
      const auto g = static_cast<std::size_t>(axis.zip_group);
      if (counted_group.size() <= g)
        counted_group.resize(g + 1, false);
      if (!counted_group[g])
        points *= axis.values.size();
      counted_group[g] = true;
    }
  }
  fmt::print("{}: valid ({} on {} GPUs, strategy {}, {} sweep point{})\n", scenario_path, s.model.name,
             s.cluster.workers(), s.strategy.kind, points, points == 1 ? "" : "s");
  return 0;
}

int list_command(const std::string& what) {
  if (what == "models") {
    for (const auto& name : dag::zoo_model_names())
      fmt::print("{}\n", name);
    fmt::print("transformer\n");
  } else if (what == "strategies") {
    for (const auto& s : dag::strategies())
      fmt::print("{:<10} {}\n", s.name, s.description);
  } else if (what == "collectives") {
    for (const auto& a : sim::allreduce_algorithms())
      fmt::print("allreduce {:<17} {}\n", a.name, a.description);
  } else if (what == "gpus") {
    for (const auto& g : sim::gpu_presets())
      fmt::print("{:<16} fp32 {:>5.1f} TFLOPS  fp16 {:>6.1f} TFLOPS  memory {:>5.0f} GB/s {:>3.0f} GiB\n", g.name,
                 g.fp32_flops / 1e12, g.fp16_flops / 1e12, g.memory_bandwidth / 1e9, g.memory_bytes / 1073741824.0);
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"ddlsim: predicts the iteration time and scalability of distributed deep-learning training"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "ddlsim 0.1.0");

  std::string scenario, out_dir, engine, what;
  std::vector<std::string> overrides;
  bool no_trace = false;

  auto* run = app.add_subcommand("run", "run one scenario and write summary.json, tasks.csv, timeline.json");
  run->add_option("SCENARIO", scenario, "scenario JSON file")->required();
  run->add_option("--out", out_dir, "output directory (default: out/<scenario name>)");
  run->add_option("--engine", engine, "engine: analytic or flow (overrides the scenario's)")
      ->check(CLI::IsMember({"analytic", "flow"}));
  run->add_option("--set", overrides, "override a scenario key: a.b=JSON (repeatable)");
  run->add_flag("--no-trace", no_trace, "do not write timeline.json");

  auto* check = app.add_subcommand("check", "validate a scenario (and its sweep) without running it");
  check->add_option("SCENARIO", scenario, "scenario JSON file")->required();
  check->add_option("--set", overrides, "override a scenario key: a.b=JSON (repeatable)");

  auto* list = app.add_subcommand("list", "list what is built in");
  list->add_option("WHAT", what, "models | strategies | collectives | gpus")
      ->required()
      ->check(CLI::IsMember({"models", "strategies", "collectives", "gpus"}));

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "ddlsim: %s (see ddlsim --help)\n", e.what());
    return 2;
  }

  try {
    if (run->parsed())
      return run_command(scenario, out_dir, engine, overrides, !no_trace);
    if (check->parsed())
      return check_command(scenario, overrides);
    if (list->parsed())
      return list_command(what);
  } catch (const InputError& e) {
    std::fprintf(stderr, "ddlsim: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddlsim: internal error: %s\n", e.what());
    return 1;
  }
  return 0;
}
