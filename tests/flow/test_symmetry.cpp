// Node symmetry (sim/flow/symmetry.hpp): which lowerings are invariant under which node group, and the 2-node
// quotient reproduces the full simulation (every collective's end time and every link's statistics) with and
// without contention, per node and per GPU NICs, aggregated and per-message.
#include "sim/cli/run.hpp"
#include "sim/flow/flow_engine.hpp"
#include "sim/flow/symmetry.hpp"
#include "sim/network/collectives.hpp"
#include "sim/plan/prepare.hpp"
#include "sim/spec/scenario.hpp"
#include "support/cluster.hpp"
#include "support/run_in_child.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <stdexcept>

using namespace ddlsim;
using namespace ddlsim::sim;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;

namespace {

std::vector<Phase> lower(const std::string& algorithm, LoweringShape shape, Granularity g = Granularity::aggregated) {
  const auto* l = find_lowering(Collective::allreduce, algorithm);
  REQUIRE(l != nullptr);
  return l->lower(shape, 64e6, g);
}

ClusterSpec star(int nodes, int gpus, bool nic_per_gpu) {
  return ddlsim::test::star_cluster(nodes, gpus, {100e9, 1e-6}, {12.5e9, 5e-6}, nic_per_gpu);
}

// Runs the jobs with and without symmetry, each in its own child: end times, then per link bytes, busy time, peak
// and mean utilisation; the texts are the link names and the symmetry used.
test::ChildReport run(const ClusterSpec& c, const std::vector<CollectiveJob>& jobs, bool per_message, bool symmetry) {
  auto report = test::run_in_child([&](test::ChildReport& out) {
    const auto r = run_collectives_flow(c, jobs, per_message, symmetry);
    for (const auto& j : r.jobs)
      out.values.push_back(j.end_s);
    for (const auto& l : r.links) {
      out.values.insert(out.values.end(), {l.bytes, l.busy_s, l.peak_utilisation, l.mean_utilisation});
      out.texts.push_back(l.name);
    }
    out.texts.push_back(r.symmetry);
  });
  if (!report.error.empty())
    throw std::runtime_error(report.error);
  return report;
}

} // namespace

TEST_CASE("flow::symmetry: ring and hierarchical are invariant under the node shift, halving-doubling under XOR",
          "[flow][symmetry]") {
  using flow::NodeSymmetry;
  const LoweringShape shape{8, 4};
  CHECK(flow::invariant(lower("ring", shape), shape, NodeSymmetry::cyclic));
  CHECK(flow::invariant(lower("ring", shape, Granularity::per_message), shape, NodeSymmetry::cyclic));
  CHECK(flow::invariant(lower("hierarchical", shape), shape, NodeSymmetry::cyclic));
  CHECK(flow::invariant(lower("halving-doubling", shape), shape, NodeSymmetry::xor_nodes));
  CHECK_FALSE(flow::invariant(lower("halving-doubling", shape), shape, NodeSymmetry::cyclic));
  // A tree has a root; recursive halving-doubling on 6 nodes pairs 2 extra nodes with the power-of-two core.
  CHECK_FALSE(flow::invariant(lower("tree", shape), shape, NodeSymmetry::cyclic));
  CHECK_FALSE(flow::invariant(lower("tree", shape), shape, NodeSymmetry::xor_nodes));
  const LoweringShape six{6, 4};
  CHECK_FALSE(flow::invariant(lower("halving-doubling", six), six, NodeSymmetry::cyclic));
  CHECK(flow::candidate_symmetries(six) == std::vector<NodeSymmetry>{NodeSymmetry::cyclic});
  CHECK(flow::candidate_symmetries({1, 8}).empty());
}

TEST_CASE("flow::symmetry: the quotient keeps node 0's flows and sends the others' to node 1", "[flow][symmetry]") {
  const LoweringShape shape{4, 2};
  const auto full = lower("ring", shape);
  const auto q = flow::quotient_phases(full, shape);
  REQUIRE(q.size() == full.size());
  // A ring over 4 x 2 GPUs: node 0 sends 0 -> 1 (intra) and 1 -> 2 (to node 1, GPU 0): rank 2 of the quotient.
  REQUIRE(q[0].flows.size() == 2);
  CHECK(q[0].flows[0].src == 0);
  CHECK(q[0].flows[0].dst == 1);
  CHECK(q[0].flows[1].src == 1);
  CHECK(q[0].flows[1].dst == 2);
  CHECK(q[0].flows[1].bytes == full[0].flows[1].bytes);
  CHECK(q[0].flows[1].latency_repeats == full[0].flows[1].latency_repeats);
  // The ring's last hop, 7 -> 0 (node 3 to node 0), is represented by node 0's 1 -> 2.
  CHECK(flow::quotient_obstacle(star(4, 2, false)).empty());
  auto torus = star(4, 2, false);
  torus.topology.kind = TopologyKind::torus;
  CHECK(flow::quotient_obstacle(torus) == "the topology is not a star");
  CHECK(flow::quotient_obstacle(star(1, 8, false)) == "a single node");
}

