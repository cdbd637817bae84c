// A calibration's measured collectives (version 2) in place of the algorithm's closed form (issue #12): the table
// interpolated inside its sizes, the alpha-beta segments outside them, only for the communicator measured; the notes
// say which were used and what was extrapolated.
#include "sim/analytic/analytic.hpp"
#include "sim/flow/flow_engine.hpp"
#include "sim/network/lowering/evaluate.hpp"
#include "sim/plan/prepare.hpp"
#include "sim/spec/scenario.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

using namespace ddlsim;
using namespace ddlsim::sim;
using Catch::Matchers::WithinRel;

namespace {

// 2 nodes x 8 GPUs, bsp: one allreduce of the model's gradient, 4 bytes per parameter.
Json measured_doc(std::int64_t parameters, int nodes = 2) {
  Json doc = Json::parse(R"({
    "name": "measured",
    "model": {"layers": [{"name": "l0", "fwd_flops": "1 GFLOP"}], "batch_per_gpu": 8},
    "gpu": {"peak_flops": "100 TFLOPS", "memory_bandwidth": "2 TB/s"},
    "cluster": {"gpus_per_node": 8, "intra_node": {"bandwidth": "300 GB/s", "latency": "1 us"},
                "inter_node": {"bandwidth": "100 Gbps", "latency": "5 us"}},
    "strategy": {"kind": "bsp"},
    "calibration": {"format": "ddlsim-calibration", "version": 2, "source": "test",
      "collectives": [{"collective": "allreduce", "ranks": 16, "nodes": 2,
        "table": [["1048576 B", "0.0002 s"], ["4194304 B", "0.0003566 s"], ["16777216 B", "0.0008 s"]],
        "segments": [{"first_size": "1048576 B", "last_size": "16777216 B", "alpha": "0.0002 s",
                      "beta": "3.6e-11 s/B", "points": 3, "mean_relative_error": 0.01,
                      "max_relative_error": 0.02}]}]}
  })");
  doc["model"]["layers"][0]["params"] = parameters;
  doc["cluster"]["nodes"] = nodes;
  return doc;
}

double allreduce_s(const RunResult& r) {
  for (std::size_t v = 0; v < r.graph.size(); ++v)
    if (dag::collective_of(r.graph.task(v)) == Collective::allreduce)
      return r.graph.task(v).duration_s;
  FAIL("no allreduce");
  return 0;
}

bool noted(const RunResult& r, const std::string& phrase) {
  for (const auto& n : r.notes)
    if (n.find(phrase) != std::string::npos)
      return true;
  return false;
}

} // namespace

TEST_CASE("calibration: a measured collective replaces the algorithm for its communicator", "[calibration][measured]") {
  // 4 MiB, a measured size: exactly the measurement.
  const auto at = run_analytic(parse_scenario(measured_doc(1048576), "m.json"));
  CHECK(allreduce_s(at) == 0.0003566);
  CHECK(noted(at, "measured allreduce over 16 ranks on 2 nodes (<inline>) timed 1 collective"));
  CHECK_FALSE(noted(at, "extrapolated"));
  // 2 MiB, between 1 and 4 MiB: a third of the way.
  const auto between = run_analytic(parse_scenario(measured_doc(524288), "m.json"));
  CHECK_THAT(allreduce_s(between), WithinRel(0.0002 + (0.0003566 - 0.0002) / 3, 1e-12));
  // 64 MiB, beyond the table: the segment, flagged.
  const auto beyond = run_analytic(parse_scenario(measured_doc(16777216), "m.json"));
  CHECK_THAT(allreduce_s(beyond), WithinRel(0.0002 + 3.6e-11 * 67108864, 1e-12));
  CHECK(noted(beyond, "1 of them outside its measured sizes (1 MiB .. 16 MiB), extrapolated"));
  // 4 nodes x 8 GPUs: 8 GPUs per node across nodes as measured, 32 ranks instead of 16: the bus bandwidth kept
  // (factor 2 (p - 1) / p), the start-up (the segment's alpha, 200 us) scaled by a ring's 2 (p - 1) steps.
  const auto wider = run_analytic(parse_scenario(measured_doc(1048576, 4), "m.json"));
  CHECK_THAT(allreduce_s(wider), WithinRel(0.0002 * 62 / 30 + (0.0003566 - 0.0002) * (62.0 / 32) / (30.0 / 16), 1e-12));
  CHECK(noted(wider, "measured allreduce over 16 ranks on 2 nodes (<inline>) timed 1 collective over 32 ranks, its "
                     "bus bandwidth kept"));
  // One node of 8 GPUs is another fabric (no NIC on the path): the ring's closed form, no note.
  auto one_node = measured_doc(1048576, 1);
  const auto other = run_analytic(parse_scenario(one_node, "m.json"));
  const auto alone = parse_scenario(one_node, "m.json");
  CHECK_THAT(
      allreduce_s(other),
      WithinRel(make_cost_model(*alone.allreduce.algorithm, alone.cluster.network())->cost(4194304).time_s, 1e-12));
  CHECK_FALSE(noted(other, "measured allreduce"));
}

TEST_CASE("calibration: the flow engine's links reproduce a measured allreduce over the whole cluster",
          "[calibration][measured][flow]") {
  // One segment, alpha 200 us and beta 3.6e-11 s/B, over 16 ranks: a ring of 30 steps on inter-node links of
  // 30 / (16 x 3.6e-11) B/s and 200 / 30 / 2 us each (a hop crosses two NIC links); the intra-node links (300 GB/s,
  // 1 us) are faster, so every step takes the inter-node hop's time: T = alpha + beta n at any size, here 64 MiB
  // (one SimGrid engine per process: one flow run per test case).
  auto doc = measured_doc(16777216);
  doc["engine"] = "flow";
  const auto flow = run_flow(parse_scenario(doc, "m.json"));
  CHECK_THAT(allreduce_s(flow), WithinRel(0.0002 + 3.6e-11 * 67108864, 1e-6));
  CHECK(noted(flow, "the flow engine's inter-node links take"));
  CHECK_FALSE(noted(flow, "measured allreduce over")); // the analytic engine's note
}

TEST_CASE("calibration: the flow engine keeps the scenario's links for an algorithm other than the ring",
          "[calibration][measured][flow]") {
  auto doc = measured_doc(1048576);
  doc["collectives"] = {{"allreduce", "tree"}};
  doc["engine"] = "flow";
  const auto tree = run_flow(parse_scenario(doc, "m.json"));
  CHECK(noted(tree, "replayed by the analytic engine only"));
}

TEST_CASE("calibration: one of gpu.calibration and the top-level calibration", "[calibration][measured]") {
  auto doc = measured_doc(1048576);
  doc["gpu"]["calibration"] = doc["calibration"];
  try {
    (void)parse_scenario(doc, "m.json");
    FAIL("both calibrations were accepted");
  } catch (const InputError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("/gpu/calibration") && Catch::Contains("keep one"));
  }
}
