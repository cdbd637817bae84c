// Sparsification strategies on the analytic engine (dag/compression.hpp, sim/network/lowering/global_topk_tree.cpp):
// the communication of topk and gtopk is the gTop-k paper's cost model, the compression kernels are their documented
// memory traffic at the GPU's effective bandwidth, and on a slow network gTop-k scales better than Top-k, which
// scales better than the dense allreduce.
#include "dag/compression.hpp"
#include "sim/cli/run.hpp"
#include "sim/report/report.hpp"
#include "sim/spec/scenario.hpp"

#include <catch2/catch.hpp>

#include <cmath>

using namespace ddlsim;
using namespace ddlsim::sim;
using Catch::Matchers::WithinRel;

namespace {

// ResNet-50 on p single-GPU workers of a star over 1 GbE (the gTop-k paper's setting).
Scenario resnet50(int p, const std::string& kind, double density = 0.001) {
  Json doc = Json::parse(R"({"model": {"zoo": "resnet50", "batch_per_gpu": 32},
    "gpu": {"preset": "V100-SXM2-32GB", "efficiency": 0.642},
    "cluster": {"gpus_per_node": 1, "inter_node": {"bandwidth": "1 Gbps", "latency": "25 us"}},
    "strategy": {}})");
  doc["cluster"]["nodes"] = p;
  doc["strategy"]["kind"] = kind;
  if (kind == "topk" || kind == "gtopk")
    doc["strategy"]["density"] = density;
  return parse_scenario(doc, "sparse.json");
}

const dag::Task& only(const RunResult& r, dag::TaskKind kind, int nth = 0) {
  for (std::size_t v = 0; v < r.graph.size(); ++v)
    if (r.graph.task(v).kind == kind && nth-- == 0)
      return r.graph.task(v);
  FAIL("no such task");
  throw std::logic_error("unreachable");
}

} // namespace

TEST_CASE("sim::topk and gtopk communicate as the gTop-k paper's cost model", "[sim][sparse]") {
  const double density = GENERATE(0.001, 0.01);
  const double a = 2 * 25e-6, b = 4 / 1.25e8; // per message (two NIC links), per 4-byte element
  for (int p : {2, 4, 8, 16, 32}) {
    CAPTURE(density, p);
    const double lg = std::log2(p);
    const auto topk = run_scenario(resnet50(p, "topk", density));
    const auto gtopk = run_scenario(resnet50(p, "gtopk", density));
    REQUIRE(topk.groups.size() == 1);
    const double m = static_cast<double>(topk.groups[0].elements);
    const double k = static_cast<double>(dag::selected_of(topk.groups[0]));
    CHECK(k == std::ceil(density * m));
    // 2k elements per message: k values and k int32 indices.
    CHECK_THAT(only(topk, dag::TaskKind::communication).duration_s, WithinRel(lg * a + 2 * (p - 1) * k * b, 1e-12));
    CHECK_THAT(only(gtopk, dag::TaskKind::communication).duration_s, WithinRel(2 * lg * a + 4 * lg * k * b, 1e-12));
    CHECK(dag::collective_of(only(gtopk, dag::TaskKind::communication)) == dag::Collective::global_topk);
    // Rank 0 of gTop-k's tree sends the global top-k log2 p times; Top-k's allgather sends p - 1 blocks.
    CHECK_THAT(gtopk.communication_bytes_per_worker, WithinRel(lg * 8 * k, 1e-12));
    CHECK_THAT(topk.communication_bytes_per_worker, WithinRel((p - 1) * 8 * k, 1e-12));
  }
}

