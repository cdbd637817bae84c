// Lowerings against the analytic engine's closed forms (sim/network/collectives.cpp): a contention-free evaluator runs
// the phases on a two-level cluster (GPU links inside a node, one NIC per node on a star) and must reproduce the
// alpha-beta cost of ring, halving-doubling, hierarchical and double-binary-tree allreduce.
#include "sim/network/collectives.hpp"
#include "sim/network/lowering/evaluate.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

using namespace ddlsim::sim;
using namespace ddlsim::sim::test;
using Catch::Matchers::WithinRel;

namespace {

// The contention-free evaluator the analytic engine uses for lowerings without a closed form.
double evaluate(const std::vector<Phase>& phases, const Network& net) {
  return phase_synchronous_time(phases, net);
}

double closed_form(std::string_view algorithm, const Network& net, double bytes) {
  return find_lowering(Collective::allreduce, algorithm)->closed_form(net)->cost(bytes).time_s;
}

double lowered(std::string_view algorithm, const Network& net, double bytes, Granularity granularity) {
  const LoweringShape shape{.nodes = net.nodes, .gpus_per_node = net.gpus_per_node, .rails = net.nic_per_gpu};
  return evaluate(lower(Collective::allreduce, algorithm, shape, bytes, granularity), net);
}

} // namespace

TEST_CASE("lowering::ring, halving-doubling and hierarchical reproduce their closed forms on a star of single-GPU "
          "nodes",
          "[lowering][closed-form]") {
  auto [bytes, bandwidth, latency] = GENERATE(table<double, double, double>({
      {1024.0, 1.25e9, 25e-6},
      {100e6, 1.25e9, 25e-6},
      {1073741824.0, 12.5e9, 1e-6},
      {25.0 * 1048576, 12.5e9, 2e-6},
  }));
  const auto algorithm = GENERATE(as<std::string>{}, "ring", "halving-doubling", "hierarchical");
  const auto granularity = GENERATE(Granularity::aggregated, Granularity::per_message);
  CAPTURE(bytes, bandwidth, latency, algorithm, describe(granularity));
  for (int p = 2; p <= 64; ++p) {
    CAPTURE(p);
    const Network net{p, 1, {}, {bandwidth, latency}};
    CHECK_THAT(lowered(algorithm, net, bytes, granularity), WithinRel(closed_form(algorithm, net, bytes), 1e-9));
  }
}

TEST_CASE("lowering::the aggregated tree reproduces the double binary tree on single-GPU nodes",
          "[lowering][closed-form]") {
  // 2 ceil(log2 p) a + 2n/B from four nodes on, where a node inner in one tree and not the root of the other sends
  // four flows of n/2. Two and three nodes have none: each NIC carries n (two flows of n/2), resp. three flows,
  // and the closed form counts the trees' edges at each node.
  auto [bytes, bandwidth, latency] = GENERATE(table<double, double, double>({
      {1024.0, 1.25e9, 25e-6},
      {100e6, 1.25e9, 25e-6},
      {1073741824.0, 12.5e9, 1e-6},
  }));
  CAPTURE(bytes, bandwidth, latency);
  const double a = 2 * latency;
  for (int p = 4; p <= 64; ++p) {
    CAPTURE(p);
    const Network net{p, 1, {}, {bandwidth, latency}};
    CHECK_THAT(lowered("tree", net, bytes, Granularity::aggregated), WithinRel(closed_form("tree", net, bytes), 1e-9));
  }
  // p = 2: each tree is the edge 0 - 1; p = 3: three flows of n/2 leave node 0; the closed form agrees.
  for (const Network& net : {Network{2, 1, {}, {bandwidth, latency}}, Network{3, 1, {}, {bandwidth, latency}}}) {
    const double expected = net.nodes == 2 ? 2 * a + bytes / bandwidth : 4 * a + 1.5 * bytes / bandwidth;
    CHECK_THAT(lowered("tree", net, bytes, Granularity::aggregated), WithinRel(expected, 1e-9));
    CHECK_THAT(closed_form("tree", net, bytes), WithinRel(expected, 1e-9));
  }
}

