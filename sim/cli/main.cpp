// The `ddlsim` command line (docs/contracts.md, "Command line" and "Exit status"). Exit 0 on success; bad input exits
// 2 with one line naming the file and JSON path; a sweep or merge with failed points exits 3; anything unexpected
// exits 1 with a message, never a crash.
#include "core/error.hpp"
#include "core/io.hpp"
#include "dag/strategy.hpp"
#include "dag/zoo/zoo.hpp"
#include "sim/cli/calibrate.hpp"
#include "sim/cli/import_trace.hpp"
#include "sim/cli/node.hpp"
#include "sim/cli/probe_plan.hpp"
#include "sim/cli/run.hpp"
#include "sim/cli/run_progress.hpp"
#include "sim/cli/sweep.hpp"
#include "sim/network/collectives.hpp"
#include "sim/report/plot.hpp"
#include "sim/report/report.hpp"
#include "sim/spec/gpus.hpp"
#include "sim/spec/scenario.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

namespace {

using namespace ddlsim;

int run_command(const std::string& scenario_path, const std::string& out_dir, const std::string& engine,
                const std::vector<std::string>& overrides, bool trace, bool quiet) {
  std::vector<std::string> all = overrides;
  if (!engine.empty())
    all.push_back("engine=" + engine);
  const auto scenario = sim::load_scenario(scenario_path, all, sim::SweepBlock::ignored); // runs the base only
  const std::string dir = out_dir.empty() ? (std::filesystem::path("out") / scenario.name).string() : out_dir;
  const OutputDir held(dir); // an unusable or busy --out fails before the simulation, not after
  std::optional<sim::RunProgress> progress;
  progress.emplace(!quiet, fmt::format("{} on the {} engine", scenario.name, sim::engine_name(scenario.engine)));
  const auto result = sim::run_scenario(scenario);
  progress->step("writing the reports");
  sim::write_reports(dir, scenario, result, trace);
  progress.reset(); // the line cleared before the summary
  fmt::print("{}  reports in {}/ (summary.json, tasks.csv{}{})\n", sim::human_summary(scenario, result), dir,
             result.variability ? ", iterations.csv" : "", trace ? ", timeline.json" : "");
  return 0;
}

int check_command(const std::string& scenario_path, const std::vector<std::string>& overrides) {
  const auto s = sim::load_scenario(scenario_path, overrides);
  sim::check_runnable(s); // what `run` refuses from its plan, before simulating (#31 R25)
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
             s.cluster.workers(), s.strategy.kind(), points, points == 1 ? "" : "s");
  return 0;
}

// Exit status of a sweep or merge with failed points: the results are complete, but not every point ran.
constexpr int kSomePointsFailed = 3;

int report_sweep(const sim::SweepOutcome& o, const std::string& dir) {
  fmt::print("sweep: {} point{}: {} run now, {} already done, {} failed; results in {}/results.csv and results.json\n",
             o.points, o.points == 1 ? "" : "s", o.ran, o.resumed, o.failed, dir);
  for (const auto& p : o.plots)
    fmt::print("  plot {}\n", p);
  for (const auto& n : o.notes)
    fmt::print("  note: {}\n", n);
  if (o.failed > 0) {
    std::fprintf(stderr, "ddlsim: %zu of %zu points failed (their error is in the error column of %s/results.csv)\n",
                 o.failed, o.points, dir.c_str());
    return kSomePointsFailed;
  }
  return 0;
}

int sweep_command(const std::string& scenario_path, std::string out_dir, const std::vector<std::string>& overrides,
                  int jobs, bool resume, const std::string& shard, bool plots, bool quiet) {
  ReadLog inputs; // what the scenario and its swept values read: the journal keeps their fingerprints
  const auto s = sim::load_scenario(scenario_path, overrides); // validates the scenario and every swept value
  if (s.sweep.empty())
    throw InputError(scenario_path, "/sweep", "the scenario has no \"sweep\" block to expand (use ddlsim run)");
  sim::SweepOptions o;
  o.out_dir = out_dir.empty() ? (std::filesystem::path("out") / s.name).string() : out_dir;
  o.jobs = jobs > 0 ? jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  o.resume = resume;
  if (!shard.empty())
    o.shard = sim::parse_shard(shard);
  o.plots = plots;
  o.progress = !quiet;
  o.inputs = inputs.files();
  o.inputs.erase(scenario_path); // the scenario itself: the sweep's identity
  return report_sweep(sim::run_sweep(s, o), o.out_dir);
}

