// The flow engine against closed forms: contention-free collectives agree with the analytic engine within 0.1 %,
// shared bottlenecks halve bandwidth, aggregated lowering stays within 0.5 % of per-message simulation, and a
// whole iteration agrees with the analytic engine when nothing contends.
#include "sim/analytic/analytic.hpp"
#include "sim/cli/run.hpp"
#include "sim/flow/flow_engine.hpp"
#include "sim/network/collectives.hpp"
#include "sim/network/lowering/evaluate.hpp"
#include "sim/plan/prepare.hpp"
#include "sim/spec/scenario.hpp"
#include "support/run_in_child.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cmath>
#include <stdexcept>
#include <tuple>

using namespace ddlsim;
using namespace ddlsim::sim;
using Catch::Matchers::WithinRel;

namespace {

// One simulation per child process (SimGrid's engine is a singleton); `fn` returns the numbers to check.
template <class Fn> std::vector<double> values_in_child(Fn&& fn) {
  const auto report = test::run_in_child([&](test::ChildReport& out) { out.values = fn(); });
  if (!report.error.empty())
    throw std::runtime_error(report.error);
  return report.values;
}

ClusterSpec cluster(int nodes, int gpus, double inter_bw, double inter_lat, double intra_bw = 150e9,
                    double intra_lat = 1e-6) {
  ClusterSpec c;
  c.nodes = nodes;
  c.gpus_per_node = gpus;
  c.inter = {inter_bw, inter_lat};
  c.intra = {intra_bw, intra_lat};
  return c;
}

double flow_time(const ClusterSpec& c, const std::string& algorithm, double bytes, bool per_message) {
  const auto out = values_in_child([&] {
    const auto r = run_collectives_flow(c, {{Collective::allreduce, algorithm, bytes, 0.0}}, per_message);
    return std::vector<double>{r.jobs[0].end_s - r.jobs[0].start_s};
  });
  REQUIRE(out.size() == 1);
  return out[0];
}

double analytic_time(const ClusterSpec& c, const std::string& algorithm, double bytes) {
  return find_lowering(Collective::allreduce, algorithm)->closed_form(c.network())->cost(bytes).time_s;
}

} // namespace

TEST_CASE("flow::allreduce agrees with the analytic closed forms without contention", "[flow][agreement]") {
  // p, sizes 1 KiB .. 1 GiB, several alpha and beta (docs/engines.md, "Link semantics": with one GPU per node
  // ring = 2(p-1)a + 2(p-1)/p n/B).
  auto [nodes, gpus, bytes, bandwidth, latency] = GENERATE(table<int, int, double, double, double>({
      {2, 1, 1024.0, 1.25e9, 25e-6},
      {3, 1, 1048576.0, 1.25e8, 50e-6},
      {5, 1, 64.0 * 1048576, 12.5e9, 2e-6},
      {8, 1, 1073741824.0, 12.5e9, 5e-6},
      {16, 1, 25.0 * 1048576, 1.25e9, 25e-6},
      {64, 1, 4096.0, 25e9, 1e-6},
      {2, 4, 100e6, 1.25e9, 25e-6},
      {4, 8, 256e6, 12.5e9, 5e-6},
      {8, 8, 1e6, 25e9, 2e-6},
  }));
  const auto algorithm = GENERATE(as<std::string>{}, "ring", "halving-doubling", "hierarchical", "tree", "nvls");
  const bool per_message = GENERATE(false, true);
  CAPTURE(nodes, gpus, bytes, bandwidth, latency, algorithm, per_message);
  // The tree's closed form is the pipelined NCCL bound (every NIC carries 2n), reached from 4 nodes on; on 2-3
  // nodes the real trees load a NIC less (tested below), and per-message trees run synchronous steps.
  if (algorithm == "tree" && (per_message || (nodes > 1 && nodes < 4)))
    return;
  // NVLS across nodes pipelines the switch and the network; per message, the network's steps run one by one.
  if (algorithm == "nvls" && per_message && nodes > 1)
    return;
  const auto c = cluster(nodes, gpus, bandwidth, latency);
  CHECK_THAT(flow_time(c, algorithm, bytes, per_message), WithinRel(analytic_time(c, algorithm, bytes), 1e-3));
}

