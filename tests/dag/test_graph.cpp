// dag::IterationGraph: structure of the iteration DAG, cycle detection, critical path.
#include "dag/graph.hpp"
#include "dag/strategy.hpp"

#include <catch2/catch.hpp>

#include <algorithm>

using namespace ddlsim::dag;
using Catch::Matchers::WithinRel;

namespace {
Model chain(int layers) {
  Model m;
  m.name = "chain";
  for (int l = 0; l < layers; ++l)
    m.layers.push_back({.name = "l" + std::to_string(l),
                        .kind = "linear",
                        .params = {{"l" + std::to_string(l) + ".weight", {100}, 100}},
                        .fwd_flops = 1,
                        .bwd_flops = 2,
                        .activation_bytes = 4,
                        .inputs = {}});
  return m;
}
WorkerCosts costs_for(int layers) {
  WorkerCosts c;
  c.data_load_s = 0.5;
  c.prefetch = false;
  c.h2d_s = 0.25;
  for (int l = 0; l < layers; ++l) {
    c.fwd_s.push_back(1.0 + l);
    c.bwd_s.push_back(2.0 * (1.0 + l));
  }
  c.update_s = 0.125;
  return c;
}
} // namespace

TEST_CASE("dag::build_iteration makes load, copy, forward, backward, groups and update", "[dag][graph]") {
  const auto model = chain(3);
  const auto costs = costs_for(3);
  SECTION("single worker: no communication; critical path is the whole chain") {
    const auto g = build_iteration(model, costs, {}, false);
    CHECK(g.size() == 2 + 3 + 3 + 1);
    const auto cp = g.critical_path();
    // 0.5 load + 0.25 copy + (1+2+3) forward + (2+4+6) backward + 0.125 update
    CHECK_THAT(cp.length_s, WithinRel(0.5 + 0.25 + 6 + 12 + 0.125, 1e-12));
    CHECK(cp.tasks.size() == g.size());
  }
  SECTION("groups add one communication task each, chained in launch order, before the update") {
    std::vector<GradientGroup> groups(2);
    groups[0] = {.tensors = {2}, .elements = 100, .bytes = 400, .ready_layer = 2, .launch_delay_s = 0};
    groups[1] = {.tensors = {1, 0}, .elements = 200, .bytes = 800, .ready_layer = 0, .launch_delay_s = 0.01};
    const auto g = build_iteration(model, costs, groups, true);
    CHECK(g.size() == 9 + 2 + 1); // two allreduces and one launch delay
    std::size_t comms = 0;
    for (std::size_t v = 0; v < g.size(); ++v)
      if (g.task(v).kind == TaskKind::communication) {
        ++comms;
        CHECK(g.task(v).resource == Resource::comm);
        CHECK(collective_of(g.task(v)) == Collective::allreduce);
      }
    CHECK(comms == 2);
    CHECK(g.topological_order().size() == g.size());
  }
}

TEST_CASE("dag::unroll_iterations chains copies through the update and the loader", "[dag][graph]") {
  const auto model = chain(3);
  const auto costs = costs_for(3);
  const auto one = build_iteration(model, costs, {}, false);
  const auto g = unroll_iterations(one, 3);
  REQUIRE(g.size() == 3 * one.size());
  for (std::size_t v = 0; v < g.size(); ++v) {
    CHECK(g.task(v).iteration == static_cast<int>(v / one.size()));
    CHECK(g.task(v).kind == one.task(v % one.size()).kind);
  }
  // Without resources, the critical path runs load, copy, 6 s forward, 12 s backward, update, then the next
  // iteration's copy: 0.5 + 3 x (0.25 + 6 + 12 + 0.125).
  CHECK_THAT(g.critical_path().length_s, WithinRel(0.5 + 3 * (0.25 + 6 + 12 + 0.125), 1e-12));
  // Each copy's loading waits for the previous copy's, its copy for the previous update.
  const auto find = [&](TaskKind kind, int iteration) {
    for (std::size_t v = 0; v < g.size(); ++v)
      if (g.task(v).kind == kind && g.task(v).iteration == iteration)
        return v;
    FAIL("no such task");
    return std::size_t{0};
  };
  const auto preds_of_copy = g.predecessors(find(TaskKind::h2d, 2));
  CHECK(std::find(preds_of_copy.begin(), preds_of_copy.end(), find(TaskKind::update, 1)) != preds_of_copy.end());
  CHECK(g.predecessors(find(TaskKind::data_load, 1)) == std::vector<std::size_t>{find(TaskKind::data_load, 0)});
  CHECK(g.predecessors(find(TaskKind::data_load, 0)).empty());
  SECTION("a DAG that is not one iteration is refused") {
    IterationGraph two_updates = one;
    two_updates.add({.kind = TaskKind::update, .resource = Resource::gpu_compute});
    CHECK_THROWS_WITH(unroll_iterations(two_updates, 2), Catch::Contains("more than one update"));
  }
}

