// Built-in GPU presets: per-format dense peak rates, memory, compute units, the GPU-to-GPU links and the host link,
// with the source of each group of figures (sim/spec/gpus.cpp; docs/scenario.md, "GPU presets").
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

namespace ddlsim::sim {

/// Number formats a GEMM can run in (`model.compute_dtype`); the one name table is kComputeDtypeNames.
enum class ComputeDtype : std::uint8_t { fp32, tf32, bf16, fp16, fp8 };
inline constexpr std::array<std::string_view, 5> kComputeDtypeNames{"fp32", "tf32", "bf16", "fp16", "fp8"};
[[nodiscard]] constexpr std::string_view compute_dtype_name(ComputeDtype d) {
  return kComputeDtypeNames.at(static_cast<std::size_t>(d));
}

/// Dense peak rates (no structured sparsity) in FLOP/s (int8: OP/s); 0 where the GPU has none or its datasheet
/// gives none. fp64 is the tensor-core (matrix) figure where the GPU has one; fp32 the CUDA-core (vector) one, or
/// AMD's matrix figure.
struct DtypePeaks {
  double fp64 = 0, fp32 = 0, tf32 = 0, bf16 = 0, fp16 = 0, fp8 = 0, int8 = 0;
};
[[nodiscard]] double peak_of(const DtypePeaks& p, ComputeDtype d);

/// A measured GEMM ceiling: the best fraction of the format's dense peak that a sweep of large matmuls reached, and
/// the shape (m x n x k) it reached it at (0 where the measurement gives none).
struct GemmCeiling {
  double efficiency = 0;
  std::int64_t m = 0, n = 0, k = 0;
  std::string_view source;
};

/// The GPU-to-GPU link family of a preset: NVIDIA's NVLink, AMD's Infinity Fabric (xGMI), or none (PCIe only).
enum class ScaleUp : std::uint8_t { none, nvlink, xgmi };

struct GpuPreset {
  std::string_view name;
  DtypePeaks peaks;
  double memory_bandwidth = 0; ///< B/s
  double memory_bytes = 0;     ///< B (the datasheet's "GB" taken as GiB, as nvidia-smi reports the HBM parts)
  double host_link = 0;        ///< B/s per direction, PCIe x16 theoretical
  int pcie_generation = 0;
  int compute_units = 0;      ///< SMs (NVIDIA) or CUs (AMD)
  int compute_capability = 0; ///< CUDA major x 10 + minor (60 Pascal ... 100 Blackwell); 0 for AMD
  ScaleUp scale_up = ScaleUp::none;
  /// One GPU-to-GPU link's rate per direction (B/s) and the number of links; 0 without such links.
  double link_Bps = 0;
  int links = 0;
  /// The rate NCCL's topology search assumes for one NVLink link (NVIDIA/nccl src/graph/topo.h, SMxx_NVLINK_BW).
  double nccl_nvlink_link_Bps = 0;
  GemmCeiling bf16_gemm; ///< cuBLAS (rocBLAS/hipBLASLt) bf16 GEMM ceiling; also taken for fp16, tf32 and fp32
  GemmCeiling fp8_gemm;  ///< fp8 GEMM ceiling (zero efficiency without an FP8 peak)
  std::string_view peaks_source, memory_source, units_source, links_source;

  /// The NVLink rate per link and direction (0 for a GPU without NVLink).
  [[nodiscard]] double nvlink_link_Bps() const { return scale_up == ScaleUp::nvlink ? link_Bps : 0.0; }
};

[[nodiscard]] std::span<const GpuPreset> gpu_presets();
[[nodiscard]] const GpuPreset* find_gpu_preset(std::string_view name);
/// The preset of a CUDA device by the name the driver gives it ("NVIDIA H100 80GB HBM3", "Tesla V100-SXM2-32GB"), or
/// nullptr.
[[nodiscard]] const GpuPreset* find_gpu_preset_for_device(std::string_view device_name);

} // namespace ddlsim::sim
