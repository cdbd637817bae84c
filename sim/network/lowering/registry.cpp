// The registry of collective algorithms: one line per (collective, algorithm), sorted by collective (in enum order)
// then by algorithm name, giving its description, its lowering and its closed form (nullptr: costed by the
// phase-synchronous time of the lowering). Each algorithm lives in its own file,
// sim/network/lowering/<collective>_<algorithm>.cpp; docs/architecture.md says how to add one.
#include "sim/network/lowering/detail.hpp"

#include <algorithm>
#include <array>

namespace ddlsim::sim {
namespace {

using C = Collective;
using namespace detail;
constexpr bool kDefault = true; ///< the algorithm that carries the collective unless a scenario picks one
constexpr bool kOther = false;

constexpr std::array kAlgorithms{
    // allreduce: the scenario's `collectives.allreduce`, ring unless it says otherwise
    CollectiveLowering{C::allreduce, "halving-doubling",
                       "recursive halving reduce-scatter + recursive doubling allgather (Rabenseifner)",
                       &lower_allreduce_halving_doubling, &closed_form_allreduce_halving_doubling, kOther},
    CollectiveLowering{C::allreduce, "hierarchical",
                       "intra-node reduce-scatter, inter-node ring allreduce, intra-node allgather",
                       &lower_allreduce_hierarchical, &closed_form_allreduce_hierarchical, kOther},
    CollectiveLowering{C::allreduce, "nvls",
                       "NVLink SHARP: the NVSwitch reduces (Hopper); across nodes pipelined with a ring over the NICs",
                       &lower_allreduce_nvls, &closed_form_allreduce_nvls, kOther, /*reduces_in_switch=*/true},
    CollectiveLowering{C::allreduce, "ring", "ring reduce-scatter + allgather, 2(p-1) steps (bandwidth-optimal)",
                       &lower_allreduce_ring, &closed_form_allreduce_ring, kDefault, /*reduces_in_switch=*/false,
                       /*inverts_to_links=*/true},
    CollectiveLowering{C::allreduce, "tree", "double binary tree across nodes, chain inside a node, pipelined (NCCL)",
                       &lower_allreduce_tree, &closed_form_allreduce_tree, kOther},
    // allgather: Top-k's pairs and quantised buckets by recursive doubling (log2 p rounds, as in the gTop-k paper's
    // comparison, Shi et al., ICDCS 2019)
    CollectiveLowering{C::allgather, "recursive-doubling", "recursive doubling, log2 p rounds of growing messages",
                       &lower_allgather_recursive_doubling, nullptr, kDefault},
    CollectiveLowering{C::allgather, "ring", "ring, p-1 steps of n/p", &lower_allgather_ring, nullptr, kOther},
    CollectiveLowering{C::global_topk, "tree", "gTop-k: tree reduction of the top-k pairs, then broadcast down it",
                       &lower_global_topk_tree, nullptr, kDefault},
    CollectiveLowering{C::ps_push, "sharded", "every worker sends its shards of a key to the servers owning them",
                       &lower_ps_push_sharded, nullptr, kDefault},
    CollectiveLowering{C::ps_pull, "sharded", "every server sends its shard of a key's parameters to every worker",
                       &lower_ps_pull_sharded, nullptr, kDefault},
    CollectiveLowering{C::reduce_scatter, "ring", "ring, p-1 steps of n/p", &lower_reduce_scatter_ring, nullptr,
                       kDefault},
    CollectiveLowering{C::broadcast, "ring", "pipelined ring from rank 0", &lower_broadcast_ring, nullptr, kDefault},
    CollectiveLowering{C::broadcast, "tree", "binomial tree from rank 0", &lower_broadcast_tree, nullptr, kOther},
    CollectiveLowering{C::point_to_point, "direct", "one message from rank 0 to rank p-1", &lower_point_to_point_direct,
                       nullptr, kDefault},
};

// Sorted (so that each collective's algorithms are contiguous, by name), unique, one default per collective. (A null
// lowering is not checked here: GCC's sanitizers make a function's address non-constant; tests/network lowers every
// entry.)
constexpr bool well_formed() {
  for (std::size_t i = 0; i < kAlgorithms.size(); ++i) {
    const auto& a = kAlgorithms[i];
    if (a.collective == C::none || a.algorithm.empty() || a.description.empty())
      return false;
    if (i > 0) {
      const auto& before = kAlgorithms[i - 1];
      if (before.collective > a.collective || (before.collective == a.collective && before.algorithm >= a.algorithm))
        return false;
    }
    const auto defaults = std::count_if(kAlgorithms.begin(), kAlgorithms.end(), [&a](const CollectiveLowering& b) {
      return b.collective == a.collective && b.is_default;
    });
    if (defaults != 1)
      return false;
  }
  return true;
}
static_assert(well_formed(), "registry: sort by collective then algorithm, one default per collective");

} // namespace

std::span<const CollectiveLowering> lowerings() {
  return kAlgorithms;
}

std::span<const CollectiveLowering> lowerings(Collective collective) {
  const auto first = std::find_if(kAlgorithms.begin(), kAlgorithms.end(),
                                  [collective](const CollectiveLowering& a) { return a.collective == collective; });
  const auto last = std::find_if(first, kAlgorithms.end(),
                                 [collective](const CollectiveLowering& a) { return a.collective != collective; });
  return {first, last};
}

const CollectiveLowering* find_lowering(Collective collective, std::string_view algorithm) {
  for (const auto& a : lowerings(collective))
    if (a.algorithm == algorithm)
      return &a;
  return nullptr;
}

const CollectiveLowering* default_lowering(Collective collective) {
  for (const auto& a : lowerings(collective))
    if (a.is_default)
      return &a;
  return nullptr;
}

} // namespace ddlsim::sim
