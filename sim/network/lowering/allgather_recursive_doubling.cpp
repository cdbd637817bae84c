// Recursive-doubling allgather (Thakur, Rabenseifner, Gropp, IJHPCA 2005, Sec. 4.1): at distance d = 1, 2, ...,
// p'/2 every rank exchanges everything it has gathered so far with rank ^ d. Non-powers of two are folded in as in
// Rabenseifner's allreduce (same paper, Sec. 4.4): p' = 2^floor(log2 p), r = p - p', ranks 2i and 2i+1 (i < r) pair.
#include "sim/network/lowering/detail.hpp"

#include <algorithm>
#include <bit>

namespace ddlsim::sim::detail {

// n is the gathered result, n/p per rank. Pre: 2i sends its block (n/p) to 2i+1. Core over virtual ranks
// v -> real (v < r ? 2v+1 : v+r), where v < r stands for two blocks: at distance d, v sends the blocks of its
// aligned group of d virtual ranks to v ^ d (d/p n when p is a power of two). Post: 2i+1 sends 2i everything but
// 2i's own block ((p-1)/p n). Every rank receives (p-1)/p n in all. No step reuses a pair, so aggregated equals
// per_message: [pre] + log2 p' phases + [post].
std::vector<Phase> lower_allgather_recursive_doubling(const LoweringShape& shape, double bytes,
                                                      Granularity /*granularity*/) {
  check_arguments(shape, bytes);
  const int p = shape.workers();
  if (p <= 1)
    return {};
  const PowerOfTwoCore core_map(p);
  const int core = core_map.core;
  const int extra = core_map.extra;
  const double block = bytes / p;
  const auto real = [&core_map](int v) { return core_map.real(v); };
  // Blocks held by the virtual ranks [first, first + count): one each, plus one more for each paired rank.
  const auto blocks = [extra](int first, int count) { return count + std::clamp(extra - first, 0, count); };

  std::vector<Phase> phases;
  phases.reserve(static_cast<std::size_t>(std::countr_zero(static_cast<unsigned>(core)) + 2));
  if (extra > 0)
    phases.push_back(core_map.fold_in(block));
  for (int d = 1; d < core; d *= 2) {
    Phase& phase = phases.emplace_back();
    phase.flows.reserve(static_cast<std::size_t>(core));
    for (int v = 0; v < core; ++v)
      phase.flows.push_back({real(v), real(v ^ d), blocks(v & ~(d - 1), d) * block, 1});
  }
  if (extra > 0)
    phases.push_back(core_map.fold_out((p - 1) * block));
  return phases;
}

} // namespace ddlsim::sim::detail
