// Sharded data parallelism (scenario `sharding`, docs/sharding.md): which model state is sharded (ZeRO stage), over
// which GPUs (the data-parallel group, a node, or s GPUs: HSDP), the units stage 3 gathers, their prefetch and
// resharding, and the formats of the gathers and reductions.
#pragma once

#include "core/json.hpp"
#include "dag/model.hpp"
#include "dag/sharding.hpp"
#include "sim/network/collectives.hpp"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ddlsim::sim {

/// `sharding.offload`: where the sharded state lives. `optimizer`: the optimizer state (and fp32 master weights) in
/// host memory, the step on the host's CPU (ZeRO-Offload; FSDP's CPUOffloadPolicy keeps the parameters there too);
/// `parameters` (stage 3): the parameter shards too, copied to the GPU before each all-gather (ZeRO-3's offload_param).
enum class Offload : std::uint8_t { none, optimizer, parameters };
/// The offload modes' names, by enumerator (the one name table, read by the parser and the reports).
inline constexpr std::array<std::string_view, 3> kOffloadNames{"none", "optimizer", "parameters"};
[[nodiscard]] constexpr std::string_view offload_name(Offload o) {
  return kOffloadNames.at(static_cast<std::size_t>(o));
}

/// The host memory bandwidth one GPU's optimizer step gets on the host by default: a DGX A100's two AMD EPYC 7742
/// sockets, each 8 channels of DDR4-3200 (204.8 GB/s, AMD's specifications), shared by its 8 GPUs (NVIDIA DGX A100
/// datasheet): 51.2 GB/s.
inline constexpr double kDefaultHostMemoryBandwidth = 2 * 204.8e9 / 8;

struct ShardingSpec {
  /// 0: none (every rank holds everything; the schedule of today's strategies), 1: optimizer state (ZeRO-1,
  /// Megatron-Core's distributed optimizer), 2: + gradients (ZeRO-2, FSDP SHARD_GRAD_OP), 3: + parameters (ZeRO-3,
  /// FSDP FULL_SHARD).
  int stage = 0;
  /// GPUs of a shard group (s): the whole data-parallel group (d), a node's GPUs, or s dividing d. s < d is HSDP:
  /// reduce-scatter in the shard group, then an allreduce of the shard across the d / s replicas.
  int shard_size = 1;
  std::string group = "data"; ///< as the scenario gave it: "data", "node" or the number
  dag::UnitKind unit = dag::UnitKind::block;
  double unit_bytes = 0;             ///< unit == size: the unit's size in param_dtype
  int prefetch = 1;                  ///< stage 3: units gathered ahead
  bool reshard_after_forward = true; ///< stage 3
  bool reshard_last = false;         ///< stage 3, `reshard_after_forward` "all": the last unit regathered too
  dag::DType param_dtype = dag::DType::fp32;
  dag::DType reduce_dtype = dag::DType::fp32;
  Offload offload = Offload::none;
  double host_memory_bandwidth = kDefaultHostMemoryBandwidth; ///< B/s for one GPU's step on the host (offload)
  bool host_memory_bandwidth_given = false;
  /// The parameter all-gathers' algorithm: `collectives.allgather` when given, else the ring, NCCL's (the registry's
  /// default allgather, recursive doubling, is the one sparse gradients are gathered with).
  const CollectiveLowering* gather_algorithm = nullptr;
  bool ring_gathers_by_default = false;

  [[nodiscard]] int replicas(int data_parallel) const { return data_parallel / shard_size; }
};

struct Scenario;
/// Reads `sharding` into s.sharding, checked against the model, cluster, strategy and parallelism parsed before it;
/// errors name the JSON path and, for a combination that is refused, why.
void parse_sharding(ObjectReader r, Scenario& s);

/// The scenario's sharding when it shards anything (stage >= 1), else nullptr.
[[nodiscard]] const ShardingSpec* sharded(const Scenario& s);

/// Stage 1 with a compressing strategy (sparsification, quantisation, PowerSGD): the gradients are exchanged as the
/// strategy exchanges them, and every GPU then steps on its shard and all-gathers the parameters.
[[nodiscard]] bool exchanges_compressed(const Scenario& s);

} // namespace ddlsim::sim
