// Collective lowerings (sim/network/lowering): the registry, well-formed phases for every algorithm and shape,
// aggregated against per-message lowerings (same pairs, same bytes, folded steps counted in latency_repeats), and sizes
// at 8192 ranks.
#include "sim/network/lowering/evaluate.hpp"
#include "support.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <string_view>

using namespace ddlsim::sim;
using namespace ddlsim::sim::test;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;

TEST_CASE("lowering::registry lists each algorithm once and finds it by collective and name", "[lowering]") {
  std::set<std::pair<std::string, std::string>> seen;
  for (const auto& l : lowerings()) {
    CAPTURE(collective_name(l.collective), l.algorithm);
    CHECK(seen.emplace(std::string(collective_name(l.collective)), std::string(l.algorithm)).second);
    CHECK(find_lowering(l.collective, l.algorithm) == &l);
    CHECK(l.lower != nullptr);
  }
  CHECK(seen == std::set<std::pair<std::string, std::string>>{{"allreduce", "halving-doubling"},
                                                              {"allreduce", "hierarchical"},
                                                              {"allreduce", "nvls"},
                                                              {"allreduce", "ring"},
                                                              {"allreduce", "tree"},
                                                              {"allgather", "recursive-doubling"},
                                                              {"allgather", "ring"},
                                                              {"reduce_scatter", "ring"},
                                                              {"broadcast", "ring"},
                                                              {"global_topk", "tree"},
                                                              {"ps_push", "sharded"},
                                                              {"ps_pull", "sharded"},
                                                              {"broadcast", "tree"},
                                                              {"point_to_point", "direct"}});
  CHECK(find_lowering(Collective::allreduce, "butterfly") == nullptr);
  CHECK(find_lowering(Collective::reduce_scatter, "tree") == nullptr);
}

TEST_CASE("lowering::registry groups each collective's algorithms by name, with one default", "[lowering]") {
  const auto names = [](std::span<const CollectiveLowering> algorithms) {
    std::vector<std::string> out;
    for (const auto& a : algorithms)
      out.emplace_back(a.algorithm);
    return out;
  };
  CHECK(names(lowerings(Collective::allreduce)) ==
        std::vector<std::string>{"halving-doubling", "hierarchical", "nvls", "ring", "tree"});
  CHECK(names(lowerings(Collective::allgather)) == std::vector<std::string>{"recursive-doubling", "ring"});
  CHECK(lowerings(Collective::none).empty());
  CHECK(default_lowering(Collective::none) == nullptr);
  const auto default_of = [](Collective c) { return std::string(default_lowering(c)->algorithm); };
  CHECK(default_of(Collective::allreduce) == "ring");
  CHECK(default_of(Collective::allgather) == "recursive-doubling");
  CHECK(default_of(Collective::global_topk) == "tree");
  CHECK(default_of(Collective::ps_push) == "sharded");
  CHECK(default_of(Collective::ps_pull) == "sharded");
  for (const auto& l : lowerings()) {
    CAPTURE(collective_name(l.collective), l.algorithm);
    CHECK(std::ranges::count_if(lowerings(l.collective), [](const auto& a) { return a.is_default; }) == 1);
  }
}

TEST_CASE("lowering::an algorithm's cost model is its closed form, or else its lowering's", "[lowering]") {
  const Network net{4, 2, {100e9, 1e-6}, {12.5e9, 5e-6}};
  const LoweringShape shape{net.nodes, net.gpus_per_node};
  const double n = 64e6;
  for (const char* algorithm : {"halving-doubling", "hierarchical", "ring", "tree"}) {
    CAPTURE(algorithm);
    const auto* allreduce = find_lowering(Collective::allreduce, algorithm);
    REQUIRE(allreduce->closed_form != nullptr);
    CHECK(make_cost_model(*allreduce, net)->cost(n).time_s == allreduce->closed_form(net)->cost(n).time_s);
  }
  REQUIRE(find_lowering(Collective::allgather, "ring")->closed_form == nullptr);
  const auto* allgather = find_lowering(Collective::allgather, "ring");
  const auto phases = allgather->lower(shape, n, Granularity::aggregated);
  const auto cost = make_cost_model(*allgather, net)->cost(n);
  CHECK(cost.time_s == phase_synchronous_time(phases, net));
  CHECK(cost.bytes_sent == busiest_sender_bytes(phases, net.workers()));
}

