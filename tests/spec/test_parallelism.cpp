// `parallelism` and `pipeline` (sim/spec/parallelism.hpp): what is accepted, and every error naming its JSON path.
#include "core/error.hpp"
#include "sim/spec/scenario.hpp"

#include <catch2/catch.hpp>

using namespace ddlsim;
using namespace ddlsim::sim;

namespace {
// 8 GPUs (2 nodes x 4), 8 layers.
Json eight_layers() {
  Json doc = Json::parse(R"({
    "name": "p",
    "model": {"layers": [], "batch_per_gpu": 4},
    "gpu": {"peak_flops": "10 TFLOPS", "memory_bandwidth": "900 GB/s"},
    "cluster": {"nodes": 2, "gpus_per_node": 4, "intra_node": {"bandwidth": "12 GB/s", "latency": "5 us"},
                "inter_node": {"bandwidth": "10 Gbps", "latency": "25 us"}},
    "strategy": {"kind": "wfbp"},
    "parallelism": {"pipeline": 4},
    "pipeline": {"micro_batches": 8}
  })");
  for (int l = 0; l < 8; ++l)
    doc["model"]["layers"].push_back({{"name", "l" + std::to_string(l)}, {"params", 1000}, {"fwd_flops", "1 GFLOP"}});
  return doc;
}
} // namespace

TEST_CASE("sim::parse_scenario reads parallelism and pipeline", "[sim][scenario][pipeline]") {
  Json doc = eight_layers();
  SECTION("defaults: 1F1B, balanced, no recomputation; data = GPUs / pipeline") {
    const auto s = parse_scenario(doc, "p.json");
    CHECK(s.parallelism.data == 2);
    CHECK(s.parallelism.pipeline == 4);
    CHECK(s.parallelism.tensor == 1);
    REQUIRE(s.pipeline);
    CHECK(s.pipeline->schedule->name == "1f1b");
    CHECK(s.pipeline->micro_batches == 8);
    CHECK(s.pipeline->virtual_stages == 1);
    CHECK(s.pipeline->partition == PartitionKind::balanced);
    CHECK(s.pipeline->recompute == dag::Recompute::none);
    // Megatron's rank order: stage s of replica k is GPU k + d s.
    CHECK(s.parallelism.gpu(0, 0) == 0);
    CHECK(s.parallelism.gpu(0, 1) == 1);
    CHECK(s.parallelism.gpu(3, 1) == 7);
  }
  SECTION("interleaved with virtual stages, an explicit partition, recomputation") {
    doc["pipeline"] = Json::parse(R"({"schedule": "interleaved-1f1b", "micro_batches": 8, "virtual_stages": 2,
                                      "partition": [1, 1, 1, 1, 1, 1, 1, 1], "recompute": "except-last"})");
    const auto s = parse_scenario(doc, "p.json");
    REQUIRE(s.pipeline);
    CHECK(s.pipeline->schedule->name == "interleaved-1f1b");
    CHECK(s.pipeline->virtual_stages == 2);
    CHECK(s.pipeline->partition == PartitionKind::explicit_layers);
    CHECK(s.pipeline->layers_per_stage == std::vector<int>(8, 1));
    CHECK(s.pipeline->recompute == dag::Recompute::except_last);
  }
  SECTION("no parallelism object: pure data parallelism") {
    doc.erase("parallelism");
    doc.erase("pipeline");
    const auto s = parse_scenario(doc, "p.json");
    CHECK_FALSE(s.pipeline);
    CHECK(s.parallelism.data == 1);
  }
}

