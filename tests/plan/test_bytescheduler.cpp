// ByteScheduler (issue #14, item 5; dag/strategies/bytescheduler.cpp, sim/plan/schedule.cpp): priority admission
// within a credit on hand-built graphs, and the strategy's timeline on a two-layer model worked by hand.
#include "dag/strategy.hpp"
#include "sim/analytic/analytic.hpp"
#include "sim/plan/schedule.hpp"
#include "sim/spec/scenario.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace ddlsim;
using namespace ddlsim::sim;
using Catch::Matchers::Contains;
using Catch::Matchers::WithinAbs;
using dag::Resource;
using dag::TaskKind;

TEST_CASE("schedule: prioritised transfers go in priority order while the credit allows, FIFO beyond it",
          "[plan][schedule][bytescheduler]") {
  // A (priority 2, 4 ms) ready at 0, C (priority 1, 3 ms) at 1, B (priority 0, 2 ms) at 2, 4 bytes each.
  const auto timeline = [](double credit) {
    dag::IterationGraph g;
    g.set_priority_credit(credit);
    const auto delay = [&](double ms) {
      return g.add({.kind = TaskKind::delay, .resource = Resource::none, .duration_s = ms * 1e-3});
    };
    const auto transfer = [&](double ms, int priority) {
      return g.add({.kind = TaskKind::communication,
                    .resource = Resource::comm,
                    .duration_s = ms * 1e-3,
                    .priority = priority,
                    .payload = dag::CollectiveOp{.wire = {.collective = dag::Collective::allreduce, .bytes = 4}}});
    };
    const auto a = transfer(4, 2);
    const auto c = transfer(3, 1);
    const auto b = transfer(2, 0);
    g.depend(delay(1), c);
    g.depend(delay(2), b);
    const auto t = schedule(g);
    return std::vector<double>{t[a].start_s * 1e3, t[b].start_s * 1e3, t[c].start_s * 1e3};
  };
  SECTION("credit of one transfer: A runs, then the most urgent of those waiting: B before C") {
    const auto t = timeline(4);
    CHECK_THAT(t[0], WithinAbs(0, 1e-9));
    CHECK_THAT(t[1], WithinAbs(4, 1e-9));
    CHECK_THAT(t[2], WithinAbs(6, 1e-9));
  }
  SECTION("credit of two: C was handed over at 1 behind A; B, handed at 4, runs after C") {
    const auto t = timeline(8);
    CHECK_THAT(t[2], WithinAbs(4, 1e-9));
    CHECK_THAT(t[1], WithinAbs(7, 1e-9));
  }
  SECTION("transfers ready at one instant queue before any is handed over: the most urgent goes first") {
    dag::IterationGraph g;
    g.set_priority_credit(4);
    std::vector<dag::IterationGraph::Id> ids;
    for (const int priority : {3, 1, 2})
      ids.push_back(
          g.add({.kind = TaskKind::communication,
                 .resource = Resource::comm,
                 .duration_s = 1e-3,
                 .priority = priority,
                 .payload = dag::CollectiveOp{.wire = {.collective = dag::Collective::allreduce, .bytes = 4}}}));
    const auto t = schedule(g);
    CHECK_THAT(t[ids[1]].start_s * 1e3, WithinAbs(0, 1e-9));
    CHECK_THAT(t[ids[2]].start_s * 1e3, WithinAbs(1, 1e-9));
    CHECK_THAT(t[ids[0]].start_s * 1e3, WithinAbs(2, 1e-9));
  }
  SECTION("a credit below one transfer still hands one over at a time") {
    const auto t = timeline(1);
    CHECK_THAT(t[1], WithinAbs(4, 1e-9));
    CHECK_THAT(t[2], WithinAbs(6, 1e-9));
  }
}

namespace {

// Two layers, front a (250,000 parameters) and b (2,500,000), every pass 1 ms, no update, no host tasks, on 2
// single-GPU nodes over 1 GB/s without latency: a 2-rank ring allreduce of n bytes takes n / 1 GB/s, so a's
// gradient (1 MB) 1 ms and b's (10 MB) 10 ms, in partitions of 250,000 parameters (1 ms each).
Json two_layers(const std::string& kind) {
  Json doc = Json::parse(R"({"name": "bs",
    "model": {"layers": [{"name": "a", "params": 250000, "fwd_flops": 1},
                         {"name": "b", "params": 2500000, "fwd_flops": 1}], "batch_per_gpu": 8},
    "calibration": {"format": "ddlsim-calibration", "version": 2, "batch_per_gpu": 8,
                    "layers": {"a": {"forward": "1 ms", "backward": "1 ms"},
                               "b": {"forward": "1 ms", "backward": "1 ms"}},
                    "optimizer": {"gpu": "0 s"}},
    "gpu": {}, "host": {"launch": "0 s"},
    "cluster": {"nodes": 2, "gpus_per_node": 1, "inter_node": {"bandwidth": "1 GB/s", "latency": "0 s"}},
    "strategy": {}})");
  doc["strategy"]["kind"] = kind;
  return doc;
}