namespace {

std::string describe_flow(std::size_t phase, std::size_t index, const Flow& f) {
  std::ostringstream s;
  s << "phase " << phase << " flow " << index << ": " << f.src << " -> " << f.dst << ", " << f.bytes << " bytes, "
    << f.latency_repeats << " latencies";
  return s.str();
}

// Checks one property of every flow of `phases`: a failure names the property, how many flows break it and the
// first of them (one assertion per property, not per flow: the loops below lower thousands of flows).
template <class Holds> void check_every_flow(const std::vector<Phase>& phases, std::string_view property, Holds holds) {
  std::size_t broken = 0;
  std::string first;
  for (std::size_t i = 0; i < phases.size(); ++i)
    for (std::size_t j = 0; j < phases[i].flows.size(); ++j)
      if (!holds(phases[i].flows[j]) && broken++ == 0)
        first = describe_flow(i, j, phases[i].flows[j]);
  INFO("every flow: " << property << "; " << broken << " do not, the first: " << first);
  CHECK(broken == 0);
}

} // namespace

TEST_CASE("lowering::every lowering emits well-formed, deterministic phases", "[lowering]") {
  // A flow joins two distinct ranks of the shape, carries a finite non-negative byte count (0 bytes when the
  // payload is 0) and pays its latency at least once; no phase is empty; the same input lowers identically.
  for (const auto& l : lowerings())
    for (const auto& shape : shapes())
      for (auto granularity : {Granularity::aggregated, Granularity::per_message})
        for (double bytes : {0.0, 1.0, 3e6}) {
          CAPTURE(collective_name(l.collective), l.algorithm, describe(shape), describe(granularity), bytes);
          const int p = shape.workers();
          const auto phases = l.lower(shape, bytes, granularity);
          if (p == 1)
            CHECK(phases.empty());
          else
            CHECK(!phases.empty());
          CHECK(std::count_if(phases.begin(), phases.end(), [](const Phase& ph) { return ph.flows.empty(); }) == 0);
          check_every_flow(phases, "its source is a rank", [p](const Flow& f) { return f.src >= 0 && f.src < p; });
          check_every_flow(phases, "its destination is a rank", [p](const Flow& f) { return f.dst >= 0 && f.dst < p; });
          check_every_flow(phases, "source and destination differ", [](const Flow& f) { return f.src != f.dst; });
          check_every_flow(phases, "its bytes are finite", [](const Flow& f) { return std::isfinite(f.bytes); });
          check_every_flow(phases, "its bytes are not negative", [](const Flow& f) { return f.bytes >= 0; });
          check_every_flow(phases, "it pays its latency at least once",
                           [](const Flow& f) { return f.latency_repeats >= 1; });
          check_every_flow(phases, "it carries no bytes when the payload is 0",
                           [bytes](const Flow& f) { return bytes > 0 || f.bytes == 0; });

          // Deterministic: a function of its input alone. Another input is lowered in between, so that state kept
          // from one call to the next (a cache, a reused buffer) would show; `again` must equal `phases` exactly.
          (void)l.lower(LoweringShape{3, 2}, bytes + 12345,
                        granularity == Granularity::aggregated ? Granularity::per_message : Granularity::aggregated);
          const auto again = l.lower(shape, bytes, granularity);
          REQUIRE(again.size() == phases.size());
          std::string difference; // the first, empty if none
          for (std::size_t i = 0; difference.empty() && i < phases.size(); ++i) {
            if (again[i].flows.size() != phases[i].flows.size()) {
              difference = "phase " + std::to_string(i) + " has " + std::to_string(phases[i].flows.size()) +
                           " flows, then " + std::to_string(again[i].flows.size());
              continue;
            }
            for (std::size_t j = 0; difference.empty() && j < phases[i].flows.size(); ++j) {
              const Flow &a = phases[i].flows[j], &b = again[i].flows[j];
              if (a.src != b.src || a.dst != b.dst || a.bytes != b.bytes || a.latency_repeats != b.latency_repeats)
                difference = describe_flow(i, j, a) + ", then " + describe_flow(i, j, b);
            }
          }
          INFO("lowered differently the second time: " << difference);
          CHECK(difference.empty());
        }
}