TEST_CASE("lowering::allreduce lowerings reproduce their closed forms on multi-GPU nodes", "[lowering][closed-form]") {
  // NVLink-class GPU links (100 GB/s, 1 us) and a 100 Gbps NIC per node (12.5 GB/s, 5 us): the NIC is the
  // bottleneck, as the tree's and halving-doubling's closed forms assume for steps that mix both kinds of link.
  const double bytes = GENERATE(4096.0, 64e6);
  const int g = GENERATE(2, 3, 4, 8);
  CAPTURE(bytes, g);
  for (int nodes : {1, 2, 3, 4, 5, 8, 16}) {
    CAPTURE(nodes);
    const Network net{nodes, g, {100e9, 1e-6}, {12.5e9, 5e-6}};
    for (const char* algorithm : {"ring", "halving-doubling", "hierarchical"})
      for (auto granularity : {Granularity::aggregated, Granularity::per_message}) {
        CAPTURE(algorithm, describe(granularity));
        CHECK_THAT(lowered(algorithm, net, bytes, granularity), WithinRel(closed_form(algorithm, net, bytes), 1e-9));
      }
    // Tree: the busiest NIC's bytes (n on two nodes, 1.5n on three, 2n from four) and GPU link's (2n in a chain of 3+
    // GPUs, n in one of 2), as the aggregated lowering, with one NIC per node or per GPU (every NIC: rails, 1/g each).
    // Where the GPU links set the pace (rails, from 3 GPUs) the lowering hides the inter-node latency 2D a_e under
    // them (header of allreduce_tree.cpp): within it of the closed form, below.
    for (const bool per_gpu : {false, true}) {
      CAPTURE(per_gpu);
      Network n = net;
      n.nic_per_gpu = per_gpu;
      const double nic_bytes = (nodes == 2 ? 1.0 : nodes == 3 ? 1.5 : 2.0) * bytes / (per_gpu && nodes > 1 ? g : 1);
      const double chain_bytes = per_gpu && nodes > 1 ? 2.0 * (g - 1) / g * bytes : g >= 3 ? 2 * bytes : bytes;
      const double tree = lowered("tree", n, bytes, Granularity::aggregated);
      const double cf = closed_form("tree", n, bytes);
      if (nodes == 1 || nic_bytes / 12.5e9 >= chain_bytes / 100e9) {
        CHECK_THAT(tree, WithinRel(cf, 1e-9));
      } else {
        const double hidden = 2 * std::ceil(std::log2(nodes)) * 10e-6;
        CHECK(tree <= cf * (1 + 1e-12));
        CHECK(tree >= (cf - hidden) * (1 - 1e-12));
        CHECK_THAT(cf,
                   WithinRel(2 * ((g - 1) * 2e-6 + std::ceil(std::log2(nodes)) * 10e-6) + chain_bytes / 100e9, 1e-9));
      }
    }
  }
}

namespace {

// The ring allreduce simulated message by message with data dependencies (the reference the closed form stands
// for): rank r's send of step s starts once it has received step s-1's chunk from r-1 and its own link has finished
// sending step s-1; a send over edge r -> r+1 takes t_r = n/p / B_r and arrives a_r later. Returns the last arrival.
double dependency_driven_ring(const Network& net, double bytes) {
  const int p = net.workers(), g = net.gpus_per_node;
  std::vector<double> t(static_cast<std::size_t>(p)), a(static_cast<std::size_t>(p));
  for (int r = 0; r < p; ++r) {
    const bool inter = (r + 1) % g == 0 && net.nodes > 1;
    const LinkSpec& link = inter ? net.inter : net.intra;
    t[static_cast<std::size_t>(r)] = bytes / p / link.bandwidth;
    a[static_cast<std::size_t>(r)] = 2 * link.latency_s;
  }
  std::vector<double> arrival(static_cast<std::size_t>(p), 0.0), link_free(static_cast<std::size_t>(p), 0.0);
  for (int s = 0; s < 2 * (p - 1); ++s) {
    std::vector<double> next(static_cast<std::size_t>(p));
    for (int r = 0; r < p; ++r) {
      const auto i = static_cast<std::size_t>(r);
      const double received = s == 0 ? 0.0 : arrival[static_cast<std::size_t>((r + p - 1) % p)];
      const double start = std::max(received, link_free[i]);
      link_free[i] = start + t[i];
      next[i] = start + t[i] + a[i];
    }
    arrival = std::move(next);
  }
  return *std::max_element(arrival.begin(), arrival.end());
}

} // namespace

