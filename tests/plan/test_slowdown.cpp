// Compute slowed by communication beside it (issue #14, item 4; sim/plan/schedule.hpp): timelines worked by hand on
// small DAGs, the event-driven pass against the list scheduler on every shipped scenario, and the key end to end.
#include "core/io.hpp"
#include "sim/analytic/analytic.hpp"
#include "sim/flow/flow_engine.hpp"
#include "sim/plan/prepare.hpp"
#include "sim/plan/schedule.hpp"
#include "sim/spec/scenario.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <vector>

using namespace ddlsim;
using namespace ddlsim::sim;
using Catch::Matchers::Contains;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;
using dag::Resource;
using dag::TaskKind;

namespace {

using Id = dag::IterationGraph::Id;

Id add(dag::IterationGraph& g, TaskKind kind, Resource resource, double ms, int gpu = 0) {
  return g.add({.kind = kind, .resource = resource, .duration_s = ms * 1e-3, .device = dag::Device::gpu(gpu)});
}

} // namespace

TEST_CASE("schedule: backward runs 1 + s times slower while a collective overlaps it, and only then",
          "[plan][schedule][slowdown]") {
  // forward 2 ms, then backward 10 ms; a delay of 5 ms, then a 5 ms allreduce on the same GPU: it overlaps the
  // backward over [5, 10]. With s = 0.5 the backward does 3 ms of work by 5, 5 / 1.5 ms during the allreduce and the
  // remaining 10 - 3 - 10/3 ms after it: it ends at 10 + 11/3 ms, 5 (1 - 1/1.5) = 5/3 ms later than alone.
  dag::IterationGraph g;
  const auto f = add(g, TaskKind::forward, Resource::gpu_compute, 2);
  const auto b = add(g, TaskKind::backward, Resource::gpu_compute, 10);
  const auto d = add(g, TaskKind::delay, Resource::none, 5);
  const auto c = add(g, TaskKind::communication, Resource::comm, 5);
  g.depend(f, b);
  g.depend(d, c);
  const double s = GENERATE(0.0, 0.5, 1.0, 3.0);
  CAPTURE(s);
  const auto t = schedule(g, {.compute_slowdown = s});
  CHECK(t[b].start_s == 2e-3);
  CHECK_THAT(t[c].start_s, WithinRel(5e-3, 1e-12));
  CHECK_THAT(t[c].end_s, WithinRel(10e-3, 1e-12));
  // work done during the overlap: 5 ms / (1 + s); the rest at full speed
  const double expected = 10e-3 + (10e-3 - 3e-3 - 5e-3 / (1 + s));
  CHECK_THAT(t[b].end_s, WithinRel(expected, 1e-12));
  CHECK_THAT(t[b].end_s - t[b].start_s - 10e-3, WithinRel(5e-3 * s / (1 + s), 1e-9) || WithinAbs(0, 1e-15));
}

TEST_CASE("schedule: a collective longer than the backward slows it to its end; another GPU's compute is not slowed",
          "[plan][schedule][slowdown]") {
  // The allreduce starts with the backward (both at 0) and lasts 30 ms: the backward's 10 ms of work take 10 (1 + s).
  // GPU 1's backward of 10 ms runs beside it untouched, and GPU 0's next compute after the allreduce at full speed.
  dag::IterationGraph g;
  const auto b0 = add(g, TaskKind::backward, Resource::gpu_compute, 10, 0);
  const auto c0 = add(g, TaskKind::communication, Resource::comm, 30, 0);
  const auto b1 = add(g, TaskKind::backward, Resource::gpu_compute, 10, 1);
  const auto u0 = add(g, TaskKind::update, Resource::gpu_compute, 4, 0);
  g.depend(c0, u0);
  const auto t = schedule(g, {.compute_slowdown = 0.25});
  CHECK_THAT(t[b0].end_s, WithinRel(12.5e-3, 1e-12));
  CHECK(t[b1].end_s == 10e-3);
  CHECK(t[u0].start_s == 30e-3);
  CHECK_THAT(t[u0].end_s, WithinRel(34e-3, 1e-12));
  (void)c0;
}

