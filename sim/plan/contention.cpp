// Collectives whose instances share links (sim/plan/contention.hpp).
#include "sim/plan/contention.hpp"

#include "sim/network/communicator.hpp"
#include "sim/network/lowering/evaluate.hpp"
#include "sim/plan/prepare.hpp"

#include <vector>

namespace ddlsim::sim {

double InstanceContention::factor(const dag::Task& task) {
  const int count = graph_.instances(task);
  const dag::Wire* w = dag::wire(task);
  if (count <= 1 || w == nullptr || w->bytes <= 0)
    return 1.0;
  const auto* server = std::get_if<dag::ServerTransfer>(&task.payload); // a key's servers shape the lowering
  const Key key{w->communicator,
                w->collective,
                dag::gathers_parameters(task),
                server != nullptr ? server->shard_first : 0,
                server != nullptr ? server->shard_count : 0,
                w->bytes};
  if (const auto known = memo_.find(key); known != memo_.end())
    return known->second;
  // The instances run over disjoint GPUs, so inside a star node they share no GPU link: only a NIC that GPUs of one
  // node share, or the host link between two sockets, can be shared.
  const Network net = s_.cluster.network();
  const auto first = layout_of(graph_.instance_communicator(task, 0).ranks, s_.cluster);
  if (!net.two_sockets && (net.nic_per_gpu || first.shape.nodes == 1)) {
    memo_.emplace(key, 1.0);
    return 1.0;
  }
  const CollectiveLowering& lowering =
      w->collective == dag::Collective::allreduce ? *s_.allreduce.algorithm : task_lowering(s_, task);
  std::vector<std::vector<Phase>> instances;
  instances.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    const auto layout = i == 0 ? first : layout_of(graph_.instance_communicator(task, i).ranks, s_.cluster);
    const auto shape = task_shape(s_, task, layout.shape);
    instances.push_back(
        to_global_ranks(lowering.lower(shape, w->bytes, Granularity::aggregated), shape, layout.ranks, s_.cluster));
  }
  const double together = concurrent_phase_time(instances, net);
  instances.resize(1);
  const double alone = concurrent_phase_time(instances, net);
  const double f = alone > 0 && together > alone ? together / alone : 1.0;
  memo_.emplace(key, f);
  return f;
}

} // namespace ddlsim::sim