TEST_CASE("lowering::a ring pays each hop's latency along its critical chunk's walk", "[lowering][closed-form]") {
  // N nodes of g GPUs, GPU links (a_i = 2 x 1 us) and NICs (a_e = 2 x 5 us): the ring's 2(p-1) hops are k
  // inter-node ones and 2(p-1) - k intra-node ones, k = 2N for g >= 3 (a chunk can skip two intra-node edges),
  // 2N - 1 for g = 2, 2(p-1) for g = 1 and 0 on one node; the bandwidth term runs at the slower link.
  const double bytes = GENERATE(0.0, 4096.0, 64e6);
  const int g = GENERATE(1, 2, 3, 4, 8);
  CAPTURE(bytes, g);
  for (int nodes : {1, 2, 3, 4, 16}) {
    CAPTURE(nodes);
    const Network net{nodes, g, {100e9, 1e-6}, {12.5e9, 5e-6}};
    const int p = nodes * g;
    if (p == 1)
      continue;
    const int k = nodes == 1 ? 0 : g == 1 ? 2 * (p - 1) : g == 2 ? 2 * nodes - 1 : 2 * nodes;
    const double bandwidth = nodes > 1 ? 12.5e9 : 100e9;
    const double expected = (2 * (p - 1) - k) * 2e-6 + k * 10e-6 + 2.0 * (p - 1) / p * bytes / bandwidth;
    CHECK_THAT(closed_form("ring", net, bytes), WithinRel(expected, 1e-9));
    for (auto granularity : {Granularity::aggregated, Granularity::per_message}) {
      CAPTURE(describe(granularity));
      CHECK_THAT(lowered("ring", net, bytes, granularity), WithinRel(expected, 1e-9));
    }
  }
}

TEST_CASE("lowering::the ring's closed form is the message-by-message ring's, pipelined", "[lowering][closed-form]") {
  // Whole-chunk messages with data dependencies take exactly the closed form when latency alone counts (n = 0) or
  // every link has one bandwidth (every dependency path then carries 2(p-1) transfers and the critical walk's
  // latencies); with a faster link inside the node, less: the closed form is the pipelined ring (NCCL cuts each
  // chunk into slices), whose throughput is its slowest edge's.
  const int g = GENERATE(1, 2, 3, 4, 8);
  const double bytes = GENERATE(0.0, 4096.0, 1e6, 64e6);
  CAPTURE(g, bytes);
  for (int nodes : {1, 2, 3, 5}) {
    CAPTURE(nodes);
    if (nodes * g == 1)
      continue;
    const Network uniform{nodes, g, {12.5e9, 1e-6}, {12.5e9, 5e-6}};
    CHECK_THAT(dependency_driven_ring(uniform, bytes), WithinRel(closed_form("ring", uniform, bytes), 1e-9));
    const Network nvlink{nodes, g, {100e9, 1e-6}, {12.5e9, 5e-6}};
    if (bytes == 0 || nodes == 1 || g == 1)
      CHECK_THAT(dependency_driven_ring(nvlink, bytes), WithinRel(closed_form("ring", nvlink, bytes), 1e-9));
    else
      CHECK(dependency_driven_ring(nvlink, bytes) < closed_form("ring", nvlink, bytes));
  }
}

TEST_CASE("lowering::per-message ring steps pay the critical chunk's hops in order", "[lowering][closed-form]") {
  // 2 nodes x 3 GPUs (p = 6): edges 0>1, 1>2 intra, 2>3 inter, 3>4, 4>5 intra, 5>0 inter. The walk of 10 edges
  // with the most inter-node hops starts after two intra-node edges: at edge 2 (2>3), crossing 4 inter-node hops.
  const Network net{2, 3, {100e9, 1e-6}, {12.5e9, 5e-6}};
  const auto phases = lower(Collective::allreduce, "ring", {2, 3}, 6e6, Granularity::per_message);
  REQUIRE(phases.size() == 10);
  std::vector<double> edges;
  for (const auto& f : phases[0].flows)
    edges.push_back(2 * (f.src / 3 == f.dst / 3 ? net.intra : net.inter).latency_s);
  const auto walk = critical_walk(edges, 10);
  CHECK(walk.first == 2);
  CHECK_THAT(walk.latency_s, WithinRel(4 * 10e-6 + 6 * 2e-6, 1e-12));
  for (std::size_t k = 0; k < phases.size(); ++k) {
    CAPTURE(k);
    CHECK(phases[k].chain_hops == 10);
    CHECK(phases[k].chain_hop == static_cast<int>(k));
    const bool inter = (2 + k) % 3 == 2; // edge j is inter-node when j % 3 == 2
    CHECK(walk_hop_latency(edges, walk, static_cast<int>(k)) == (inter ? 10e-6 : 2e-6));
  }
}

