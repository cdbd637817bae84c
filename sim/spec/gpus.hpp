// Built-in GPU presets with their published peak FLOPS, memory bandwidth, memory size and host link.
#pragma once

#include <span>
#include <string_view>

namespace ddlsim::sim {

struct GpuPreset {
  std::string_view name;
  double fp32_flops;       ///< FLOP/s, dense, CUDA cores
  double fp16_flops;       ///< FLOP/s, dense, tensor cores (fp16 in, fp32 accumulate)
  double bf16_flops;       ///< FLOP/s, dense, tensor cores; 0 where the GPU has no bf16 tensor cores
  double memory_bandwidth; ///< B/s
  double memory_bytes;     ///< B
  double host_link;        ///< B/s per direction, PCIe x16 theoretical
  std::string_view source;
  int compute_capability; ///< major x 10 + minor (CUDA): 60 Pascal, 70 Volta, 75 Turing, 80 Ampere, 90 Hopper
  /// One NVLink link's rate per direction (B/s) and the rate NCCL's topology search assumes for it (topo.h,
  /// SMxx_NVLINK_BW); 0 for a GPU without NVLink.
  double nvlink_link_Bps;
  double nccl_nvlink_link_Bps;
};

[[nodiscard]] std::span<const GpuPreset> gpu_presets();
[[nodiscard]] const GpuPreset* find_gpu_preset(std::string_view name);

} // namespace ddlsim::sim
