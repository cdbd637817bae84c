// PowerSGD (dag/powersgd.hpp): PyTorch's should_compress rule, the traffic of the low-rank factors ((n + m) r per
// matrix: n r in the P allreduce, m r in the Q allreduce), the hook's chain of kernels and allreduces per bucket,
// kernels costed on the roofline, the separate compression stream, flow against analytic, the report and bad input.
#include "dag/powersgd.hpp"
#include "sim/cli/run.hpp"
#include "sim/plan/prepare.hpp"
#include "sim/report/report.hpp"
#include "sim/spec/scenario.hpp"
#include "support/run_in_child.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <stdexcept>

using namespace ddlsim;
using namespace ddlsim::sim;
using Catch::Matchers::WithinRel;

namespace {

const std::string kScenario = std::string(DDLSIM_SOURCE_DIR) + "/scenarios/powersgd-100gbps.json";

// Two layers on 4 single-GPU nodes: DDP's first bucket (1 MiB) closes on fc.weight, so bucket 0 is {fc.bias,
// fc.weight} and bucket 1 {conv.bias, conv.weight}.
Json two_layers(int rank) {
  Json doc = Json::parse(R"({
    "model": {"layers": [
        {"name": "conv", "fwd_flops": "1 GFLOP",
         "params": [{"name": "conv.weight", "shape": [64, 3, 7, 7]}, {"name": "conv.bias", "shape": [64]}]},
        {"name": "fc", "fwd_flops": "1 GFLOP",
         "params": [{"name": "fc.weight", "shape": [1000, 2048]}, {"name": "fc.bias", "shape": [1000]}]}],
      "batch_per_gpu": 8},
    "gpu": {"peak_flops": "10 TFLOPS", "memory_bandwidth": "900 GB/s"},
    "cluster": {"nodes": 4, "gpus_per_node": 1, "inter_node": {"bandwidth": "10 Gbps", "latency": "25 us"}},
    "strategy": {"kind": "powersgd"}})");
  doc["strategy"]["rank"] = rank;
  return doc;
}

std::vector<std::size_t> tasks_of_group(const RunResult& r, int group) {
  std::vector<std::size_t> out;
  for (std::size_t v = 0; v < r.graph.size(); ++v)
    if (dag::group_of(r.graph.task(v)) == group)
      out.push_back(v);
  return out;
}

bool depends_on(const RunResult& r, std::size_t after, std::size_t before) {
  const auto p = r.graph.predecessors(after);
  return std::find(p.begin(), p.end(), before) != p.end();
}

template <class Fn> std::vector<double> in_child(Fn&& fn) {
  const auto report = test::run_in_child([&](test::ChildReport& out) { out.values = fn(); });
  if (!report.error.empty())
    throw std::runtime_error(report.error);
  return report.values;
}

} // namespace

TEST_CASE("sim::powersgd compresses every conv and fc weight of ResNet-50 at rank 4", "[sim][powersgd]") {
  // 53 convolutions and the fc pass the rule (the smallest, 64 x 64 x 1 x 1, by 1024 < 4096); the 107 batch-norm
  // weights and biases and the fc bias are vectors, sent dense.
  const auto s = load_scenario(kScenario);
  const auto j = summary_json(s, run_scenario(s));
  REQUIRE(j.contains("powersgd"));
  CHECK(j["powersgd"]["compressed_matrices"] == 54);
  CHECK(j["powersgd"]["dense_tensors"] == 107);
  CHECK(j["powersgd"]["elements"] == 25557032);
  CHECK(j["powersgd"]["rank"] == 4);
  CHECK(j["powersgd"]["compression_stream"] == "inline");
}

