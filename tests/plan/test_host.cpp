// Host threads (sim/plan/host.hpp, issue #12): every GPU task waits for the host thread that issues it, the host
// issues one task after the other, and when the host is the bottleneck a faster GPU does not shorten the step.
// Schedules computed by hand below; both engines; the measured step and trace beside the prediction.
#include "core/io.hpp"
#include "sim/analytic/analytic.hpp"
#include "sim/flow/flow_engine.hpp"
#include "sim/report/report.hpp"
#include "sim/spec/scenario.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

using namespace ddlsim;
using namespace ddlsim::sim;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;

namespace {

// Two calibrated layers (forward 1, 3 ms; backward 2, 4 ms), no copy, no update time: GPU tasks h2d, fwd a, fwd b,
// bwd b, bwd a, update.
Json host_doc(int nodes = 1) {
  Json doc = Json::parse(R"({
    "model": {"layers": [{"name": "a", "params": 1000000, "fwd_flops": 1},
                          {"name": "b", "params": 2000000, "fwd_flops": 1}],
              "batch_per_gpu": 4},
    "calibration": {"format": "ddlsim-calibration", "version": 2, "batch_per_gpu": 4,
                    "layers": {"a": {"forward": "1 ms", "backward": "2 ms"},
                               "b": {"forward": "3 ms", "backward": "4 ms"}}},
    "gpu": {},
    "cluster": {"gpus_per_node": 1, "inter_node": {"bandwidth": "1 GB/s", "latency": "50 us"}},
    "strategy": {"kind": "bsp"}
  })");
  doc["cluster"]["nodes"] = nodes;
  return doc;
}

std::size_t launches_of_kind(const RunResult& r, dag::TaskKind kind) {
  std::size_t n = 0;
  for (std::size_t v = 0; v < r.graph.size(); ++v)
    n += r.graph.task(v).kind == kind ? 1 : 0;
  return n;
}

} // namespace

TEST_CASE("host: a host thread slower than the GPU sets the step", "[plan][host]") {
  Json doc = host_doc();
  doc["host"] = {{"launch", "2 ms"}};
  SECTION("each GPU task starts when its launch ends; the iteration is the steady state") {
    // Host times given: two iterations unrolled. Iteration 0: launches [0,2] h2d, [2,4] fwd a, [4,6] fwd b, [6,8]
    // bwd b, [8,10] bwd a, [10,12] update. GPU: h2d at 2 (no copy), fwd a [4,5], fwd b [6,9], bwd b [9,13], bwd a
    // [13,15], update at 15. Iteration 1: launches from 12, h2d [12,14] (runs at 15, after the update), fwd a
    // [14,16] -> GPU [16,17], fwd b -> [18,21], bwd b -> [21,25], bwd a -> [25,27], update launch [22,24], update at
    // 27. The period 27 - 15 = 12 ms is the host's, not the 15 ms of one iteration alone.
    const auto r = run_analytic(parse_scenario(doc, "t.json"));
    CHECK_THAT(r.iteration_time_s, WithinRel(12e-3, 1e-12));
    CHECK(launches_of_kind(r, dag::TaskKind::launch) == 2 * 6);
    CHECK_THAT(r.breakdown.compute_s, WithinRel(10e-3, 1e-12)); // over the window [15, 27]
    CHECK_THAT(r.breakdown.idle_s, WithinRel(2e-3, 1e-9));
    CHECK_THAT(r.single_gpu_iteration_s, WithinRel(12e-3, 1e-12));
    CHECK_THAT(r.notes.front(), Catch::Contains("2 iterations are unrolled"));
  }
  SECTION("a GPU twice as fast: the host's 12 ms bound it") {
    // Iteration 0: fwd a [4,4.5], fwd b [6,7.5], bwd b [8,10], bwd a [10,11], update at 12 (its launch ends at 12);
    // iteration 1 the same 12 ms later: still 12 ms.
    doc["gpu"]["speedup"] = 2;
    const auto r = run_analytic(parse_scenario(doc, "t.json"));
    CHECK_THAT(r.iteration_time_s, WithinRel(12e-3, 1e-12));
    CHECK_THAT(r.breakdown.compute_s, WithinRel(5e-3, 1e-12));
    REQUIRE(!r.notes.empty());
    CHECK_THAT(r.notes.back(), Catch::Contains("host-bound") && Catch::Contains("12 ms"));
  }
  SECTION("no host: \"0 s\" adds no task") {
    doc["host"]["launch"] = "0 s";
    const auto r = run_analytic(parse_scenario(doc, "t.json"));
    CHECK_THAT(r.iteration_time_s, WithinRel(10e-3, 1e-12));
    CHECK(launches_of_kind(r, dag::TaskKind::launch) == 0);
  }
}