TEST_CASE("lowering::per-message tree and broadcast ring pay one latency per synchronous pipeline step",
          "[lowering][closed-form]") {
  // Phases are synchronous, so a pipeline of k chunks over H hops takes (k + H - 1) steps of a + chunk / B, not
  // the perfect pipeline's H a + n/B of the aggregated lowering.
  const double n = 16 * 512.0 * 1024; // 16 chunks for the broadcast, 8 per tree
  const double B = 12.5e9, l = 5e-6, a = 2 * l;
  SECTION("broadcast ring on 8 single-GPU nodes: k + p - 2 steps of one chunk per link") {
    const Network net{8, 1, {}, {B, l}};
    const auto per_message = lower(Collective::broadcast, "ring", {8, 1}, n, Granularity::per_message);
    CHECK(per_message.size() == 16 + 6);
    CHECK_THAT(evaluate(per_message, net), WithinRel((16 + 6) * (a + n / 16 / B), 1e-9));
    CHECK_THAT(evaluate(lower(Collective::broadcast, "ring", {8, 1}, n, Granularity::aggregated), net),
               WithinRel(7 * a + n / B, 1e-9));
  }
  SECTION("tree on 8 single-GPU nodes: k + 2H - 1 steps, H = 3") {
    const auto per_message = lower(Collective::allreduce, "tree", {8, 1}, n, Granularity::per_message);
    CHECK(per_message.size() == 8 + 2 * 3 - 1);
  }
}

TEST_CASE("lowering::the gTop-k paper's cost model: dense ring, Top-k by recursive-doubling allgather, gTop-k",
          "[lowering][closed-form][sparse]") {
  // Shi et al., ICDCS 2019, Table I, with alpha per message and beta per element on p single-GPU workers of a
  // star: dense ring allreduce 2(p-1) a + 2(p-1)/p m b; Top-k (allgather of k values and k indices by recursive
  // doubling) log2(p) a + 2(p-1) rho m b; gTop-k 2 log2(p) a + 4 log2(p) rho m b. Here a = 2 x NIC latency (two
  // NIC links per message), b = 4 bytes / B (fp32 values, int32 indices).
  const double m = 25557032; // ResNet-50's gradient elements
  const double rho = GENERATE(0.001, 0.01);
  const double bandwidth = GENERATE(1.25e8, 1.25e9); // 1 GbE, 10 GbE
  const double latency = 25e-6;
  CAPTURE(rho, bandwidth);
  const double a = 2 * latency, b = 4 / bandwidth, k = rho * m;
  for (int p = 2; p <= 64; p *= 2) {
    CAPTURE(p);
    const Network net{p, 1, {}, {bandwidth, latency}};
    const double lg = std::log2(p);
    CHECK_THAT(closed_form("ring", net, 4 * m), WithinRel(2 * (p - 1) * a + 2.0 * (p - 1) / p * m * b, 1e-12));
    const auto topk = lower(Collective::allgather, "recursive-doubling", {p, 1}, p * 8 * k, Granularity::aggregated);
    CHECK_THAT(evaluate(topk, net), WithinRel(lg * a + 2 * (p - 1) * rho * m * b, 1e-12));
    const auto gtopk = lower(Collective::global_topk, "tree", {p, 1}, 8 * k, Granularity::aggregated);
    CHECK_THAT(evaluate(gtopk, net), WithinRel(2 * lg * a + 4 * lg * rho * m * b, 1e-12));
    // gTop-k's traffic grows with log2 p, Top-k's with p: from 4 workers on, gTop-k sends less per worker.
    if (p >= 4)
      CHECK(busiest_sender_bytes(gtopk, p) <= busiest_sender_bytes(topk, p));
  }
  // Non-powers of two fold r = p - p' ranks in before and out after the core: 2 log2(p') + 2 messages.
  for (int p : {3, 5, 6, 7, 12, 33}) {
    CAPTURE(p);
    const Network net{p, 1, {}, {bandwidth, latency}};
    const double core_rounds = std::floor(std::log2(p));
    const auto gtopk = lower(Collective::global_topk, "tree", {p, 1}, 8 * k, Granularity::aggregated);
    CHECK_THAT(evaluate(gtopk, net), WithinRel((2 * core_rounds + 2) * (a + 2 * k * b), 1e-12));
  }
}