int merge_command(const std::vector<std::string>& shards, const std::string& out_dir, bool plots) {
  return report_sweep(sim::merge_sweeps(shards, out_dir, plots), out_dir);
}

int plot_command(const std::string& csv, sim::PlotRequest request, std::string out) {
  const auto table = sim::read_results_csv(csv);
  const auto keys = table.swept_keys();
  if (request.x.empty())
    request.x = table.column("workers") >= 0 && !keys.empty() && keys.front() == "cluster.nodes"
                    ? "workers"
                    : (keys.empty() ? "workers" : keys.front());
  if (request.y.empty())
    request.y = "throughput_samples_per_s";
  if (request.group.empty())
    for (const auto& k : keys)
      if (k != request.x && !(request.x == "workers" && k == "cluster.nodes")) {
        request.group = k;
        break;
      }
  if (out.empty())
    out = (std::filesystem::path(csv).parent_path() / fmt::format("plot-{}-vs-{}.png", request.y, request.x)).string();
  if (std::any_of(out.begin(), out.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }))
    throw InputError(out, "",
                     "plot --out: a control character (a newline?) in the file name, which gnuplot's script "
                     "cannot hold");
  fmt::print("plot {}\n", sim::make_plot(table, request, out));
  return 0;
}

// One line per preset, its name first (scripts/gpu-check.sh reads it): dense peaks by format in TFLOP/s (int8: TOP/s;
// "-" where the GPU has none), memory, compute units (SMs or CUs), GPU-to-GPU links and PCIe generation.
void list_gpus() {
  const auto tera = [](double rate) { return rate > 0 ? fmt::format("{:g}", rate / 1e12) : std::string("-"); };
  for (const auto& g : sim::gpu_presets()) {
    const auto& p = g.peaks;
    const bool nvidia = g.compute_capability > 0;
    const std::string links =
        g.scale_up == sim::ScaleUp::none
            ? "no GPU links"
            : fmt::format("{} {} x {:g} GB/s", g.scale_up == sim::ScaleUp::nvlink ? "NVLink" : "xGMI", g.links,
                          g.link_Bps / 1e9);
    fmt::print("{:<15} fp64 {:>5} fp32 {:>5} tf32 {:>6} bf16 {:>6} fp16 {:>6} fp8 {:>6} int8 {:>6} TFLOPS  {:>6g} GB/s "
               "{:>3g} GiB  {:>3} {}  {:<20} PCIe gen{}\n",
               g.name, tera(p.fp64), tera(p.fp32), tera(p.tf32), tera(p.bf16), tera(p.fp16), tera(p.fp8), tera(p.int8),
               g.memory_bandwidth / 1e9, g.memory_bytes / 1073741824.0, g.compute_units, nvidia ? "SMs" : "CUs", links,
               g.pcie_generation);
  }
}

int list_command(const std::string& what) {
  if (what == "models") {
    for (const auto& name : dag::zoo_model_names())
      fmt::print("{}\n", name);
    fmt::print("transformer\n");
  } else if (what == "strategies") {
    for (const auto* s : dag::strategies())
      fmt::print("{:<13} {}\n", s->name, s->description);
  } else if (what == "collectives") {
    // The collectives a scenario chooses an algorithm for (`collectives.<name>`), the default marked.
    for (const auto c :
         {Collective::allreduce, Collective::allgather, Collective::reduce_scatter, Collective::broadcast})
      for (const auto& a : sim::lowerings(c))
        fmt::print("{:<14} {:<18} {}{}\n", collective_name(a.collective), a.algorithm, a.description,
                   a.is_default ? " (default)" : "");
  } else if (what == "gpus") {
    list_gpus();
  }
  return 0;
}