TEST_CASE("host: measured host times per layer, optimizer and iteration from a calibration", "[plan][host]") {
  Json doc = host_doc();
  auto& c = doc["calibration"];
  c["layers"]["a"]["forward_host"] = "0.5 ms";
  c["layers"]["a"]["backward_host"] = "6 ms";
  c["layers"]["b"]["forward_host"] = "4 ms";
  c["host"] = {{"launch", "1 ms"}, {"iteration", "3 ms"}};
  c["optimizer"] = {{"gpu", "2 ms"}, {"host", "1.5 ms"}};
  // Host: iteration [0,3], h2d [3,4] (one launch), fwd a [4,4.5], fwd b [4.5,8.5], bwd b [8.5,9.5] (no backward_host:
  // one launch), bwd a [9.5,15.5], update [15.5,17]. GPU: fwd a [4.5,5.5], fwd b [8.5,11.5], bwd b [11.5,15.5],
  // bwd a [15.5,17.5], update (2 ms, not scaled) [17.5,19.5]. Iteration 1: host [17,34] (17 ms), h2d at 21, fwd a
  // [21.5,22.5], fwd b [25.5,28.5], bwd b [28.5,32.5], bwd a [32.5,34.5], update [34.5,36.5]: period 17 ms.
  const auto r = run_analytic(parse_scenario(doc, "t.json"));
  CHECK_THAT(r.iteration_time_s, WithinRel(17e-3, 1e-12));
  CHECK(launches_of_kind(r, dag::TaskKind::launch) == 2 * 7);
  SECTION("host times do not scale with the batch; GPU times do") {
    // GPU 22 ms per iteration, now slower than the host's 17: iteration 0 as before up to fwd a [4.5,6.5], fwd b
    // [8.5,14.5], bwd b [14.5,22.5], bwd a [22.5,26.5], update [26.5,28.5]; iteration 1 from 28.5 to 50.5.
    doc["model"]["batch_per_gpu"] = 8;
    const auto twice = run_analytic(parse_scenario(doc, "t.json"));
    CHECK_THAT(twice.iteration_time_s, WithinRel(22e-3, 1e-12));
  }
  SECTION("version 1 cannot give host times") {
    c["version"] = 1;
    c.erase("host");
    c.erase("optimizer");
    CHECK_THROWS_WITH(parse_scenario(doc, "t.json"),
                      Catch::Contains("/calibration/layers/a") || Catch::Contains("forward_host"));
  }
}

TEST_CASE("host: a data load without prefetching holds the thread that issues the copy", "[plan][host]") {
  Json doc = host_doc();
  doc["host"] = {{"launch", "1 ms"}};
  doc["data"] = {{"loading_per_sample", "2 ms"}, {"prefetch", false}};
  // Load [0,8] (4 samples), then launches from 8: h2d [8,9], fwd a [9,10] -> GPU fwd a [10,11], fwd b [11,14],
  // bwd b [14,18], bwd a [18,20]; update launch [13,14], update at 20. The same thread then loads the next batch
  // [14,22] (after its last launch, not after the GPU), launches from 22: fwd a [24,25], ..., update at 34. The
  // period is the thread's 8 + 6 ms; loading after the GPU's 10 ms would give 18 ms.
  const auto r = run_analytic(parse_scenario(doc, "t.json"));
  CHECK_THAT(r.iteration_time_s, WithinRel(14e-3, 1e-12));
  REQUIRE(!r.notes.empty());
  CHECK_THAT(r.notes.back(), Catch::Contains("host-bound") && Catch::Contains("loads its batches"));
}

TEST_CASE("host: collectives are issued by the host too, and both engines agree", "[plan][host][flow]") {
  Json doc = host_doc(4);
  doc["strategy"]["kind"] = "wfbp";
  doc["host"] = {{"launch", "2 ms"}};
  const auto analytic = run_analytic(parse_scenario(doc, "t.json"));
  // h2d, 2 forwards, 2 backwards, update and one allreduce per layer's gradient, in each of two iterations.
  CHECK(launches_of_kind(analytic, dag::TaskKind::launch) == 2 * 8);
  doc["engine"] = "flow";
  doc["flow"] = {{"symmetry", "off"}}; // every GPU simulated
  const auto flow = run_flow(parse_scenario(doc, "t.json"));
  CHECK_THAT(flow.iteration_time_s, WithinRel(analytic.iteration_time_s, 1e-4));
  // Every simulated GPU's host thread ran its launches.
  std::size_t launches = launches_of_kind(flow, dag::TaskKind::launch) * (1 + flow.replicas.size());
  CHECK(launches == 2 * 8 * 4);
}

