// The shape-aware compute model (sim/plan/gemm_efficiency.hpp, layer_costs.hpp; issue #33 items 4 and 5): tile and
// wave quantisation, the epilogue's small-K penalty and the memory floor against their closed forms; the measured
// ceiling reproduced at its shape; FP8's GEMMs at the FP8 peak with Transformer Engine's casts; where it applies.
#include "calibrate/nccl_tests.hpp"
#include "core/json.hpp"
#include "sim/analytic/analytic.hpp"
#include "sim/plan/compute.hpp"
#include "sim/plan/gemm_efficiency.hpp"
#include "sim/plan/gemm_fit.hpp"
#include "sim/plan/layer_costs.hpp"
#include "sim/spec/scenario.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

using namespace ddlsim;
using namespace ddlsim::sim;
using Catch::Matchers::Contains;
using Catch::Matchers::WithinRel;

namespace {
// 108 compute units (an A100), no epilogue or traffic cost (an unbounded bandwidth).
constexpr GemmDevice kIdeal{
    .peak_flops = 312e12, .ceiling = 0.9, .bandwidth = 1e30, .units = 108, .in_bytes = 2, .out_bytes = 2};
} // namespace

TEST_CASE("sim::wave_efficiency: tile and wave quantisation on the compute units", "[sim][gemm]") {
  SECTION("tiles that fill the units exactly: every slot does useful work") {
    // 12 x 9 tiles of 256 x 128 = 108 = one wave
    CHECK(wave_efficiency({.m = 12 * 256, .n = 9 * 128, .k = 4096, .count = 1}, 108) == 1.0);
    // the transposed shape takes the other orientation of the tile
    CHECK(wave_efficiency({.m = 9 * 128, .n = 12 * 256, .k = 4096, .count = 1}, 108) == 1.0);
    // a batch of 108 single tiles
    CHECK(wave_efficiency({.m = 256, .n = 128, .k = 64, .count = 108}, 108) == 1.0);
  }
  SECTION("one tile more than a wave: two waves for 109 tiles' work, about half") {
    CHECK_THAT(wave_efficiency({.m = 256, .n = 109 * 128, .k = 4096, .count = 1}, 108), WithinRel(109.0 / 216, 1e-12));
  }
  SECTION("a matrix that overhangs its tiles: the overhang's share is lost") {
    // 100 x 128 outputs in one 256 x 128 tile (or 128 x 256), one wave of 108 slots
    CHECK_THAT(wave_efficiency({.m = 100, .n = 128, .k = 64, .count = 1}, 108),
               WithinRel(100.0 * 128 / (108.0 * 256 * 128), 1e-12));
  }
}

