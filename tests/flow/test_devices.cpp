// Tasks on devices: a DAG on two GPUs of different nodes joined by a point-to-point transfer from rank 1 to rank 2,
// scheduled by both engines. Each device's streams are their own queues; the transfer crosses two NIC links, so it
// takes 2 l_e + n / B_e (a star: docs/engines.md, "Link semantics") on both engines. And data-parallel replicas: the
// flow engine times every simulated GPU's copy of the worker's tasks and tasks.csv lists them on their real devices.
#include "sim/analytic/analytic.hpp"
#include "sim/flow/flow_engine.hpp"
#include "sim/network/collectives.hpp"
#include "sim/network/lowering/evaluate.hpp"
#include "sim/plan/prepare.hpp"
#include "sim/plan/schedule.hpp"
#include "sim/report/report.hpp"
#include "sim/spec/scenario.hpp"
#include "support/run_in_child.hpp"

#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <sstream>
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
                     .duration_s = 1e-3,
                     .device = dag::Device::gpu(1),
                     .payload = dag::Compute{.layer = 0}});
  d.other = g.add({.kind = dag::TaskKind::forward,
                   .resource = dag::Resource::gpu_compute,
                   .duration_s = 5e-3,
                   .device = dag::Device::gpu(2),
                   .payload = dag::Compute{.layer = 0}});
  d.send = g.add({.kind = dag::TaskKind::communication,
                  .resource = dag::Resource::comm,
                  .device = dag::Device::gpu(1),
                  .payload = dag::Transfer{.wire = {.collective = dag::Collective::point_to_point,
                                                    .communicator = g.add_communicator({{1, 2}}),
                                                    .bytes = kBytes},
                                           .src = 1,
                                           .dst = 2}});
  d.consume = g.add({.kind = dag::TaskKind::backward,
                     .resource = dag::Resource::gpu_compute,
                     .duration_s = 2e-3,
                     .device = dag::Device::gpu(2),
                     .payload = dag::Compute{.layer = 0}});
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
    auto& send = std::get<dag::Transfer>(same.graph.task(same.send).payload);
    send.dst = 0;
    send.wire.communicator = same.graph.add_communicator({{1, 0}});
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

namespace {

struct Row {
  std::string device, resource, kind, layer;
  double start_s = 0, end_s = 0;
};

std::vector<Row> rows_of(const std::vector<std::string>& lines) {
  std::vector<Row> rows;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    std::vector<std::string> f;
    std::stringstream in(lines[i] + ","); // each field ends with a comma, so getline reads an empty last one too
    for (std::string field; std::getline(in, field, ',');)
      f.push_back(field);
    REQUIRE(f.size() == 10); // ...,start_s,end_s,collective,communicator
    rows.push_back({f[0], f[1], f[2], f[3], std::stod(f[6]), std::stod(f[7])});
  }
  return rows;
}

// The quickstart's shape: 2 nodes x 4 GPUs on a star, a small model with WFBP.
Scenario two_by_four(const std::string& symmetry, int report_replicas) {
  auto doc = Json::parse(R"({
    "model": {"layers": [{"name": "a", "params": 1000000, "fwd_flops": "20 GFLOP"},
                         {"name": "b", "params": 2000000, "fwd_flops": "10 GFLOP"}], "batch_per_gpu": 8},
    "gpu": {"peak_flops": "10 TFLOPS", "memory_bandwidth": "900 GB/s"},
    "cluster": {"nodes": 2, "gpus_per_node": 4,
                "intra_node": {"bandwidth": "12 GB/s", "latency": "5 us"},
                "inter_node": {"bandwidth": "10 Gbps", "latency": "25 us"}},
    "strategy": {"kind": "wfbp"}, "engine": "flow"})");
  doc["flow"] = {{"symmetry", symmetry}, {"report_replicas", report_replicas}};
  return parse_scenario(doc, "replicas.json");
}

// tasks.csv's rows by device, in file order.
std::map<std::string, std::vector<Row>> by_device(const std::vector<Row>& rows) {
  std::map<std::string, std::vector<Row>> out;
  for (const auto& r : rows)
    out[r.device].push_back(r);
  return out;
}

} // namespace

