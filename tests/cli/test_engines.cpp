// The two engines agree through `ddlsim run`, on scenarios rather than on hand-built shapes: every collective and
// algorithm that honours NICs per GPU (ring and tree allreduce on 2 and 4 nodes, ring allgather, reduce-scatter and
// broadcast) within 0.1 %, and a tensor x data layout whose data-parallel groups share a node's NIC within 3 %
// (docs/engines.md, "Groups that share a link"). Scenarios: tests/data/engines/.
#include "support/cli.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

using Catch::Matchers::WithinRel;
using ddlsim::test::read_text;
using ddlsim::test::run_ok;
using ddlsim::test::TempDir;

namespace {

const std::string kData = std::string(DDLSIM_SOURCE_DIR) + "/tests/data/engines/";

// iteration_time_s of `scenario` on `engine` with the given --set overrides.
double iteration_s(const std::string& scenario, const std::string& engine, const std::vector<std::string>& sets) {
  TempDir out;
  std::vector<std::string> args{"run", kData + scenario, "--engine", engine, "--out", out / "run", "--no-trace"};
  for (const auto& s : sets) {
    args.push_back("--set");
    args.push_back(s);
  }
  run_ok(args);
  return nlohmann::json::parse(read_text(out / "run/summary.json")).at("iteration_time_s").get<double>();
}

const std::string kTraced =
    R"(strategy={"kind":"traced","collectives":[{"collective":"reduce_scatter","bytes":"256 MiB"},)"
    R"({"collective":"allgather","bytes":"256 MiB"},{"collective":"broadcast","bytes":"64 MiB"}]})";

} // namespace

TEST_CASE("run: NICs per GPU give the same iteration on both engines", "[cli][engines]") {
  // (what is exercised, its --set overrides): BSP's one allreduce of BERT-large, exposed; then a traced iteration of a
  // reduce-scatter, an allgather and a broadcast of the whole cluster, each exposed.
  const auto [label, sets] = GENERATE_COPY(table<std::string, std::vector<std::string>>({
      {"ring allreduce, 2 nodes", {"collectives.allreduce=ring", "cluster.nodes=2"}},
      {"ring allreduce, 4 nodes", {"collectives.allreduce=ring", "cluster.nodes=4"}},
      {"tree allreduce, 2 nodes", {"collectives.allreduce=tree", "cluster.nodes=2"}},
      {"tree allreduce, 4 nodes", {"collectives.allreduce=tree", "cluster.nodes=4"}},
      {"ring reduce-scatter, allgather, broadcast, 2 nodes", {kTraced, "cluster.nodes=2"}},
      {"ring reduce-scatter, allgather, broadcast, 4 nodes", {kTraced, "cluster.nodes=4"}},
  }));
  CAPTURE(label);
  const double analytic = iteration_s("h100-nics.json", "analytic", sets);
  const double flow = iteration_s("h100-nics.json", "flow", sets);
  CHECK_THAT(flow, WithinRel(analytic, 1e-3));
  // Not vacuous: the same scenario with one NIC per node (of the same rate) communicates longer on both engines.
  auto per_node = sets;
  per_node.emplace_back("cluster.nic=per-node");
  CHECK(iteration_s("h100-nics.json", "flow", per_node) > 1.05 * flow);
  CHECK(iteration_s("h100-nics.json", "analytic", per_node) > 1.05 * analytic);
}

TEST_CASE("run: data-parallel groups that share a node's NIC are timed alike on both engines", "[cli][engines]") {
  // t = 8 inside each of 2 nodes, d = 2 across them over one NIC per node: the 8 data-parallel groups' allreduces
  // cross each NIC together (identical groups starting together: exact, 0.1 %); then t = 4, p = 2, d = 2 on 4 nodes
  // of 4, where pipeline transfers run beside them (3 %).
  // (layout, --set, analytic within this of flow, NICs per GPU at most this x the iteration)
  const auto [label, sets, within, faster] =
      GENERATE_COPY(table<std::string, std::vector<std::string>, double, double>({
          {"t 8, d 2 on 2 x 8", {}, 1e-3, 0.9},
          {"t 4, p 2, d 2 on 4 x 4",
           {"cluster.nodes=4", "cluster.gpus_per_node=4", "parallelism.tensor=4", "parallelism.pipeline=2",
            "pipeline.micro_batches=8", "model.batch_per_gpu=2"},
           3e-2,
           0.99},
      }));
  CAPTURE(label);
  const double analytic = iteration_s("hybrid-t8-d2-v100.json", "analytic", sets);
  const double flow = iteration_s("hybrid-t8-d2-v100.json", "flow", sets);
  CHECK_THAT(analytic, WithinRel(flow, within));
  // Not vacuous: with a NIC per GPU the groups no longer share one, and both engines are faster.
  auto per_gpu = sets;
  per_gpu.emplace_back("cluster.nic=per-gpu");
  CHECK(iteration_s("hybrid-t8-d2-v100.json", "analytic", per_gpu) < faster * analytic);
}
