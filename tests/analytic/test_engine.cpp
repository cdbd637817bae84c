// sim analytic engine: closed-form iteration times on small calibrated models, MG-WFBP never slower than WFBP
// or BSP on zoo models, single-GPU measurements reproduced exactly, breakdown invariants.
#include "sim/analytic/analytic.hpp"
#include "sim/spec/scenario.hpp"

#include <catch2/catch.hpp>

using namespace ddlsim;
using namespace ddlsim::sim;
using Catch::Matchers::WithinRel;

namespace {

// Two layers with calibrated times (forward 1, 3 ms; backward 2, 4 ms), no roofline: update and copy cost 0; no host
// launches (their own cases below).
Json calibrated_two_layers(const std::string& strategy) {
  Json doc = Json::parse(R"({
    "model": {"layers": [{"name": "a", "params": 1000000, "fwd_flops": 1},
                          {"name": "b", "params": 2000000, "fwd_flops": 1}],
              "batch_per_gpu": 4},
    "gpu": {"calibration": {"batch_per_gpu": 4,
                            "layers": {"a": {"forward": "1 ms", "backward": "2 ms"},
                                       "b": {"forward": "3 ms", "backward": "4 ms"}}}},
    "cluster": {"nodes": 4, "gpus_per_node": 1, "inter_node": {"bandwidth": "1 GB/s", "latency": "50 us"}},
    "strategy": {"kind": "wfbp"}, "host": {"launch": "0 s"}
  })");
  doc["strategy"]["kind"] = strategy;
  return doc;
}

double ring(double bytes) {
  return 2 * 3 * 100e-6 + 2.0 * 3 / 4 * bytes / 1e9;
} // p = 4, a = 2 x 50 us

} // namespace

TEST_CASE("sim::analytic engine matches hand-computed schedules", "[sim][engine]") {
  SECTION("bsp: compute, then one allreduce of 12 MB") {
    const auto r = run_analytic(parse_scenario(calibrated_two_layers("bsp"), "t.json"));
    CHECK_THAT(r.iteration_time_s, WithinRel(10e-3 + ring(12e6), 1e-12));
    CHECK_THAT(r.single_gpu_iteration_s, WithinRel(10e-3, 1e-12));
    CHECK_THAT(r.communication_bytes_per_worker, WithinRel(2.0 * 3 / 4 * 12e6, 1e-12));
  }
  SECTION("wfbp: b's gradient (8 MB) goes at 8 ms while a's backward runs, a's (4 MB) after both") {
    // forward 4 ms, b backward ends at 8 ms, a backward at 10 ms; ring(8 MB) = 12.6 ms > 2 ms
    const auto r = run_analytic(parse_scenario(calibrated_two_layers("wfbp"), "t.json"));
    CHECK_THAT(r.iteration_time_s, WithinRel(8e-3 + ring(8e6) + ring(4e6), 1e-12));
    CHECK_THAT(r.breakdown.exposed_communication_s, WithinRel(r.iteration_time_s - 10e-3, 1e-9));
    REQUIRE(r.groups.size() == 2);
    CHECK(r.groups[0].bytes == 8e6);
  }
  SECTION("mg-wfbp merges the two: one start-up saved is better than 2 ms of overlap lost? Check the optimum") {
    const auto r = run_analytic(parse_scenario(calibrated_two_layers("mg-wfbp"), "t.json"));
    const double separate = 8e-3 + ring(8e6) + ring(4e6), merged = 10e-3 + ring(12e6);
    CHECK_THAT(r.iteration_time_s, WithinRel(std::min(separate, merged), 1e-12));
  }
}

