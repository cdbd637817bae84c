// GEMM time from tile and wave quantisation, the epilogue and the memory traffic (gemm_efficiency.hpp).
#include "sim/plan/gemm_efficiency.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace ddlsim::sim {
namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

// Tile slots the waves occupy with tm x tn tiles: waves x units x tm x tn.
double occupied_slots(const GemmShape& g, int units, std::int64_t tm, std::int64_t tn) {
  const std::int64_t tiles = g.count * ceil_div(g.m, tm) * ceil_div(g.n, tn);
  const std::int64_t waves = ceil_div(tiles, units);
  return static_cast<double>(waves) * units * static_cast<double>(tm * tn);
}

// Time per unit of tile area and of K-loop: the main loop's 2 k FLOPs per output element at the SM's share of the
// peak, and the epilogue's out_bytes per output element at its share of the bandwidth.
double per_element_s(const GemmShape& g, const GemmDevice& d) {
  return 2.0 * static_cast<double>(g.k) / (d.ceiling * d.peak_flops) + d.out_bytes / d.bandwidth;
}

} // namespace

double element_bytes(ComputeDtype d) {
  return d == ComputeDtype::fp32 || d == ComputeDtype::tf32 ? 4.0 : d == ComputeDtype::fp8 ? 1.0 : 2.0;
}

double wave_efficiency(const GemmShape& g, int units) {
  assert(g.m > 0 && g.n > 0 && g.count > 0 && units > 0 && "a GEMM of positive sizes on a GPU of compute units");
  const double useful = static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.count);
  const double slots =
      std::min(occupied_slots(g, units, kTileLong, kTileShort), occupied_slots(g, units, kTileShort, kTileLong));
  return useful / slots;
}

// The waves' tile time with K cut into `splits` slices, each its own tile, and the slices' fp32 partial sums written
// and read back by a reduction kernel when there is more than one.
double split_tiles_s(const GemmShape& g, const GemmDevice& d, std::int64_t splits) {
  GemmShape slice = g;
  slice.k = ceil_div(g.k, splits);
  slice.count = g.count * splits;
  const double useful = static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(slice.count);
  const double reduction_s = splits > 1 ? kPartialBytes * useful / d.bandwidth : 0.0;
  return useful / wave_efficiency(slice, d.units) * per_element_s(slice, d) + reduction_s;
}

double gemm_time_s(const GemmShape& g, const GemmDevice& d) {
  // Split-K where the output has fewer tiles than the units have room for: the fastest number of slices of at least
  // kMinSplitK, as cuBLAS's heuristics and CUTLASS's split-K kernels choose for a small C and a long K (a weight
  // gradient over many tokens or pixels).
  const std::int64_t most = std::max<std::int64_t>(1, std::min<std::int64_t>(d.units, g.k / kMinSplitK));
  double tiles_s = split_tiles_s(g, d, 1);
  for (std::int64_t splits = 2; splits <= most; ++splits)
    tiles_s = std::min(tiles_s, split_tiles_s(g, d, splits));
  const double useful = static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.count);
  const double mk = static_cast<double>(g.m) * static_cast<double>(g.k);
  const double kn = static_cast<double>(g.k) * static_cast<double>(g.n);
  const double traffic_s = (static_cast<double>(g.count) * d.in_bytes * (mk + kn) + d.out_bytes * useful) / d.bandwidth;
  return std::max(tiles_s, traffic_s);
}

double gemm_efficiency(const GemmShape& g, const GemmDevice& d) {
  return g.flops() / (d.peak_flops * gemm_time_s(g, d));
}

double mainloop_ceiling(const GemmCeiling& c, const GemmDevice& d) {
  if (c.m <= 0 || c.n <= 0 || c.k <= 0)
    return c.efficiency;
  // E = c w / (1 + c r) with r = out_bytes peak / (2 k bandwidth): c = E / (w - E r)
  const GemmShape best{.m = c.m, .n = c.n, .k = c.k, .count = 1};
  const double w = wave_efficiency(best, d.units);
  const double r = d.out_bytes * d.peak_flops / (2.0 * static_cast<double>(c.k) * d.bandwidth);
  return std::min(1.0, c.efficiency / (w - c.efficiency * r));
}

} // namespace ddlsim::sim
