// gTop-k sparse allreduce (Shi, Wang, Chu, Li, Qian, "A Distributed Synchronous SGD Algorithm with Global Top-k
// Sparsification for Low Bandwidth Networks", ICDCS 2019, Algorithm 2 gTopKAllReduce): every rank holds its local
// top-k as k (value, index) pairs. In log2 p rounds of a binomial reduction tree, at distance d = 1, 2, ..., p/2
// the ranks r with r mod 2d = d send their k pairs to r - d, which keeps the top-k of the 2k it then holds; rank 0
// ends with the global top-k and broadcasts it back down the same tree in log2 p rounds. Every message is the k
// pairs: with alpha per message and beta per element, 2 log2(p) alpha + 4 log2(p) k beta (the paper's cost,
// 2k elements per message). Non-powers of two are folded in as in Rabenseifner's allreduce (PowerOfTwoCore): the
// first r = p - p' even ranks send their pairs to their odd neighbour before the core and get the result back
// after it.
#include "sim/network/lowering/detail.hpp"

#include <bit>

namespace ddlsim::sim::detail {

// `bytes`: one rank's k selected pairs (k x (value + index) bytes), the size of every message. No pair of ranks
// exchanges twice in one direction, so aggregated equals per_message.
std::vector<Phase> lower_global_topk_tree(const LoweringShape& shape, double bytes, Granularity /*granularity*/) {
  check_arguments(shape, bytes);
  const int p = shape.workers();
  if (p <= 1)
    return {};
  const PowerOfTwoCore core_map(p);
  const int core = core_map.core;
  const int extra = core_map.extra;
  const auto real = [&core_map](int v) { return core_map.real(v); };
  const int rounds = std::countr_zero(static_cast<unsigned>(core));

  std::vector<Phase> phases;
  phases.reserve(static_cast<std::size_t>(2 * rounds + 2));
  if (extra > 0)
    phases.push_back(core_map.fold_in(bytes));
  for (int d = 1; d < core; d *= 2) { // reduction: r mod 2d = d sends to r - d
    Phase& phase = phases.emplace_back();
    for (int v = d; v < core; v += 2 * d)
      phase.flows.push_back({real(v), real(v - d), bytes, 1});
  }
  for (int d = core / 2; d >= 1; d /= 2) { // broadcast of the global top-k, down the same tree
    Phase& phase = phases.emplace_back();
    for (int v = 0; v < core; v += 2 * d)
      phase.flows.push_back({real(v), real(v + d), bytes, 1});
  }
  if (extra > 0)
    phases.push_back(core_map.fold_out(bytes));
  return phases;
}

} // namespace ddlsim::sim::detail