// Start and end (ms) of layer a's allreduce (or push) in iteration `it`.
std::pair<double, double> front_allreduce(const RunResult& r, int it) {
  for (std::size_t v = 0; v < r.graph.size(); ++v) {
    const auto& t = r.graph.task(v);
    if (t.kind == TaskKind::communication && t.resource == Resource::comm && t.iteration == it && t.priority == 0)
      return {r.timing[v].start_s * 1e3, r.timing[v].end_s * 1e3};
  }
  FAIL("no allreduce of the front layer");
  return {};
}

} // namespace

TEST_CASE("bytescheduler: the front layer's partition overtakes the back layer's, and the iteration shortens",
          "[plan][bytescheduler]") {
  // WFBP: forward [0, 2], backward b [2, 3], a [3, 4]; b's allreduce [3, 13], then a's [13, 14]: 14 ms.
  const auto wfbp = run_analytic(parse_scenario(two_layers("wfbp"), "t.json"));
  CHECK_THAT(wfbp.iteration_time_s * 1e3, WithinAbs(14, 1e-9));
  // ByteScheduler, partitions of 250,000 parameters (b: 10), credit one partition: b's first partition [3, 4]; a's,
  // ready at 4, goes next [4, 5], then b's nine others [5, 14]. The next forward of a needs only a's: [5, 6]; b's
  // forward waits for b's last partition: [14, 15], backward [15, 17], and so on: a period of 13 ms (each
  // iteration's last partition ends at 14, 27, 40).
  Json doc = two_layers("bytescheduler");
  doc["strategy"]["partition"] = 250000;
  doc["strategy"]["credit"] = 250000;
  const auto bs = run_analytic(parse_scenario(doc, "t.json"));
  CHECK(bs.groups.size() == 11);
  CHECK_THAT(bs.iteration_time_s * 1e3, WithinAbs(13, 1e-9));
  CHECK_THAT(front_allreduce(bs, 0).first, WithinAbs(4, 1e-9));
  CHECK_THAT(front_allreduce(bs, 1).first, WithinAbs(17, 1e-9));
  SECTION("a credit of two partitions: b's second was handed over before a's was ready: a at [5, 6]") {
    doc["strategy"]["credit"] = 500000;
    const auto two = run_analytic(parse_scenario(doc, "t.json"));
    CHECK_THAT(front_allreduce(two, 0).first, WithinAbs(5, 1e-9));
    CHECK_THAT(two.iteration_time_s * 1e3, WithinAbs(13, 1e-9));
  }
  SECTION("a credit of everything is FIFO: a waits behind all of b, [13, 14], and the period is WFBP's 14 ms") {
    doc["strategy"]["credit"] = 100000000;
    const auto fifo = run_analytic(parse_scenario(doc, "t.json"));
    CHECK_THAT(front_allreduce(fifo, 0).first, WithinAbs(13, 1e-9));
    CHECK_THAT(fifo.iteration_time_s * 1e3, WithinAbs(14, 1e-9));
  }
  SECTION("over parameter servers (one, co-located): a's push [4, 5] ms and pull [5, 6], period 14; FIFO 15") {
    // Each partition a key on server 0 (node 0); worker 1's push and pull of 1 MB take 1 ms each. Pushes: b's first
    // [3, 4], a's [4, 5], b's others [5, 14]; pulls follow each push on their own stream: a's [5, 6], b's last
    // [14, 15]. Forward a [6, 7], forward b [15, 16], backward [16, 18]: backward a ends 4, 18, 32 ms. With a credit
    // of everything a's push waits behind b's ten, [13, 14], its pull [14, 15], backward a ends 4, 19, 34 ms.
    doc["strategy"]["backend"] = "ps";
    doc["strategy"]["servers"] = 1;
    const auto ps = run_analytic(parse_scenario(doc, "t.json"));
    REQUIRE(ps.parameter_server);
    CHECK_THAT(front_allreduce(ps, 0).first, WithinAbs(4, 1e-9)); // the push (comm stream) of priority 0
    CHECK_THAT(ps.iteration_time_s * 1e3, WithinAbs(14, 1e-9));
    doc["strategy"]["credit"] = 100000000;
    const auto fifo = run_analytic(parse_scenario(doc, "t.json"));
    CHECK_THAT(fifo.iteration_time_s * 1e3, WithinAbs(15, 1e-9));
  }
  SECTION("bad keys name their path") {
    doc["strategy"]["credit"] = 0;
    CHECK_THROWS_WITH(parse_scenario(doc, "t.json"), Contains("/strategy/credit"));
    doc["strategy"]["credit"] = 1000;
    doc["strategy"]["partition"] = "big";
    CHECK_THROWS_WITH(parse_scenario(doc, "t.json"), Contains("/strategy/partition"));
    doc["strategy"].erase("partition");
    doc["strategy"]["servers"] = 2; // without backend "ps"
    CHECK_THROWS_WITH(parse_scenario(doc, "t.json"), Contains("/strategy/servers") && Contains("backend"));
  }
}
