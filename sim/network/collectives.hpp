// Closed-form (alpha-beta) costs of allreduce algorithms on the scenario's two-level cluster, used by the
// analytic engine. Link semantics as in DESIGN.md: a message inside a node crosses two GPU links (alpha =
// 2 x intra latency, bandwidth = intra), a message between nodes crosses two NIC links (alpha = 2 x inter
// latency, bandwidth = inter), and the NIC is shared by the node's GPUs that send off-node at the same time.
#pragma once

#include "sim/network/cluster.hpp"

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ddlsim::sim {

struct CollectiveCost {
  double time_s = 0;
  double bytes_sent = 0; ///< bytes one worker sends (its busiest worker for asymmetric algorithms)
};

/// One allreduce algorithm's cost model on a given network. Built once per scenario (precomputes the
/// algorithm's step structure), then evaluated per message size.
class AllreduceModel {
public:
  virtual ~AllreduceModel() = default;
  [[nodiscard]] virtual CollectiveCost cost(double bytes) const = 0;
};

struct AllreduceAlgorithm {
  std::string_view name;
  std::string_view description;
  std::unique_ptr<AllreduceModel> (*make)(const Network&);
};

/// Built-in algorithms, sorted by name: halving-doubling, hierarchical, ring, tree.
[[nodiscard]] std::span<const AllreduceAlgorithm> allreduce_algorithms();
[[nodiscard]] const AllreduceAlgorithm* find_allreduce_algorithm(std::string_view name);

/// A model that replays a measured alpha-beta fit; bytes_sent follows the ring algorithm.
[[nodiscard]] std::unique_ptr<AllreduceModel> make_measured_allreduce(const Network& net, const AlphaBeta& fit);

} // namespace ddlsim::sim
