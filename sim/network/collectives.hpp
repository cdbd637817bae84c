// The collective algorithms: one registry (sim/network/lowering/registry.cpp) lists every (collective, algorithm)
// with its lowering onto point-to-point flows (lowering/lowering.hpp) and, where one has been derived, its alpha-beta
// closed form, which the analytic engine uses; both live in one file, lowering/<collective>_<algorithm>.cpp.
// Closed-form link semantics (docs/engines.md, "Link semantics"): a message inside a node crosses two GPU links (alpha
// = 2 x intra latency, bandwidth = intra), a message between nodes crosses two NIC links (alpha = 2 x inter latency,
// bandwidth = inter), and the NIC is shared by the node's GPUs that send off-node at the same time. Reduction
// arithmetic is not costed (GPU reductions run at memory bandwidth, far above network bandwidth).
#pragma once

#include "core/collective.hpp"
#include "sim/network/cluster.hpp"
#include "sim/network/lowering/lowering.hpp"

#include <memory>
#include <optional>
#include <span>
#include <string_view>

namespace ddlsim::sim {

using ddlsim::Collective;
using ddlsim::collective_name;

struct CollectiveCost {
  double time_s = 0;
  double bytes_sent = 0; ///< bytes one worker sends (its busiest worker for asymmetric algorithms)
};

/// One collective algorithm's cost model on a given network. Built once per scenario (precomputes the algorithm's
/// step structure), then evaluated per message size.
class CollectiveModel {
public:
  virtual ~CollectiveModel() = default;
  [[nodiscard]] virtual CollectiveCost cost(double bytes) const = 0;
  /// alpha and beta when cost(n).time_s = alpha + beta n for every n >= 0 (every closed form: latencies plus bytes
  /// over bandwidths), taken from cost(0) and cost(1 GiB); nullopt for a model that is not affine (a lowering timed
  /// phase by phase). MG-WFBP's planner ranks its candidates with them in linear time.
  [[nodiscard]] std::optional<AlphaBeta> affine() const {
    if (!affine_in_bytes())
      return std::nullopt;
    constexpr double kBytes = 1073741824.0;
    const double alpha = cost(0).time_s;
    return AlphaBeta{alpha, (cost(kBytes).time_s - alpha) / kBytes};
  }

  /// The flows one cost() visits: 0 for a closed form, its lowering's for a model that lowers the collective on every
  /// call and times it phase by phase. Planners that cost many candidates estimate their work with it (#31 R28).
  [[nodiscard]] virtual double evaluation_flows() const { return 0; }

protected:
  [[nodiscard]] virtual bool affine_in_bytes() const { return false; }
};

/// A closed form's factory: the model of the algorithm over all of `net`'s workers.
using ClosedFormFn = std::unique_ptr<CollectiveModel> (*)(const Network& net);

/// One registry entry: an algorithm of a collective. A pointer to an entry is the handle a parsed scenario keeps.
struct CollectiveLowering {
  Collective collective;
  std::string_view algorithm;   ///< its name in scenarios ("ring", "halving-doubling", ...)
  std::string_view description; ///< one line for `ddlsim list collectives`
  LowerFn lower;
  ClosedFormFn closed_form; ///< nullptr: costed by the phase-synchronous time of its lowering (lowering/evaluate.hpp)
  /// The algorithm that carries the collective unless a scenario picks one (one per collective).
  bool is_default;
  /// The node's switch reduces (NVLink SHARP): the cluster needs an NVLS-capable node (ClusterSpec::nvls) of at
  /// least 2 GPUs.
  bool reduces_in_switch = false;
  /// A measured allreduce by this algorithm over the whole cluster gives the links' α and β (its closed form
  /// inverted, sim/plan/measured_links.hpp).
  bool inverts_to_links = false;
};

/// Every entry, sorted by collective (in enum order), then by algorithm name.
[[nodiscard]] std::span<const CollectiveLowering> lowerings();
/// The algorithms of one collective, sorted by name (allreduce: halving-doubling, hierarchical, ring, tree).
[[nodiscard]] std::span<const CollectiveLowering> lowerings(Collective collective);
/// nullptr when `collective` has no algorithm of that name.
[[nodiscard]] const CollectiveLowering* find_lowering(Collective collective, std::string_view algorithm);
/// The collective's default algorithm; nullptr for a collective without any (none).
[[nodiscard]] const CollectiveLowering* default_lowering(Collective collective);

} // namespace ddlsim::sim