TEST_CASE("sim::PowerSGD traffic per matrix is (n + m) r elements per allreduce pair", "[sim][powersgd]") {
  const int rank = GENERATE(1, 2, 4, 8);
  CAPTURE(rank);
  const double e = 4, r = rank;
  const auto s = parse_scenario(two_layers(rank), "two.json");
  const auto run = run_scenario(s);
  REQUIRE(run.groups.size() == 2);
  // Bucket 0: fc.weight 1000 x 2048 compressed, fc.bias dense; bucket 1: conv.weight 64 x 147, conv.bias dense.
  const std::vector<std::vector<double>> expected{{1000 * e, 1000 * r * e, 2048 * r * e}, // dense, P, Q
                                                  {64 * e, 64 * r * e, 147 * r * e}};
  double wire_bytes = 0;
  for (int g = 0; g < 2; ++g) {
    std::vector<double> bytes;
    for (auto v : tasks_of_group(run, g))
      if (run.graph.task(v).kind == dag::TaskKind::communication) {
        CHECK(dag::collective_of(run.graph.task(v)) == dag::Collective::allreduce);
        bytes.push_back(dag::bytes_of(run.graph.task(v)));
      }
    CAPTURE(g);
    REQUIRE(bytes.size() == 3);
    CHECK(bytes == expected[static_cast<std::size_t>(g)]);
    for (double b : bytes)
      wire_bytes += b;
  }
  // P and Q together carry (n + m) r elements per matrix.
  CHECK(expected[0][1] + expected[0][2] == (1000 + 2048) * r * e);
  CHECK(expected[1][1] + expected[1][2] == (64 + 147) * r * e);
  const auto j = summary_json(s, run);
  CHECK(j["powersgd"]["wire_elements_per_worker"] == static_cast<std::int64_t>(wire_bytes / e));
  CHECK(j["powersgd"]["compressed_matrices"] == 2);
  CHECK(j["powersgd"]["dense_tensors"] == 2);
  CHECK_THAT(j["powersgd"]["compression_ratio"].get<double>(), WithinRel(2058472 / (wire_bytes / e), 1e-12));
  // A ring on 4 workers sends 2 (p - 1) / p of each allreduce's buffer per worker.
  CHECK_THAT(run.communication_bytes_per_worker, WithinRel(1.5 * wire_bytes, 1e-12));
}

TEST_CASE("sim::a PowerSGD bucket is the hook's chain of kernels and allreduces", "[sim][powersgd][dag]") {
  const auto run = run_scenario(parse_scenario(two_layers(4), "two.json"));
  using K = dag::TaskKind;
  std::size_t update = 0;
  for (std::size_t v = 0; v < run.graph.size(); ++v)
    if (run.graph.task(v).kind == K::update)
      update = v;
  std::vector<std::size_t> first_comm;
  for (int g = 0; g < 2; ++g) {
    CAPTURE(g);
    const auto chain = tasks_of_group(run, g);
    // compress (error feedback, Q, P = MQ) -> dense allreduce -> unpack -> P allreduce -> orthogonalise P,
    // Q = M^T P -> Q allreduce -> decompress and new error
    const std::vector<K> kinds{K::compression, K::communication, K::compression, K::communication,
                               K::compression, K::communication, K::compression};
    REQUIRE(chain.size() == kinds.size());
    for (std::size_t i = 0; i < chain.size(); ++i) {
      CAPTURE(i);
      CHECK(run.graph.task(chain[i]).kind == kinds[i]);
      if (kinds[i] == K::compression)
        CHECK(run.graph.task(chain[i]).resource == dag::Resource::gpu_compute);
      if (i > 0) {
        CHECK(depends_on(run, chain[i], chain[i - 1]));
        CHECK(run.timing[chain[i]].start_s >= run.timing[chain[i - 1]].end_s);
      }
    }
    CHECK(depends_on(run, update, chain.back()));
    first_comm.push_back(chain[1]);
  }
  // Buckets are launched in order: bucket 1's first allreduce waits for bucket 0's.
  CHECK(depends_on(run, first_comm[1], first_comm[0]));
}

