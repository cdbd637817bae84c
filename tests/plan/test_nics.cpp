// NICs per GPU (cluster.nic "per-gpu"): the ring runs one ring per local GPU over every NIC (NCCL's channels), as
// fast as hierarchical's rings per local GPU, and the tree one pair of trees per local GPU (each NIC 1/g of the
// node's inter-node bytes).
#include "sim/analytic/analytic.hpp"
#include "sim/spec/scenario.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace ddlsim;
using namespace ddlsim::sim;

namespace {

// One 100 MB layer, BSP (one allreduce after backward), 2 nodes x 4 GPUs, NVLink-class GPU links, 100 Gb/s NICs.
Json two_nodes(const std::string& nic, const std::string& algorithm) {
  Json doc = Json::parse(R"({"name": "nics",
    "model": {"layers": [{"name": "fc", "params": 25000000, "fwd_flops": "1 GFLOP"}], "batch_per_gpu": 1},
    "gpu": {"peak_flops": "100 TFLOPS", "memory_bandwidth": "2 TB/s"}, "strategy": {"kind": "bsp"},
    "cluster": {"nodes": 2, "gpus_per_node": 4, "intra_node": {"bandwidth": "300 GB/s", "latency": "1 us"},
                "inter_node": {"bandwidth": "100 Gbps", "latency": "1 us"}}})");
  doc["cluster"]["nic"] = nic;
  doc["collectives"] = {{"allreduce", algorithm}};
  return doc;
}

} // namespace

TEST_CASE("nics: rings and trees use every NIC per GPU", "[plan][nic]") {
  const auto ring = run_analytic(parse_scenario(two_nodes("per-gpu", "ring"), "t.json"));
  const auto tree = run_analytic(parse_scenario(two_nodes("per-gpu", "tree"), "t.json"));
  const auto shared_tree = run_analytic(parse_scenario(two_nodes("per-node", "tree"), "t.json"));
  const auto hierarchical = run_analytic(parse_scenario(two_nodes("per-gpu", "hierarchical"), "t.json"));
  // 100 MB: four rings of n/4, each NIC carrying one ring's 2 x 7/8 n/4 at 12.5 GB/s, about hierarchical's n/4 / B
  const double n = 100e6, B = 12.5e9;
  CHECK(ring.breakdown.exposed_communication_s > 2 * 7.0 / 8 * n / 4 / B);
  CHECK(ring.breakdown.exposed_communication_s < 1.1 * 2 * 7.0 / 8 * n / 4 / B);
  CHECK(hierarchical.breakdown.exposed_communication_s < 0.5 * 2 * 7.0 / 8 * n / B);
  // two nodes: each tree is one edge between them, n per node each way; over four NICs n/4 each, over one NIC n
  CHECK(tree.breakdown.exposed_communication_s > n / 4 / B);
  CHECK(tree.breakdown.exposed_communication_s < 1.05 * n / 4 / B);
  CHECK(shared_tree.breakdown.exposed_communication_s > n / B);
  CHECK(shared_tree.breakdown.exposed_communication_s < 1.05 * n / B);
  for (const auto* r : {&ring, &tree, &shared_tree, &hierarchical})
    CHECK(r->notes.empty());
}
