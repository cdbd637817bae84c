// ddlsim-probe PLAN.json --out PROBE.json [--dry-run]: measures on a GPU node what a scenario's plan lists (plan.hpp)
// and writes the "ddlsim-probe" JSON that `ddlsim calibrate --probe` reads, and its collectives in nccl-tests' text
// format (results.hpp). One process drives every GPU of the node (collectives through ncclCommInitAll); under
// torchrun or srun, one process per GPU measures the collectives across nodes (rendezvous.hpp). Exit codes: 0 done,
// 1 a failure of the GPU or a library, 2 bad input, 3 no GPU.
#include "cuda_probe/gpu/gpu.hpp"
#include "cuda_probe/plan.hpp"
#include "cuda_probe/rendezvous.hpp"
#include "cuda_probe/results.hpp"

#include <CLI/CLI.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>

namespace probe = ddlsim::probe;

namespace {

constexpr double kRendezvousTimeoutS = 300;

std::string hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0)
    return "localhost";
  return buf;
}

std::string human_time(double s) {
  char buf[32];
  if (s >= 1)
    std::snprintf(buf, sizeof buf, "%.3f s", s);
  else if (s >= 1e-3)
    std::snprintf(buf, sizeof buf, "%.3f ms", s * 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.2f us", s * 1e6);
  return buf;
}

int run(int argc, char** argv) {
  CLI::App app{"ddlsim-probe: measure kernels, selection, launch, copies, NCCL collectives and overlap on this GPU "
               "node for `ddlsim calibrate --probe` (docs/calibration.md#probe-file)"};
  std::string plan_path, out, nccl_out, dtype = "fp32";
  bool dry_run = false;
  int gpus = 0;
  std::vector<std::string> skip;
  double max_bytes = 1024.0 * 1024 * 1024;
  double min_time_s = 0.5;
  double timeout_s = 15;
  app.add_option("plan", plan_path, "the plan from `ddlsim probe-plan SCENARIO --out PLAN.json`")->required();
  app.add_option("--out", out, "the probe file to write (ddlsim-probe JSON)");
  app.add_flag("--dry-run", dry_run, "print every measurement it would run, and exit");
  app.add_option("--dtype", dtype, "the layers' data type: fp32 (PyTorch's default), fp16 or bf16")
      ->check(CLI::IsMember({"fp32", "fp16", "bf16"}));
  app.add_option("--gpus", gpus, "GPUs of this node in the collectives (default: every visible GPU)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--skip", skip, "leave out a group: layers, gemm, device, selection, low_rank, collectives, overlap")
      ->check(CLI::IsMember({"layers", "gemm", "device", "selection", "low_rank", "collectives", "overlap"}));
  app.add_option("--max-bytes", max_bytes, "the collectives' largest size in bytes (default 1 GiB)")
      ->check(CLI::Range(8.0, 64.0 * 1024 * 1024 * 1024));
  app.add_option("--min-time", min_time_s, "seconds of samples before the noise may stop a measurement (0.5)")
      ->check(CLI::Range(0.0, 60.0));
  app.add_option("--timeout", timeout_s, "wall-clock seconds after which a measurement stops anyway (15)")
      ->check(CLI::Range(0.001, 3600.0));
  app.add_option("--nccl-tests-out", nccl_out,
                 "where to write the collectives in nccl-tests' format (default: beside --out, .nccl-tests.txt)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  if (!dry_run && out.empty()) {
    std::fprintf(stderr, "ddlsim-probe: --out PROBE.json is required (or --dry-run)\n");
    return 2;
  }

  probe::ProbePlan plan;
  probe::RankEnvironment env;
  try {
    plan = probe::read_plan(plan_path);
    env = probe::rank_environment([](const char* name) -> std::optional<std::string> {
      const char* v = std::getenv(name);
      return v ? std::optional<std::string>(v) : std::nullopt;
    });
  } catch (const probe::PlanError& e) {
    std::fprintf(stderr, "ddlsim-probe: %s\n", e.what());
    return 2;
  } catch (const probe::RendezvousError& e) {
    std::fprintf(stderr, "ddlsim-probe: %s\n", e.what());
    return 2;
  }

  probe::ProbeOptions options;
  options.dtype = dtype == "fp16" ? probe::Dtype::fp16 : dtype == "bf16" ? probe::Dtype::bf16 : probe::Dtype::fp32;
  options.max_collective_bytes = max_bytes;
  for (const auto& s : skip) {
    options.layers = options.layers && s != "layers";
    options.gemm = options.gemm && s != "gemm";
    options.device = options.device && s != "device";
    options.selection = options.selection && s != "selection";
    options.low_rank = options.low_rank && s != "low_rank";
    options.collectives = options.collectives && s != "collectives";
    options.overlap = options.overlap && s != "overlap";
  }
  const bool multi = env.world_size > 1;
  std::string no_gpu;
  const int devices = probe::gpu::device_count(no_gpu);
  if (multi) {
    // one process per GPU: the collectives across the job; the node's own kernels come from a single-node run
    options.ranks = env.world_size;
    options.nodes = env.nodes;
    options.layers = options.gemm = options.device = options.selection = options.low_rank = false;
  } else {
    options.ranks = gpus > 0 ? gpus : devices > 0 ? devices : 1;
    options.nodes = 1;
  }
  const auto list = probe::measurements(plan, options);

  if (dry_run) {
    if (env.rank != 0)
      return 0;
    std::map<std::string, int> per_group;
    for (std::size_t i = 0; i < list.size(); ++i) {
      std::printf("%4zu  %s\n", i + 1, list[i].label.c_str());
      ++per_group[probe::group_name(list[i].group)];
    }
    std::printf("%zu measurements for %s (%s, batch %lld, %s) on %d GPU%s, %d node%s:", list.size(),
                plan.scenario.c_str(), plan.model.c_str(), static_cast<long long>(plan.batch_per_gpu),
                probe::dtype_name(options.dtype), options.ranks, options.ranks == 1 ? "" : "s", options.nodes,
                options.nodes == 1 ? "" : "s");
    for (const auto& [group, n] : per_group)
      std::printf(" %s %d", group.c_str(), n);
    std::printf("\n");
    if (options.ranks < 2 && (options.collectives || options.overlap))
      std::printf("no collectives or overlap with one GPU%s\n",
                  devices > 0 ? "" : " (no GPU here: --gpus N lists them for N GPUs)");
    return 0;
  }
  if (devices < 0) {
    std::fprintf(stderr,
                 "ddlsim-probe: no CUDA GPU (%s): run it on a GPU node, or list what it would measure with "
                 "--dry-run\n",
                 no_gpu.c_str());
    return 3;
  }
  if (!multi && options.ranks > devices) {
    std::fprintf(stderr, "ddlsim-probe: --gpus %d but this node has %d visible GPU%s\n", options.ranks, devices,
                 devices == 1 ? "" : "s");
    return 2;
  }
  if (multi && devices > 1 && env.local_rank >= devices) {
    std::fprintf(stderr, "ddlsim-probe: local rank %d has no GPU (this node has %d visible)\n", env.local_rank,
                 devices);
    return 2;
  }

  probe::gpu::Communicator comm;
  comm.rank = env.rank;
  comm.world_size = env.world_size;
  comm.local_rank = env.local_rank;
  // one process per GPU: its local rank's GPU, or the one GPU it sees (srun --gpus-per-task 1)
  const int device = multi && devices > 1 ? env.local_rank : 0;
  try {
    if (multi && (options.collectives || options.overlap)) {
      if (env.rank == 0) {
        comm.unique_id = probe::gpu::nccl_unique_id();
        if (!env.id_file.empty()) {
          probe::publish_id_file(env.id_file, comm.unique_id);
        } else {
          probe::IdServer server(env.port);
          server.serve(comm.unique_id, env.world_size - 1, kRendezvousTimeoutS);
        }
      } else {
        comm.unique_id = env.id_file.empty() ? probe::fetch_id(env.master_host, env.port, kRendezvousTimeoutS)
                                             : probe::read_id_file(env.id_file, probe::gpu::nccl_unique_id().size(),
                                                                   kRendezvousTimeoutS);
      }
    }
  } catch (const probe::RendezvousError& e) {
    std::fprintf(stderr, "ddlsim-probe: rank %d: %s\n", env.rank, e.what());
    return 2;
  }

  probe::ProbeResults results;
  results.plan = plan;
  results.options = options;
  results.rule.min_time_s = min_time_s;
  results.rule.timeout_s = timeout_s;
  results.processes = env.world_size;
  try {
    results.device = probe::gpu::describe(device);
    const auto context = probe::gpu::open(device, results.plan, options, comm);
    const bool talk = env.rank == 0;
    if (talk)
      std::printf("ddlsim-probe: %s (sm %d.%d, driver %s), %zu measurements\n", results.device.name.c_str(),
                  results.device.compute_capability_major, results.device.compute_capability_minor,
                  results.device.driver_version.c_str(), list.size());
    for (std::size_t i = 0; i < list.size(); ++i) {
      probe::gpu::Result r;
      try {
        r = context->run(list[i], results.rule);
      } catch (const std::exception& e) {
        // NCCL's ranks may be out of step after a failure: stop; a kernel on this GPU alone: record it and go on
        if (list[i].group == probe::Group::collective || list[i].group == probe::Group::overlap)
          throw;
        if (talk)
          std::printf("[%zu/%zu] %s: FAILED: %s\n", i + 1, list.size(), list[i].label.c_str(), e.what());
        results.failures.push_back({list[i], e.what()});
        continue;
      }
      if (talk) {
        std::printf("[%zu/%zu] %s: median %s (%d samples, noise %.2f %%%s)%s%s\n", i + 1, list.size(),
                    list[i].label.c_str(), human_time(r.stats.median_s).c_str(), r.stats.samples, 100 * r.stats.noise,
                    r.stats.converged ? "" : ", timed out", r.note.empty() ? "" : "; ", r.note.c_str());
        std::fflush(stdout);
      }
      results.entries.push_back({list[i], std::move(r)});
    }
    if (multi && env.rank == 0 && !env.id_file.empty())
      std::filesystem::remove(env.id_file);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddlsim-probe: rank %d: %s\n", env.rank, e.what());
    return 1;
  }
  if (env.rank != 0)
    return 0;
  const std::string host = hostname();
  for (int r = 0; r < options.ranks; ++r)
    results.hosts.push_back(multi && r / env.local_world_size != 0 ? "node" + std::to_string(r / env.local_world_size)
                                                                   : host);
  try {
    probe::write_file_atomic(out, probe::probe_json(results));
    std::printf("wrote %s\n", out.c_str());
    if (!results.failures.empty())
      std::printf("%zu measurement%s failed (listed under \"failed\" in %s)\n", results.failures.size(),
                  results.failures.size() == 1 ? "" : "s", out.c_str());
    const std::string text = probe::nccl_tests_text(results);
    if (!text.empty()) {
      if (nccl_out.empty()) {
        std::filesystem::path p(out);
        nccl_out = (p.parent_path() / p.stem()).string() + ".nccl-tests.txt";
      }
      probe::write_file_atomic(nccl_out, text);
      std::printf("wrote %s (nccl-tests' format)\n", nccl_out.c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddlsim-probe: %s\n", e.what());
    return 2;
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddlsim-probe: internal error: %s\n", e.what());
    return 1;
  }
}
