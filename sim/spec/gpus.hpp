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
};

[[nodiscard]] std::span<const GpuPreset> gpu_presets();
[[nodiscard]] const GpuPreset* find_gpu_preset(std::string_view name);

} // namespace ddlsim::sim
