// GPU presets (sim/spec/gpus.cpp): the table is complete and consistent, the figures the goldens use unchanged.
#include "sim/spec/gpus.hpp"

#include <catch2/catch.hpp>

#include <set>
#include <string>

using namespace ddlsim::sim;
using Catch::Matchers::WithinRel;

TEST_CASE("sim::gpu_presets: every preset has peaks, memory, compute units and a source for each", "[sim][gpus]") {
  std::set<std::string_view> names;
  for (const auto& g : gpu_presets()) {
    CAPTURE(g.name);
    CHECK(names.insert(g.name).second);
    CHECK(find_gpu_preset(g.name) == &g);
    CHECK(g.peaks.fp32 > 0);
    CHECK(g.peaks.fp16 > 0);
    CHECK(g.memory_bandwidth > 0);
    CHECK(g.memory_bytes > 0);
    CHECK(g.compute_units > 0);
    CHECK(g.pcie_generation >= 3);
    CHECK(g.host_link > 0);
    CHECK((g.scale_up == ScaleUp::none) == (g.links == 0));
    CHECK((g.scale_up == ScaleUp::none) == (g.link_Bps == 0));
    CHECK((g.scale_up == ScaleUp::nvlink) == (g.nccl_nvlink_link_Bps > 0));
    CHECK(g.bf16_gemm.efficiency > 0);
    CHECK(g.bf16_gemm.efficiency < 1);
    CHECK((g.peaks.fp8 > 0) == (g.fp8_gemm.efficiency > 0)); // an fp8 ceiling exactly where there is an fp8 peak
    CHECK_FALSE(g.peaks_source.empty());
    CHECK_FALSE(g.memory_source.empty());
    CHECK_FALSE(g.units_source.empty());
    CHECK_FALSE(g.links_source.empty());
    CHECK_FALSE(g.bf16_gemm.source.empty());
    // dense tensor-core rates: tf32 = bf16 / 2, fp8 = 2 bf16, where the GPU has them (within the datasheets' rounding)
    if (g.peaks.tf32 > 0 && g.peaks.bf16 > 0)
      CHECK_THAT(g.peaks.tf32, WithinRel(g.peaks.bf16 / 2, 0.02));
    if (g.peaks.fp8 > 0)
      CHECK_THAT(g.peaks.fp8, WithinRel(2 * g.peaks.bf16, 0.02));
  }
  for (const char* name :
       {"H100-SXM5-80GB", "H100-PCIe-80GB", "H100-NVL-94GB", "H200-SXM-141GB", "B200-SXM-180GB", "GB200-186GB",
        "A100-SXM4-40GB", "A100-SXM4-80GB", "A100-PCIe-40GB", "A100-PCIe-80GB", "L40S", "L4", "MI300X", "MI250X",
        "V100-SXM2-16GB", "V100-SXM2-32GB", "V100-PCIe-16GB", "V100-PCIe-32GB"}) {
    CAPTURE(name);
    CHECK(find_gpu_preset(name) != nullptr);
  }
  CHECK(find_gpu_preset("H100") == nullptr);
}

