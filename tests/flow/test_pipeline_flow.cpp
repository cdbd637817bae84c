// Pipelines on both engines: without contention the flow engine agrees with the analytic engine's closed forms; in
// a hybrid (data x pipeline) run every replica's transfers cross the same NIC at once, which only the flow engine
// sees.
#include "sim/analytic/analytic.hpp"
#include "sim/flow/flow_engine.hpp"
#include "sim/spec/scenario.hpp"
#include "support/run_in_child.hpp"

#include <catch2/catch.hpp>

using namespace ddlsim;
using namespace ddlsim::sim;
using Catch::Matchers::WithinRel;

namespace {

// 8 equal layers, `nodes` x `gpus` GPUs, `pipeline` stages of 1F1B over 8 micro-batches.
Scenario pipelined(int nodes, int gpus, int pipeline, const std::string& schedule = "1f1b") {
  Json doc = Json::parse(R"({
    "name": "pipe",
    "model": {"layers": [], "batch_per_gpu": 4},
    "gpu": {"peak_flops": "10 TFLOPS", "memory_bandwidth": "900 GB/s"},
    "cluster": {"intra_node": {"bandwidth": "100 GB/s", "latency": "2 us"},
                "inter_node": {"bandwidth": "10 Gbps", "latency": "25 us"}},
    "strategy": {"kind": "wfbp"}
  })");
  for (int l = 0; l < 8; ++l)
    doc["model"]["layers"].push_back({{"name", "l" + std::to_string(l)},
                                      {"params", 100000},
                                      {"fwd_flops", "20 GFLOP"},
                                      {"activation_bytes", "256 kB"}});
  doc["cluster"]["nodes"] = nodes;
  doc["cluster"]["gpus_per_node"] = gpus;
  doc["parallelism"] = {{"pipeline", pipeline}};
  doc["pipeline"] = {{"schedule", schedule}, {"micro_batches", 8}};
  return parse_scenario(doc, "pipe.json");
}

// The flow engine's iteration and longest transfer, in a child (one SimGrid engine per process).
std::vector<double> flow_run(const Scenario& s) {
  const auto report = test::run_in_child([&](test::ChildReport& out) {
    const auto r = run_flow(s);
    double longest = 0;
    for (std::size_t v = 0; v < r.graph.size(); ++v)
      if (dag::collective_of(r.graph.task(v)) == dag::Collective::point_to_point)
        longest = std::max(longest, r.timing[v].end_s - r.timing[v].start_s);
    out.values = {r.iteration_time_s, longest, static_cast<double>(r.replicas.size() + 1)};
  });
  INFO(report.error);
  REQUIRE(report.error.empty());
  REQUIRE(report.values.size() == 3);
  return report.values;
}

double longest_transfer(const RunResult& r) {
  double longest = 0;
  for (std::size_t v = 0; v < r.graph.size(); ++v)
    if (dag::collective_of(r.graph.task(v)) == dag::Collective::point_to_point)
      longest = std::max(longest, r.timing[v].end_s - r.timing[v].start_s);
  return longest;
}

} // namespace

TEST_CASE("flow: a pipeline without contention agrees with the analytic engine", "[flow][pipeline]") {
  // One GPU per node, one replica: each stage's sends leave its own NIC, one at a time.
  for (const std::string schedule : {"gpipe", "1f1b", "interleaved-1f1b"}) {
    CAPTURE(schedule);
    const auto s = pipelined(4, 1, 4, schedule);
    const auto analytic = run_analytic(s);
    const auto flow = flow_run(s);
    CHECK_THAT(flow[0], WithinRel(analytic.iteration_time_s, 0.005));
    CHECK(flow[2] == 1); // one replica
  }
}

TEST_CASE("flow: a hybrid pipeline's replicas share the NIC that their transfers cross",
          "[flow][pipeline][contention]") {
  // 2 nodes x 4 GPUs, 2 stages, 4 replicas: stage 0 on node 0, stage 1 on node 1; the 4 replicas' transfers
  // cross the one NIC of each node at the same instants, so each takes 4 times its time alone (the NIC's share
  // of 10 Gb/s): 2 l + 4 n / B on both engines (the analytic engine times a task's instances together,
  // sim/plan/contention.hpp).
  const auto s = pipelined(2, 4, 2);
  REQUIRE(s.parallelism.data == 4);
  const auto analytic = run_analytic(s);
  const auto flow = flow_run(s);
  CHECK(flow[2] == 4);            // every replica simulated
  const double bytes = 256e3 * 4; // the cut layer's activations for a micro-batch of 4
  const double shared = 2 * 25e-6 + 4 * bytes / 1.25e9;
  CHECK_THAT(longest_transfer(analytic), WithinRel(shared, 1e-9));
  CHECK_THAT(flow[1], WithinRel(shared, 0.01));
  CHECK_THAT(flow[0], WithinRel(analytic.iteration_time_s, 1e-3));
}

TEST_CASE("flow: tensor-group collectives on intra-node links of their own are timed exactly without their flows",
          "[flow][pipeline][tensor]") {
  // GPT-2 medium on 4 nodes x 4 GPUs: 2 stages of 4 tensor ranks (one node each), 2 data-parallel replicas; every
  // node's intra links carry only its tensor group's collectives.
  Json doc = Json::parse(R"({
    "name": "tensor",
    "model": {"zoo": "gpt2-medium", "batch_per_gpu": 2, "gradient_dtype": "bf16"},
    "gpu": {"preset": "A100-SXM4-80GB", "efficiency": 0.5},
    "cluster": {"nodes": 4, "gpus_per_node": 4, "intra_node": {"bandwidth": "300 GB/s", "latency": "1 us"},
                "inter_node": {"bandwidth": "200 Gbps", "latency": "2 us"}, "nic": "per-gpu"},
    "strategy": {"kind": "ddp"},
    "parallelism": {"pipeline": 2, "tensor": 4, "sequence_parallel": true},
    "pipeline": {"schedule": "1f1b", "micro_batches": 4, "partition": "uniform", "recompute": "full"}
  })");
  const auto run = [](const Scenario& s) {
    const auto report = test::run_in_child([&](test::ChildReport& out) {
      const auto r = run_flow(s);
      out.values = {r.iteration_time_s, static_cast<double>(r.sim.flows), r.breakdown.exposed_communication_s};
      for (const auto& l : r.links)
        out.values.insert(out.values.end(), {l.bytes, l.busy_s, l.peak_utilisation});
    });
    INFO(report.error);
    REQUIRE(report.error.empty());
    return report.values;
  };
  const auto own = run(parse_scenario(doc, "t.json"));
  doc["flow"] = {{"own_links", "off"}};
  const auto simulated = run(parse_scenario(doc, "t.json"));
  REQUIRE(own.size() == simulated.size());
  CHECK(own[1] < simulated[1] / 10); // far fewer flows on the platform
  CHECK_THAT(own[0], WithinRel(simulated[0], 1e-9));
  CHECK_THAT(own[2], WithinRel(simulated[2], 1e-9));
  double intra = 0;
  for (std::size_t i = 3; i < own.size(); ++i) {
    CAPTURE(i);
    CHECK_THAT(own[i], WithinRel(simulated[i], 1e-9) || Catch::Matchers::WithinAbs(simulated[i], 1e-12));
    intra += (i - 3) % 3 == 0 ? own[i] : 0.0;
  }
  CHECK(intra > 0);
  // Contention-free (the stages' reductions come after the flush): the analytic engine agrees.
  CHECK_THAT(own[0], WithinRel(run_analytic(parse_scenario(doc, "t.json")).iteration_time_s, 5e-3));
}
