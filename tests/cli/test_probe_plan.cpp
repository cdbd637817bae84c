// `ddlsim probe-plan` (sim/cli/probe_plan.hpp) for ResNet-50 and BERT-base: the layers' kernels at the scenario's
// batch, and the collectives the strategy issues adding up to the model's gradient (issue #13).
#include "sim/cli/probe_plan.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace ddlsim;
using namespace ddlsim::sim;

namespace {

Json scenario(const std::string& model, int batch, const Json& strategy) {
  Json doc = Json::parse(R"({"gpu": {"preset": "V100-SXM2-32GB"},
    "cluster": {"nodes": 2, "gpus_per_node": 4, "intra_node": {"bandwidth": "150 GB/s", "latency": "1 us"},
                "inter_node": {"bandwidth": "100 Gbps", "latency": "5 us"}}})");
  doc["model"] = {{"zoo", model}, {"batch_per_gpu", batch}};
  doc["strategy"] = strategy;
  return doc;
}

double bytes_of(const OrderedJson& c) {
  const std::string text = c["bytes"].get<std::string>();
  REQUIRE(text.ends_with(" B"));
  return std::stod(text);
}

} // namespace

TEST_CASE("probe-plan: ResNet-50 with WFBP", "[cli][probe]") {
  const auto s = parse_scenario(scenario("resnet50", 32, {{"kind", "wfbp"}}), "t.json");
  const auto plan = probe_plan(s);
  CHECK(plan["format"] == "ddlsim-probe-plan");
  CHECK(plan["version"] == 1);
  CHECK(plan["gpu"] == "V100-SXM2-32GB");
  const auto& layers = plan["layers"];
  REQUIRE(layers.size() == s.model.layers.size());
  const auto& conv1 = layers.front();
  CHECK(conv1["name"] == "conv1");
  CHECK(conv1["kernel"] == "convolution");
  CHECK(conv1["input"] == OrderedJson({32, 3, 224, 224}));
  CHECK(conv1["filters"] == OrderedJson({64, 3, 7, 7}));
  CHECK(conv1["stride"] == OrderedJson({2, 2}));
  CHECK(conv1["padding"] == OrderedJson({3, 3}));
  const auto& fc = layers.back();
  CHECK(fc["kernel"] == "gemm");
  CHECK((fc["m"] == 32 && fc["n"] == 1000 && fc["k"] == 2048));
  // WFBP: one allreduce per gradient tensor (161), over the 8 GPUs of 2 nodes, adding up to 25,557,032 fp32 values.
  int calls = 0;
  double bytes = 0;
  for (const auto& c : plan["collectives"]) {
    CHECK(c["collective"] == "allreduce");
    CHECK((c["ranks"] == 8 && c["nodes"] == 2));
    calls += c["count"].get<int>();
    bytes += c["count"].get<int>() * bytes_of(c);
  }
  CHECK(calls == 161);
  CHECK(bytes == 25557032.0 * 4);
  CHECK(plan["selection"].empty());
  CHECK(plan["low_rank"].empty());
}

TEST_CASE("probe-plan: BERT-base with DDP buckets, gTop-k and PowerSGD", "[cli][probe]") {
  const auto s = parse_scenario(scenario("bert-base", 8, {{"kind", "ddp"}}), "t.json");
  const auto plan = probe_plan(s);
  const auto& t = *s.model.transformer;
  int batched = 0, gemms = 0;
  for (const auto& l : plan["layers"]) {
    if (l["kernel"] == "batched_gemm") {
      ++batched;
      CHECK(l["count"] == 8 * t.heads);
    }
    gemms += l["kernel"] == "gemm" ? 1 : 0;
  }
  CHECK(batched == 2 * t.layers);
  CHECK(gemms >= 4 * t.layers);
  double bytes = 0;
  for (const auto& c : plan["collectives"])
    bytes += c["count"].get<int>() * bytes_of(c);
  CHECK(bytes == static_cast<double>(s.model.param_count()) * 4); // DDP's buckets hold every gradient once
  SECTION("gTop-k: one selection over the whole gradient at the density") {
    const auto sparse =
        probe_plan(parse_scenario(scenario("bert-base", 8, {{"kind", "gtopk"}, {"density", 0.01}}), "t.json"));
    REQUIRE(sparse["selection"].size() == 1);
    CHECK(sparse["selection"][0]["elements"] == s.model.param_count());
    CHECK_THAT(sparse["selection"][0]["density"].get<double>(), Catch::Matchers::WithinRel(0.01, 1e-3));
  }
  SECTION("PowerSGD: the matrices it factorises, at rank 4") {
    const auto low =
        probe_plan(parse_scenario(scenario("bert-base", 8, {{"kind", "powersgd"}, {"rank", 4}}), "t.json"));
    bool hidden_square = false;
    for (const auto& m : low["low_rank"]) {
      CHECK(m["rank"] == 4);
      hidden_square |= m["n"] == t.hidden && m["m"] == t.hidden;
    }
    CHECK(hidden_square); // the attention output projection, 768 x 768, in each layer
  }
}