// `ddlsim node TOPO [--gpu PRESET]` (sim/cli/node.hpp).
CLI::App* add_node_command(CLI::App& app, std::string& topo_file, std::string& gpu) {
  auto* node = app.add_subcommand("node", "what NCCL builds on a node that `nvidia-smi topo -m` printed: NVLink "
                                          "rings, GPU pairs through host memory, GPUDirect RDMA per NIC");
  node->add_option("TOPO", topo_file, "nvidia-smi topo -m output")->required();
  node->add_option("--gpu", gpu, "the GPUs' preset (ddlsim list gpus): the rings' bus bandwidth");
  return node;
}

} // namespace

int main(int argc, char** argv) {
  ignore_file_size_signal(); // a file size limit makes writes fail (and clean up), not kill the process
  CLI::App app{"ddlsim: predicts the iteration time and scalability of distributed deep-learning training"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "ddlsim 0.1.0");

  std::string scenario, out_dir, engine, what;
  std::vector<std::string> overrides;
  bool no_trace = false;
  bool quiet = false;

  auto* run = app.add_subcommand("run", "run one scenario and write summary.json, tasks.csv, timeline.json");
  run->add_option("SCENARIO", scenario, "scenario JSON file")->required();
  run->add_option("--out", out_dir, "output directory (default: out/<scenario name>)");
  std::vector<std::string> engine_names;
  for (const auto& e : sim::engines())
    engine_names.emplace_back(e.name);
  run->add_option("--engine", engine,
                  fmt::format("engine: {} (overrides the scenario's)", fmt::join(engine_names, " or ")))
      ->check(CLI::IsMember(engine_names));
  run->add_option("--set", overrides, "override a scenario key: a.b=JSON (repeatable)");
  run->add_flag("--no-trace", no_trace, "do not write timeline.json");
  run->add_flag("--quiet", quiet, "no progress line on a terminal (shown on stderr for runs over 2 s)");

  auto* check = app.add_subcommand("check", "validate a scenario (and its sweep) without running it");
  check->add_option("SCENARIO", scenario, "scenario JSON file")->required();
  check->add_option("--set", overrides, "override a scenario key: a.b=JSON (repeatable)");

  int jobs = 0;
  bool resume = false, no_plots = false;
  std::string shard;
  auto* sweep = app.add_subcommand("sweep", "run every point of the scenario's sweep; write results.csv, results.json "
                                            "and plots");
  sweep->add_option("SCENARIO", scenario, "scenario JSON file with a \"sweep\" block")->required();
  sweep->add_option("--out", out_dir, "output directory (default: out/<scenario name>)");
  sweep->add_option("-j,--jobs", jobs, "points run at a time (default: number of cores)")
      ->check(CLI::Range(1, 4096)); // a bounded range: CLI11 prints PositiveNumber's as 0 to DBL_MAX in full
  sweep->add_flag("--resume", resume, "skip the points already in DIR/points.jsonl");
  sweep->add_option("--shard", shard, "run the points whose index is I modulo N (I/N, e.g. $SLURM_ARRAY_TASK_ID/8)");
  sweep->add_option("--set", overrides, "override a scenario key: a.b=JSON (repeatable)");
  sweep->add_flag("--no-plots", no_plots, "do not draw the plots");
  sweep->add_flag("--quiet", quiet, "no progress on stderr");

  std::vector<std::string> shard_dirs;
  auto* merge = app.add_subcommand("merge", "combine the results of sweep shards (--shard I/N) into one table");
  merge->add_option("SHARD_DIR", shard_dirs, "the shards' output directories")->required();
  merge->add_option("--out", out_dir, "output directory")->required();
  merge->add_flag("--no-plots", no_plots, "do not draw the plots");

  std::string results_csv, plot_out;
  sim::PlotRequest plot_request;
  auto* plot = app.add_subcommand("plot", "plot columns of a sweep's results.csv (PNG or SVG, with .dat and .gp)");
  plot->add_option("RESULTS", results_csv, "results.csv of a sweep")->required();
  plot->add_option("--x", plot_request.x, "column on the x axis (default: GPUs when nodes were swept)");
  plot->add_option("--y", plot_request.y, "column on the y axis (default: throughput_samples_per_s)");
  plot->add_option("--group", plot_request.group, "one line per value of this column");
  plot->add_option("--out", plot_out, "FILE.png or FILE.svg (default: beside results.csv)");

  sim::CalibrateRequest calibrate_request;
  int nccl_ranks = 0;
  auto* calibrate = app.add_subcommand("calibrate", "turn measurements into a calibration file (docs/calibration.md)");
  calibrate->add_option("--nccl-tests", calibrate_request.nccl_tests, "nccl-tests output files (text or -J JSON)");
  calibrate->add_option("--kineto", calibrate_request.kineto,
                        "PyTorch profiler traces (JSON or .json.gz): layer, host and optimizer times");
  calibrate->add_option("--probe", calibrate_request.probes,
                        "ddlsim-probe files: layers, selection curves, collectives, host-to-device bandwidth");
  calibrate->add_option("--collective", calibrate_request.collectives,
                        "the collective of logs that do not name it (nccl-tests before 2.16.7): all_reduce or "
                        "allreduce, ...; once for all, or once per log (auto: as the log says)");
  calibrate->add_option("--ranks", nccl_ranks, "the ranks of logs without a device listing")
      ->check(CLI::Range(1, static_cast<int>(sim::kMaxGpus))); // calibrate::kMaxRanks (sim/cli/calibrate.cpp)
  calibrate->add_option("--out", calibrate_request.out, "the calibration file to write")->required();

  sim::ImportTraceRequest import_request;
  auto* import_trace =
      app.add_subcommand("import-trace", "a PyTorch profiler trace as a runnable scenario of the traced run: "
                                         "workload.json, calibration.json, scenario.json, traced_step.json");
  import_trace->add_option("TRACE", import_request.trace, "the trace (Chrome trace JSON, or gzip'd)")->required();
  import_trace->add_option("--out", import_request.out, "the directory to write")->required();
  import_trace->add_option("--host-scale", import_request.host_scale,
                           "multiply every host time by F (profiler overhead correction; default 1)");

  std::string plan_out;
  auto* probe_plan =
      app.add_subcommand("probe-plan", "what ddlsim-probe should measure on a GPU node for this scenario (PLAN.json)");
  probe_plan->add_option("SCENARIO", scenario, "scenario JSON file")->required();
  probe_plan->add_option("--set", overrides, "override a scenario key: a.b=JSON (repeatable)");
  probe_plan->add_option("--out", plan_out, "the plan file to write")->required();

  std::string topo_file, node_gpu;
  auto* node = add_node_command(app, topo_file, node_gpu);

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
      return run_command(scenario, out_dir, engine, overrides, !no_trace, quiet);
    if (check->parsed())
      return check_command(scenario, overrides);
    if (sweep->parsed())
      return sweep_command(scenario, out_dir, overrides, jobs, resume, shard, !no_plots, quiet);
    if (merge->parsed())
      return merge_command(shard_dirs, out_dir, !no_plots);
    if (plot->parsed())
      return plot_command(results_csv, plot_request, plot_out);
    if (list->parsed())
      return list_command(what);
    if (probe_plan->parsed())
      return sim::probe_plan_command(scenario, overrides, plan_out);
    if (node->parsed())
      return sim::node_command(topo_file, node_gpu);
    if (import_trace->parsed())
      return sim::import_trace_command(import_request);
    if (calibrate->parsed()) {
      if (nccl_ranks > 0)
        calibrate_request.ranks = nccl_ranks;
      return sim::calibrate_command(calibrate_request);
    }
  } catch (const InputError& e) {
    std::fprintf(stderr, "ddlsim: %s\n", e.what());
    return 2;
  } catch (const sim::GnuplotMissing& e) { // `plot` needs it (a sweep notes it and goes on)
    std::fprintf(stderr, "ddlsim: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddlsim: internal error: %s\n", e.what());
    // Leave without static destructors: after a simulation stopped half-way, SimGrid's engine may still hold actors
    // and activities whose teardown at exit crashed (issue #15 D2: "never finished", then SIGSEGV).
    std::fflush(nullptr);
    std::_Exit(1);
  }
  return 0;
}
