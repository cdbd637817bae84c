// How long a GEMM takes on a GPU from its shape (docs/engines.md, "Shape-aware compute efficiency"). cuBLAS and
// CUTLASS split C[m x n] into output tiles, one thread block per tile per SM at a time (NVIDIA, "Matrix Multiplication
// Background User's Guide", Deep Learning Performance documentation, sections "Tile quantization" and "Wave
// quantization"; the largest and most efficient tiles they pick are 256x128 and 128x256). A wave of `units` tiles runs
// at once; the last wave and the tiles' overhang of the matrix do no useful work. Each tile loops over K at the
// format's peak times a ceiling, then writes its outputs at its SM's share of the memory bandwidth (the epilogue,
// which a multistage CUTLASS kernel runs after its main loop): a small K (a tensor-parallel shard) spends a larger
// share in it. A small C over a long K is split over K (split-K). No GEMM beats reading its operands and writing its
// result at the memory bandwidth.
#pragma once

#include "sim/spec/gpus.hpp"

#include <cstdint>

namespace ddlsim::sim {

/// `count` independent products C[m x n] = A[m x k] B[k x n] (a batched GEMM when count > 1).
struct GemmShape {
  std::int64_t m = 0, n = 0, k = 0, count = 1;
  [[nodiscard]] double flops() const {
    return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) * static_cast<double>(count);
  }
};

/// The GPU a GEMM runs on, in one number format.
struct GemmDevice {
  double peak_flops = 0; ///< dense peak of the format, FLOP/s
  double ceiling = 1;    ///< fraction of the peak the main loop reaches (mainloop_ceiling)
  double bandwidth = 0;  ///< memory bandwidth, B/s
  int units = 1;         ///< SMs (CUs): tiles that run at once
  double in_bytes = 2;   ///< bytes per element of A and B
  double out_bytes = 2;  ///< bytes per element of C
};

/// Bytes per element of a GEMM's operands in `format`: 4 for fp32 and tf32 (stored as fp32), 1 for fp8, else 2.
[[nodiscard]] double element_bytes(ComputeDtype format);

/// Output tile sides (elements): the 256x128 tile, in either orientation (NVIDIA's guide above).
inline constexpr std::int64_t kTileLong = 256;
inline constexpr std::int64_t kTileShort = 128;

/// Split-K (CUTLASS's split-K GEMMs, "Efficient GEMM in CUDA", and cuBLAS's heuristics for a small C over a long K):
/// K cut into slices of at least kMinSplitK, one tile per slice, their fp32 partial sums written and read back by a
/// reduction (kPartialBytes per output element and slice).
inline constexpr std::int64_t kMinSplitK = 256;
inline constexpr double kPartialBytes = 8.0;

/// Useful output elements over the tile slots the waves occupy, in the better of the two tile orientations: 1 when
/// the tiles fill whole waves exactly.
[[nodiscard]] double wave_efficiency(const GemmShape& g, int units);

/// The GEMM's time on `d`: the waves' tile time (main loop + epilogue) at the best split of K, at least its memory
/// traffic.
[[nodiscard]] double gemm_time_s(const GemmShape& g, const GemmDevice& d);

/// The main loop's ceiling that makes gemm_time_s give the measured fraction `c.efficiency` of the peak at the shape
/// it was measured at (E = c w / (1 + c r), r the epilogue's share per unit ceiling); `c.efficiency` itself where the
/// measurement gives no shape. At most 1.
[[nodiscard]] double mainloop_ceiling(const GemmCeiling& c, const GemmDevice& d);

/// The fraction of the peak gemm_time_s gives (FLOPs / (peak x time)).
[[nodiscard]] double gemm_efficiency(const GemmShape& g, const GemmDevice& d);

} // namespace ddlsim::sim