TEST_CASE("lowering::aggregated lowerings move the per-message bytes between the same pairs", "[lowering]") {
  // Folding steps keeps every (src, dst) pair and its bytes. For the step-synchronous algorithms, an aggregated
  // flow's latency_repeats counts the per-message flows it folds. The pipelined ones (allreduce tree, broadcast
  // ring) instead repeat the latency of the pipeline's depth, so that count is not compared for them.
  for (const auto& l : lowerings())
    for (const auto& shape : shapes())
      for (double bytes : {0.0, 5e6}) {
        CAPTURE(collective_name(l.collective), l.algorithm, describe(shape), bytes);
        const auto agg = pair_tally(l.lower(shape, bytes, Granularity::aggregated));
        const auto msg = pair_tally(l.lower(shape, bytes, Granularity::per_message));
        const bool pipelined = (l.collective == Collective::allreduce && l.algorithm == "tree") ||
                               (l.collective == Collective::broadcast && l.algorithm == "ring");
        REQUIRE(agg.size() == msg.size());
        for (const auto& [pair, a] : agg) {
          CAPTURE(pair.first, pair.second);
          const auto it = msg.find(pair);
          REQUIRE(it != msg.end());
          CHECK_THAT(a.bytes, WithinRel(it->second.bytes, 1e-12) || WithinAbs(it->second.bytes, 1e-9));
          if (!pipelined)
            CHECK(a.latency_repeats == it->second.flows);
          CHECK(it->second.latency_repeats == it->second.flows); // per-message flows pay their latency once
        }
      }
}

TEST_CASE("lowering::aggregated algorithms fold into few phases", "[lowering]") {
  const double n = 64e6;
  SECTION("ring allreduce: one phase of p flows of 2(p-1)/p n, latency_repeats 2(p-1)") {
    const auto phases = lower(Collective::allreduce, "ring", {4, 4}, n, Granularity::aggregated);
    REQUIRE(phases.size() == 1);
    REQUIRE(phases[0].flows.size() == 16);
    for (const auto& f : phases[0].flows) {
      CHECK(f.dst == (f.src + 1) % 16);
      CHECK_THAT(f.bytes, WithinRel(2.0 * 15 / 16 * n, 1e-12));
      CHECK(f.latency_repeats == 30);
    }
  }
  SECTION("halving-doubling on 12 ranks: pre, log2 8 = 3 folded core phases far to near, post") {
    const auto phases = lower(Collective::allreduce, "halving-doubling", {12, 1}, n, Granularity::aggregated);
    REQUIRE(phases.size() == 5);
    CHECK(phases[0].flows.size() == 4);
    CHECK(phases[4].flows.size() == 4);
    for (std::size_t s = 1; s <= 3; ++s) {
      CAPTURE(s);
      const double d = 8 >> s; // virtual distance 4, 2, 1
      REQUIRE(phases[s].flows.size() == 8);
      for (const auto& f : phases[s].flows) {
        CHECK_THAT(f.bytes, WithinRel(2 * d / 8 * n, 1e-12));
        CHECK(f.latency_repeats == 2);
      }
    }
  }
  SECTION("hierarchical on 4 x 8: one intra-node phase, one inter-node phase") {
    const auto phases = lower(Collective::allreduce, "hierarchical", {4, 8}, n, Granularity::aggregated);
    REQUIRE(phases.size() == 2);
    CHECK(phases[0].flows[0].latency_repeats == 14);
    CHECK_THAT(phases[0].flows[0].bytes, WithinRel(2.0 * 7 / 8 * n, 1e-12));
    CHECK(phases[1].flows[0].latency_repeats == 6);
    CHECK_THAT(phases[1].flows[0].bytes, WithinRel(2.0 * 3 / 4 * n / 8, 1e-12));
  }
  SECTION("tree on 8 x 4: a zero-byte chain-latency phase, then every edge of both trees at once") {
    const auto phases = lower(Collective::allreduce, "tree", {8, 4}, n, Granularity::aggregated);
    REQUIRE(phases.size() == 2);
    REQUIRE(phases[0].flows.size() == 8);
    for (const auto& f : phases[0].flows) {
      CHECK(f.bytes == 0);
      CHECK(f.latency_repeats == 6); // 2(g-1)
      CHECK(f.src / 4 == f.dst / 4);
    }
    REQUIRE(phases[1].flows.size() == 4 * 31); // 2 trees x 31 edges x 2 directions
    for (const auto& f : phases[1].flows) {
      CHECK(f.bytes == n / 2);
      CHECK(f.latency_repeats == (f.src / 4 != f.dst / 4 ? 6 : 1)); // 2 ceil(log2 8) across nodes
    }
  }
  SECTION("broadcast ring: one phase, edge i -> i+1 carries n and repeats the i+1 hops of the pipeline") {
    const auto phases = lower(Collective::broadcast, "ring", {3, 2}, n, Granularity::aggregated);
    REQUIRE(phases.size() == 1);
    REQUIRE(phases[0].flows.size() == 5);
    for (int i = 0; i < 5; ++i) {
      const auto& f = phases[0].flows[static_cast<std::size_t>(i)];
      CAPTURE(i);
      CHECK(f.src == i);
      CHECK(f.dst == i + 1);
      CHECK(f.bytes == n);
      CHECK(f.latency_repeats == i + 1);
    }
  }
}