TEST_CASE("flow::two sockets per node agree with the analytic engine without contention",
          "[flow][agreement][sockets]") {
  // PCIe GPU links at 12 GB/s behind two sockets joined by a 10 GB/s host link (2 us), 100 Gb/s NICs: the analytic
  // engine times the lowering with the host link shared by the flows that cross it each way (evaluate.cpp); the
  // flow engine routes them over node<n>-host.
  auto [nodes, gpus, bytes] = GENERATE(table<int, int, double>({
      {1, 8, 256e6},
      {1, 4, 1e6},
      {2, 4, 64e6},
      {4, 8, 100e6},
  }));
  const auto algorithm = GENERATE(as<std::string>{}, "ring", "halving-doubling", "hierarchical", "tree");
  CAPTURE(nodes, gpus, bytes, algorithm);
  // The tree's chain flows pay different latencies (those across the host link more): in the flow engine they start
  // their transfers at different instants and share the GPU links unevenly, which the phase-synchronous evaluation
  // does not model; at 1 MB that is 3.5 % (183.9 vs 190.7 us), at >= 64 MB below 0.1 %.
  if (algorithm == "tree" && bytes < 64e6)
    return;
  auto c = cluster(nodes, gpus, 12.5e9, 5e-6, 12e9, 1e-6);
  c.fabric = Fabric::two_sockets;
  c.host_link = {10e9, 2e-6};
  const double analytic =
      make_cost_model(*find_lowering(Collective::allreduce, algorithm), c.network())->cost(bytes).time_s;
  CHECK_THAT(flow_time(c, algorithm, bytes, false), WithinRel(analytic, 1e-3));
}

TEST_CASE("flow::compute slowed beside communication agrees with the analytic engine", "[flow][engine][slowdown]") {
  // gpu.comm_slowdown s: compute runs at 1/(1 + s) while a collective runs on its GPU (docs/engines.md). The
  // quickstart's cluster is contention free (one NIC per node, one collective at a time): every task's start and end
  // on the flow engine equals the analytic engine's event-driven pass, for WFBP, DDP buckets and ByteScheduler's
  // priorities; s = 0 is today's timeline.
  const std::string quickstart = std::string(DDLSIM_SOURCE_DIR) + "/scenarios/quickstart.json";
  const auto kind = GENERATE(as<std::string>{}, "wfbp", "ddp", "bytescheduler");
  const double slowdown = GENERATE(0.0, 0.2, 1.0);
  CAPTURE(kind, slowdown);
  const std::vector<std::string> sets{"strategy.kind=\"" + kind + "\"", "cluster.inter_node.bandwidth=\"100 Gbps\"",
                                      fmt::format("gpu.comm_slowdown={}", slowdown)};
  const auto analytic = run_analytic(load_scenario(quickstart, sets));
  const auto flow = values_in_child([&] {
    const auto r = run_flow(load_scenario(quickstart, sets));
    std::vector<double> out{r.iteration_time_s, r.breakdown.compute_s};
    for (const auto& t : r.timing) {
      out.push_back(t.start_s);
      out.push_back(t.end_s);
    }
    return out;
  });
  REQUIRE(flow.size() == 2 + 2 * analytic.timing.size());
  CHECK_THAT(flow[0], WithinRel(analytic.iteration_time_s, 1e-7));
  CHECK_THAT(flow[1], WithinRel(analytic.breakdown.compute_s, 1e-7));
  // every task within 100 ns: SimGrid's timers round their work amounts (~1e-9 s a step; ByteScheduler at s = 0.2:
  // 14 ns after its ~2,000 events)
  double worst = 0;
  for (std::size_t v = 0; v < analytic.timing.size(); ++v)
    worst = std::max({worst, std::abs(flow[2 + 2 * v] - analytic.timing[v].start_s),
                      std::abs(flow[3 + 2 * v] - analytic.timing[v].end_s)});
  CHECK(worst < 1e-7);
}