TEST_CASE("flow::symmetry: the 2-node quotient reproduces the full simulation, contention included",
          "[flow][symmetry]") {
  auto [nodes, gpus, nic_per_gpu] = GENERATE(table<int, int, bool>({
      {2, 1, false},
      {3, 4, false},
      {4, 4, true},
      {8, 2, false},
      {16, 1, false},
  }));
  const auto algorithm = GENERATE(as<std::string>{}, "ring", "halving-doubling", "hierarchical");
  const bool per_message = GENERATE(false, true);
  CAPTURE(nodes, gpus, nic_per_gpu, algorithm, per_message);
  const auto c = star(nodes, gpus, nic_per_gpu);
  // Three collectives of different sizes that overlap: the second starts while the first is sending, the third
  // during the second's latency-bound tail.
  const std::vector<CollectiveJob> jobs{{Collective::allreduce, algorithm, 96e6, 0.0},
                                        {Collective::allreduce, algorithm, 8e6, 1e-3},
                                        {Collective::allreduce, algorithm, 1e5, 2.5e-3}};
  const auto reduced = run(c, jobs, per_message, true);
  const auto full = run(c, jobs, per_message, false);
  CHECK(full.texts.back() == "none");
  // Halving-doubling is XOR-symmetric on power-of-two node counts only; a 3-node one is simulated in full.
  const bool symmetric = algorithm != "halving-doubling" || (nodes & (nodes - 1)) == 0;
  CHECK((reduced.texts.back() != "none") == symmetric);
  REQUIRE(reduced.values.size() == full.values.size());
  // The same links in the same order (the last text is the symmetry used).
  REQUIRE(std::equal(reduced.texts.begin(), reduced.texts.end() - 1, full.texts.begin(), full.texts.end() - 1));
  for (std::size_t i = 0; i < jobs.size(); ++i)
    CHECK_THAT(reduced.values[i], WithinRel(full.values[i], 1e-9));
  for (std::size_t i = jobs.size(); i < full.values.size(); ++i) {
    CAPTURE(full.texts[(i - jobs.size()) / 4], (i - jobs.size()) % 4);
    CHECK_THAT(reduced.values[i], WithinRel(full.values[i], 1e-9) || WithinAbs(full.values[i], 1e-12));
  }
}

TEST_CASE("flow::symmetry: a whole iteration is the same with and without it, and the report says which",
          "[flow][symmetry][engine]") {
  auto s = load_scenario(std::string(DDLSIM_SOURCE_DIR) + "/scenarios/quickstart.json",
                         {"engine=\"flow\"", "strategy.kind=\"ddp\"", "cluster.nodes=4"});
  auto run_one = [](const Scenario& sc) {
    const auto report = test::run_in_child([&](test::ChildReport& out) {
      const auto r = run_scenario(sc);
      out.values = {r.iteration_time_s, static_cast<double>(r.sim.flows), static_cast<double>(r.links.size())};
      for (const auto& l : r.links)
        out.values.push_back(l.bytes);
      out.texts = r.notes;
    });
    if (!report.error.empty())
      throw std::runtime_error(report.error);
    return report;
  };
  const auto reduced = run_one(s);
  s.flow_symmetry = false;
  const auto full = run_one(s);
  REQUIRE(reduced.values.size() == full.values.size());
  CHECK_THAT(reduced.values[0], WithinRel(full.values[0], 1e-9));
  CHECK(reduced.values[1] < full.values[1] / 3); // node 0's flows only, of 4 nodes'
  for (std::size_t i = 2; i < full.values.size(); ++i)
    CHECK_THAT(reduced.values[i], WithinRel(full.values[i], 1e-9) || WithinAbs(full.values[i], 1e-9));
  const auto mentions = [](const std::vector<std::string>& notes, const std::string& what) {
    for (const auto& n : notes)
      if (n.find(what) != std::string::npos)
        return true;
    return false;
  };
  CHECK(mentions(reduced.texts, "the 4 nodes are symmetric (cyclic node shift)"));
  CHECK(mentions(full.texts, "every flow simulated (node symmetry not used: switched off"));
}