TEST_CASE("sim::gemm_time_s: the ceiling, the epilogue's small-K penalty and the memory floor", "[sim][gemm]") {
  const GemmShape full{.m = 12 * 256, .n = 9 * 128, .k = 8192, .count = 1};
  SECTION("whole waves without an epilogue cost: FLOPs / (peak x ceiling)") {
    CHECK_THAT(gemm_time_s(full, kIdeal), WithinRel(full.flops() / (312e12 * 0.9), 1e-12));
    CHECK_THAT(gemm_efficiency(full, kIdeal), WithinRel(0.9, 1e-12));
  }
  SECTION("the epilogue writes each output at the bandwidth: c / (1 + c P e / (2 k B))") {
    GemmDevice d = kIdeal;
    d.bandwidth = 2039e9;
    for (const std::int64_t k : {1536, 12288}) {
      CAPTURE(k);
      GemmShape g = full;
      g.k = k;
      const double r = 2.0 * 312e12 / (2.0 * static_cast<double>(k) * 2039e9);
      CHECK_THAT(gemm_efficiency(g, d), WithinRel(0.9 / (1 + 0.9 * r), 1e-12));
    }
    // a tensor-parallel shard's K (1536 of 12288) loses more than the whole GEMM
    GemmShape shard = full;
    shard.k = 1536;
    CHECK(gemm_efficiency(shard, d) < gemm_efficiency(full, d));
  }
  SECTION("one output tile over a long K: split-K over the units, the slices one whole wave") {
    // 256 x 128 outputs, K = 108 x 256: 108 slices of 256, one per unit, at the ceiling (the reduction is free at an
    // unbounded bandwidth); unsplit, one unit of 108 would work
    const GemmShape tall{.m = 256, .n = 128, .k = 108 * 256, .count = 1};
    CHECK_THAT(gemm_efficiency(tall, kIdeal), WithinRel(0.9, 1e-12));
    GemmDevice d = kIdeal;
    d.bandwidth = 2039e9; // then the partial sums' 8 bytes per output and slice count, and so does the epilogue
    const double slice_s = 256.0 * 128 * 108 * (2.0 * 256 / (0.9 * 312e12) + 2 / 2039e9);
    CHECK(gemm_time_s(tall, d) <= slice_s + 8.0 * 256 * 128 * 108 / 2039e9);
  }
  SECTION("a GEMM of K = 1 is bound by reading its operands and writing its result") {
    GemmDevice d = kIdeal;
    d.bandwidth = 1e12;
    // 108 x 1 tiles, one whole wave: the tiles take m n (2 / (c P) + 2 / B), less than the traffic
    const GemmShape thin{.m = 108 * 256, .n = 128, .k = 1, .count = 1};
    CHECK_THAT(gemm_time_s(thin, d), WithinRel(2.0 * (27648.0 + 128.0 + 27648.0 * 128.0) / 1e12, 1e-12));
  }
}