TEST_CASE("sim::PowerSGD kernels cost their memory traffic on the roofline", "[sim][powersgd]") {
  // Bucket 0 (N = 2,049,000 elements), fc.weight n = 1000, m = 2048, r = 4, all ops memory-bound at 900 GB/s:
  // error feedback 5 N e, Gram-Schmidt of Q (3mr + 2m(r-1) + 3.5 m r(r-1) + r(r-1)) e, P = MQ (nm + nr + mr) e.
  const auto run = run_scenario(parse_scenario(two_layers(4), "two.json"));
  const double e = 4, bw = 900e9, N = 2049000, n = 1000, m = 2048, r = 4;
  const double gs_q = (3 * m * r + 2 * m * (r - 1) + 3.5 * m * r * (r - 1) + r * (r - 1)) * e;
  const double matmul = (n * m + n * r + m * r) * e;
  const auto chain = tasks_of_group(run, 0);
  // Launches: error feedback 2, Gram-Schmidt 6 r - 4 = 20, the matmul 1; 5 us each.
  const double launch = dag::kKernelLaunchS;
  CHECK_THAT(run.graph.task(chain[0]).duration_s, WithinRel((5 * N * e + gs_q + matmul) / bw + 23 * launch, 1e-12));
  // Unpack the dense fc.bias: divide and copy back, 4 D e; one kernel.
  CHECK_THAT(run.graph.task(chain[2]).duration_s, WithinRel(4 * 1000 * e / bw + launch, 1e-12));
  // Decompress: Q /= p (2 m r e), M = P Q^T, new error over the bucket (3 N e); three kernels.
  CHECK_THAT(run.graph.task(chain[6]).duration_s,
             WithinRel((2 * m * r * e + matmul + 3 * N * e) / bw + 3 * launch, 1e-12));
  // The matmul is memory-bound: 2 n m r FLOPs at 10 TFLOPS take less than its bytes at 900 GB/s.
  CHECK(2 * n * m * r / 10e12 < matmul / bw);
  // Every kernel counts as compression (the backward is on the same stream, so none is hidden).
  double kernels = 0;
  for (std::size_t v = 0; v < run.graph.size(); ++v)
    if (run.graph.task(v).kind == dag::TaskKind::compression)
      kernels += run.graph.task(v).duration_s;
  const auto j = summary_json(parse_scenario(two_layers(4), "two.json"), run);
  CHECK_THAT(j["powersgd"]["compress_s"].get<double>(), WithinRel(kernels, 1e-12));
  CHECK(run.breakdown.compression_s > 0);
}

TEST_CASE("sim::PowerSGD on a separate compression stream is never slower than inline", "[sim][powersgd]") {
  const auto [zoo, batch] = GENERATE(table<std::string, int>({{"resnet50", 32}, {"bert-base", 32}}));
  const int rank = GENERATE(1, 4, 8);
  const int nodes = GENERATE(2, 16);
  CAPTURE(zoo, rank, nodes);
  const std::vector<std::string> common{"model.zoo=" + zoo, "model.batch_per_gpu=" + std::to_string(batch),
                                        "strategy.rank=" + std::to_string(rank),
                                        "cluster.nodes=" + std::to_string(nodes)};
  auto with = [&](const std::string& stream) {
    auto o = common;
    o.push_back("strategy.compression_stream=" + stream);
    return run_scenario(load_scenario(kScenario, o));
  };
  const auto inline_run = with("inline");
  const auto separate = with("separate");
  CHECK(separate.iteration_time_s <= inline_run.iteration_time_s);
  CHECK(separate.breakdown.compression_s < inline_run.breakdown.compression_s);
  for (std::size_t v = 0; v < separate.graph.size(); ++v)
    if (separate.graph.task(v).kind == dag::TaskKind::compression)
      CHECK(separate.graph.task(v).resource == dag::Resource::gpu_compression);
  // The traffic does not depend on the stream.
  CHECK(separate.communication_bytes_per_worker == inline_run.communication_bytes_per_worker);
}

TEST_CASE("flow::a PowerSGD iteration agrees with the analytic engine on a star without contention",
          "[sim][powersgd][flow]") {
  const auto stream = GENERATE("inline", "separate");
  CAPTURE(stream);
  const auto base = load_scenario(kScenario, {"cluster.nodes=2", std::string("strategy.compression_stream=") + stream});
  const auto analytic = run_scenario(base);
  const auto out = in_child([&] {
    auto s = base;
    s.engine = Engine::flow;
    const auto r = run_scenario(s);
    return std::vector<double>{r.iteration_time_s, r.breakdown.compression_s, r.communication_bytes_per_worker};
  });
  REQUIRE(out.size() == 3);
  CHECK_THAT(out[0], WithinRel(analytic.iteration_time_s, 1e-3));
  CHECK_THAT(out[1], WithinRel(analytic.breakdown.compression_s, 1e-3));
  CHECK(out[2] == analytic.communication_bytes_per_worker);
}

