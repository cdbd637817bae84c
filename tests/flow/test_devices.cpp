// Tasks on devices: a DAG on two GPUs of different nodes joined by a point-to-point transfer from rank 1 to rank 2,
// scheduled by both engines. Each device's streams are their own queues; the transfer crosses two NIC links, so it
// takes 2 l_e + n / B_e (DESIGN.md's star) on both engines.
#include "sim/flow/flow_engine.hpp"
#include "sim/network/collectives.hpp"
#include "sim/network/lowering/evaluate.hpp"
#include "sim/plan/prepare.hpp"
#include "sim/plan/schedule.hpp"
#include "sim/spec/scenario.hpp"
#include "support/run_in_child.hpp"

#include <catch2/catch.hpp>

#include <stdexcept>

using namespace ddlsim;
using namespace ddlsim::sim;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;

namespace {

// 2 nodes x 2 GPUs: rank 1 is GPU 1 of node 0, rank 2 GPU 0 of node 1.
Scenario two_nodes() {
  return parse_scenario(Json::parse(R"({
    "model": {"layers": [{"name": "a", "params": 1000, "fwd_flops": "1 GFLOP"}], "batch_per_gpu": 8},
    "gpu": {"peak_flops": "10 TFLOPS", "memory_bandwidth": "900 GB/s"},
    "cluster": {"nodes": 2, "gpus_per_node": 2,
                "intra_node": {"bandwidth": "100 GB/s", "latency": "2 us"},
                "inter_node": {"bandwidth": "10 Gbps", "latency": "25 us"}},
    "strategy": {"kind": "wfbp"}})"),
                        "devices.json");
}

constexpr double kBytes = 4e6;
constexpr double kTransfer = 2 * 25e-6 + kBytes / 1.25e9; // two NIC links of 25 us, 10 Gb/s

struct Dag {
  dag::IterationGraph graph;
  dag::IterationGraph::Id produce, other, send, consume;
};

// GPU 1 computes 1 ms, then sends 4 MB to GPU 2 (3.25 ms), which meanwhile computes 5 ms of other work on its compute
// stream and then the 2 ms consumer that needs the transfer: the consumer waits for the busy stream, not only for
// the data.
Dag two_device_dag() {
  Dag d;
  auto& g = d.graph;
  d.produce = g.add({.kind = dag::TaskKind::forward,
                     .resource = dag::Resource::gpu_compute,
                     .layer = 0,
                     .duration_s = 1e-3,
                     .device = dag::Device::gpu(1)});
  d.other = g.add({.kind = dag::TaskKind::forward,
                   .resource = dag::Resource::gpu_compute,
                   .layer = 0,
                   .duration_s = 5e-3,
                   .device = dag::Device::gpu(2)});
  d.send = g.add({.kind = dag::TaskKind::communication,
                  .resource = dag::Resource::comm,
                  .collective = dag::Collective::point_to_point,
                  .bytes = kBytes,
                  .device = dag::Device::gpu(1),
                  .communicator = g.add_communicator({{1, 2}}),
                  .src = 1,
                  .dst = 2});
  d.consume = g.add({.kind = dag::TaskKind::backward,
                     .resource = dag::Resource::gpu_compute,
                     .layer = 0,
                     .duration_s = 2e-3,
                     .device = dag::Device::gpu(2)});
  g.depend(d.produce, d.send);
  g.depend(d.send, d.consume);
  return d;
}

} // namespace

TEST_CASE("analytic: a point-to-point task between ranks 1 and 2 on two devices", "[analytic][devices]") {
  const auto s = two_nodes();
  auto d = two_device_dag();
  const auto allreduce = make_cost_model(*s.allreduce.algorithm, s.cluster.network());
  cost_communication(s, *allreduce, d.graph);
  CHECK_THAT(d.graph.task(d.send).duration_s, WithinRel(kTransfer, 1e-12));
  CHECK(d.graph.devices() == std::vector<dag::Device>{dag::Device::gpu(1), dag::Device::gpu(2)});
  const auto t = schedule(d.graph);
  // Both devices start at once: their compute streams are separate queues.
  CHECK(t[d.produce].start_s == 0);
  CHECK(t[d.other].start_s == 0);
  CHECK_THAT(t[d.send].start_s, WithinRel(1e-3, 1e-12));
  CHECK_THAT(t[d.send].end_s, WithinRel(1e-3 + kTransfer, 1e-12));
  // The data arrives at 4.25 ms; GPU 2's stream is busy until 5 ms.
  CHECK_THAT(t[d.consume].start_s, WithinRel(5e-3, 1e-12));
  CHECK_THAT(t[d.consume].end_s, WithinRel(7e-3, 1e-12));

  SECTION("on one node the pair is 1 x 2 and crosses two GPU links") {
    auto same = two_device_dag();
    same.graph.task(same.send).dst = 0;
    same.graph.task(same.send).communicator = same.graph.add_communicator({{1, 0}});
    cost_communication(s, *allreduce, same.graph);
    CHECK_THAT(same.graph.task(same.send).duration_s, WithinRel(2 * 2e-6 + kBytes / 100e9, 1e-12));
  }
}

TEST_CASE("flow: a point-to-point task between ranks 1 and 2 on two devices", "[flow][devices]") {
  const auto report = test::run_in_child([](test::ChildReport& out) {
    const auto s = two_nodes();
    auto d = two_device_dag();
    const auto run = simulate_graph_flow(s, d.graph);
    for (auto v : {d.produce, d.other, d.send, d.consume}) {
      out.values.push_back(run.timing[v].start_s);
      out.values.push_back(run.timing[v].end_s);
    }
    out.values.push_back(static_cast<double>(run.flows));
  });
  REQUIRE(report.error.empty());
  const auto& v = report.values;
  REQUIRE(v.size() == 9);
  CHECK(v[0] == 0); // produce on GPU 1
  CHECK_THAT(v[1], WithinAbs(1e-3, 1e-12));
  CHECK(v[2] == 0);                                    // other work on GPU 2, concurrently
  CHECK_THAT(v[5], WithinRel(1e-3 + kTransfer, 1e-9)); // the transfer: 2 l_e + n / B_e after produce
  CHECK_THAT(v[6], WithinRel(5e-3, 1e-9));             // the consumer waits for GPU 2's stream
  CHECK_THAT(v[7], WithinRel(7e-3, 1e-9));
  CHECK(v[8] == 1); // one flow
}