TEST_CASE("sim::mainloop_ceiling reproduces the measured fraction at its shape", "[sim][gemm]") {
  const GemmCeiling a100{.efficiency = 267.9 / 312, .m = 6912, .n = 16384, .k = 2048, .source = "MAMF"};
  GemmDevice d{.peak_flops = 312e12, .ceiling = 1, .bandwidth = 2039e9, .units = 108, .in_bytes = 2, .out_bytes = 2};
  d.ceiling = mainloop_ceiling(a100, d);
  CHECK(d.ceiling > a100.efficiency);
  CHECK(d.ceiling < 1);
  CHECK_THAT(gemm_efficiency({.m = 6912, .n = 16384, .k = 2048, .count = 1}, d), WithinRel(267.9 / 312, 1e-12));
  // without a shape, the measured fraction itself
  const GemmCeiling shapeless{.efficiency = 0.776, .m = 0, .n = 0, .k = 0, .source = "MAMF"};
  CHECK(mainloop_ceiling(shapeless, d) == 0.776);
}

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
  SECTION("shape-aware: the FP8 GEMM model (the H200's measured fp8 ceiling) + the casts") {
    const auto s = parse_scenario(one_gemm("H100-SXM5-80GB", "fp8", false), "t.json");
    REQUIRE(s.gpu.shape_aware);
    const GpuPreset& h100 = *s.gpu.preset;
    GemmDevice d{
        .peak_flops = 1979e12, .ceiling = 1, .bandwidth = bandwidth, .units = 132, .in_bytes = 1, .out_bytes = 2};
    d.ceiling = mainloop_ceiling(h100.fp8_gemm, d);
    const GemmShape g{.m = 4 * 2048, .n = 4096, .k = 4096, .count = 1};
    const auto w = compute_costs(s).worker;
    CHECK_THAT(w.fwd_s[0], WithinRel(gemm_time_s(g, d) + cast_fwd / bandwidth, 1e-12));
    CHECK(compute_costs(s).source == "shape-aware");
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

TEST_CASE("the shape-aware model is the default on a preset without gpu.efficiency", "[sim][gemm]") {
  Json doc = one_gemm("A100-SXM4-80GB", "bf16", false);
  CHECK(parse_scenario(doc, "t.json").gpu.shape_aware);
  doc["gpu"]["efficiency"] = 0.5;
  CHECK_FALSE(parse_scenario(doc, "t.json").gpu.shape_aware);
  CHECK(compute_costs(parse_scenario(doc, "t.json")).source == "roofline");
  doc["gpu"].erase("efficiency");
  doc["gpu"]["peak_flops"] = "100 TFLOPS";
  CHECK_FALSE(parse_scenario(doc, "t.json").gpu.shape_aware);
  // the A100's whole-wave GEMM at its fitted ceiling: (8192 x 4096) outputs = 32 x 32 tiles of 256 x 128 = 1024 tiles
  // in 10 waves of 108 (0.948 of the slots)
  doc["gpu"].erase("peak_flops");
  const auto s = parse_scenario(doc, "t.json");
  GemmDevice d{.peak_flops = 312e12, .ceiling = 1, .bandwidth = 2039e9, .units = 108, .in_bytes = 2, .out_bytes = 2};
  d.ceiling = mainloop_ceiling(s.gpu.preset->bf16_gemm, d);
  const GemmShape g{.m = 4 * 2048, .n = 4096, .k = 4096, .count = 1};
  CHECK_THAT(wave_efficiency(g, 108), WithinRel(1024.0 / 1080, 1e-12));
  CHECK_THAT(compute_costs(s).worker.fwd_s[0], WithinRel(gemm_time_s(g, d), 1e-12));
}

// scenarios/gpt3-175b-hybrid.json without its gpu.efficiency (t = 8, p = 8, v = 2, sequence parallelism, selective
// recomputation), its NVSwitch at `intra` (null: the scenario's 300 GB/s); the model FLOPs utilisation predicted.
double gpt3_shape_aware_mfu(const char* intra) {
  Json doc = load_json_file(std::string(DDLSIM_SOURCE_DIR) + "/scenarios/gpt3-175b-hybrid.json");
  doc["gpu"].erase("efficiency");
  doc.erase("sweep");
  if (intra != nullptr)
    doc["cluster"]["intra_node"]["bandwidth"] = intra;
  const auto s = parse_scenario(doc, "gpt3.json");
  REQUIRE(s.gpu.shape_aware);
  const auto r = run_analytic(s);
  REQUIRE(r.model_flops_utilisation);
  CHECK(r.compute_source == "shape-aware");
  return *r.model_flops_utilisation;
}

// The bus bandwidth NCCL reached over the 8 A100s of one NVSwitch board for an allreduce of `bytes`, the times
// measured around it interpolated linearly (as a calibration replays them): Echo's nccl-tests log.
double nvswitch_bus_bandwidth(double bytes) {
  const auto log = calibrate::read_nccl_tests(std::string(DDLSIM_SOURCE_DIR) +
                                                  "/tests/data/shared/nccl-tests/echo_azure_a100_8gpu_all_reduce.txt",
                                              {.collective = calibrate::NcclCollective::all_reduce});
  const auto sizes = calibrate::fastest_per_size(log.rows);
  std::size_t i = 1;
  while (i + 1 < sizes.size() && sizes[i].size_bytes < bytes)
    ++i;
  const auto& [s0, t0] = sizes[i - 1];
  const auto& [s1, t1] = sizes[i];
  REQUIRE((s0 <= bytes && bytes <= s1));
  const double time_s = t0 + (t1 - t0) * (bytes - s0) / (s1 - s0);
  return calibrate::busbw_factor(calibrate::NcclCollective::all_reduce, 8) * bytes / time_s;
}

TEST_CASE("shape-aware GPT-3 175B on 1,024 A100s against Megatron-LM's measured model FLOPs utilisation",
          "[sim][gemm][gpt3]") {
  // Megatron-LM measured 51.4 % for GPT-3 175B so run (Korthikanti et al., arXiv:2205.05198, Table 5; the
  // Megatron-LM README's MFU table). docs/engines.md, "Choosing gpu.efficiency", gives the figures and what the model
  // leaves out. Pinned so that a change that moves them is seen. With the NVSwitch as specified (300 GB/s) the model
  // predicts 60.1 %, 16.9 % above; with the bus bandwidth NCCL measured on the same 8-GPU A100 NVSwitch board for
  // the 48 MiB of the tensor-parallel collectives (Echo's nccl-tests log in tests/data/shared/nccl-tests: 190 GB/s
  // interpolated between 32 and 64 MiB) 57.4 %, 11.7 % above: within the issue's 15 %, and an upper bound.
  const double spec = gpt3_shape_aware_mfu(nullptr);
  CHECK_THAT(spec, WithinRel(0.601, 0.005));
  // b s h = 2048 x 12288 x 2 bytes = 48 MiB per collective; nccl-tests' bus bandwidth is comparable across
  // collectives (its doc/PERFORMANCE.md), so the allreduce's stands for the allgathers and reduce-scatters
  const double busbw = nvswitch_bus_bandwidth(48 * 1024.0 * 1024);
  CHECK_THAT(busbw, WithinRel(190e9, 0.01));
  const double measured_nvswitch = gpt3_shape_aware_mfu(fmt::format("{} B/s", busbw).c_str());
  CHECK(measured_nvswitch > 0.514);
  CHECK_THAT(measured_nvswitch, WithinRel(0.514, 0.15));
  CHECK_THAT(measured_nvswitch, WithinRel(0.574, 0.005));
}

TEST_CASE("shape-aware: a fused attention layer by FlashAttention's blocks of 128 queries in waves", "[sim][gemm]") {
  // A one-block LM (h 1024, 8 heads of 128, s 2048), batch 4, on an H100; its attention's scores layer taken as a
  // fused kernel (kind flash_attention, as the model side builds it): 4 x 8 heads x 2048 / 128 = 512 blocks on 132 SMs,
  // 4 waves, each block F / 512 at 75 % of 989.4 TFLOP/s over 132, then 128 x 128 outputs of 2 bytes at 3.35 TB/s / 132
  Json doc = Json::parse(R"({
    "name": "flash",
    "model": {"zoo": "transformer", "batch_per_gpu": 4, "gradient_dtype": "bf16",
              "transformer": {"layers": 1, "hidden": 1024, "heads": 8, "sequence": 2048, "vocabulary": 32000}},
    "gpu": {"preset": "H100-SXM5-80GB"},
    "cluster": {"nodes": 1, "gpus_per_node": 1},
    "strategy": {"kind": "bsp"}
  })");
  auto s = parse_scenario(doc, "flash.json");
  std::size_t l = 0;
  while (s.model.layers[l].kind != "attention")
    ++l;
  s.model.layers[l].kind = "flash_attention";
  const double flops = 4 * s.model.layers[l].fwd_flops;
  const double block_s = flops / 512 / (0.75 * 989.4e12 / 132) + 128.0 * 128 * 2 / (3350e9 / 132);
  CHECK_THAT(compute_costs(s).worker.fwd_s[l], WithinRel(4 * block_s, 1e-12));
}

