// Benchmark: the flow engine on SimGrid from 64 to 8,192 GPUs (issue #3 targets: ResNet-50 WFBP iteration on
// 1,024 GPUs <= 2 s wall and <= 1 GiB resident; on 8,192 GPUs <= 20 s; one 1 GiB ring allreduce on 1,024 GPUs
// <= 0.2 s), beside the analytic engine and the per-message reference. Every point runs in its own child process
// (SimGrid's engine is a singleton); peak memory is the child's maximum resident set. Prints a table; not a test.
#include "sim/engine.hpp"
#include "sim/scenario.hpp"

#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace ddlsim;

namespace {

struct Point {
  double wall_s = 0;
  double iteration_s = 0;
  double flows = 0;
  double max_rss_mib = 0;
  bool ok = false;
};

// Runs `fn` (returning {wall, iteration, flows}) in a child; reads the numbers and the child's peak RSS.
template <class Fn> Point in_child(Fn fn) {
  int fds[2];
  if (::pipe(fds) != 0)
    return {};
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    double out[3] = {0, 0, 0};
    int code = 0;
    try {
      fn(out);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "point failed: %s\n", e.what());
      code = 3;
    }
    if (::write(fds[1], out, sizeof out) != static_cast<ssize_t>(sizeof out))
      code = 4;
    ::_exit(code);
  }
  ::close(fds[1]);
  double out[3] = {0, 0, 0};
  const ssize_t got = ::read(fds[0], out, sizeof out);
  ::close(fds[0]);
  int status = 0;
  struct rusage usage {};
  ::wait4(pid, &status, 0, &usage);
  Point p;
  p.ok = got == static_cast<ssize_t>(sizeof out) && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  p.wall_s = out[0];
  p.iteration_s = out[1];
  p.flows = out[2];
  p.max_rss_mib = static_cast<double>(usage.ru_maxrss) / 1024.0;
  return p;
}

sim::Scenario resnet50(int nodes, int gpus, const std::string& engine, bool per_message) {
  Json doc = Json::parse(R"({"model": {"zoo": "resnet50", "batch_per_gpu": 64},
    "gpu": {"preset": "V100-SXM2-32GB", "efficiency": 0.642},
    "cluster": {"intra_node": {"bandwidth": "150 GB/s", "latency": "1 us"},
                "inter_node": {"bandwidth": "100 Gbps", "latency": "5 us"}},
    "collectives": {"allreduce": "ring"}, "strategy": {"kind": "wfbp"}})");
  doc["cluster"]["nodes"] = nodes;
  doc["cluster"]["gpus_per_node"] = gpus;
  doc["engine"] = engine;
  if (per_message)
    doc["flow"] = {{"granularity", "per-message"}};
  return sim::parse_scenario(doc, "bench");
}

std::string fmt_point(const Point& p) {
  if (!p.ok)
    return fmt::format("{:>10} {:>10} {:>12}", "failed", "", "");
  return fmt::format("{:>10.3f} {:>10.0f} {:>12.0f}", p.wall_s, p.max_rss_mib, p.flows);
}

} // namespace

int main(int argc, char** argv) {
  const int max_gpus = argc > 1 ? std::atoi(argv[1]) : 8192;
  fmt::print("ResNet-50, WFBP (161 ring allreduces), batch 64, 8 GPUs per node, 100 Gb/s NICs\n");
  fmt::print("{:>6} | {:>10} {:>10} {:>12} | {:>12} {:>12} | {:>10}\n", "GPUs", "flow wall s", "peak MiB", "flows",
             "flow iter ms", "analytic ms", "agreement");
  for (int gpus = 64; gpus <= max_gpus; gpus *= 2) {
    const int nodes = gpus / 8;
    const auto flow = in_child([&](double* out) {
      const auto r = sim::run_scenario(resnet50(nodes, 8, "flow", false));
      out[0] = r.sim.wall_s;
      out[1] = r.iteration_time_s;
      out[2] = static_cast<double>(r.sim.flows);
    });
    const auto analytic = sim::run_scenario(resnet50(nodes, 8, "analytic", false));
    fmt::print("{:>6} | {} | {:>12.3f} {:>12.3f} | {:>9.5f}%\n", gpus, fmt_point(flow), flow.iteration_s * 1e3,
               analytic.iteration_time_s * 1e3,
               100 * std::abs(flow.iteration_s - analytic.iteration_time_s) / analytic.iteration_time_s);
  }
  fmt::print("\nPer-message reference (every ring step a flow), same scenario\n");
  for (int gpus : {64, 256}) {
    const auto p = in_child([&](double* out) {
      const auto r = sim::run_scenario(resnet50(gpus / 8, 8, "flow", true));
      out[0] = r.sim.wall_s;
      out[1] = r.iteration_time_s;
      out[2] = static_cast<double>(r.sim.flows);
    });
    fmt::print("{:>6} | {} | {:>12.3f}\n", gpus, fmt_point(p), p.iteration_s * 1e3);
  }
  fmt::print("\nOne 1 GiB ring allreduce on 1,024 GPUs (128 nodes x 8)\n");
  for (bool per_message : {false, true}) {
    const auto p = in_child([&](double* out) {
      sim::ClusterSpec c;
      c.nodes = 128;
      c.gpus_per_node = 8;
      c.intra = {150e9, 1e-6};
      c.inter = {12.5e9, 5e-6};
      const auto r =
          sim::run_collectives_flow(c, {{sim::CollectiveKind::allreduce, "ring", 1073741824.0, 0}}, per_message);
      out[0] = r.wall_s;
      out[1] = r.jobs[0].end_s;
      out[2] = static_cast<double>(r.flows);
    });
    fmt::print("{:>13} | {} | {:>12.3f} ms simulated\n", per_message ? "per-message" : "aggregated", fmt_point(p),
               p.iteration_s * 1e3);
  }
  return 0;
}
