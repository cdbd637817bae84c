// Parameter-server push and pull on the flow engine (sim/network/lowering/ps_*_sharded.cpp, sim/flow/platform.cpp's
// dedicated server hosts): alone they agree with their phase-synchronous closed forms within 0.1 % (max-min on a
// star shares each NIC equally among its flows, as the closed form does); the node symmetry is used for a
// co-located push split over every node's server and refused for dedicated hosts or a key on one server; a whole
// ps-sync iteration with one dedicated server (pushes and pulls on disjoint link directions) matches the analytic
// engine; ps-async on the flow engine says that it reuses the analytic queue model.
#include "sim/cli/run.hpp"
#include "sim/flow/flow_engine.hpp"
#include "sim/flow/symmetry.hpp"
#include "sim/network/lowering/evaluate.hpp"
#include "sim/plan/prepare.hpp"
#include "sim/spec/scenario.hpp"
#include "support/cluster.hpp"
#include "support/run_in_child.hpp"

#include <catch2/catch.hpp>

#include <stdexcept>

using namespace ddlsim;
using namespace ddlsim::sim;
using Catch::Matchers::WithinRel;

namespace {

test::ChildReport in_child(const std::function<void(test::ChildReport&)>& fn) {
  auto report = test::run_in_child(fn);
  if (!report.error.empty())
    throw std::runtime_error(report.error);
  return report;
}

ClusterSpec star(int nodes, int gpus, int server_hosts) {
  return ddlsim::test::star_cluster(nodes, gpus, {12e9, 5e-6}, {1.25e9, 25e-6}, false, server_hosts);
}

} // namespace

TEST_CASE("flow::ps push and pull agree with their phase-synchronous closed forms", "[flow][ps][agreement]") {
  auto [nodes, gpus, servers, dedicated, first, count] = GENERATE(table<int, int, int, bool, int, int>({
      {4, 1, 1, true, 0, 0},
      {8, 1, 4, true, 0, 0},
      {3, 1, 7, true, 0, 0},
      {16, 1, 2, true, 1, 1},
      {8, 1, 8, false, 0, 0},
      {4, 4, 4, false, 0, 0},
      {6, 2, 6, false, 3, 1},
  }));
  const auto kind = GENERATE(Collective::ps_push, Collective::ps_pull);
  CAPTURE(nodes, gpus, servers, dedicated, first, count, collective_name(kind));
  const double m = 16e6;
  const auto c = star(nodes, gpus, dedicated ? servers : 0);
  const LoweringShape shape{nodes, gpus, servers, dedicated, first, count};
  const double expected =
      phase_synchronous_time(find_lowering(kind, "sharded")->lower(shape, m, Granularity::aggregated), c.network());
  const auto out = in_child([&](test::ChildReport& r) {
    const auto f = run_collectives_flow(c, {{kind, "sharded", m, 0.0, shape}}, false);
    r.values = {f.jobs[0].end_s - f.jobs[0].start_s};
    r.texts = {f.symmetry};
  });
  REQUIRE(out.values.size() == 1);
  CHECK_THAT(out.values[0], WithinRel(expected, 1e-3));
  // Only a co-located key split over one server per node is node-symmetric (4 x 4 has 4 servers on 4 nodes).
  const bool symmetric = !dedicated && count == 0 && servers == nodes;
  CHECK((out.texts[0] != "none") == symmetric);
}

TEST_CASE("flow::symmetry refuses lowerings that touch dedicated server ranks", "[flow][ps][symmetry]") {
  const LoweringShape colocated{4, 2, 4, false}, dedicated{4, 2, 4, true};
  const auto* push = find_lowering(Collective::ps_push, "sharded");
  CHECK(flow::invariant(push->lower(colocated, 1e6, Granularity::aggregated), colocated, flow::NodeSymmetry::cyclic));
  CHECK(
      flow::invariant(push->lower(colocated, 1e6, Granularity::aggregated), colocated, flow::NodeSymmetry::xor_nodes));
  // Dedicated servers 8..11 would map onto each other under XOR of their pseudo-node index; they belong to no node.
  for (auto g : {flow::NodeSymmetry::cyclic, flow::NodeSymmetry::xor_nodes})
    CHECK_FALSE(flow::invariant(push->lower(dedicated, 1e6, Granularity::aggregated), dedicated, g));
  CHECK(flow::quotient_obstacle(star(4, 2, 4)) == "dedicated parameter-server hosts");
  // A small key on server 1 alone: not symmetric.
  const LoweringShape one{4, 2, 4, false, 1, 1};
  CHECK_FALSE(flow::invariant(push->lower(one, 1e6, Granularity::aggregated), one, flow::NodeSymmetry::cyclic));
}