TEST_CASE("shape-aware: the element-wise kernels folded into a layer run at the bandwidth, on top of its GEMM",
          "[sim][gemm]") {
  // GPT-2's blocks: mlp.c_fc folds GELU (reads and writes s·4h elements), mlp.c_proj a dropout (2·s·h) and a
  // residual add (3·s·h), attn.softmax the probabilities' dropout (2·a·s²); bf16 on an H100, 2 sequences of 1024.
  Json doc = Json::parse(R"({"name": "e", "model": {"zoo": "gpt2", "batch_per_gpu": 2, "gradient_dtype": "bf16"},
      "gpu": {"preset": "H100-SXM5-80GB"}, "cluster": {"nodes": 1, "gpus_per_node": 1}, "strategy": {"kind": "ddp"}})");
  auto s = parse_scenario(doc, "e.json");
  REQUIRE(s.gpu.shape_aware);
  const auto index = [&](const std::string& name) {
    for (std::size_t i = 0; i < s.model.layers.size(); ++i)
      if (s.model.layers[i].name == name)
        return i;
    FAIL(name);
    return std::size_t{0};
  };
  const std::size_t fc = index("transformer.h.0.mlp.c_fc"), proj = index("transformer.h.0.mlp.c_proj");
  const std::size_t softmax = index("transformer.h.0.attn.softmax");
  const double sh = 1024.0 * 768, scores = 12 * 1024.0 * 1024;
  CHECK(s.model.layers[fc].elementwise_bytes == 4 * 2 * 4 * sh);
  CHECK(s.model.layers[proj].elementwise_bytes == 4 * (2 + 3) * sh);
  // the attention probabilities' dropout, a kernel of its own beside Megatron's fused softmax: 12 heads' scores
  CHECK(s.model.layers[softmax].elementwise_bytes == 4 * 2 * scores);
  CHECK(s.model.layers[softmax].elementwise_bwd_flops == s.model.layers[softmax].elementwise_flops);
  const auto with = shape_aware_layer_times(s);
  for (auto& layer : s.model.layers) { // the same GEMMs without their element-wise kernels
    layer.fwd_flops -= layer.elementwise_flops;
    layer.bwd_flops -= layer.elementwise_bwd_flops;
    layer.elementwise_flops = layer.elementwise_bytes = layer.elementwise_bwd_flops = 0;
  }
  const auto without = shape_aware_layer_times(s);
  for (const std::size_t l : {fc, proj, softmax}) {
    // 2-byte elements (bf16) of 2 samples at 3.35 TB/s; the backward twice the forward's traffic
    const double bytes = 2 * 2.0 / 4 * (l == fc ? 4 * 2 * 4 * sh : l == proj ? 4 * 5 * sh : 4 * 2 * scores);
    CHECK_THAT(with.fwd_s[l] - without.fwd_s[l], WithinRel(bytes / 3350e9, 1e-9));
    CHECK_THAT(with.bwd_s[l] - without.bwd_s[l], WithinRel(2 * bytes / 3350e9, 1e-9));
  }
}