TEST_CASE("sim::PowerSGD traffic is a small fraction of DDP's", "[sim][powersgd]") {
  const auto ddp = run_scenario(load_scenario(kScenario, {R"(strategy={"kind":"ddp"})"}));
  const auto psgd = run_scenario(load_scenario(kScenario));
  // Same buckets: the hook runs per DDP bucket.
  REQUIRE(ddp.groups.size() == psgd.groups.size());
  for (std::size_t i = 0; i < ddp.groups.size(); ++i)
    CHECK(ddp.groups[i].tensors == psgd.groups[i].tensors);
  const auto ps = powersgd_totals(psgd.groups);
  REQUIRE(ps.has_value());
  CHECK_THAT(psgd.communication_bytes_per_worker * ps->compression_ratio(),
             WithinRel(ddp.communication_bytes_per_worker, 1e-9));
  CHECK(ps->compression_ratio() > 10);
  CHECK_FALSE(powersgd_totals(ddp.groups).has_value());
}

TEST_CASE("sim::bad PowerSGD input names the file and /strategy/rank", "[sim][powersgd][errors]") {
  SECTION("rank not an integer") {
    auto doc = two_layers(4);
    doc["strategy"]["rank"] = 2.5;
    REQUIRE_THROWS_WITH(parse_scenario(doc, "t.json"), "t.json: /strategy/rank: expected a positive integer (the rank "
                                                       "of the low-rank approximation), got 2.5");
    doc["strategy"]["rank"] = "4";
    REQUIRE_THROWS_WITH(parse_scenario(doc, "t.json"), Catch::Contains("/strategy/rank: expected a positive integer"));
  }
  SECTION("rank below 1") {
    const int rank = GENERATE(0, -3);
    const std::string message =
        "t.json: /strategy/rank: " + std::to_string(rank) + " is below 1: the rank of the low-rank approximation";
    REQUIRE_THROWS_WITH(parse_scenario(two_layers(rank), "t.json"), message);
    // The same value as parsed JSON text (a non-negative integer is held as unsigned).
    auto doc = two_layers(4);
    doc["strategy"]["rank"] = Json::parse(std::to_string(rank));
    REQUIRE_THROWS_WITH(parse_scenario(doc, "t.json"), message);
  }
  SECTION("rank above min(n, m) of every weight matrix") {
    REQUIRE_THROWS_WITH(parse_scenario(two_layers(2000), "t.json"),
                        "t.json: /strategy/rank: 2000 is above min(n, m) of every weight matrix of 'inline', so no "
                        "matrix can be compressed: the largest min(n, m) is 1000, of fc.weight (1000 x 2048)");
    REQUIRE_THROWS_WITH(load_scenario(kScenario, {"strategy.rank=5000"}),
                        Catch::Contains("/strategy/rank: 5000 is above min(n, m)") &&
                            Catch::Contains("the largest min(n, m) is 1024, of layer4.0.downsample.0.weight (2048 x "
                                            "1024)"));
  }
  SECTION("a rank at which no matrix is worth compressing") {
    REQUIRE_THROWS_WITH(parse_scenario(two_layers(1000), "t.json"),
                        Catch::Contains("t.json: /strategy/rank: at rank 1000 no weight matrix of 'inline' is worth "
                                        "compressing"));
  }
  SECTION("keys of another strategy kind") {
    auto doc = two_layers(4);
    doc["strategy"]["kind"] = "ddp";
    REQUIRE_THROWS_WITH(parse_scenario(doc, "t.json"),
                        "t.json: /strategy/rank: applies to strategy kind 'powersgd', not 'ddp'");
    doc["strategy"].erase("rank");
    doc["strategy"]["kind"] = "topk";
    doc["strategy"]["compression_stream"] = "separate";
    REQUIRE_THROWS_WITH(parse_scenario(doc, "t.json"),
                        "t.json: /strategy/compression_stream: applies to strategy kind 'powersgd', not 'topk'");
  }
  SECTION("unknown compression_stream") {
    auto doc = two_layers(4);
    doc["strategy"]["compression_stream"] = "sideways";
    REQUIRE_THROWS_WITH(parse_scenario(doc, "t.json"), Catch::Contains("t.json: /strategy/compression_stream: ") &&
                                                           Catch::Contains("sideways") && Catch::Contains("separate"));
  }
  SECTION("a GPU without peak FLOPS") {
    auto doc = two_layers(4);
    doc["gpu"] = Json::parse(R"({"single_gpu_iteration": "100 ms", "memory_bandwidth": "900 GB/s"})");
    REQUIRE_THROWS_WITH(parse_scenario(doc, "t.json"), Catch::Contains("t.json: /strategy/kind: 'powersgd' costs"));
  }
}