TEST_CASE("lowering::8192 ranks lower into phase-level flows", "[lowering][scale]") {
  SECTION("aggregated ring allreduce: 1 phase of 8192 flows") {
    for (const LoweringShape shape : {LoweringShape{8192, 1}, LoweringShape{1024, 8}}) {
      CAPTURE(describe(shape));
      const auto phases = lower(Collective::allreduce, "ring", shape, 1e9, Granularity::aggregated);
      REQUIRE(phases.size() == 1);
      CHECK(phases[0].flows.size() == 8192);
    }
  }
  SECTION("per-message ring allreduce: 2(p-1) phases of p flows") {
    // 8192 ranks would hold 2 x 8191 x 8192 = 134 M flows (3 GiB); the count is checked at 1024 ranks.
    const auto phases = lower(Collective::allreduce, "ring", {1024, 1}, 1e9, Granularity::per_message);
    CHECK(phases.size() == 2 * 1023);
    CHECK(phases.back().flows.size() == 1024);
  }
  SECTION("every aggregated lowering stays at O(p) flows per phase and few phases") {
    for (const auto& l : lowerings()) {
      CAPTURE(collective_name(l.collective), l.algorithm);
      // A parameter server's push and pull are all-to-servers: p x S flows (here 16 dedicated servers).
      const bool ps = l.collective == Collective::ps_push || l.collective == Collective::ps_pull;
      const auto phases = l.lower({1024, 8, ps ? 16 : 0, ps}, 1e9, Granularity::aggregated);
      CHECK(phases.size() <= 2 * 13 + 2); // gTop-k: log2 p rounds up the tree and log2 p down
      for (const auto& ph : phases)
        CHECK(ph.flows.size() <= (ps ? 16 * 8192 : 4 * 8192));
    }
  }
}

TEST_CASE("lowering::a linear cost is affine, alpha + n beta, where one flow is each phase's slowest at every payload",
          "[lowering]") {
  // A ring inside one node or over single-GPU nodes has one slowest flow per phase whatever the payload, so planners
  // (MG-WFBP over sharded reduce-scatters) may rank candidates in O(1); the figure is the phase-synchronous time
  // itself. Across multi-GPU nodes a phase may pair a flow of more latency with one of less bandwidth: not affine.
  const Network net{4, 2, {100e9, 1e-6}, {12.5e9, 5e-6}};
  for (const auto& shape : shapes()) {
    CAPTURE(describe(shape));
    const Network on{shape.nodes, shape.gpus_per_node, net.intra, net.inter};
    for (const auto collective : {Collective::reduce_scatter, Collective::allgather}) {
      const LinearLoweringCost cost(*find_lowering(collective, "ring"), shape, on);
      const auto ab = cost.affine();
      if (shape.nodes == 1 || shape.gpus_per_node == 1)
        REQUIRE(ab);
      if (!ab)
        continue;
      for (const double n : {0.0, 1.0, 4096.0, 64e6, 5e9})
        CHECK_THAT(ab->alpha_s + n * ab->beta_s_per_byte, WithinRel(cost(n), 1e-12) || WithinAbs(cost(n), 1e-18));
    }
  }
}