namespace {
// An H100 SXM in bf16 as the probe's fit sees it: its preset's peak, SMs and bandwidth.
constexpr GemmDevice kH100Bf16{
    .peak_flops = 989.4e12, .ceiling = 1, .bandwidth = 3350e9, .units = 132, .in_bytes = 2, .out_bytes = 2};

// Shapes that exercise every part of the model: whole and partial waves, a small K's epilogue, split-K of a small C
// over a long K, the memory floor of K = 1.
const std::vector<GemmShape> kFitShapes = {
    {.m = 4096, .n = 4096, .k = 4096, .count = 1},  {.m = 8192, .n = 12288, .k = 1536, .count = 1},
    {.m = 3000, .n = 3000, .k = 3000, .count = 1},  {.m = 256, .n = 256, .k = 65536, .count = 1},
    {.m = 16384, .n = 16384, .k = 256, .count = 1}, {.m = 1024, .n = 16384, .k = 1024, .count = 1},
    {.m = 16384, .n = 16384, .k = 1, .count = 1},   {.m = 8192, .n = 28672, .k = 4096, .count = 1}};

std::vector<MeasuredGemm> timed_at(const GemmDevice& d) {
  std::vector<MeasuredGemm> points;
  for (const auto& g : kFitShapes)
    points.push_back({.shape = g, .time_s = gemm_time_s(g, d)});
  return points;
}
} // namespace