TEST_CASE("sim::parse_scenario rejects pipelines it cannot run, naming the JSON path", "[sim][scenario][pipeline]") {
  Json doc = eight_layers();
  const auto error = [&](const std::string& key, const Json& value) {
    Json d = doc;
    d[Json::json_pointer(key)] = value;
    try {
      (void)parse_scenario(d, "p.json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK(error("/parallelism/pipeline", 3) ==
        "p.json: /parallelism: the cluster's 8 GPUs are not divisible by pipeline x tensor = 3");
  CHECK(error("/parallelism/tensor", 2) == "p.json: /parallelism/tensor: tensor parallelism splits a transformer's "
                                           "layers (Megatron-LM); model 'inline' is not a transformer (use 1)");
  CHECK(error("/pipeline/micro_batches", 0).find("/pipeline/micro_batches") != std::string::npos);
  CHECK(error("/pipeline/schedule", "zero-bubble").find("/pipeline/schedule: ") != std::string::npos);
  CHECK(error("/pipeline/virtual_stages", 2) ==
        "p.json: /pipeline/virtual_stages: only interleaved-1f1b runs virtual stages");
  // v = 1 is every schedule's own: accepted with any schedule, so that a sweep can zip schedules with their v.
  CHECK(error("/pipeline/virtual_stages", 1) == "accepted");
  CHECK(error("/pipeline", Json::parse(R"({"schedule": "gpipe", "micro_batches": 8, "virtual_stages": 1})")) ==
        "accepted");
  CHECK(error("/pipeline", Json::parse(R"({"schedule": "interleaved-1f1b", "micro_batches": 6})")) ==
        "p.json: /pipeline/micro_batches: interleaved-1f1b needs micro-batches divisible by the 4 pipeline stages (as "
        "Megatron-LM), got 6");
  CHECK(
      error("/pipeline", Json::parse(R"({"schedule": "interleaved-1f1b", "micro_batches": 8, "virtual_stages": 3})")) ==
      "p.json: /pipeline: 12 virtual stages (4 stages x 3) for a model of 8 layers");
  CHECK(error("/pipeline/partition", Json::parse("[2, 2, 2]")) ==
        "p.json: /pipeline/partition: expected 4 layer counts (one per virtual stage), got 3");
  CHECK(error("/pipeline/partition", Json::parse("[2, 2, 2, 3]")) ==
        "p.json: /pipeline/partition: the layer counts add up to 9, the model has 8 layers");
  CHECK(error("/pipeline/partition", Json::parse("[2, 2, 4, 0]")) ==
        "p.json: /pipeline/partition/3: expected a layer count of at least 1");
  CHECK(error("/pipeline/partition", "random").find("/pipeline/partition: ") != std::string::npos);
  CHECK(error("/pipeline/depth", 1).find("/pipeline/depth") != std::string::npos); // unknown key
  CHECK(error("/strategy", Json::parse(R"({"kind": "ps-sync"})")).find("/strategy/kind: ps-sync does not combine") !=
        std::string::npos);
  Json no_pipeline = doc;
  no_pipeline.erase("pipeline");
  REQUIRE_THROWS_WITH(
      parse_scenario(no_pipeline, "p.json"),
      "p.json: /pipeline: parallelism.pipeline > 1 needs a pipeline object with at least micro_batches");
}

TEST_CASE("sim::parse_scenario reads the asynchronous schedules", "[sim][scenario][pipeline]") {
  Json doc = eight_layers();
  doc["pipeline"] = Json::parse(R"({"schedule": "spectrain", "micro_batches": 8, "weight_prediction": "v2"})");
  const auto s = parse_scenario(doc, "p.json");
  REQUIRE(s.pipeline);
  CHECK(s.pipeline->schedule->name == "spectrain");
  CHECK(s.pipeline->weight_prediction == dag::WeightPrediction::v2);
  doc["pipeline"] = Json::parse(R"({"schedule": "pipedream", "micro_batches": 8, "weight_prediction": "v1"})");
  REQUIRE_THROWS_WITH(parse_scenario(doc, "p.json"),
                      "p.json: /pipeline/weight_prediction: only spectrain predicts weights");
}

TEST_CASE("sim::parse_scenario takes null for an absent parallelism or pipeline", "[sim][scenario][pipeline]") {
  Json doc = eight_layers();
  doc["parallelism"] = nullptr;
  doc["pipeline"] = nullptr;
  const auto s = parse_scenario(doc, "p.json");
  CHECK_FALSE(s.pipeline);
  CHECK(s.parallelism.pipeline == 1);
  doc["parallelism"] = {{"pipeline", 4}};
  REQUIRE_THROWS_WITH(
      parse_scenario(doc, "p.json"),
      "p.json: /pipeline: parallelism.pipeline > 1 needs a pipeline object with at least micro_batches");
}