TEST_CASE("flow::rings over NICs per GPU agree with the analytic engine", "[flow][agreement][rails]") {
  // cluster.nic "per-gpu": g rotated rings, each leaving a node through another GPU's NIC (ring_steps); the ring's
  // closed form 2(p-1)/p n max((g-1)/(g B_i), 1/(g B_e)) plus its walk, with node symmetry and without.
  auto [nodes, gpus, bytes, intra_bw] = GENERATE(table<int, int, double, double>({
      {2, 4, 64e6, 150e9},
      {4, 8, 256e6, 150e9},
      {3, 2, 1e6, 150e9},
      {2, 8, 100e6, 20e9},
  }));
  const bool per_message = GENERATE(false, true);
  CAPTURE(nodes, gpus, bytes, intra_bw, per_message);
  auto c = cluster(nodes, gpus, 25e9, 5e-6, intra_bw, 1e-6);
  c.nic_per_gpu = true;
  CHECK_THAT(flow_time(c, "ring", bytes, per_message), WithinRel(analytic_time(c, "ring", bytes), 1e-3));
}

TEST_CASE("flow::trees over NICs per GPU agree with the analytic engine", "[flow][agreement][rails]") {
  // cluster.nic "per-gpu": g pairs of trees, pair c entering each node at GPU c and c-1 (allreduce_tree.cpp), each
  // NIC carrying 1/g of the node's inter-node bytes: n/g each way on two nodes, 1.5n/g on three, 2n/g from four,
  // where it is the bottleneck. From 64 MB (the trees' chain flows start unevenly below, as above).
  auto [nodes, gpus, bytes] = GENERATE(table<int, int, double>({{2, 4, 256e6}, {3, 8, 64e6}, {4, 8, 256e6}}));
  CAPTURE(nodes, gpus, bytes);
  auto c = cluster(nodes, gpus, 12.5e9, 5e-6, 150e9, 1e-6);
  c.nic_per_gpu = true;
  const double share = (nodes == 2 ? 1.0 : nodes == 3 ? 1.5 : 2.0) / gpus;
  const double depth = std::ceil(std::log2(nodes));
  CHECK_THAT(analytic_time(c, "tree", bytes),
             WithinRel(2 * (depth * 10e-6 + (gpus - 1) * 2e-6) + share * bytes / 12.5e9, 1e-12));
  CHECK_THAT(flow_time(c, "tree", bytes, false), WithinRel(analytic_time(c, "tree", bytes), 1e-3));
}

TEST_CASE("flow::a double binary tree on 2 and 3 nodes loads a NIC with n and 1.5 n", "[flow][agreement]") {
  // p = 2: 2a + n/B; p = 3: 4a + 1.5 n/B (sim/network/lowering/allreduce_tree.cpp), a = 2 x latency
  const double n = 100e6, B = 1.25e9, a = 50e-6;
  CHECK_THAT(flow_time(cluster(2, 1, B, 25e-6), "tree", n, false), WithinRel(2 * a + n / B, 1e-6));
  CHECK_THAT(flow_time(cluster(3, 1, B, 25e-6), "tree", n, false), WithinRel(4 * a + 1.5 * n / B, 1e-6));
}

TEST_CASE("flow::two allreduces on one shared bottleneck each take the time of one at half bandwidth",
          "[flow][contention]") {
  // Two equal ring allreduces over the same 8 single-GPU nodes started together: every NIC direction carries two
  // equal flows, so each finishes at 2(p-1)a + 2(p-1)/p n/(B/2).
  const auto c = cluster(8, 1, 1.25e9, 25e-6);
  const double n = 100e6, p = 8, a = 50e-6, B = 1.25e9;
  const auto out = values_in_child([&] {
    const auto r = run_collectives_flow(
        c, {{Collective::allreduce, "ring", n, 0.0}, {Collective::allreduce, "ring", n, 0.0}}, false);
    return std::vector<double>{r.jobs[0].end_s, r.jobs[1].end_s};
  });
  REQUIRE(out.size() == 2);
  const double expected = 2 * (p - 1) * a + 2 * (p - 1) / p * n / (B / 2);
  CHECK_THAT(out[0], WithinRel(expected, 1e-6));
  CHECK_THAT(out[1], WithinRel(expected, 1e-6));
}