TEST_CASE("sim::fit_gemm_ceiling recovers the ceiling the times were made with", "[sim][gemm][fit]") {
  for (const double ceiling : {0.4123, 0.7317, 0.9999, 1.0}) {
    CAPTURE(ceiling);
    GemmDevice d = kH100Bf16;
    d.ceiling = ceiling;
    const CeilingFit fit = fit_gemm_ceiling(timed_at(d), kH100Bf16);
    CHECK_THAT(fit.ceiling, WithinRel(ceiling, 1e-6));
    CHECK(fit.mean_relative_error < 1e-9);
    CHECK(fit.max_relative_error < 1e-9);
  }
}

TEST_CASE("sim::fit_gemm_ceiling: least squares on relative error, the error figures by hand", "[sim][gemm][fit]") {
  // Two GEMMs of whole waves on an unbounded bandwidth (no epilogue, no memory floor): the model takes a / c, a the
  // FLOPs over the peak. Measured at a / 0.8 and a / 0.6, the relative errors are q x - 1 with x = 1 / c and
  // q = 0.8, 0.6: least squares gives x = (0.8 + 0.6) / (0.64 + 0.36) = 1.4, c = 1 / 1.4; the errors are
  // 0.8 x 1.4 - 1 = 0.12 and 0.6 x 1.4 - 1 = -0.16: mean 0.14, worst 0.16.
  GemmDevice d = kIdeal;
  const GemmShape a{.m = 12 * 256, .n = 9 * 128, .k = 4096, .count = 1}, b{.m = 12 * 256, .n = 9 * 128, .k = 8192};
  const double peak = d.peak_flops;
  std::vector<MeasuredGemm> points = {{.shape = a, .time_s = a.flops() / peak / 0.8},
                                      {.shape = b, .time_s = b.flops() / peak / 0.6}};
  CeilingFit fit = fit_gemm_ceiling(points, d);
  CHECK_THAT(fit.ceiling, WithinRel(1 / 1.4, 1e-6));
  CHECK_THAT(fit.mean_relative_error, WithinRel(0.14, 1e-6));
  CHECK_THAT(fit.max_relative_error, WithinRel(0.16, 1e-6));
  SECTION("times faster than the peak allows: the ceiling stops at 1") {
    // at c = 1 the model is 1.25 and 1.1 times the measured a / 1.25 and a / 1.1
    points = {{.shape = a, .time_s = a.flops() / peak / 1.25}, {.shape = b, .time_s = b.flops() / peak / 1.1}};
    fit = fit_gemm_ceiling(points, d);
    CHECK(fit.ceiling == 1.0);
    CHECK_THAT(fit.mean_relative_error, WithinRel((0.25 + 0.1) / 2, 1e-12));
    CHECK_THAT(fit.max_relative_error, WithinRel(0.25, 1e-12));
  }
  SECTION("a GEMM measured faster than its memory traffic says nothing of the ceiling: it stays at 1") {
    // every ceiling from about 0.003 up gives the traffic's time, twice the measured one
    d.bandwidth = 1e12;
    const GemmShape thin{.m = 108 * 256, .n = 128, .k = 1, .count = 1};
    fit = fit_gemm_ceiling({{.shape = thin, .time_s = gemm_time_s(thin, d) / 2}}, d);
    CHECK(fit.ceiling == 1.0);
    CHECK_THAT(fit.mean_relative_error, WithinRel(1.0, 1e-12));
  }
}

namespace {
// one_gemm on an H100 in `dtype`, calibrated inline by a gemm entry.
Scenario calibrated_gemm(const std::string& dtype, const Json& entry, bool efficiency = false) {
  Json doc = one_gemm("H100-SXM5-80GB", dtype, efficiency);
  doc["calibration"] = {{"format", "ddlsim-calibration"}, {"version", 2}, {"gemm", entry}};
  return parse_scenario(doc, "t.json");
}
} // namespace

