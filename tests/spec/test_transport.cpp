// Link transports (issue #14, item 2): `cluster.*.transport` scales a link's rate by NCCL's achieved share over that
// transport (network/cluster.hpp), `efficiency` by the scenario's own; the TCP default is the shared Polaris sweep's
// 1 GiB bus bandwidth over its nodes' two 200 Gb/s ports, and the ring predicted from the spec sheet with it meets
// the sweep's other large rows.
#include "calibrate/nccl_tests.hpp"
#include "sim/spec/scenario.hpp"

#include <catch2/catch.hpp>

using namespace ddlsim;
using namespace ddlsim::sim;
using Catch::Matchers::Contains;
using Catch::Matchers::WithinRel;

namespace {

// Polaris (ALCF machine overview): 4 A100-SXM4 per node on NVLink (600 GB/s per GPU, both directions: 300 GB/s
// each way), two Slingshot-11 ports of 200 Gb/s per node; latencies from the spec sheets (Slingshot: sub-microsecond
// switches), which do not matter at the sizes compared.
Json polaris(const Json& inter) {
  Json doc = Json::parse(R"({"name": "polaris", "model": {"zoo": "resnet50", "batch_per_gpu": 32},
    "gpu": {"preset": "A100-SXM4-40GB"}, "strategy": {"kind": "bsp"},
    "cluster": {"nodes": 2, "gpus_per_node": 4, "intra_node": {"bandwidth": "300 GB/s", "latency": "2 us"}}})");
  doc["cluster"]["inter_node"] = inter;
  return doc;
}

} // namespace

TEST_CASE("sim: a link's transport scales its rate", "[sim][scenario][transport]") {
  const auto rate = 400e9 / 8;
  SECTION("no transport: the rate as given (as before)") {
    const auto s = parse_scenario(polaris({{"bandwidth", "400 Gbps"}, {"latency", "2 us"}}), "t.json");
    CHECK(s.cluster.inter.bandwidth == rate);
    CHECK(s.cluster.inter.efficiency == 1);
  }
  SECTION("tcp and rdma take their documented shares") {
    const auto tcp =
        parse_scenario(polaris({{"bandwidth", "400 Gbps"}, {"latency", "2 us"}, {"transport", "tcp"}}), "t");
    CHECK_THAT(tcp.cluster.inter.bandwidth, WithinRel(rate * 9.45 / 50, 1e-15));
    const auto rdma =
        parse_scenario(polaris({{"bandwidth", "400 Gbps"}, {"latency", "2 us"}, {"transport", "rdma"}}), "t");
    CHECK_THAT(rdma.cluster.inter.bandwidth, WithinRel(rate * 12.2 / 12.5, 1e-15));
  }
  SECTION("the scenario's efficiency wins over the transport's") {
    const auto s = parse_scenario(
        polaris({{"bandwidth", "400 Gbps"}, {"latency", "2 us"}, {"transport", "tcp"}, {"efficiency", 0.5}}), "t");
    CHECK(s.cluster.inter.bandwidth == rate / 2);
    CHECK(s.cluster.inter.transport == "tcp");
  }
  SECTION("bad values name their path") {
    CHECK_THROWS_WITH(
        parse_scenario(polaris({{"bandwidth", "400 Gbps"}, {"latency", "2 us"}, {"transport", "udp"}}), "t.json"),
        Contains("/cluster/inter_node/transport"));
    CHECK_THROWS_WITH(
        parse_scenario(polaris({{"bandwidth", "400 Gbps"}, {"latency", "2 us"}, {"efficiency", 0}}), "t.json"),
        Contains("/cluster/inter_node/efficiency"));
    CHECK_THROWS_WITH(
        parse_scenario(polaris({{"bandwidth", "400 Gbps"}, {"latency", "2 us"}, {"efficiency", 1.5}}), "t.json"),
        Contains("/cluster/inter_node/efficiency"));
  }
}

TEST_CASE("sim: NCCL over TCP on Polaris, predicted from the spec sheet, meets the shared sweep at >= 64 MiB",
          "[sim][transport][data]") {
  calibrate::NcclReadOptions all_reduce;
  all_reduce.collective = calibrate::NcclCollective::all_reduce; // nccl-tests 2.13 does not name it
  const auto log = calibrate::read_nccl_tests(
      std::string(DDLSIM_SHARED_DATA) + "/nccl-tests/a100_2x4_tcp_allreduce.txt", all_reduce);
  // the default is this sweep's 1 GiB bus bandwidth over the node's 400 Gb/s
  const auto& last = log.rows.back();
  REQUIRE(last.size_bytes == 1073741824);
  CHECK_THAT(kTcpEfficiency, WithinRel(last.out_of_place->busbw_Bps / 50e9, 1e-12));
  const auto s = parse_scenario(polaris({{"bandwidth", "400 Gbps"}, {"latency", "2 us"}, {"transport", "tcp"}}), "t");
  const auto ring = s.allreduce.algorithm->closed_form(s.cluster.network());
  int compared = 0;
  for (const auto& row : log.rows) {
    if (row.size_bytes < 64u << 20)
      continue;
    const double predicted = ring->cost(static_cast<double>(row.size_bytes)).time_s;
    CAPTURE(row.size_bytes, predicted, row.fastest_s());
    CHECK(std::abs(predicted / row.fastest_s() - 1) < 0.15);
    ++compared;
  }
  CHECK(compared == 5); // 64 MiB .. 1 GiB
}