TEST_CASE("flow::a node's GPUs share its NIC", "[flow][contention]") {
  // Halving-doubling on 2 nodes x 4 GPUs: the first step (distance 4) sends n/2 from every GPU across the
  // node boundary; 4 flows share each NIC direction (B/4 each), unless every GPU has its own NIC.
  const double n = 64e6;
  auto c = cluster(2, 4, 12.5e9, 5e-6, 100e9, 1e-6);
  const double shared = flow_time(c, "halving-doubling", n, false);
  c.nic_per_gpu = true;
  const double own = flow_time(c, "halving-doubling", n, false);
  // Closed forms: inter step 2(a_e + n/2 / (B_e / sharers)), intra steps 2(a_i + n/4/B_i) + 2(a_i + n/8/B_i).
  const double ae = 10e-6, ai = 2e-6, Be = 12.5e9, Bi = 100e9;
  const double intra = 2 * (ai + n / 4 / Bi) + 2 * (ai + n / 8 / Bi);
  CHECK_THAT(shared, WithinRel(2 * (ae + n / 2 / (Be / 4)) + intra, 1e-3));
  CHECK_THAT(own, WithinRel(2 * (ae + n / 2 / Be) + intra, 1e-3));
}

TEST_CASE("flow::aggregated lowering stays within 0.5 % of per-message simulation on 64 GPUs", "[flow][fidelity]") {
  const auto algorithm = GENERATE(as<std::string>{}, "ring", "halving-doubling", "hierarchical");
  const bool background = GENERATE(false, true);
  CAPTURE(algorithm, background);
  const auto c = cluster(8, 8, 12.5e9, 5e-6, 100e9, 1e-6);
  auto run = [&](bool per_message) {
    return values_in_child([&] {
      std::vector<CollectiveJob> jobs{{Collective::allreduce, algorithm, 256e6, 0.0}};
      // Background: a second, smaller allreduce that starts mid-way and shares every link.
      if (background)
        jobs.push_back({Collective::allreduce, "ring", 64e6, 5e-3});
      const auto r = run_collectives_flow(c, jobs, per_message);
      return std::vector<double>{r.jobs[0].end_s};
    })[0];
  };
  CHECK_THAT(run(false), WithinRel(run(true), 5e-3));
}

TEST_CASE("flow::a whole iteration agrees with the analytic engine when nothing contends", "[flow][engine]") {
  // Gradients are sent one group at a time on one stream: no two collectives overlap, so the flow engine must
  // reproduce the analytic schedule; it adds per-link statistics and counts its flows.
  const auto kind = GENERATE("wfbp", "mg-wfbp", "ddp");
  CAPTURE(kind);
  auto base = load_scenario(std::string(DDLSIM_SOURCE_DIR) + "/scenarios/quickstart.json",
                            {std::string("strategy.kind=") + kind});
  const double analytic = run_scenario(base).iteration_time_s;
  const auto out = values_in_child([&] {
    auto s = base;
    s.engine = Engine::flow;
    const auto r = run_scenario(s);
    double nic_bytes = 0;
    for (const auto& l : r.links)
      if (l.role == "nic")
        nic_bytes = std::max(nic_bytes, l.bytes);
    return std::vector<double>{r.iteration_time_s, static_cast<double>(r.sim.flows),
                               static_cast<double>(r.links.size()), nic_bytes, r.communication_bytes_per_worker};
  });
  REQUIRE(out.size() == 5);
  CHECK_THAT(out[0], WithinRel(analytic, 1e-3));
  CHECK(out[1] > 0);
  CHECK(out[2] > 0);
  // A ring over 2 nodes x 4 GPUs sends one ring edge out of each node: the NIC carries 2(p-1)/p of the buffer.
  CHECK_THAT(out[3], WithinRel(out[4], 1e-6));
}

TEST_CASE("flow::sparse collectives (gTop-k, Top-k's allgather) agree with their phase-synchronous cost",
          "[flow][agreement][sparse]") {
  // Without contention the flow engine runs a lowering's phases exactly as the analytic evaluation does
  // (sim/network/lowering/evaluate.hpp), on single- and multi-GPU nodes, powers of two and not.
  auto [nodes, gpus] = GENERATE(table<int, int>({{2, 1}, {3, 1}, {8, 1}, {13, 1}, {64, 1}, {4, 4}, {6, 8}}));
  const double pairs_bytes = 8 * 0.001 * 25557032; // ResNet-50 at density 0.001: k values + k indices
  const auto c = cluster(nodes, gpus, 1.25e9, 25e-6, 12e9, 5e-6);
  const LoweringShape shape{nodes, gpus};
  const int p = nodes * gpus;
  for (const auto& [kind, algorithm, bytes] :
       {std::tuple{Collective::global_topk, "tree", pairs_bytes},
        std::tuple{Collective::allgather, "recursive-doubling", p * pairs_bytes}}) {
    CAPTURE(nodes, gpus, collective_name(kind), algorithm);
    const double expected = phase_synchronous_time(
        find_lowering(kind, algorithm)->lower(shape, bytes, Granularity::aggregated), c.network());
    const auto out = values_in_child([&] {
      const auto r = run_collectives_flow(c, {{kind, algorithm, bytes, 0.0}}, false);
      return std::vector<double>{r.jobs[0].end_s - r.jobs[0].start_s};
    });
    REQUIRE(out.size() == 1);
    CHECK_THAT(out[0], WithinRel(expected, 1e-3));
  }
}