TEST_CASE("dag::IterationGraph detects cycles", "[dag][graph]") {
  IterationGraph g;
  const auto a = g.add({.kind = TaskKind::forward, .resource = Resource::gpu_compute, .payload = Compute{.layer = 0}});
  const auto b = g.add({.kind = TaskKind::forward, .resource = Resource::gpu_compute, .payload = Compute{.layer = 1}});
  const auto c = g.add({.kind = TaskKind::backward, .resource = Resource::gpu_compute, .payload = Compute{.layer = 1}});
  g.depend(a, b);
  g.depend(b, c);
  CHECK(g.topological_order() == std::vector<std::size_t>{a, b, c});
  g.depend(c, b);
  REQUIRE_THROWS_WITH(g.topological_order(), Catch::Contains("cycle through task"));
}

TEST_CASE("dag::backward_finish_times runs layers last to first", "[dag][graph]") {
  WorkerCosts c;
  c.bwd_s = {1, 2, 4};
  CHECK(backward_finish_times(c) == std::vector<double>{7, 6, 4});
}

TEST_CASE("dag::IterationGraph::place makes the DAG stand for every member of its data-parallel group",
          "[dag][graph][replicas]") {
  const auto model = chain(2);
  const std::vector<GradientGroup> groups{{.tensors = {1, 0}, .elements = 200, .bytes = 800, .ready_layer = 0}};
  auto g = build_iteration(model, costs_for(2), groups, true);
  CHECK(g.replicas() == 1);
  CHECK(g.replica_device(0, Device::gpu(0)) == Device::gpu(0));
  CHECK_THROWS_AS(g.replica_device(1, Device::gpu(0)), std::logic_error);

  // GPU 5 of a 3-node x 4-GPU cluster, in a strided group {1, 5, 9}: replica 1 is GPU 9 (node 2), replica 2 wraps
  // round to GPU 1 (node 0).
  g.place({.gpu = 5, .node = 1, .gpus_per_node = 4, .data_parallel = {{1, 5, 9}}});
  REQUIRE(g.replicas() == 3);
  CHECK(g.replica_device(0, Device::gpu(5)) == Device::gpu(5));
  CHECK(g.replica_device(1, Device::gpu(5)) == Device::gpu(9));
  CHECK(g.replica_device(1, Device::host(1)) == Device::host(2));
  CHECK(g.replica_device(2, Device::gpu(5)) == Device::gpu(1));
  CHECK(g.replica_device(2, Device::host(1)) == Device::host(0));
  CHECK_THROWS_AS(g.replica_device(3, Device::gpu(5)), std::logic_error);
  CHECK_THROWS_AS(g.replica_device(1, Device::gpu(6)), std::logic_error); // not a device of the placed worker
  int collectives = 0;
  for (IterationGraph::Id v = 0; v < g.size(); ++v) {
    if (collective_of(g.task(v)) != Collective::none) {
      CHECK(g.instances(g.task(v)) == 1);
      CHECK(g.instance_of(g.task(v), 2) == 0);
    }
    collectives += collective_of(g.task(v)) != Collective::none ? 1 : 0;
  }
  CHECK(collectives == 1);

  auto h = build_iteration(model, costs_for(2), {}, false);
  CHECK_THROWS_AS(h.place({.gpu = 2, .node = 0, .gpus_per_node = 4, .data_parallel = {{0, 1}}}), std::logic_error);
  CHECK_THROWS_AS(h.place({.gpu = 2, .node = 1, .gpus_per_node = 4, .data_parallel = {{2, 3}}}), std::logic_error);
}
