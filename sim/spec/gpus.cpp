// GPU presets from the vendors' datasheets (dense rates: where a datasheet gives only figures with 2:4 structured
// sparsity, they are halved, as its footnote says). PCIe x16 per direction: gen3 15.75 GB/s, gen4 31.5 GB/s, gen5
// 63 GB/s (8/16/32 GT/s x 16 lanes x 128/130 encoding / 8 bits). GEMM ceilings: the Maximum Achievable Matmul FLOPS
// (MAMF) table of Bekman's "Machine Learning Engineering" (github.com/stas00/ml-engineering, compute/accelerator/
// README.md: a sweep of torch.matmul shapes, bf16 and fp8 inputs, no sparsity); a GPU not measured there takes the
// measurement of its closest measured relative, named in its source.
#include "sim/spec/gpus.hpp"

#include <algorithm>
#include <cctype>
#include <utility>

namespace ddlsim::sim {
namespace {
constexpr double T = 1e12;
constexpr double GB = 1e9;
constexpr double GiB = 1073741824.0;
constexpr double kPcie3 = 15.75e9, kPcie4 = 31.5e9, kPcie5 = 63.0e9;

constexpr std::string_view kV100Sheet = "NVIDIA Tesla V100 datasheet (2020), SXM2 / PCIe columns";
constexpr std::string_view kA100Sheet = "NVIDIA A100 Tensor Core GPU datasheet (2021), dense (no sparsity)";
constexpr std::string_view kH100Sheet = "NVIDIA H100 Tensor Core GPU datasheet (2023), dense (no sparsity)";
constexpr std::string_view kH100NvlSheet =
    "NVIDIA H100 Tensor Core GPU datasheet (2023), H100 NVL column: sparse figures "
    "halved";
constexpr std::string_view kH200Sheet = "NVIDIA H200 Tensor Core GPU datasheet (2024), H200 SXM column: sparse figures "
                                        "halved";
constexpr std::string_view kB200Sheet = "NVIDIA HGX B200 specifications (nvidia.com/en-us/data-center/hgx, 2025): the "
                                        "8-GPU board's figures / 8, sparse figures halved";
constexpr std::string_view kGb200Sheet = "NVIDIA GB200 NVL72 specifications (nvidia.com/en-us/data-center/gb200-nvl72, "
                                         "2025): the rack's figures / 72 GPUs, sparse figures halved";
constexpr std::string_view kL40sSheet = "NVIDIA L40S datasheet (2023): dense figures; fp64 not given";
constexpr std::string_view kL4Sheet = "NVIDIA L4 Tensor Core GPU datasheet (2023): tensor figures given with sparsity "
                                      "only, halved; fp64 not given";
constexpr std::string_view kMi300xSheet =
    "AMD Instinct MI300X data sheet (2023): peak theoretical, matrix, no sparsity";
constexpr std::string_view kMi250xSheet = "AMD Instinct MI250X data sheet (2021): peak theoretical, matrix (both GCDs)";
constexpr std::string_view kP100Sheet = "NVIDIA Tesla P100 datasheet (2016)";
constexpr std::string_view kT4Sheet = "NVIDIA T4 datasheet (2019)";

// Compute units: the architecture whitepapers (Pascal GP100: 56 SMs on the Tesla P100; Turing: 40 on the T4; Volta:
// 80 on the V100; Ampere: 108 on the A100; Hopper: 132 on the SXM5 and 114 on the PCIe H100), the CUDA cores a
// datasheet gives over 128 per SM (Ada, Hopper, Blackwell SMs), or AMD's data sheets (compute units).
constexpr std::string_view kUnitsHopper = "NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022): 132 SMs (SXM5), "
                                          "114 (PCIe)";
constexpr std::string_view kUnitsBlackwell =
    "148 SMs: cudaDeviceProp::multiProcessorCount of a B200 as kernels written "
    "for it assume (FlashAttention-4, CUTLASS examples); not in the datasheet";

// NVLink per link and direction: NVLink 2 (V100), 3 (A100) and 4 (H100, H200) 25 GB/s, NVLink 5 (B200, GB200)
// 50 GB/s (the datasheets' totals: 300 GB/s over 6 links, 600 GB/s over 12, 900 GB/s over 18, 1.8 TB/s over 18).
// NCCL's topology assumes 20.0 (SM70, SM80), 20.6 (SM90) and 40.1 GB/s (SM100) per link (NVIDIA/nccl
// src/graph/topo.h). The PCIe A100, H100 and H100 NVL bridge pairs of GPUs (600 GB/s over 12 links).
constexpr double kNvl = 25 * GB;
constexpr double kNvl5 = 50 * GB;
constexpr std::string_view kNvlinkSource = "datasheet total / links; NCCL's rate: NVIDIA/nccl src/graph/topo.h";

// GEMM ceilings (MAMF table, bf16 unless said; efficiency = measured / the table's theoretical peak).
constexpr std::string_view kMamf = "Bekman, ml-engineering, compute/accelerator/README.md, MAMF table";
constexpr std::string_view kMamfB200 = "Bekman, ml-engineering, H200 to B200 upgrade guide, MAMF tables (shape not "
                                       "given)";
constexpr GemmCeiling kNone{.efficiency = 0, .m = 0, .n = 0, .k = 0, .source = ""};
constexpr GemmCeiling kA100Sxm{.efficiency = 267.9 / 312, .m = 6912, .n = 16384, .k = 2048, .source = kMamf};
constexpr GemmCeiling kA100Pcie{.efficiency = 256.4 / 312, .m = 2304, .n = 5120, .k = 1536, .source = kMamf};
constexpr GemmCeiling kH100Sxm{.efficiency = 792.1 / 989, .m = 6144, .n = 17920, .k = 2816, .source = kMamf};
constexpr GemmCeiling kH200{.efficiency = 794.5 / 989, .m = 0, .n = 0, .k = 0, .source = kMamfB200};
constexpr GemmCeiling kH200Fp8{.efficiency = 1453.4 / 1979, .m = 0, .n = 0, .k = 0, .source = kMamfB200};
constexpr GemmCeiling kB200{.efficiency = 1745.0 / 2250, .m = 0, .n = 0, .k = 0, .source = kMamfB200};
constexpr GemmCeiling kB200Fp8{.efficiency = 3432.5 / 4500, .m = 0, .n = 0, .k = 0, .source = kMamfB200};
constexpr GemmCeiling kMi300x{.efficiency = 781.9 / 1300, .m = 4096, .n = 10240, .k = 4864, .source = kMamf};
constexpr GemmCeiling kMi250x{.efficiency = 147.0 / 191.5,
                              .m = 1024,
                              .n = 14080,
                              .k = 19968,
                              .source = "Bekman, ml-engineering, MAMF table (one "
                                        "GCD)"};
// By analogy (assumed, not measured on the GPU itself): the same chip's other board, or the closest generation.
constexpr GemmCeiling kLikeH100 = {.efficiency = kH100Sxm.efficiency,
                                   .m = kH100Sxm.m,
                                   .n = kH100Sxm.n,
                                   .k = kH100Sxm.k,
                                   .source = "assumed: the H100 SXM's MAMF (same GH100 chip, or the same generation "
                                             "of tensor cores)"};
constexpr GemmCeiling kLikeH200Fp8 = {.efficiency = kH200Fp8.efficiency,
                                      .m = 0,
                                      .n = 0,
                                      .k = 0,
                                      .source = "assumed: the H200's fp8 MAMF (same generation of tensor cores)"};
constexpr GemmCeiling kLikeB200 = {.efficiency = kB200.efficiency,
                                   .m = 0,
                                   .n = 0,
                                   .k = 0,
                                   .source = "assumed: the B200's MAMF (the same Blackwell GPU)"};
constexpr GemmCeiling kLikeB200Fp8 = {.efficiency = kB200Fp8.efficiency,
                                      .m = 0,
                                      .n = 0,
                                      .k = 0,
                                      .source = "assumed: the B200's fp8 MAMF (the same Blackwell GPU)"};
constexpr GemmCeiling kLikeA100 = {.efficiency = kA100Sxm.efficiency,
                                   .m = kA100Sxm.m,
                                   .n = kA100Sxm.n,
                                   .k = kA100Sxm.k,
                                   .source = "assumed: the A100 SXM's MAMF (the oldest generation measured)"};
constexpr GemmCeiling kLikeA100Pcie = {.efficiency = kA100Pcie.efficiency,
                                       .m = kA100Pcie.m,
                                       .n = kA100Pcie.n,
                                       .k = kA100Pcie.k,
                                       .source = "assumed: the A100 PCIe's MAMF (same GA100 chip)"};

constexpr std::array kPresets{
    GpuPreset{.name = "A100-PCIe-40GB",
              .peaks = {.fp64 = 19.5 * T,
                        .fp32 = 19.5 * T,
                        .tf32 = 156 * T,
                        .bf16 = 312 * T,
                        .fp16 = 312 * T,
                        .fp8 = 0,
                        .int8 = 624 * T},
              .memory_bandwidth = 1555 * GB,
              .memory_bytes = 40 * GiB,
              .host_link = kPcie4,
              .pcie_generation = 4,
              .compute_units = 108,
              .compute_capability = 80,
              .scale_up = ScaleUp::nvlink,
              .link_Bps = kNvl,
              .links = 12,
              .nccl_nvlink_link_Bps = 20.0 * GB,
              .bf16_gemm = kA100Pcie,
              .fp8_gemm = kNone,
              .peaks_source = kA100Sheet,
              .memory_source = kA100Sheet,
              .units_source = "NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020): 108 SMs",
              .links_source = kNvlinkSource},
    GpuPreset{.name = "A100-PCIe-80GB",
              .peaks = {.fp64 = 19.5 * T,
                        .fp32 = 19.5 * T,
                        .tf32 = 156 * T,
                        .bf16 = 312 * T,
                        .fp16 = 312 * T,
                        .fp8 = 0,
                        .int8 = 624 * T},
              .memory_bandwidth = 1935 * GB,
              .memory_bytes = 80 * GiB,
              .host_link = kPcie4,
              .pcie_generation = 4,
              .compute_units = 108,
              .compute_capability = 80,
              .scale_up = ScaleUp::nvlink,
              .link_Bps = kNvl,
              .links = 12,
              .nccl_nvlink_link_Bps = 20.0 * GB,
              .bf16_gemm = kA100Pcie,
              .fp8_gemm = kNone,
              .peaks_source = kA100Sheet,
              .memory_source = kA100Sheet,
              .units_source = "NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020): 108 SMs",
              .links_source = kNvlinkSource},
    GpuPreset{.name = "A100-SXM4-40GB",
              .peaks = {.fp64 = 19.5 * T,
                        .fp32 = 19.5 * T,
                        .tf32 = 156 * T,
                        .bf16 = 312 * T,
                        .fp16 = 312 * T,
                        .fp8 = 0,
                        .int8 = 624 * T},
              .memory_bandwidth = 1555 * GB,
              .memory_bytes = 40 * GiB,
              .host_link = kPcie4,
              .pcie_generation = 4,
              .compute_units = 108,
              .compute_capability = 80,
              .scale_up = ScaleUp::nvlink,
              .link_Bps = kNvl,
              .links = 12,
              .nccl_nvlink_link_Bps = 20.0 * GB,
              .bf16_gemm = kA100Sxm,
              .fp8_gemm = kNone,
              .peaks_source = kA100Sheet,
              .memory_source = kA100Sheet,
              .units_source = "NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020): 108 SMs",
              .links_source = kNvlinkSource},
    GpuPreset{.name = "A100-SXM4-80GB",
              .peaks = {.fp64 = 19.5 * T,
                        .fp32 = 19.5 * T,
                        .tf32 = 156 * T,
                        .bf16 = 312 * T,
                        .fp16 = 312 * T,
                        .fp8 = 0,
                        .int8 = 624 * T},
              .memory_bandwidth = 2039 * GB,
              .memory_bytes = 80 * GiB,
              .host_link = kPcie4,
              .pcie_generation = 4,
              .compute_units = 108,
              .compute_capability = 80,
              .scale_up = ScaleUp::nvlink,
              .link_Bps = kNvl,
              .links = 12,
              .nccl_nvlink_link_Bps = 20.0 * GB,
              .bf16_gemm = kA100Sxm,
              .fp8_gemm = kNone,
              .peaks_source = kA100Sheet,
              .memory_source = kA100Sheet,
              .units_source = "NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020): 108 SMs",
              .links_source = kNvlinkSource},
    GpuPreset{.name = "B200-SXM-180GB",
              .peaks = {.fp64 = 37 * T,
                        .fp32 = 75 * T,
                        .tf32 = 1125 * T,
                        .bf16 = 2250 * T,
                        .fp16 = 2250 * T,
                        .fp8 = 4500 * T,
                        .int8 = 4500 * T},
              .memory_bandwidth = 8000 * GB,
              .memory_bytes = 180 * GiB,
              .host_link = kPcie5,
              .pcie_generation = 5,
              .compute_units = 148,
              .compute_capability = 100,
              .scale_up = ScaleUp::nvlink,
              .link_Bps = kNvl5,
              .links = 18,
              .nccl_nvlink_link_Bps = 40.1 * GB,
              .bf16_gemm = kB200,
              .fp8_gemm = kB200Fp8,
              .peaks_source = kB200Sheet,
              .memory_source = kB200Sheet,
              .units_source = kUnitsBlackwell,
              .links_source = kNvlinkSource},
    GpuPreset{.name = "GB200-186GB",
              .peaks = {.fp64 = 45 * T,
                        .fp32 = 80 * T,
                        .tf32 = 1250 * T,
                        .bf16 = 2500 * T,
                        .fp16 = 2500 * T,
                        .fp8 = 5000 * T,
                        .int8 = 5000 * T},
              .memory_bandwidth = 8000 * GB,
              .memory_bytes = 186 * GiB,
              .host_link = kPcie5,
              .pcie_generation = 5,
              .compute_units = 148,
              .compute_capability = 100,
              .scale_up = ScaleUp::nvlink,
              .link_Bps = kNvl5,
              .links = 18,
              .nccl_nvlink_link_Bps = 40.1 * GB,
              .bf16_gemm = kLikeB200,
              .fp8_gemm = kLikeB200Fp8,
              .peaks_source = kGb200Sheet,
              .memory_source = kGb200Sheet,
              .units_source = kUnitsBlackwell,
              .links_source = kNvlinkSource},
    GpuPreset{.name = "H100-NVL-94GB",
              .peaks = {.fp64 = 60 * T,
                        .fp32 = 60 * T,
                        .tf32 = 417.5 * T,
                        .bf16 = 835.5 * T,
                        .fp16 = 835.5 * T,
                        .fp8 = 1670.5 * T,
                        .int8 = 1670.5 * T},
              .memory_bandwidth = 3900 * GB,
              .memory_bytes = 94 * GiB,
              .host_link = kPcie5,
              .pcie_generation = 5,
              .compute_units = 132,
              .compute_capability = 90,
              .scale_up = ScaleUp::nvlink,
              .link_Bps = kNvl,
              .links = 12,
              .nccl_nvlink_link_Bps = 20.6 * GB,
              .bf16_gemm = kLikeH100,
              .fp8_gemm = kLikeH200Fp8,
              .peaks_source = kH100NvlSheet,
              .memory_source = kH100NvlSheet,
              .units_source = "assumed: the SXM5 part's 132 SMs (16,896 CUDA cores / 128); not in the datasheet",
              .links_source = kNvlinkSource},
    GpuPreset{.name = "H100-PCIe-80GB",
              .peaks = {.fp64 = 51 * T,
                        .fp32 = 51 * T,
                        .tf32 = 378 * T,
                        .bf16 = 756 * T,
                        .fp16 = 756 * T,
                        .fp8 = 1513 * T,
                        .int8 = 1513 * T},
              .memory_bandwidth = 2000 * GB,
              .memory_bytes = 80 * GiB,
              .host_link = kPcie5,
              .pcie_generation = 5,
              .compute_units = 114,
              .compute_capability = 90,
              .scale_up = ScaleUp::nvlink,
              .link_Bps = kNvl,
              .links = 12,
              .nccl_nvlink_link_Bps = 20.6 * GB,
              .bf16_gemm = kLikeH100,
              .fp8_gemm = kLikeH200Fp8,
              .peaks_source = kH100Sheet,
              .memory_source = kH100Sheet,
              .units_source = kUnitsHopper,
              .links_source = kNvlinkSource},
    GpuPreset{.name = "H100-SXM5-80GB",
              .peaks = {.fp64 = 67 * T,
                        .fp32 = 67 * T,
                        .tf32 = 494.5 * T,
                        .bf16 = 989.4 * T,
                        .fp16 = 989.4 * T,
                        .fp8 = 1979 * T,
                        .int8 = 1979 * T},
              .memory_bandwidth = 3350 * GB,
              .memory_bytes = 80 * GiB,
              .host_link = kPcie5,
              .pcie_generation = 5,
              .compute_units = 132,
              .compute_capability = 90,
              .scale_up = ScaleUp::nvlink,
              .link_Bps = kNvl,
              .links = 18,
              .nccl_nvlink_link_Bps = 20.6 * GB,
              .bf16_gemm = kH100Sxm,
              .fp8_gemm = kLikeH200Fp8,
              .peaks_source = kH100Sheet,
              .memory_source = kH100Sheet,
              .units_source = kUnitsHopper,
              .links_source = kNvlinkSource},
    GpuPreset{.name = "H200-SXM-141GB",
              .peaks = {.fp64 = 67 * T,
                        .fp32 = 67 * T,
                        .tf32 = 494.5 * T,
                        .bf16 = 989.5 * T,
                        .fp16 = 989.5 * T,
                        .fp8 = 1979 * T,
                        .int8 = 1979 * T},
              .memory_bandwidth = 4800 * GB,
              .memory_bytes = 141 * GiB,
              .host_link = kPcie5,
              .pcie_generation = 5,
              .compute_units = 132,
              .compute_capability = 90,
              .scale_up = ScaleUp::nvlink,
              .link_Bps = kNvl,
              .links = 18,
              .nccl_nvlink_link_Bps = 20.6 * GB,
              .bf16_gemm = kH200,
              .fp8_gemm = kH200Fp8,
              .peaks_source = kH200Sheet,
              .memory_source = kH200Sheet,
              .units_source = "the H100 SXM5's GH100 (132 SMs, Hopper whitepaper): the H200 is that GPU with HBM3e",
              .links_source = kNvlinkSource},
    GpuPreset{.name = "L4",
              .peaks = {.fp64 = 0,
                        .fp32 = 30.3 * T,
                        .tf32 = 60 * T,
                        .bf16 = 121 * T,
                        .fp16 = 121 * T,
                        .fp8 = 242.5 * T,
                        .int8 = 242.5 * T},
              .memory_bandwidth = 300 * GB,
              .memory_bytes = 24 * GiB,
              .host_link = kPcie4,
              .pcie_generation = 4,
              .compute_units = 58,
              .compute_capability = 89,
              .scale_up = ScaleUp::none,
              .link_Bps = 0,
              .links = 0,
              .nccl_nvlink_link_Bps = 0,
              .bf16_gemm = kLikeH100,
              .fp8_gemm = kLikeH200Fp8,
              .peaks_source = kL4Sheet,
              .memory_source = kL4Sheet,
              .units_source = "the datasheet's 7,424 CUDA cores / 128 per Ada SM (Ada whitepaper)",
              .links_source = "none: PCIe only"},
    GpuPreset{.name = "L40S",
              .peaks = {.fp64 = 0,
                        .fp32 = 91.6 * T,
                        .tf32 = 183 * T,
                        .bf16 = 362.05 * T,
                        .fp16 = 362.05 * T,
                        .fp8 = 733 * T,
                        .int8 = 733 * T},
              .memory_bandwidth = 864 * GB,
              .memory_bytes = 48 * GiB,
              .host_link = kPcie4,
              .pcie_generation = 4,
              .compute_units = 142,
              .compute_capability = 89,
              .scale_up = ScaleUp::none,
              .link_Bps = 0,
              .links = 0,
              .nccl_nvlink_link_Bps = 0,
              .bf16_gemm = kLikeH100,
              .fp8_gemm = kLikeH200Fp8,
              .peaks_source = kL40sSheet,
              .memory_source = kL40sSheet,
              .units_source = "the datasheet's 18,176 CUDA cores / 128 per Ada SM (Ada whitepaper)",
              .links_source = "none: PCIe only"},
    GpuPreset{.name = "MI250X",
              .peaks = {.fp64 = 95.7 * T,
                        .fp32 = 95.7 * T,
                        .tf32 = 0,
                        .bf16 = 383 * T,
                        .fp16 = 383 * T,
                        .fp8 = 0,
                        .int8 = 383 * T},
              .memory_bandwidth = 3276.8 * GB,
              .memory_bytes = 128 * GiB,
              .host_link = kPcie4,
              .pcie_generation = 4,
              .compute_units = 220,
              .compute_capability = 0,
              .scale_up = ScaleUp::xgmi,
              .link_Bps = 50 * GB,
              .links = 8,
              .nccl_nvlink_link_Bps = 0,
              .bf16_gemm = kMi250x,
              .fp8_gemm = kNone,
              .peaks_source = kMi250xSheet,
              .memory_source = kMi250xSheet,
              .units_source = kMi250xSheet,
              .links_source = "ROCm docs, MI250 microarchitecture: 25 GT/s x 16 lanes = 50 GB/s per Infinity Fabric "
                              "link; 8 links (data sheet)"},
    GpuPreset{.name = "MI300X",
              .peaks = {.fp64 = 163.4 * T,
                        .fp32 = 163.4 * T,
                        .tf32 = 653.7 * T,
                        .bf16 = 1307.4 * T,
                        .fp16 = 1307.4 * T,
                        .fp8 = 2614.9 * T,
                        .int8 = 2614.9 * T},
              .memory_bandwidth = 5300 * GB,
              .memory_bytes = 192 * GiB,
              .host_link = kPcie5,
              .pcie_generation = 5,
              .compute_units = 304,
              .compute_capability = 0,
              .scale_up = ScaleUp::xgmi,
              .link_Bps = 64 * GB,
              .links = 7,
              .nccl_nvlink_link_Bps = 0,
              .bf16_gemm = kMi300x,
              .fp8_gemm = {.efficiency = kMi300x.efficiency,
                           .m = kMi300x.m,
                           .n = kMi300x.n,
                           .k = kMi300x.k,
                           .source = "assumed: the MI300X's bf16 MAMF (no fp8 measurement)"},
              .peaks_source = kMi300xSheet,
              .memory_source = kMi300xSheet,
              .units_source = kMi300xSheet,
              .links_source = "data sheet: 896 GB/s peak aggregate over 7 GPU links, 128 GB/s each, both directions"},
    GpuPreset{.name = "P100-PCIe-16GB",
              .peaks = {.fp64 = 4.7 * T, .fp32 = 9.3 * T, .tf32 = 0, .bf16 = 0, .fp16 = 18.7 * T, .fp8 = 0, .int8 = 0},
              .memory_bandwidth = 732 * GB,
              .memory_bytes = 16 * GiB,
              .host_link = kPcie3,
              .pcie_generation = 3,
              .compute_units = 56,
              .compute_capability = 60,
              .scale_up = ScaleUp::none,
              .link_Bps = 0,
              .links = 0,
              .nccl_nvlink_link_Bps = 0,
              .bf16_gemm = kLikeA100Pcie,
              .fp8_gemm = kNone,
              .peaks_source = kP100Sheet,
              .memory_source = kP100Sheet,
              .units_source = "NVIDIA Tesla P100 whitepaper (2016): 56 SMs",
              .links_source = "none: PCIe only"},
    GpuPreset{.name = "T4",
              .peaks = {.fp64 = 0, .fp32 = 8.1 * T, .tf32 = 0, .bf16 = 0, .fp16 = 65 * T, .fp8 = 0, .int8 = 130 * T},
              .memory_bandwidth = 320 * GB,
              .memory_bytes = 16 * GiB,
              .host_link = kPcie3,
              .pcie_generation = 3,
              .compute_units = 40,
              .compute_capability = 75,
              .scale_up = ScaleUp::none,
              .link_Bps = 0,
              .links = 0,
              .nccl_nvlink_link_Bps = 0,
              .bf16_gemm = kLikeA100Pcie,
              .fp8_gemm = kNone,
              .peaks_source = kT4Sheet,
              .memory_source = kT4Sheet,
              .units_source = "NVIDIA Turing GPU Architecture whitepaper (2018): 40 SMs on the T4",
              .links_source = "none: PCIe only"},
    GpuPreset{.name = "V100-PCIe-16GB",
              .peaks = {.fp64 = 7 * T, .fp32 = 14 * T, .tf32 = 0, .bf16 = 0, .fp16 = 112 * T, .fp8 = 0, .int8 = 0},
              .memory_bandwidth = 900 * GB,
              .memory_bytes = 16 * GiB,
              .host_link = kPcie3,
              .pcie_generation = 3,
              .compute_units = 80,
              .compute_capability = 70,
              .scale_up = ScaleUp::none,
              .link_Bps = 0,
              .links = 0,
              .nccl_nvlink_link_Bps = 0,
              .bf16_gemm = kLikeA100Pcie,
              .fp8_gemm = kNone,
              .peaks_source = kV100Sheet,
              .memory_source = kV100Sheet,
              .units_source = "NVIDIA Tesla V100 GPU Architecture whitepaper (2017): 80 SMs",
              .links_source = "none: PCIe only"},
    GpuPreset{.name = "V100-PCIe-32GB",
              .peaks = {.fp64 = 7 * T, .fp32 = 14 * T, .tf32 = 0, .bf16 = 0, .fp16 = 112 * T, .fp8 = 0, .int8 = 0},
              .memory_bandwidth = 900 * GB,
              .memory_bytes = 32 * GiB,
              .host_link = kPcie3,
              .pcie_generation = 3,
              .compute_units = 80,
              .compute_capability = 70,
              .scale_up = ScaleUp::none,
              .link_Bps = 0,
              .links = 0,
              .nccl_nvlink_link_Bps = 0,
              .bf16_gemm = kLikeA100Pcie,
              .fp8_gemm = kNone,
              .peaks_source = kV100Sheet,
              .memory_source = kV100Sheet,
              .units_source = "NVIDIA Tesla V100 GPU Architecture whitepaper (2017): 80 SMs",
              .links_source = "none: PCIe only"},
    GpuPreset{.name = "V100-SXM2-16GB",
              .peaks = {.fp64 = 7.8 * T, .fp32 = 15.7 * T, .tf32 = 0, .bf16 = 0, .fp16 = 125 * T, .fp8 = 0, .int8 = 0},
              .memory_bandwidth = 900 * GB,
              .memory_bytes = 16 * GiB,
              .host_link = kPcie3,
              .pcie_generation = 3,
              .compute_units = 80,
              .compute_capability = 70,
              .scale_up = ScaleUp::nvlink,
              .link_Bps = kNvl,
              .links = 6,
              .nccl_nvlink_link_Bps = 20.0 * GB,
              .bf16_gemm = kLikeA100,
              .fp8_gemm = kNone,
              .peaks_source = kV100Sheet,
              .memory_source = kV100Sheet,
              .units_source = "NVIDIA Tesla V100 GPU Architecture whitepaper (2017): 80 SMs",
              .links_source = kNvlinkSource},
    GpuPreset{.name = "V100-SXM2-32GB",
              .peaks = {.fp64 = 7.8 * T, .fp32 = 15.7 * T, .tf32 = 0, .bf16 = 0, .fp16 = 125 * T, .fp8 = 0, .int8 = 0},
              .memory_bandwidth = 900 * GB,
              .memory_bytes = 32 * GiB,
              .host_link = kPcie3,
              .pcie_generation = 3,
              .compute_units = 80,
              .compute_capability = 70,
              .scale_up = ScaleUp::nvlink,
              .link_Bps = kNvl,
              .links = 6,
              .nccl_nvlink_link_Bps = 20.0 * GB,
              .bf16_gemm = kLikeA100,
              .fp8_gemm = kNone,
              .peaks_source = kV100Sheet,
              .memory_source = kV100Sheet,
              .units_source = "NVIDIA Tesla V100 GPU Architecture whitepaper (2017): 80 SMs",
              .links_source = kNvlinkSource},
};
// CUDA's device names (cudaDeviceProp::name, nvidia-smi's "name") that are not a preset's name after the vendor's
// "NVIDIA " or "Tesla " in any letter case; "NVIDIA A100-SXM4-80GB", "NVIDIA A100-PCIE-40GB", "Tesla V100-SXM2-16GB",
// "Tesla T4", "NVIDIA L40S" are. scripts/gpu-check.sh maps these H100s and the H200 alike (and takes an H200 NVL, whose
// peaks its datasheet gives lower, for the SXM's preset; here it has none).
constexpr std::pair<std::string_view, std::string_view> kDeviceNames[] = {{"H100 80GB HBM3", "H100-SXM5-80GB"},
                                                                          {"H100 PCIe", "H100-PCIe-80GB"},
                                                                          {"H100 NVL", "H100-NVL-94GB"},
                                                                          {"H200", "H200-SXM-141GB"},
                                                                          {"A100 80GB PCIe", "A100-PCIe-80GB"},
                                                                          {"B200", "B200-SXM-180GB"},
                                                                          {"GB200", "GB200-186GB"}};

bool same_letters(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
  });
}