TEST_CASE("schedule: two collectives in a row slow the compute beside them once, and a gap between them not at all",
          "[plan][schedule][slowdown]") {
  // One 20 ms backward; allreduces over [0, 4] and [4, 8] (back to back: the GPU communicates without a break), then
  // one over [12, 16] after a 4 ms gap. s = 1: 8 ms of overlap do 4 ms of work, [8, 12] 4 ms, [12, 16] 2 ms, and the
  // remaining 10 ms end at 26 ms.
  dag::IterationGraph g;
  const auto b = add(g, TaskKind::backward, Resource::gpu_compute, 20);
  const auto c1 = add(g, TaskKind::communication, Resource::comm, 4);
  const auto c2 = add(g, TaskKind::communication, Resource::comm, 4);
  const auto gap = add(g, TaskKind::delay, Resource::none, 4);
  const auto c3 = add(g, TaskKind::communication, Resource::comm, 4);
  g.depend(c1, c2);
  g.depend(c2, gap);
  g.depend(gap, c3);
  const auto t = schedule(g, {.compute_slowdown = 1});
  CHECK_THAT(t[c3].start_s, WithinRel(12e-3, 1e-12));
  CHECK_THAT(t[b].end_s, WithinRel(26e-3, 1e-12));
}

TEST_CASE("schedule: the event-driven pass without slowdown is the list scheduler, bit for bit, on every shipped "
          "scenario",
          "[plan][schedule][slowdown]") {
  int compared = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(DDLSIM_SOURCE_DIR) + "/scenarios")) {
    if (entry.path().extension() != ".json")
      continue;
    CAPTURE(entry.path().string());
    const auto s = load_scenario(entry.path().string());
    if (s.strategy.asynchronous())
      continue;
    const auto plan = prepare(s, Engine::analytic);
    const auto& g = plan.graph;
    const auto list = schedule(g);
    const auto events = schedule_event_driven(g, {});
    REQUIRE(list.size() == events.size());
    for (std::size_t v = 0; v < list.size(); ++v) {
      CAPTURE(v);
      REQUIRE(list[v].start_s == events[v].start_s);
      REQUIRE(list[v].end_s == events[v].end_s);
    }
    ++compared;
  }
  CHECK(compared >= 10);
}

TEST_CASE("gpu.comm_slowdown: the analytic engine slows the backward beside WFBP's allreduces; 0 changes nothing",
          "[plan][schedule][slowdown]") {
  // The quickstart with WFBP over 100 Gb/s: the backward, not the network, sets the step, so slowing it shows. (On
  // its 10 Gb/s the allreduces set the step: the compute grows by the slowdown and the step does not.)
  const std::string quickstart = std::string(DDLSIM_SOURCE_DIR) + "/scenarios/quickstart.json";
  const std::vector<std::string> wfbp{"strategy.kind=\"wfbp\"", "cluster.inter_node.bandwidth=\"100 Gbps\""};
  const auto with = [&](const std::string& set) {
    auto sets = wfbp;
    sets.push_back(set);
    return run_analytic(load_scenario(quickstart, sets));
  };
  const auto base = run_analytic(load_scenario(quickstart, wfbp));
  const auto zero = with("gpu.comm_slowdown=0");
  CHECK(zero.iteration_time_s == base.iteration_time_s);
  CHECK(zero.breakdown.compute_s == base.breakdown.compute_s);
  const auto slowed = with("gpu.comm_slowdown=0.2");
  CHECK(slowed.iteration_time_s > 1.02 * base.iteration_time_s);
  CHECK(slowed.breakdown.compute_s > base.breakdown.compute_s);
  bool noted = false;
  for (const auto& n : slowed.notes)
    noted = noted || n.find("1.2 x slower while a collective runs") != std::string::npos;
  CHECK(noted);
  SECTION("out of range, it is refused with its path (the flow engine's agreement: tests/flow)") {
    CHECK_THROWS_WITH(load_scenario(quickstart, {"gpu.comm_slowdown=-0.1"}), Contains("/gpu/comm_slowdown"));
  }
}

TEST_CASE("calibration: overlap.compute_slowdown is read, written back and used when the scenario gives none",
          "[plan][schedule][slowdown][calibration]") {
  const Json doc =
      Json::parse(R"({"format": "ddlsim-calibration", "version": 2, "overlap": {"compute_slowdown": 0.15}})");
  const auto c = dag::parse_calibration(doc, "c.json", "");
  REQUIRE(c.compute_slowdown);
  CHECK(*c.compute_slowdown == 0.15);
  CHECK(dag::calibration_json(c).dump() ==
        R"({"format":"ddlsim-calibration","version":2,"overlap":{"compute_slowdown":0.15}})");
  CHECK_THROWS_WITH(
      dag::parse_calibration(Json::parse(R"({"version": 1, "overlap": {"compute_slowdown": 0.1}})"), "c.json", ""),
      Contains("/overlap"));
  Scenario s;
  s.gpu.calibration = c;
  CHECK(comm_slowdown(s).factor == 0.15);
  CHECK(comm_slowdown(s).source == "c.json");
  s.gpu.comm_slowdown = 0.0;
  CHECK(comm_slowdown(s).factor == 0);
}
