// Benchmark: a 1,000-point analytic sweep (issue #4 target: under 10 s on 2 cores, process start-up included):
// spawns `ddlsim sweep` on the quickstart scenario with 50 node counts x 5 strategies x 4 bandwidths and prints the
// wall time and points per second, without and with the plots. Prints a table; not a test.
//
//   bench_sweep [jobs, default 2]
#include "core/io.hpp"
#include "core/json.hpp"
#include "spawn.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

using namespace ddlsim;
namespace fs = std::filesystem;

namespace {

// Runs ddlsim with `args`; returns the wall time, or a negative number when it failed.
double timed_run(const std::vector<std::string>& args) {
  const auto run = bench::run_ddlsim(args);
  return run.ok ? run.wall_s : -1;
}

} // namespace

int main(int argc, char** argv) {
  const int jobs = argc > 1 ? std::atoi(argv[1]) : 2;
  const fs::path dir = fs::temp_directory_path() / fmt::format("ddlsim-bench-sweep-{}", ::getpid());
  fs::create_directories(dir);
  Json doc = Json::parse(read_file(std::string(DDLSIM_SOURCE_DIR) + "/scenarios/quickstart.json"));
  Json nodes = Json::array();
  for (int n = 1; n <= 50; ++n)
    nodes.push_back(n);
  doc["sweep"] = {{"cluster.nodes", nodes},
                  {"strategy.kind", {"bsp", "wfbp", "ddp", "fusion", "mg-wfbp"}},
                  {"cluster.inter_node.bandwidth", {"10 Gbps", "25 Gbps", "100 Gbps", "200 Gbps"}}};
  const std::string scenario = (dir / "sweep1000.json").string();
  write_file_atomic(scenario, doc.dump(2));
  constexpr double points = 50 * 5 * 4;

  fmt::print("1,000-point analytic sweep of scenarios/quickstart.json (ResNet-50, 1..50 nodes x 4 V100,\n"
             "5 strategies, 4 bandwidths), `ddlsim sweep -j {}`, wall time of the whole process\n\n",
             jobs);
  fmt::print("{:<28} {:>9} {:>10}\n", "", "wall s", "points/s");
  for (bool plots : {false, true}) {
    std::vector<std::string> args{
        "sweep", scenario, "--out", (dir / (plots ? "plots" : "noplots")).string(), "-j", std::to_string(jobs)};
    if (!plots)
      args.emplace_back("--no-plots");
    const double wall = timed_run(args);
    if (wall < 0)
      fmt::print("{:<28} {:>9}\n", plots ? "with plots" : "without plots", "failed");
    else
      fmt::print("{:<28} {:>9.3f} {:>10.0f}\n", plots ? "with plots (PNG + SVG)" : "without plots", wall,
                 points / wall);
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  return 0;
}