TEST_CASE("sim::compression kernels cost their memory traffic and count as compression", "[sim][sparse]") {
  const auto r = run_scenario(resnet50(32, "gtopk"));
  const double bw = 900e9 * 0.642; // V100-SXM2 memory bandwidth x efficiency
  const double m = static_cast<double>(r.groups[0].elements), k = static_cast<double>(dag::selected_of(r.groups[0]));
  // Error feedback 4 m e, radix select 36 m e + k pairs, six kernels; decompression clears m e and adds k pairs,
  // two kernels; 5 us per launch.
  CHECK_THAT(only(r, dag::TaskKind::compression, 0).duration_s, WithinRel((40 * m * 4 + 8 * k) / bw + 6 * 5e-6, 1e-12));
  CHECK_THAT(only(r, dag::TaskKind::compression, 1).duration_s, WithinRel((m * 4 + k * 16) / bw + 2 * 5e-6, 1e-12));
  CHECK_THAT(r.breakdown.compression_s, WithinRel(only(r, dag::TaskKind::compression, 0).duration_s +
                                                      only(r, dag::TaskKind::compression, 1).duration_s,
                                                  1e-9));
  const auto& b = r.breakdown;
  CHECK_THAT(b.compute_s + b.compression_s + b.exposed_communication_s + b.idle_s,
             WithinRel(r.iteration_time_s, 1e-12));
}

TEST_CASE("sim::on 1 GbE, gTop-k scales better than Top-k, which scales better than dense", "[sim][sparse]") {
  // The gTop-k paper's finding (Shi et al., ICDCS 2019, Fig. 8): at 32 workers over 1 GbE the dense allreduce
  // is network-bound, Top-k's allgather grows with p, gTop-k's tree with log2 p.
  const auto dense = run_scenario(resnet50(32, "bsp"));
  const auto topk = run_scenario(resnet50(32, "topk"));
  const auto gtopk = run_scenario(resnet50(32, "gtopk"));
  CHECK(dense.scaling_efficiency < topk.scaling_efficiency);
  CHECK(topk.scaling_efficiency < gtopk.scaling_efficiency);
  // Top-k's communication grows linearly in p, gTop-k's logarithmically.
  const auto topk8 = run_scenario(resnet50(8, "topk"));
  const auto gtopk8 = run_scenario(resnet50(8, "gtopk"));
  CHECK(only(topk, dag::TaskKind::communication).duration_s / only(topk8, dag::TaskKind::communication).duration_s > 4);
  CHECK(only(gtopk, dag::TaskKind::communication).duration_s / only(gtopk8, dag::TaskKind::communication).duration_s <
        2);
}

TEST_CASE("sim::sparsification needs the GPU's memory bandwidth", "[sim][sparse][errors]") {
  Json doc = Json::parse(R"({"model": {"zoo": "resnet50", "batch_per_gpu": 32},
    "gpu": {"single_gpu_iteration": "250 ms"},
    "cluster": {"nodes": 4, "gpus_per_node": 1, "inter_node": {"bandwidth": "1 Gbps", "latency": "25 us"}},
    "strategy": {"kind": "gtopk"}})");
  try {
    (void)parse_scenario(doc, "nobw.json");
    FAIL("accepted a sparsification strategy without the GPU's memory bandwidth");
  } catch (const InputError& e) {
    CHECK(e.pointer() == "/strategy/kind");
    CHECK_THAT(e.detail(), Catch::Contains("gpu.preset or gpu.memory_bandwidth"));
  }
  doc["gpu"]["memory_bandwidth"] = "900 GB/s";
  CHECK(run_scenario(parse_scenario(doc, "bw.json")).breakdown.compression_s > 0);
}

TEST_CASE("sim::the summary reports what sparsification sent and its rounds", "[sim][sparse][report]") {
  for (const char* kind : {"topk", "gtopk"}) {
    CAPTURE(kind);
    const auto s = resnet50(8, kind, 0.01);
    const auto j = summary_json(s, run_scenario(s));
    REQUIRE(j.contains("sparsification"));
    const auto& sp = j["sparsification"];
    CHECK(sp["elements"] == 25557032);
    CHECK(sp["selected_elements"] == 255571); // ceil(0.01 x 25,557,032)
    CHECK(sp["density"] == 0.01);
    // 8 workers: Top-k's allgather takes log2 8 = 3 rounds, gTop-k 3 up the tree and 3 down.
    CHECK(sp["rounds"] == (std::string(kind) == "topk" ? 3 : 6));
    CHECK(sp["collective"] == (std::string(kind) == "topk" ? "allgather" : "global_topk"));
  }
  CHECK_FALSE(summary_json(resnet50(8, "bsp"), run_scenario(resnet50(8, "bsp"))).contains("sparsification"));
}