TEST_CASE("flow: tasks.csv lists every simulated GPU's copy of the worker's tasks", "[flow][devices][replicas]") {
  const auto symmetry = GENERATE(std::string("off"), std::string("auto"));
  CAPTURE(symmetry);
  const auto report = test::run_in_child([&](test::ChildReport& out) {
    const auto s = two_by_four(symmetry, 64);
    const auto r = run_flow(s);
    std::stringstream csv(tasks_csv(s, r));
    for (std::string line; std::getline(csv, line);)
      out.texts.push_back(line);
    out.values.push_back(static_cast<double>(r.graph.size()));
    out.values.push_back(r.iteration_time_s);
  });
  REQUIRE(report.error.empty());
  REQUIRE(report.values.size() == 2);
  const auto tasks = static_cast<std::size_t>(report.values[0]);
  const auto devices = by_device(rows_of(report.texts));
  // Without symmetry all 8 GPUs and both hosts; under node symmetry node 0's 4 GPUs and its host.
  const int gpus = symmetry == "off" ? 8 : 4;
  std::set<std::string> expected;
  for (int g = 0; g < gpus; ++g)
    expected.insert("gpu" + std::to_string(g));
  expected.insert("host0");
  if (symmetry == "off")
    expected.insert("host1");
  std::set<std::string> listed;
  for (const auto& [d, rows] : devices)
    listed.insert(d);
  CHECK(listed == expected);
  // Every replica runs the whole DAG: its GPU rows and its host rows (each host serves its node's 4 replicas).
  const auto& gpu0 = devices.at("gpu0");
  const auto& host0 = devices.at("host0");
  CHECK(report.texts.size() - 1 == static_cast<std::size_t>(gpus) * tasks);
  CHECK(host0.size() % 4 == 0);
  CHECK(gpu0.size() + host0.size() / 4 == tasks);
  // The replicas are identical (same compute, one shared collective per group), so every GPU's rows have replica
  // 0's kinds and times, and the collectives end together.
  for (const auto& [d, rows] : devices) {
    if (d.rfind("gpu", 0) != 0)
      continue;
    CAPTURE(d);
    REQUIRE(rows.size() == gpu0.size());
    for (std::size_t i = 0; i < rows.size(); ++i) {
      CHECK(rows[i].kind == gpu0[i].kind);
      CHECK(rows[i].layer == gpu0[i].layer);
      CHECK(rows[i].start_s == gpu0[i].start_s);
      CHECK(rows[i].end_s == gpu0[i].end_s);
    }
  }
  double last = 0;
  for (const auto& row : gpu0)
    last = std::max(last, row.end_s);
  CHECK_THAT(last, WithinRel(report.values[1], 1e-12));
}

TEST_CASE("flow: flow.report_replicas bounds the replicas listed, and the analytic engine lists its representative",
          "[flow][devices][replicas]") {
  const auto report = test::run_in_child([](test::ChildReport& out) {
    const auto s = two_by_four("off", 3);
    const auto r = run_flow(s);
    std::stringstream csv(tasks_csv(s, r));
    for (std::string line; std::getline(csv, line);)
      out.texts.push_back(line);
    out.values.push_back(static_cast<double>(r.replicas.size()));
    out.values.push_back(static_cast<double>(std::count_if(r.notes.begin(), r.notes.end(), [](const std::string& n) {
      return n.find("the first 3 of the 8 data-parallel replicas") != std::string::npos;
    })));
  });
  REQUIRE(report.error.empty());
  REQUIRE(report.values.size() == 2);
  CHECK(report.values[0] == 2); // replicas 1 and 2 beside the DAG's own
  CHECK(report.values[1] == 1); // and a note says so
  std::set<std::string> listed;
  for (const auto& [d, rows] : by_device(rows_of(report.texts)))
    listed.insert(d);
  CHECK(listed == std::set<std::string>{"gpu0", "gpu1", "gpu2", "host0"});

  auto s = two_by_four("off", 64);
  s.engine = Engine::analytic;
  const auto r = run_analytic(s);
  CHECK(r.replicas.empty());
  std::vector<std::string> lines;
  std::stringstream csv(tasks_csv(s, r));
  for (std::string line; std::getline(csv, line);)
    lines.push_back(line);
  listed.clear();
  for (const auto& [d, rows] : by_device(rows_of(lines)))
    listed.insert(d);
  CHECK(listed == std::set<std::string>{"gpu0", "host0"});
}

TEST_CASE("flow: a task that cannot finish is an internal error, not a crash (#15 D2)", "[flow][robustness]") {
  // A latency beyond SimGrid's clock (the scenario parser refuses it since; set here behind its back): the engine
  // stops with tasks unfinished, which must surface as an exception, not as SIGSEGV while the simulation unwinds.
  const auto report = test::run_in_child([](test::ChildReport&) {
    auto s = load_scenario(std::string(DDLSIM_SOURCE_DIR) + "/scenarios/quickstart.json", {"engine=flow"});
    s.cluster.inter.latency_s = 1e300;
    (void)run_flow(s);
  });
  CHECK_THAT(report.error, Catch::Contains("never finished"));
}
