// GPU presets from NVIDIA's datasheets. PCIe x16 per direction: gen3 15.75 GB/s, gen4 31.5 GB/s, gen5 63 GB/s
// (8/16/32 GT/s x 16 lanes x 128/130 encoding / 8 bits).
#include "sim/spec/gpus.hpp"

#include <array>

namespace ddlsim::sim {
namespace {
constexpr double T = 1e12;
constexpr double GB = 1e9;
constexpr double GiB = 1073741824.0;
constexpr double kPcie3 = 15.75e9, kPcie4 = 31.5e9, kPcie5 = 63.0e9;
constexpr std::string_view kV100 = "NVIDIA Tesla V100 datasheet (2020), SXM2 / PCIe columns";
constexpr std::string_view kA100 = "NVIDIA A100 Tensor Core GPU datasheet (2021), dense (no sparsity)";
constexpr std::string_view kH100 = "NVIDIA H100 Tensor Core GPU datasheet (2023), dense (no sparsity)";
constexpr std::string_view kP100 = "NVIDIA Tesla P100 datasheet (2016)";
constexpr std::string_view kT4 = "NVIDIA T4 datasheet (2019)";
// NVLink per link and direction (the PCIe V100 and P100 have none; the PCIe A100 and H100 bridge pairs): NVLink 2
// (V100), 3 (A100) and 4 (H100) 25 GB/s (the datasheets' totals: 300 GB/s over 6, 600 GB/s over 12, 900 GB/s over 18).
// NCCL's topology assumes 20.0 (SM70, SM80) and 20.6 GB/s (SM90) per link (NVIDIA/nccl src/graph/topo.h).
constexpr double kNvl = 25 * GB;

constexpr std::array<GpuPreset, 11> kPresets{{
    {"A100-PCIe-40GB", 19.5 * T, 312 * T, 312 * T, 1555 * GB, 40 * GiB, kPcie4, kA100, 80, kNvl, 20.0 * GB},
    {"A100-SXM4-40GB", 19.5 * T, 312 * T, 312 * T, 1555 * GB, 40 * GiB, kPcie4, kA100, 80, kNvl, 20.0 * GB},
    {"A100-SXM4-80GB", 19.5 * T, 312 * T, 312 * T, 2039 * GB, 80 * GiB, kPcie4, kA100, 80, kNvl, 20.0 * GB},
    {"H100-PCIe-80GB", 51 * T, 756 * T, 756 * T, 2000 * GB, 80 * GiB, kPcie5, kH100, 90, kNvl, 20.6 * GB},
    {"H100-SXM5-80GB", 67 * T, 989.4 * T, 989.4 * T, 3350 * GB, 80 * GiB, kPcie5, kH100, 90, kNvl, 20.6 * GB},
    {"P100-PCIe-16GB", 9.3 * T, 18.7 * T, 0, 732 * GB, 16 * GiB, kPcie3, kP100, 60, 0, 0},
    {"T4", 8.1 * T, 65 * T, 0, 320 * GB, 16 * GiB, kPcie3, kT4, 75, 0, 0},
    {"V100-PCIe-16GB", 14 * T, 112 * T, 0, 900 * GB, 16 * GiB, kPcie3, kV100, 70, 0, 0},
    {"V100-PCIe-32GB", 14 * T, 112 * T, 0, 900 * GB, 32 * GiB, kPcie3, kV100, 70, 0, 0},
    {"V100-SXM2-16GB", 15.7 * T, 125 * T, 0, 900 * GB, 16 * GiB, kPcie3, kV100, 70, kNvl, 20.0 * GB},
    {"V100-SXM2-32GB", 15.7 * T, 125 * T, 0, 900 * GB, 32 * GiB, kPcie3, kV100, 70, kNvl, 20.0 * GB},
}};
} // namespace

std::span<const GpuPreset> gpu_presets() {
  return kPresets;
}

const GpuPreset* find_gpu_preset(std::string_view name) {
  for (const auto& p : kPresets)
    if (p.name == name)
      return &p;
  return nullptr;
}

} // namespace ddlsim::sim