std::string_view without_vendor(std::string_view name) {
  for (const std::string_view vendor : {"NVIDIA ", "Tesla "})
    if (name.starts_with(vendor))
      return name.substr(vendor.size());
  return name;
}

} // namespace

double peak_of(const DtypePeaks& p, ComputeDtype d) {
  switch (d) {
  case ComputeDtype::fp32:
    return p.fp32;
  case ComputeDtype::tf32:
    return p.tf32;
  case ComputeDtype::bf16:
    return p.bf16;
  case ComputeDtype::fp16:
    return p.fp16;
  case ComputeDtype::fp8:
    return p.fp8;
  }
  return 0;
}

std::span<const GpuPreset> gpu_presets() {
  return kPresets;
}

const GpuPreset* find_gpu_preset(std::string_view name) {
  for (const auto& p : kPresets)
    if (p.name == name)
      return &p;
  return nullptr;
}

const GpuPreset* find_gpu_preset_for_device(std::string_view device_name) {
  const std::string_view name = without_vendor(device_name);
  for (const auto& [device, preset] : kDeviceNames)
    if (name == device)
      return find_gpu_preset(preset);
  for (const auto& p : kPresets)
    if (same_letters(p.name, name))
      return &p;
  return nullptr;
}

} // namespace ddlsim::sim
