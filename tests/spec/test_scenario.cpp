// sim scenario loading: the shipped scenario parses; overrides, sweeps, inline layers and calibration.
#include "sim/spec/scenario.hpp"

#include <catch2/catch.hpp>

using namespace ddlsim;
using namespace ddlsim::sim;
using Catch::Matchers::WithinRel;

namespace {
const std::string kQuickstart = std::string(DDLSIM_SOURCE_DIR) + "/scenarios/quickstart.json";

Json minimal() {
  return Json::parse(R"({
    "name": "t",
    "model": {"layers": [{"name": "a", "params": 1000, "fwd_flops": "1 GFLOP"},
                          {"name": "b", "params": 2000, "fwd_flops": 2e9, "bwd_flops": "3 GFLOP"}],
              "batch_per_gpu": 8},
    "gpu": {"peak_flops": "10 TFLOPS", "memory_bandwidth": "900 GB/s"},
    "cluster": {"nodes": 2, "gpus_per_node": 1, "inter_node": {"bandwidth": "10 Gbps", "latency": "25 us"}},
    "strategy": {"kind": "wfbp"}
  })");
}
} // namespace

TEST_CASE("sim::load_scenario reads the shipped quickstart", "[sim][scenario]") {
  const auto s = load_scenario(kQuickstart);
  CHECK(s.name == "quickstart");
  CHECK(s.model.name == "resnet50");
  CHECK(s.model.param_count() == 25557032);
  CHECK(s.cluster.workers() == 8);
  CHECK(s.cluster.inter.bandwidth == 1.25e9); // 10 Gbps
  CHECK_THAT(s.cluster.inter.latency_s, WithinRel(25e-6, 1e-15));
  CHECK(s.gpu.peak_flops == 15.7e12); // V100-SXM2 fp32
  CHECK(s.strategy.kind() == "mg-wfbp");
  CHECK(s.engine == Engine::analytic);
}

TEST_CASE("sim::parse_scenario resolves the allreduce algorithm to its registry entry", "[sim][scenario]") {
  Json doc = minimal();
  SECTION("ring by default") {
    CHECK(parse_scenario(doc, "t.json").allreduce.algorithm == find_lowering(Collective::allreduce, "ring"));
  }
  SECTION("by name, or as an object") {
    doc["collectives"] = Json::parse(R"({"allreduce": "tree"})");
    CHECK(parse_scenario(doc, "t.json").allreduce.algorithm == find_lowering(Collective::allreduce, "tree"));
    doc["collectives"] = Json::parse(R"({"allreduce": {"algorithm": "hierarchical"}})");
    CHECK(parse_scenario(doc, "t.json").allreduce.algorithm == find_lowering(Collective::allreduce, "hierarchical"));
  }
  SECTION("a measured fit") {
    doc["collectives"] = Json::parse(R"({"allreduce": {"alpha": "523 us", "beta": "0.857 ns/B"}})");
    const auto s = parse_scenario(doc, "t.json");
    REQUIRE(s.allreduce.measured);
    CHECK_THAT(s.allreduce.measured->alpha_s, WithinRel(523e-6, 1e-12));
  }
  SECTION("an unknown name lists the registry's") {
    doc["collectives"] = Json::parse(R"({"allreduce": "butterfly"})");
    REQUIRE_THROWS_WITH(parse_scenario(doc, "t.json"),
                        "t.json: /collectives/allreduce: unknown allreduce algorithm 'butterfly' (expected one of: "
                        "halving-doubling, hierarchical, nvls, ring, tree)");
  }
}

TEST_CASE("sim::apply_override sets dotted keys with JSON or string values", "[sim][scenario]") {
  Json doc = minimal();
  apply_override(doc, "cluster.nodes=16", "t.json");
  apply_override(doc, "strategy.kind=mg-wfbp", "t.json"); // not JSON: taken as a string
  apply_override(doc, "name=\"quoted\"", "t.json");
  apply_override(doc, R"(strategy={"kind":"ddp","bucket_cap":"10 MiB"})", "t.json");
  apply_override(doc, "data.prefetch=false", "t.json"); // creates the missing object
  const auto s = parse_scenario(doc, "t.json");
  CHECK(s.cluster.nodes == 16);
  CHECK(s.name == "quoted");
  CHECK(s.strategy.kind() == "ddp");
  CHECK(s.strategy.get<dag::BucketOptions>().bucket_cap_bytes == 10.0 * 1048576);
  CHECK_FALSE(s.data.prefetch);
  REQUIRE_THROWS_WITH(apply_override(doc, "cluster.nodes.x=1", "t.json"),
                      "t.json: /cluster/nodes: cannot set 'cluster.nodes.x': /cluster/nodes is not an object");
  REQUIRE_THROWS_WITH(apply_override(doc, "novalue", "t.json"), Catch::Contains("not of the form key.path=VALUE"));
}