TEST_CASE("sim::MgWfbp is never slower than WFBP or BSP on zoo models", "[sim][engine][mgwfbp]") {
  auto [model, nodes, gpus, bandwidth, latency, algorithm] =
      GENERATE(table<const char*, int, int, const char*, const char*, const char*>({
          {"resnet50", 2, 4, "10 Gbps", "25 us", "ring"},
          {"resnet50", 16, 1, "1 Gbps", "50 us", "ring"},
          {"vgg16", 4, 4, "100 Gbps", "2 us", "hierarchical"},
          {"googlenet", 8, 1, "10 Gbps", "25 us", "halving-doubling"},
          {"bert-base", 4, 8, "100 Gbps", "5 us", "tree"},
          {"alexnet", 32, 1, "10 Gbps", "100 us", "ring"},
      }));
  CAPTURE(model, nodes, gpus, bandwidth, algorithm);
  Json doc = Json::parse(R"({"model": {"batch_per_gpu": 32}, "gpu": {"preset": "V100-SXM2-32GB"},
                             "cluster": {"intra_node": {"bandwidth": "150 GB/s", "latency": "1 us"}},
                             "strategy": {"kind": "wfbp"}})");
  doc["model"]["zoo"] = model;
  doc["cluster"]["nodes"] = nodes;
  doc["cluster"]["gpus_per_node"] = gpus;
  doc["cluster"]["inter_node"] = {{"bandwidth", bandwidth}, {"latency", latency}};
  doc["collectives"]["allreduce"] = algorithm;
  auto time_of = [&](const char* kind) {
    doc["strategy"]["kind"] = kind;
    return run_analytic(parse_scenario(doc, "t.json")).iteration_time_s;
  };
  const double mg = time_of("mg-wfbp");
  CHECK(mg <= time_of("wfbp") * (1 + 1e-12));
  CHECK(mg <= time_of("bsp") * (1 + 1e-12));
  CHECK(mg <= time_of("ddp") * (1 + 1e-12));
}

TEST_CASE("sim::analytic engine reproduces a measured single-GPU iteration", "[sim][engine]") {
  Json doc = Json::parse(R"({"model": {"zoo": "resnet50", "batch_per_gpu": 64},
                             "gpu": {"preset": "V100-SXM2-32GB", "single_gpu_iteration": "252.9 ms"},
                             "cluster": {"nodes": 1, "gpus_per_node": 1}, "strategy": {"kind": "wfbp"},
                             "host": {"launch": "0 s"}})");
  auto r = run_analytic(parse_scenario(doc, "t.json"));
  CHECK_THAT(r.iteration_time_s, WithinRel(0.2529, 1e-12));
  // With the default launch (5 us per GPU task), the host issues the copy before anything runs: one launch later.
  doc.erase("host");
  r = run_analytic(parse_scenario(doc, "t.json"));
  CHECK_THAT(r.iteration_time_s, WithinRel(0.2529 + 5e-6, 1e-12));
  CHECK_THAT(r.scaling_efficiency, WithinRel(1.0, 1e-12));
  CHECK(r.groups.empty());
  CHECK(r.compute_source == "single_gpu_iteration");
  // Backward is twice the forward when spread by FLOPs (docs/engines.md, "Where the numbers come from"): compare the
  // two sums.
  double fwd = 0, bwd = 0;
  for (std::size_t v = 0; v < r.graph.size(); ++v) {
    if (r.graph.task(v).kind == dag::TaskKind::forward)
      fwd += r.graph.task(v).duration_s;
    if (r.graph.task(v).kind == dag::TaskKind::backward)
      bwd += r.graph.task(v).duration_s;
  }
  CHECK_THAT(bwd, WithinRel(2 * fwd, 1e-9));
}

TEST_CASE("sim::breakdown accounts for the whole iteration", "[sim][engine]") {
  const auto kind = GENERATE("bsp", "wfbp", "ddp", "fusion", "mg-wfbp");
  CAPTURE(kind);
  auto s = load_scenario(std::string(DDLSIM_SOURCE_DIR) + "/scenarios/quickstart.json",
                         {std::string("strategy.kind=") + kind});
  const auto r = run_analytic(s);
  const auto& b = r.breakdown;
  CHECK_THAT(b.compute_s + b.compression_s + b.exposed_communication_s + b.idle_s,
             WithinRel(r.iteration_time_s, 1e-12));
  double busy = 0; // forward, backward and update run one at a time on the GPU stream
  for (std::size_t v = 0; v < r.graph.size(); ++v) {
    const auto k = r.graph.task(v).kind;
    if (k == dag::TaskKind::forward || k == dag::TaskKind::backward || k == dag::TaskKind::update)
      busy += r.graph.task(v).duration_s;
  }
  CHECK_THAT(b.compute_s, WithinRel(busy, 1e-9));
  CHECK(r.iteration_time_s >= r.single_gpu_iteration_s);
  CHECK(r.critical_path_s <= r.iteration_time_s * (1 + 1e-12)); // resources can only delay
  CHECK(r.critical_path_s >= r.single_gpu_iteration_s * (1 - 1e-12));
  std::int64_t elements = 0;
  for (const auto& g : r.groups)
    elements += g.elements;
  CHECK(elements == 25557032);
}
