// model.compute_dtype (issue #33 item 4): the GEMMs' peak by format; FP8's GEMMs at the FP8 peak with Transformer
// Engine's casts, in the transformer blocks only; refused on a GPU without FP8.
#include "sim/plan/compute.hpp"
#include "sim/spec/scenario.hpp"

#include <catch2/catch.hpp>

using namespace ddlsim;
using namespace ddlsim::sim;
using Catch::Matchers::Contains;
using Catch::Matchers::WithinRel;

namespace {
// One linear layer of 4096 x 4096 over 2048 tokens per sample, in transformer block 0 (where FP8 applies).
Json one_gemm(const std::string& preset, const std::string& compute_dtype, bool efficiency) {
  Json doc = Json::parse(R"({
    "name": "one-gemm",
    "model": {"layers": [{"name": "fc", "kind": "linear", "block": 0,
                          "params": [{"name": "fc.weight", "shape": [4096, 4096]}],
                          "fwd_flops": 68719476736, "activation_bytes": "33554432 B"}],
              "input_bytes_per_sample": "33554432 B", "batch_per_gpu": 4, "gradient_dtype": "bf16"},
    "cluster": {"nodes": 1, "gpus_per_node": 1},
    "strategy": {"kind": "bsp"}
  })");
  doc["gpu"] = {{"preset", preset}};
  if (efficiency)
    doc["gpu"]["efficiency"] = 1.0;
  doc["model"]["compute_dtype"] = compute_dtype;
  return doc;
}
} // namespace

TEST_CASE("model.compute_dtype fp8: the blocks' linear layers at the FP8 peak, with Transformer Engine's casts",
          "[sim][gemm][fp8]") {
  // 2 x 4096 x 4096 x 2048 = 68,719,476,736 FLOPs per sample; 4 samples
  const double flops = 4 * 68719476736.0, bandwidth = 3350e9;
  // casts: forward the input (4 x 2048 x 4096 elements) and the weight (4096^2), backward the output gradient,
  // 4 bytes per element each
  const double cast_fwd = 4.0 * (4 * 2048.0 * 4096 + 4096.0 * 4096), cast_bwd = 4.0 * 4 * 2048.0 * 4096;
  SECTION("roofline at gpu.efficiency 1 on an H100: FLOPs / FP8 peak + the casts at the bandwidth") {
    const auto s = parse_scenario(one_gemm("H100-SXM5-80GB", "fp8", true), "t.json");
    const auto w = compute_costs(s).worker;
    CHECK_THAT(w.fwd_s[0], WithinRel(flops / 1979e12 + cast_fwd / bandwidth, 1e-12));
    CHECK_THAT(w.bwd_s[0], WithinRel(2 * flops / 1979e12 + cast_bwd / bandwidth, 1e-12));
    // bf16: the bf16 peak, no casts
    const auto b = compute_costs(parse_scenario(one_gemm("H100-SXM5-80GB", "bf16", true), "t.json")).worker;
    CHECK_THAT(b.fwd_s[0], WithinRel(flops / 989.4e12, 1e-12));
    // the model FLOPs utilisation stays against the 16-bit peak
    CHECK(s.gpu.peak_flops == 989.4e12);
  }
  SECTION("a GPU without FP8 refuses it, naming the preset") {
    REQUIRE_THROWS_WITH(parse_scenario(one_gemm("V100-SXM2-32GB", "fp8", false), "t.json"),
                        "t.json: /gpu/preset: V100-SXM2-32GB has no FP8 tensor cores, which model.compute_dtype fp8 "
                        "needs (`ddlsim list gpus` shows the presets with an fp8 peak)");
    REQUIRE_THROWS_WITH(parse_scenario(one_gemm("A100-SXM4-80GB", "fp8", true), "t.json"),
                        Contains("A100-SXM4-80GB has no FP8 tensor cores"));
  }
  SECTION("a layer outside the blocks stays in 16 bits") {
    Json doc = one_gemm("H100-SXM5-80GB", "fp8", true);
    doc["model"]["layers"][0].erase("block");
    const auto w = compute_costs(parse_scenario(doc, "t.json")).worker;
    CHECK_THAT(w.fwd_s[0], WithinRel(flops / 989.4e12, 1e-12));
  }
}

TEST_CASE("model.compute_dtype picks the GEMMs' peak; absent, the gradients' format", "[sim][gemm]") {
  Json doc = one_gemm("A100-SXM4-80GB", "tf32", true);
  CHECK(parse_scenario(doc, "t.json").gpu.peak_flops == 156e12);
  doc["model"].erase("compute_dtype");
  CHECK(parse_scenario(doc, "t.json").gpu.peak_flops == 312e12); // bf16 gradients
  doc["model"]["gradient_dtype"] = "fp32";
  CHECK(parse_scenario(doc, "t.json").gpu.peak_flops == 19.5e12);
  doc["model"]["compute_dtype"] = "tf32";
  doc["gpu"]["preset"] = "V100-SXM2-32GB";
  REQUIRE_THROWS_WITH(parse_scenario(doc, "t.json"), Contains("/gpu/preset: V100-SXM2-32GB has no tf32 peak"));
}