TEST_CASE("sim::parse_scenario validates the sweep block point by point", "[sim][scenario][sweep]") {
  Json doc = minimal();
  doc["sweep"] = Json::parse(R"({"cluster.nodes": [1, 2, 4],
                                 "zip": [{"strategy.kind": ["wfbp", "bsp"], "model.batch_per_gpu": [8, 16]}]})");
  const auto s = parse_scenario(doc, "t.json");
  REQUIRE(s.sweep.size() == 3);
  CHECK(s.sweep[0].key == "cluster.nodes");
  CHECK(s.sweep[0].zip_group == -1);
  CHECK(s.sweep[1].zip_group == 0);
  CHECK(s.sweep[2].values.size() == 2);
  SECTION("a bad value names its index") {
    doc["sweep"] = Json::parse(R"({"cluster.nodes": [1, -2]})");
    REQUIRE_THROWS_WITH(parse_scenario(doc, "t.json"),
                        "t.json: /sweep/cluster.nodes/1: cluster.nodes = -2: /cluster/nodes: -2 is out of range "
                        "[1, 1048576]");
  }
  SECTION("zipped axes must have equal lengths") {
    doc["sweep"] = Json::parse(R"({"zip": [{"cluster.nodes": [1, 2], "model.batch_per_gpu": [8]}]})");
    REQUIRE_THROWS_WITH(parse_scenario(doc, "t.json"), Catch::Contains("equal lengths"));
  }
  SECTION("zipped values are validated together: a schedule with its virtual stages") {
    doc["pipeline"] = Json::parse(R"({"micro_batches": 2})");
    doc["sweep"] = Json::parse(
        R"({"zip": [{"pipeline.schedule": ["gpipe", "interleaved-1f1b"], "pipeline.virtual_stages": [1, 2]}]})");
    CHECK(parse_scenario(doc, "t.json").sweep.size() == 2); // v = 2 alone would not be valid with the base's 1f1b
    doc["sweep"] =
        Json::parse(R"({"zip": [{"pipeline.schedule": ["gpipe", "1f1b"], "pipeline.virtual_stages": [1, 2]}]})");
    REQUIRE_THROWS_WITH(parse_scenario(doc, "t.json"),
                        "t.json: /sweep/zip/0/pipeline.virtual_stages/1: pipeline.schedule = \"1f1b\", "
                        "pipeline.virtual_stages = 2: /pipeline/virtual_stages: only interleaved-1f1b runs virtual "
                        "stages");
  }
}

TEST_CASE("sim::parse_scenario takes an inline calibration and checks its layer names", "[sim][scenario]") {
  Json doc = minimal();
  doc["gpu"] = Json::parse(R"({"calibration": {"batch_per_gpu": 8,
                               "layers": {"a": {"forward": "1 ms", "backward": "2 ms"},
                                          "b": {"forward": "3 ms", "backward": "4 ms"}}}})");
  const auto s = parse_scenario(doc, "t.json");
  REQUIRE(s.gpu.calibration);
  CHECK(s.gpu.calibration->layers.at("b").backward_s == 4e-3);
  doc["gpu"]["calibration"]["layers"]["zzz"] = Json::parse(R"({"forward": "1 ms", "backward": "1 ms"})");
  REQUIRE_THROWS_WITH(parse_scenario(doc, "t.json"), Catch::Contains("calibrated layer 'zzz' is not a layer"));
}

TEST_CASE("sim::parse_scenario reads a decoder's shape: zoo entries changed by `transformer`, `attention`",
          "[sim][scenario][decoder]") {
  const auto error = [](const Json& doc) {
    try {
      (void)parse_scenario(doc, "d.json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  Json doc = minimal();
  doc["model"] = Json::parse(R"({"zoo": "llama3-8b", "batch_per_gpu": 1, "transformer": {"sequence": 4096}})");
  const auto s = parse_scenario(doc, "d.json");
  REQUIRE(s.model.transformer);
  CHECK(s.model.transformer->sequence == 4096);
  CHECK(s.model.transformer->query_groups() == 8);
  CHECK(s.model.param_count() == 8'030'261'248); // the sequence changes no parameter (rotary positions)
  CHECK(s.model.name == "llama3-8b");
  const auto kinds = [](const dag::Model& m, const std::string& kind) {
    return std::count_if(m.layers.begin(), m.layers.end(), [&](const dag::Layer& l) { return l.kind == kind; });
  };
  CHECK(kinds(s.model, "flash_attention") == 32);
  doc["model"]["attention"] = "eager";
  const auto eager = parse_scenario(doc, "d.json");
  CHECK(kinds(eager.model, "flash_attention") == 0);
  CHECK(kinds(eager.model, "softmax") == 32);
  // The parametric decoder takes every option; GPT-2's defaults keep its eager attention.
  doc["model"] = Json::parse(R"({"zoo": "transformer", "batch_per_gpu": 1, "attention": "flash",
      "transformer": {"layers": 2, "hidden": 512, "heads": 8, "sequence": 128, "vocabulary": 1000, "kv_heads": 2,
                      "mlp": "swiglu", "ffn_hidden": 1376, "norm": "rmsnorm", "position": "rope",
                      "tied_embeddings": false, "bias": "none", "dropout": false}})");
  const auto p = parse_scenario(doc, "d.json");
  // 2·V·h + L·(2h² + 2h·(2·64) + 3h·f + 2h) + h
  CHECK(p.model.param_count() == 2 * 1000 * 512 + 2 * (2 * 512 * 512 + 2 * 512 * 128 + 3 * 512 * 1376 + 2 * 512) + 512);
  CHECK(kinds(p.model, "flash_attention") == 2);
  // Mistakes name their key.
  doc["model"]["transformer"]["mlp"] = "swish";
  CHECK_THAT(error(doc), Catch::Contains("/model/transformer/mlp") && Catch::Contains("swiglu"));
  doc["model"]["transformer"]["mlp"] = "gelu";
  doc["model"]["transformer"]["kv_head"] = 2;
  CHECK_THAT(error(doc), Catch::Contains("/model/transformer/kv_head"));
  doc["model"] = Json::parse(R"({"zoo": "resnet50", "batch_per_gpu": 1, "attention": "flash"})");
  CHECK_THAT(error(doc), Catch::Contains("/model/attention") && Catch::Contains("decoder language model"));
  doc["model"] = Json::parse(R"({"zoo": "llama2-7b", "batch_per_gpu": 1, "transformer": {"heads": 33}})");
  CHECK_THAT(error(doc), Catch::Contains("/model/transformer/heads") && Catch::Contains("divisible"));
}
