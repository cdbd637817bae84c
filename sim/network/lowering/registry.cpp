// The table of collective lowerings: one line per (collective, algorithm), sorted by collective then algorithm;
// each lowering lives in its own file (sim/network/lowering/<collective>_<algorithm>.cpp).
#include "sim/network/lowering/detail.hpp"

#include <array>

namespace ddlsim::sim {
namespace {

using CK = CollectiveKind;
constexpr std::array<CollectiveLowering, 13> kLowerings{{
    {CK::allreduce, "halving-doubling", &detail::lower_allreduce_halving_doubling},
    {CK::allreduce, "hierarchical", &detail::lower_allreduce_hierarchical},
    {CK::allreduce, "ring", &detail::lower_allreduce_ring},
    {CK::allreduce, "tree", &detail::lower_allreduce_tree},
    {CK::allgather, "recursive-doubling", &detail::lower_allgather_recursive_doubling},
    {CK::allgather, "ring", &detail::lower_allgather_ring},
    {CK::reduce_scatter, "ring", &detail::lower_reduce_scatter_ring},
    {CK::broadcast, "ring", &detail::lower_broadcast_ring},
    {CK::broadcast, "tree", &detail::lower_broadcast_tree},
    {CK::point_to_point, "direct", &detail::lower_point_to_point_direct},
    {CK::global_topk, "tree", &detail::lower_global_topk_tree},
    {CK::ps_push, "sharded", &detail::lower_ps_push_sharded},
    {CK::ps_pull, "sharded", &detail::lower_ps_pull_sharded},
}};

} // namespace

std::span<const CollectiveLowering> lowerings() {
  return kLowerings;
}

const CollectiveLowering* find_lowering(CollectiveKind collective, std::string_view algorithm) {
  for (const auto& l : kLowerings)
    if (l.collective == collective && l.algorithm == algorithm)
      return &l;
  return nullptr;
}

std::string_view collective_name(CollectiveKind c) {
  switch (c) {
  case CollectiveKind::allreduce:
    return "allreduce";
  case CollectiveKind::allgather:
    return "allgather";
  case CollectiveKind::reduce_scatter:
    return "reduce_scatter";
  case CollectiveKind::broadcast:
    return "broadcast";
  case CollectiveKind::point_to_point:
    return "point_to_point";
  case CollectiveKind::global_topk:
    return "global_topk";
  case CollectiveKind::ps_push:
    return "ps_push";
  case CollectiveKind::ps_pull:
    return "ps_pull";
  }
  return "unknown";
}

} // namespace ddlsim::sim