TEST_CASE("host: a pipeline's passes are issued layer by layer while they run", "[plan][host][pipeline]") {
  // 4 layers on 2 stages, 1F1B, 4 micro-batches. A host thread far slower than the GPU bounds each stage by its host
  // time: per micro-batch 2 layers x (forward + backward) launches, plus the copy (stage 0), the transfers and the
  // update, all at 10 ms.
  Json doc = Json::parse(R"({
    "model": {"layers": [{"name": "l0", "params": 1000, "fwd_flops": 1}, {"name": "l1", "params": 1000, "fwd_flops": 1},
                          {"name": "l2", "params": 1000, "fwd_flops": 1}, {"name": "l3", "params": 1000, "fwd_flops": 1}],
              "batch_per_gpu": 1},
    "calibration": {"format": "ddlsim-calibration", "version": 2, "batch_per_gpu": 1,
                    "layers": {"l0": {"forward": "1 us", "backward": "2 us"}, "l1": {"forward": "1 us", "backward": "2 us"},
                               "l2": {"forward": "1 us", "backward": "2 us"}, "l3": {"forward": "1 us", "backward": "2 us"}}},
    "gpu": {},
    "cluster": {"nodes": 1, "gpus_per_node": 2, "intra_node": {"bandwidth": "100 GB/s", "latency": "1 us"}},
    "strategy": {"kind": "bsp"}, "host": {"launch": "10 ms"},
    "parallelism": {"pipeline": 2}, "pipeline": {"schedule": "1f1b", "micro_batches": 4, "partition": [2, 2]}
  })");
  const auto r = run_analytic(parse_scenario(doc, "t.json"));
  double host_stage0 = 0;
  for (std::size_t v = 0; v < r.graph.size(); ++v)
    if (r.graph.task(v).resource == dag::Resource::host_thread && r.graph.task(v).device == dag::Device::gpu(0))
      host_stage0 += r.graph.task(v).duration_s;
  // Stage 0: 4 x (copy + 2 forward + 2 backward layers + send activation + receive gradient... as its transfers) and
  // the update: every pass issues 2 layers' worth, 20 ms.
  CHECK(host_stage0 >= 4 * (10e-3 + 20e-3 + 20e-3) + 10e-3);
  CHECK(r.iteration_time_s >= host_stage0);
  CHECK(r.iteration_time_s < host_stage0 + 0.1); // the GPU adds microseconds, the other stage's host the rest
}

TEST_CASE("host: the measured step is reported and its trace shown beside the simulated one", "[plan][host][report]") {
  const auto dir = std::filesystem::temp_directory_path() / "ddlsim_test_host_measured";
  std::filesystem::create_directories(dir);
  write_file_atomic(
      (dir / "step.json").string(),
      R"({"traceEvents": [{"ph": "M", "name": "process_name", "pid": 7, "tid": 0, "args": {"name": "python"}},
                                        {"ph": "X", "name": "aten::conv2d", "pid": 7, "tid": 1, "ts": 0, "dur": 900},
                                        {"ph": "X", "name": "volta_scudnn", "pid": 0, "tid": 7, "ts": 10, "dur": 950},
                                        {"ph": "i", "name": "ignored", "pid": 7, "tid": 1, "ts": 5}]})");
  Json doc = host_doc();
  doc["measured"] = {{"iteration", "10.5 ms"}, {"timeline", "step.json"}, {"source", "test"}};
  const auto s = parse_scenario(doc, (dir / "t.json").string());
  const auto r = run_analytic(s);
  const auto summary = summary_json(s, r);
  CHECK_THAT(summary["measured_iteration_s"].get<double>(), WithinRel(10.5e-3, 1e-12));
  const auto timeline = timeline_json(s, r);
  std::size_t traced = 0, named = 0;
  for (const auto& e : timeline["traceEvents"]) {
    if (e["ph"] == "M" && e["args"]["name"].get<std::string>().starts_with("traced: "))
      ++named;
    if (e["ph"] == "X" && (e["name"] == "aten::conv2d" || e["name"] == "volta_scudnn"))
      ++traced;
  }
  CHECK(traced == 2);
  CHECK(named == 2); // "traced: python" and "traced: process 1" for the GPU's pid 0
  SECTION("a missing trace is an input error naming the key") {
    doc["measured"]["timeline"] = "absent.json";
    CHECK_THROWS_WITH(parse_scenario(doc, (dir / "t.json").string()), Catch::Contains("/measured/timeline"));
  }
  std::filesystem::remove_all(dir);
}