TEST_CASE("sim::gpu_presets: the figures of the presets that scenarios used before stay as they were", "[sim][gpus]") {
  // (name, fp32, fp16, bf16, memory bandwidth, memory GiB, host link, compute capability, NVLink, NCCL's NVLink)
  const auto [name, fp32, fp16, bf16, bandwidth, gib, host, cc, nvlink, nccl] =
      GENERATE(table<const char*, double, double, double, double, double, double, int, double, double>({
          {"A100-PCIe-40GB", 19.5e12, 312e12, 312e12, 1555e9, 40, 31.5e9, 80, 25e9, 20e9},
          {"A100-SXM4-40GB", 19.5e12, 312e12, 312e12, 1555e9, 40, 31.5e9, 80, 25e9, 20e9},
          {"A100-SXM4-80GB", 19.5e12, 312e12, 312e12, 2039e9, 80, 31.5e9, 80, 25e9, 20e9},
          {"H100-PCIe-80GB", 51e12, 756e12, 756e12, 2000e9, 80, 63e9, 90, 25e9, 20.6e9},
          {"H100-SXM5-80GB", 67e12, 989.4e12, 989.4e12, 3350e9, 80, 63e9, 90, 25e9, 20.6e9},
          {"P100-PCIe-16GB", 9.3e12, 18.7e12, 0, 732e9, 16, 15.75e9, 60, 0, 0},
          {"T4", 8.1e12, 65e12, 0, 320e9, 16, 15.75e9, 75, 0, 0},
          {"V100-PCIe-16GB", 14e12, 112e12, 0, 900e9, 16, 15.75e9, 70, 0, 0},
          {"V100-PCIe-32GB", 14e12, 112e12, 0, 900e9, 32, 15.75e9, 70, 0, 0},
          {"V100-SXM2-16GB", 15.7e12, 125e12, 0, 900e9, 16, 15.75e9, 70, 25e9, 20e9},
          {"V100-SXM2-32GB", 15.7e12, 125e12, 0, 900e9, 32, 15.75e9, 70, 25e9, 20e9},
      }));
  CAPTURE(name);
  const GpuPreset* g = find_gpu_preset(name);
  REQUIRE(g != nullptr);
  CHECK(g->peaks.fp32 == fp32);
  CHECK(g->peaks.fp16 == fp16);
  CHECK(g->peaks.bf16 == bf16);
  CHECK(g->memory_bandwidth == bandwidth);
  CHECK(g->memory_bytes == gib * 1073741824.0);
  CHECK(g->host_link == host);
  CHECK(g->compute_capability == cc);
  CHECK(g->nvlink_link_Bps() == nvlink);
  CHECK(g->nccl_nvlink_link_Bps == nccl);
}

TEST_CASE("sim::peak_of picks the format's dense peak", "[sim][gpus]") {
  const GpuPreset* h100 = find_gpu_preset("H100-SXM5-80GB");
  REQUIRE(h100 != nullptr);
  CHECK(peak_of(h100->peaks, ComputeDtype::fp32) == 67e12);
  CHECK(peak_of(h100->peaks, ComputeDtype::tf32) == 494.5e12);
  CHECK(peak_of(h100->peaks, ComputeDtype::bf16) == 989.4e12);
  CHECK(peak_of(h100->peaks, ComputeDtype::fp8) == 1979e12);
  CHECK(peak_of(find_gpu_preset("V100-SXM2-32GB")->peaks, ComputeDtype::fp8) == 0);
}

TEST_CASE("sim::find_gpu_preset_for_device: CUDA's device names to presets", "[sim][gpus]") {
  const auto preset = [](const char* device) {
    const GpuPreset* p = find_gpu_preset_for_device(device);
    return p ? std::string(p->name) : std::string("none");
  };
  CHECK(preset("NVIDIA H100 80GB HBM3") == "H100-SXM5-80GB");
  CHECK(preset("NVIDIA H100 PCIe") == "H100-PCIe-80GB");
  CHECK(preset("NVIDIA H100 NVL") == "H100-NVL-94GB");
  CHECK(preset("NVIDIA H200") == "H200-SXM-141GB");
  CHECK(preset("NVIDIA A100-SXM4-80GB") == "A100-SXM4-80GB");
  CHECK(preset("NVIDIA A100-PCIE-40GB") == "A100-PCIe-40GB");
  CHECK(preset("NVIDIA A100 80GB PCIe") == "A100-PCIe-80GB");
  CHECK(preset("Tesla V100-SXM2-32GB") == "V100-SXM2-32GB");
  CHECK(preset("Tesla V100-PCIE-16GB") == "V100-PCIe-16GB");
  CHECK(preset("Tesla T4") == "T4");
  CHECK(preset("NVIDIA L40S") == "L40S");
  CHECK(preset("NVIDIA B200") == "B200-SXM-180GB");
  CHECK(preset("NVIDIA GeForce RTX 4090") == "none");
  CHECK(preset("NVIDIA H200 NVL") == "none"); // lower peaks than the SXM's
  CHECK(preset("") == "none");
}