TEST_CASE("flow::a ps-sync iteration with dedicated servers agrees with the analytic engine", "[flow][ps][engine]") {
  // One dedicated server: one lane per stream, so pushes (worker up-links, the server's down-link) and pulls (the
  // other directions) never share a link; with more servers, keys on different servers overlap on the workers'
  // NICs, which only the flow engine shares.
  const int servers = 1;
  Json doc = Json::parse(R"({"model": {"zoo": "resnet50", "batch_per_gpu": 64},
    "gpu": {"preset": "V100-PCIe-32GB", "single_gpu_iteration": "252.9 ms"},
    "cluster": {"nodes": 4, "gpus_per_node": 1, "inter_node": {"bandwidth": "10 Gbps", "latency": "25 us"}},
    "strategy": {"kind": "ps-sync", "placement": "dedicated"}})");
  doc["strategy"]["servers"] = servers;
  auto s = parse_scenario(doc, "ps.json");
  const auto analytic = run_scenario(s);
  const auto out = in_child([&](test::ChildReport& r) {
    auto f = s;
    f.engine = Engine::flow;
    const auto run = run_scenario(f);
    r.values = {run.iteration_time_s, static_cast<double>(run.links.size())};
    for (const auto& l : run.links)
      if (l.name == "server0-nic_DOWN")
        r.values.push_back(l.bytes);
  });
  REQUIRE(out.values.size() == 3);
  CHECK_THAT(out.values[0], WithinRel(analytic.iteration_time_s, 1e-3));
  CHECK(out.values[1] == 2 * (4 + servers)); // a NIC per node and per server host, both directions
  // Server 0's NIC receives, in each of the 3 unrolled iterations, its shard of every key from the 4 workers.
  double shard0 = 0;
  for (const auto& g : analytic.groups)
    if (dag::shard_first_of(g) == 0)
      shard0 += g.bytes / dag::shard_count_of(g);
  CHECK_THAT(out.values[2], WithinRel(kPsSyncIterations * 4 * shard0, 1e-6));
}

TEST_CASE("flow::ps-async reuses the analytic queue model and says so", "[flow][ps][async]") {
  auto s = load_scenario(std::string(DDLSIM_SOURCE_DIR) + "/scenarios/quickstart.json",
                         {"strategy.kind=ps-async", "engine=flow"});
  const auto out = in_child([&](test::ChildReport& r) {
    const auto run = run_scenario(s);
    r.values = {run.iteration_time_s};
    r.texts = run.notes;
    r.texts.push_back(std::string(engine_name(run.engine)));
  });
  s.engine = Engine::analytic;
  CHECK(out.values[0] == run_scenario(s).iteration_time_s);
  CHECK(out.texts.back() == "flow");
  bool mentioned = false;
  for (const auto& n : out.texts)
    mentioned = mentioned || n.find("analytic engine's FIFO link-queue simulation") != std::string::npos;
  CHECK(mentioned);
}

TEST_CASE("flow::a co-located ps-sync with every key split runs on the 2-node quotient, exactly",
          "[flow][ps][symmetry]") {
  // bigarray_bound 1 splits every key over the 4 servers (GPU 0 of each node): every push and pull is invariant
  // under the node shift, so node 0's flows on the quotient reproduce the full simulation.
  auto s = load_scenario(std::string(DDLSIM_SOURCE_DIR) + "/scenarios/ps-vs-allreduce.json",
                         {"engine=flow", "strategy.bigarray_bound=1", "cluster.nodes=4", "cluster.gpus_per_node=2"});
  const auto run = [](const Scenario& sc) {
    return in_child([&](test::ChildReport& r) {
      const auto result = run_scenario(sc);
      r.values = {result.iteration_time_s, static_cast<double>(result.sim.flows)};
      r.texts = result.notes;
    });
  };
  const auto reduced = run(s);
  s.flow_symmetry = false;
  const auto full = run(s);
  CHECK_THAT(reduced.values[0], WithinRel(full.values[0], 1e-9));
  CHECK(reduced.values[1] < full.values[1] / 3);
  CHECK_THAT(reduced.texts.back(), Catch::Contains("the 4 nodes are symmetric"));
}