TEST_CASE("a calibration's gemm entry sets the ceiling of the GEMMs in its format", "[sim][gemm][fit]") {
  const GemmShape g{.m = 4 * 2048, .n = 4096, .k = 4096, .count = 1};
  const Json entry = {{"dtype", "bf16"},
                      {"ceiling", 0.6},
                      {"gpu", "H100-SXM5-80GB"},
                      {"points", 51},
                      {"mean_relative_error", 0.031},
                      {"max_relative_error", 0.12}};
  SECTION("in its format on its GPU: the fitted ceiling, said in the notes") {
    const auto s = calibrated_gemm("bf16", entry);
    GemmDevice d = kH100Bf16;
    d.ceiling = 0.6;
    const auto costs = compute_costs(s);
    CHECK(costs.source == "shape-aware");
    CHECK_THAT(costs.worker.fwd_s[0], WithinRel(gemm_time_s(g, d), 1e-12));
    // dA = dC B^T (m x k over n) and dB = A^T dC (k x n over m)
    const double backward = gemm_time_s({.m = g.m, .n = g.k, .k = g.n, .count = 1}, d) +
                            gemm_time_s({.m = g.k, .n = g.n, .k = g.m, .count = 1}, d);
    CHECK_THAT(costs.worker.bwd_s[0], WithinRel(backward, 1e-12));
    CHECK_THAT(costs.note, Contains("bf16 GEMMs' main loop at up to 60.0 % of 989.4 TFLOP/s (calibration t.json "
                                    "/calibration/gemm: fitted to 51 measured GEMMs, mean error 3.1 %)"));
    CHECK_THAT(costs.note, !Contains("not used"));
  }
  SECTION("in another format: the preset's ceiling, and a note that it is not used") {
    Json fp32 = entry;
    fp32["dtype"] = "fp32";
    const auto s = calibrated_gemm("bf16", fp32);
    GemmDevice d = kH100Bf16;
    d.ceiling = mainloop_ceiling(s.gpu.preset->bf16_gemm, d);
    const auto costs = compute_costs(s);
    CHECK_THAT(costs.worker.fwd_s[0], WithinRel(gemm_time_s(g, d), 1e-12));
    CHECK_THAT(costs.note, Contains("the calibration's fp32 GEMM ceiling (t.json /calibration/gemm) is not used: this "
                                    "scenario's GEMMs run in bf16"));
  }
  SECTION("fitted on another GPU: not used") {
    Json a100 = entry;
    a100["gpu"] = "A100-SXM4-80GB";
    CHECK_THAT(compute_costs(calibrated_gemm("bf16", a100)).note,
               Contains("is not used: it was fitted on the A100-SXM4-80GB, this scenario's GPU is the H100-SXM5-80GB"));
  }
  SECTION("fp8: an fp8 entry times the blocks' FP8 GEMMs") {
    Json fp8 = entry;
    fp8["dtype"] = "fp8";
    const auto s = calibrated_gemm("fp8", fp8);
    GemmDevice d{
        .peak_flops = 1979e12, .ceiling = 0.6, .bandwidth = 3350e9, .units = 132, .in_bytes = 1, .out_bytes = 2};
    const double casts = 4.0 * (4 * 2048.0 * 4096 + 4096.0 * 4096) / 3350e9;
    const auto costs = compute_costs(s);
    CHECK_THAT(costs.worker.fwd_s[0], WithinRel(gemm_time_s(g, d) + casts, 1e-12));
    CHECK_THAT(costs.note, Contains("in fp8 at up to 60.0 % of 1979 TFLOP/s (calibration t.json /calibration/gemm"));
  }
  SECTION("gpu.efficiency overrides it, and the notes say so") {
    const auto costs = compute_costs(calibrated_gemm("bf16", entry, true));
    CHECK(costs.source == "roofline");
    CHECK_THAT(costs.worker.fwd_s[0], WithinRel(4 * 68719476736.0 / 989.4e12, 1e-12));
    CHECK_THAT(costs.note, Contains("the calibration's bf16 GEMM ceiling (t.json /calibration/gemm) is not used: "
                                    "gpu.efficiency"));
  }
}
