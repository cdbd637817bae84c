// The collectives an iteration asks for: one enum for every layer, so that the DAG's communication tasks
// (dag/graph.hpp) and the network layer's algorithms (sim/network/collectives.hpp) name a collective the same way.
// Which algorithm carries one, and at what cost, is the network layer's business.
#pragma once

#include <cstdint>
#include <string_view>

namespace ddlsim {

/// `none`: no communication (a task's default). `allgather`: every worker's message to every worker (Top-k's pairs,
/// quantised buckets); `global_topk`: gTop-k's sparse allreduce of k (value, index) pairs into the global top-k (Shi
/// et al., ICDCS 2019); `ps_push` / `ps_pull`: every worker sends its shards of a key to the parameter servers owning
/// them / receives the updated parameters back (dag/strategies/ps.cpp). `reduce_scatter`, `broadcast` and
/// `point_to_point` are lowered by the network layer but emitted by no strategy yet.
enum class Collective : std::uint8_t {
  none,
  allreduce,
  allgather,
  global_topk,
  ps_push,
  ps_pull,
  reduce_scatter,
  broadcast,
  point_to_point
};

/// The collective's name in messages and reports: "allreduce", "global_topk", "ps_push", ...
[[nodiscard]] constexpr std::string_view collective_name(Collective c) {
  switch (c) {
  case Collective::none:
    return "none";
  case Collective::allreduce:
    return "allreduce";
  case Collective::allgather:
    return "allgather";
  case Collective::global_topk:
    return "global_topk";
  case Collective::ps_push:
    return "ps_push";
  case Collective::ps_pull:
    return "ps_pull";
  case Collective::reduce_scatter:
    return "reduce_scatter";
  case Collective::broadcast:
    return "broadcast";
  case Collective::point_to_point:
    return "point_to_point";
  }
  return "?";
}

} // namespace ddlsim
