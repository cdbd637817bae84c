// Lowerings against the analytic engine's closed forms (sim/network/collectives.cpp): a contention-free evaluator runs
// the phases on a two-level cluster (GPU links inside a node, one NIC per node on a star) and must reproduce the
// alpha-beta cost of ring, halving-doubling, hierarchical and double-binary-tree allreduce.
#include "sim/network/collectives.hpp"
#include "sim/network/lowering/evaluate.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

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
  return evaluate(lower(Collective::allreduce, algorithm, {net.nodes, net.gpus_per_node}, bytes, granularity), net);
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

TEST_CASE("lowering::the aggregated tree reproduces the double binary tree from 4 single-GPU nodes on",
          "[lowering][closed-form]") {
  // 2 ceil(log2 p) a + 2n/B needs a NIC that carries 2n (four flows of n/2): a node inner in one tree and not the
  // root of the other. Two and three nodes have none: each NIC carries n (two flows of n/2), resp. three flows.
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
  // p = 2: each tree is the edge 0 - 1; p = 3: three flows of n/2 leave node 0 (closed forms: 2a + 2n/B, 4a + 2n/B).
  CHECK_THAT(lowered("tree", {2, 1, {}, {bandwidth, latency}}, bytes, Granularity::aggregated),
             WithinRel(2 * a + bytes / bandwidth, 1e-9));
  CHECK_THAT(lowered("tree", {3, 1, {}, {bandwidth, latency}}, bytes, Granularity::aggregated),
             WithinRel(4 * a + 1.5 * bytes / bandwidth, 1e-9));
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
    // Tree: exact once a link carries 2n (4+ nodes; on one node a chain of 3+ GPUs), faster otherwise.
    const double tree = lowered("tree", net, bytes, Granularity::aggregated);
    if (nodes >= 4 || (nodes == 1 && g >= 3))
      CHECK_THAT(tree, WithinRel(closed_form("tree", net, bytes), 1e-9));
    else
      CHECK(tree < closed_form("tree", net, bytes));
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
