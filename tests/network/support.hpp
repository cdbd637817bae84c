// Helpers shared by the lowering tests: running a lowering by name, the cluster shapes the properties are checked
// on, and per-rank / per-pair byte tallies of a lowered collective.
#pragma once

#include "sim/network/collectives.hpp"

#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace ddlsim::sim::test {

inline std::vector<Phase> lower(Collective kind, std::string_view algorithm, const LoweringShape& shape, double bytes,
                                Granularity granularity) {
  const auto* l = find_lowering(kind, algorithm);
  REQUIRE(l != nullptr);
  return l->lower(shape, bytes, granularity);
}

/// Every shape nodes x g for g in {1, 2, 4, 8} and nodes in {1, ..., 8, 16}: p in {1, ..., 8, 16} on single-GPU
/// nodes, and multi-GPU nodes up to 128 ranks.
inline std::vector<LoweringShape> shapes() {
  std::vector<LoweringShape> out;
  for (int g : {1, 2, 4, 8})
    for (int nodes : {1, 2, 3, 4, 5, 6, 7, 8, 16})
      out.push_back({nodes, g});
  return out;
}

inline std::string describe(const LoweringShape& s) {
  return std::to_string(s.nodes) + " nodes x " + std::to_string(s.gpus_per_node) + " GPUs";
}

inline const char* describe(Granularity g) {
  return g == Granularity::aggregated ? "aggregated" : "per_message";
}

/// Bytes each rank sends (`sent`) and receives (`received`) over all phases.
struct RankBytes {
  std::vector<double> sent, received;
};
inline RankBytes rank_bytes(const std::vector<Phase>& phases, int p) {
  RankBytes b{std::vector<double>(static_cast<std::size_t>(p), 0.0),
              std::vector<double>(static_cast<std::size_t>(p), 0.0)};
  for (const auto& ph : phases)
    for (const auto& f : ph.flows) {
      b.sent[static_cast<std::size_t>(f.src)] += f.bytes;
      b.received[static_cast<std::size_t>(f.dst)] += f.bytes;
    }
  return b;
}

/// Per (src, dst) pair: bytes, number of flows, and the sum of their latency_repeats.
struct PairTally {
  double bytes = 0;
  int flows = 0;
  int latency_repeats = 0;
};
inline std::map<std::pair<int, int>, PairTally> pair_tally(const std::vector<Phase>& phases) {
  std::map<std::pair<int, int>, PairTally> out;
  for (const auto& ph : phases)
    for (const auto& f : ph.flows) {
      auto& t = out[{f.src, f.dst}];
      t.bytes += f.bytes;
      ++t.flows;
      t.latency_repeats += f.latency_repeats;
    }
  return out;
}

} // namespace ddlsim::sim::test
