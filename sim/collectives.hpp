// Closed-form (alpha-beta) costs of allreduce algorithms on the scenario's two-level cluster, used by the
// analytic engine. Link semantics as in DESIGN.md: a message inside a node crosses two GPU links (alpha =
// 2 x intra latency, bandwidth = intra), a message between nodes crosses two NIC links (alpha = 2 x inter
// latency, bandwidth = inter), and the NIC is shared by the node's GPUs that send off-node at the same time.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ddlsim::sim {

struct LinkSpec {
  double bandwidth = 0; ///< B/s
  double latency_s = 0;
};

struct Network {
  int nodes = 1;
  int gpus_per_node = 1;
  LinkSpec intra;
  LinkSpec inter;
  bool nic_per_gpu = false; ///< every GPU has its own NIC: off-node flows of one node do not share it
  int server_hosts = 0;     ///< dedicated parameter-server hosts (ranks workers() ..), each with an `inter` NIC
  [[nodiscard]] int workers() const { return nodes * gpus_per_node; }
  /// How many flows leaving one node at once share one NIC link.
  [[nodiscard]] int nic_sharers(int crossing_flows) const { return nic_per_gpu ? 1 : crossing_flows; }
};

/// A measured whole-collective cost model T(n) = alpha + beta * n (n in bytes), e.g. fitted to nccl-tests.
struct AlphaBeta {
  double alpha_s = 0;
  double beta_s_per_byte = 0;
};

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