TEST_CASE("flow::a sparsified iteration (topk, gtopk) agrees with the analytic engine", "[flow][engine][sparse]") {
  const auto kind = GENERATE("topk", "gtopk");
  CAPTURE(kind);
  auto base = load_scenario(std::string(DDLSIM_SOURCE_DIR) + "/scenarios/quickstart.json",
                            {std::string("strategy.kind=") + kind, "cluster.nodes=5"});
  const auto analytic = run_scenario(base);
  const auto out = values_in_child([&] {
    auto s = base;
    s.engine = Engine::flow;
    const auto r = run_scenario(s);
    return std::vector<double>{r.iteration_time_s, r.breakdown.compression_s};
  });
  REQUIRE(out.size() == 2);
  CHECK_THAT(out[0], WithinRel(analytic.iteration_time_s, 1e-3));
  CHECK_THAT(out[1], WithinRel(analytic.breakdown.compression_s, 1e-9));
  CHECK(analytic.breakdown.compression_s > 0);
}

TEST_CASE("flow::compressed iterations (lags, omgs, qsgd, signsgd) agree with the analytic engine",
          "[flow][engine][compression]") {
  const auto [nodes, gpus] = GENERATE(table<int, int>({{8, 1}, {4, 2}, {3, 2}}));
  const auto kind = GENERATE("lags", "omgs", "qsgd", "signsgd");
  CAPTURE(nodes, gpus, kind);
  auto base =
      load_scenario(std::string(DDLSIM_SOURCE_DIR) + "/scenarios/sparse-1gbe.json",
                    {std::string("strategy.kind=") + kind, "model.zoo=resnet20-cifar", "model.batch_per_gpu=128",
                     fmt::format("cluster.nodes={}", nodes), fmt::format("cluster.gpus_per_node={}", gpus),
                     "cluster.intra_node.bandwidth=12 GB/s", "cluster.intra_node.latency=5 us"});
  const auto analytic = run_scenario(base);
  const auto out = values_in_child([&] {
    auto s = base;
    s.engine = Engine::flow;
    const auto r = run_scenario(s);
    return std::vector<double>{r.iteration_time_s, r.breakdown.compression_s, static_cast<double>(r.sim.flows)};
  });
  REQUIRE(out.size() == 3);
  CHECK_THAT(out[0], WithinRel(analytic.iteration_time_s, 1e-3));
  // The selection kernels interleave with backward: their exposed time follows the communication's timing.
  CHECK_THAT(out[1], WithinRel(analytic.breakdown.compression_s, 1e-3));
  CHECK(out[2] > 0);
}

TEST_CASE("flow engine: SimGrid's maestro activity list is kept empty (or the unlinking is not built in)",
          "[flow][simgrid]") {
  // sim/flow/maestro_activities.hpp reaches into SimGrid 3.32's private actor object; a SimGrid whose layout moved
  // makes it find no list ("not found"): correct figures, but every activity's end scans every activity in flight.
  // Rebuild with -DDDLSIM_SIMGRID_MAESTRO_UNLINK=OFF, or find the list again (docs/simgrid-maestro-list.md).
  const auto report = test::run_in_child([](test::ChildReport& out) {
    const auto r =
        run_collectives_flow(cluster(4, 4, 12.5e9, 5e-6), {{Collective::allreduce, "ring", 64e6, 0.0}}, false, false);
    out.texts.push_back(r.maestro_list);
  });
  REQUIRE(report.error.empty());
  REQUIRE(report.texts.size() == 1);
  INFO("maestro list: " << report.texts[0]);
  CHECK((report.texts[0] == "kept empty" || report.texts[0] == "off"));
}
