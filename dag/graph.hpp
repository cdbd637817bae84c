// The DAG of one training iteration on one worker (Shi, Wang, Chu: "Performance Modeling and Evaluation of
// Distributed Deep Learning Frameworks on GPUs", DASC 2018, Fig. 2): data loading -> host-to-device copy ->
// per-layer forward -> per-layer backward (reverse order) -> gradient communication groups -> update.
// Tasks carry the device (a GPU by global rank, or a node's host CPU) and the resource (stream) of that device that
// executes them; a device's resource runs one task at a time, in order of readiness. Collectives name the
// communicator (ordered set of GPU ranks) they run over; point-to-point transfers their source and destination.
#pragma once

#include "core/collective.hpp"

#include <boost/graph/adjacency_list.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace ddlsim::dag {

/// What executes a task on a worker. `none` is a pure delay (e.g. Horovod's cycle-time wait).
/// `gpu_compression`: a second CUDA stream for compression kernels (strategy.compression_stream: "separate"),
/// which overlaps with the compute stream; modelled without slowdown from sharing the SMs and memory bandwidth
/// (an upper bound on the benefit of the overlap). `comm_pull`: the receiving stream of a parameter-server worker
/// (pulls run beside pushes on the full-duplex NIC). `p2p`: a pipeline stage's sends of activations and gradients
/// to its neighbours, beside its data-parallel collectives on `comm` (Megatron sends on a stream of its own).
/// `host_thread`: the CPU thread of the training process that drives a GPU, issuing its kernels and collectives one
/// after the other (sim/plan/host.hpp); its tasks sit on the GPU's device. `copy`: the GPU's copy engine stream for
/// copies between host and GPU memory beside compute (offloaded sharded state, dag/sharding.hpp).
enum class Resource : std::uint8_t {
  host_cpu,
  gpu_compute,
  comm,
  gpu_compression,
  comm_pull,
  none,
  p2p,
  host_thread,
  copy
};
inline constexpr int kResourceCount = 9;

/// `prediction`: a weight-prediction or restore kernel of SpecTrain (element-wise over a stage's weights). `launch`:
/// the host thread issuing a GPU task (or, with no layer, its work per iteration outside the tasks).
enum class TaskKind : std::uint8_t {
  data_load,
  h2d,
  forward,
  backward,
  compression,
  communication,
  update,
  delay,
  prediction,
  launch
};

[[nodiscard]] std::string_view resource_name(Resource r);
[[nodiscard]] std::string_view task_kind_name(TaskKind k);

/// A collective the engine costs (analytic) or lowers onto the platform (flow): one enum with the network layer's
/// (core/collective.hpp).
using ddlsim::Collective;
using ddlsim::collective_name;
/// `point_to_point`: one transfer of `bytes` from Transfer::src to Transfer::dst (pipeline activations and gradients).

/// Where a task runs: a GPU by its global rank (node-major: rank r is GPU r % g of node r / g), or the host CPU of a
/// node by the node's index.
struct Device {
  enum class Kind : std::uint8_t { gpu, host };
  Kind kind = Kind::gpu;
  int index = 0;
  auto operator<=>(const Device&) const = default;
  [[nodiscard]] static Device gpu(int rank) { return {Kind::gpu, rank}; }
  [[nodiscard]] static Device host(int node) { return {Kind::host, node}; }
};
/// "gpu3", "host0".
[[nodiscard]] std::string device_name(Device d);

/// An ordered set of global GPU ranks that a collective runs over, like an NCCL communicator: the collective's rank
/// i is GPU ranks[i]. Data-parallel groups, tensor-parallel groups inside a node, and a point-to-point pair
/// {src, dst} are communicators.
struct Communicator {
  std::vector<int> ranks;
  bool operator==(const Communicator&) const = default;
};

/// What a communication task puts on the wire: a collective over a communicator, of `bytes` per worker before the
/// algorithm.
struct Wire {
  Collective collective = Collective::none;
  int communicator = -1; ///< index into IterationGraph::communicators() (a one-worker DAG's: set by place())
  double bytes = 0;
};

/// A task's payload, one per kind of work; what every task has is in Task itself.
/// Compute: forward, backward, prediction, update, data_load, h2d and launch (a launch carries its issued task's).
struct Compute {
  int layer = -1;         ///< model layer of a forward or backward, -1 otherwise
  int micro_batch = -1;   ///< pipelines: the micro-batch a pass, load or kernel works on
  int virtual_stage = -1; ///< pipelines: the virtual stage (chunk x p + rank) of a pass or kernel
};
/// A gradient group's work off the wire: its compression kernel, or a wait (Horovod's cycle, a server's update).
struct GroupWork {
  int group = -1; ///< index into the gradient groups
};
/// A collective on a communicator: a gradient group's (group >= 0), or a pipeline stage's tensor-parallel one.
struct CollectiveOp {
  Wire wire;
  int group = -1;
  int micro_batch = -1;   ///< tensor collectives: the pass's micro-batch
  int virtual_stage = -1; ///< tensor collectives: the pass's virtual stage
  /// Sharded data parallelism: an all-gather of parameters (of gradient group `group`'s tensors, dag/sharding.hpp),
  /// not a step of the group's gradient exchange.
  bool parameters = false;
};
/// A point-to-point transfer between pipeline stages; its communicator is the pair {src, dst}.
struct Transfer {
  Wire wire;
  int src = -1, dst = -1; ///< global GPU ranks
  int micro_batch = -1;
  int virtual_stage = -1; ///< the sender's
};
/// A parameter-server push or pull of a gradient group's key.
struct ServerTransfer {
  Wire wire;
  int group = -1;
  int shard_first = 0; ///< the key lives on servers [shard_first, shard_first + shard_count), split evenly
  int shard_count = 0;
};
/// std::monostate: nothing beyond the common fields (a whole iteration's load, copy or update; a barrier). A family's
/// code reads its own alternative with std::get_if; the accessors below read a field across the alternatives.
using Payload = std::variant<std::monostate, Compute, GroupWork, CollectiveOp, Transfer, ServerTransfer>;

/// A task of the DAG: what every task has, then its payload. The order of the fields packs them: 72 bytes, and
/// 120 for a Boost vertex with its two edge lists.
struct Task {
  TaskKind kind = TaskKind::delay;
  Resource resource = Resource::none;
  int iteration = 0;     ///< which unrolled iteration the task belongs to (ps-sync unrolls several)
  double duration_s = 0; ///< fixed cost; communication tasks get theirs from the engine
  Device device{};       ///< where it runs (the builders place a one-worker DAG on GPU 0; see IterationGraph::place)
  /// A resource may have lanes that run concurrently (ps-sync: one push and one pull stream per server, as
  /// ps-lite sends to different servers at once); a task of lane l waits for l only, a task of lane -1 for every
  /// lane (and every lane for it).
  int lane = -1;
  /// ByteScheduler: a communication task with a priority (lower first) waits in its resource's priority queue and
  /// is handed to the resource while the bytes handed and not finished are below IterationGraph::priority_credit
  /// (sim/plan/schedule.hpp); -1: handed over as soon as it is ready.
  int priority = -1;
  Payload payload{};
};

/// The wire of a collective, a transfer or a server transfer; nullptr for other tasks.
[[nodiscard]] inline const Wire* wire(const Task& t) {
  if (const auto* c = std::get_if<CollectiveOp>(&t.payload))
    return &c->wire;
  if (const auto* p = std::get_if<Transfer>(&t.payload))
    return &p->wire;
  if (const auto* s = std::get_if<ServerTransfer>(&t.payload))
    return &s->wire;
  return nullptr;
}
[[nodiscard]] inline Wire* wire(Task& t) {
  return const_cast<Wire*>(wire(std::as_const(t)));
}
/// Whether `t` all-gathers a sharded schedule's parameters.
[[nodiscard]] inline bool gathers_parameters(const Task& t) {
  const auto* c = std::get_if<CollectiveOp>(&t.payload);
  return c != nullptr && c->parameters;
}

/// A task's kind-specific fields, read alike whatever the task is: the default (Collective::none, -1, 0 bytes) where
/// its payload has no such field, as tasks.csv and timeline.json print them.
[[nodiscard]] inline Collective collective_of(const Task& t) {
  const Wire* w = wire(t);
  return w != nullptr ? w->collective : Collective::none;
}
[[nodiscard]] inline int communicator_of(const Task& t) {
  const Wire* w = wire(t);
  return w != nullptr ? w->communicator : -1;
}
[[nodiscard]] inline double bytes_of(const Task& t) {
  const Wire* w = wire(t);
  return w != nullptr ? w->bytes : 0.0;
}
[[nodiscard]] inline int layer_of(const Task& t) {
  const auto* c = std::get_if<Compute>(&t.payload);
  return c != nullptr ? c->layer : -1;
}
/// The gradient group of a group's kernel, wait, collective or server transfer; -1 otherwise.
[[nodiscard]] inline int group_of(const Task& t) {
  if (const auto* c = std::get_if<CollectiveOp>(&t.payload))
    return c->group;
  if (const auto* w = std::get_if<GroupWork>(&t.payload))
    return w->group;
  if (const auto* s = std::get_if<ServerTransfer>(&t.payload))
    return s->group;
  return -1;
}
/// The micro-batch of a pipeline's pass, kernel, load, tensor collective or transfer; -1 otherwise.
[[nodiscard]] inline int micro_batch_of(const Task& t) {
  if (const auto* c = std::get_if<Compute>(&t.payload))
    return c->micro_batch;
  if (const auto* c = std::get_if<CollectiveOp>(&t.payload))
    return c->micro_batch;
  if (const auto* p = std::get_if<Transfer>(&t.payload))
    return p->micro_batch;
  return -1;
}
/// The virtual stage of a pipeline's pass, kernel, tensor collective or transfer (the sender's); -1 otherwise.
[[nodiscard]] inline int virtual_stage_of(const Task& t) {
  if (const auto* c = std::get_if<Compute>(&t.payload))
    return c->virtual_stage;
  if (const auto* c = std::get_if<CollectiveOp>(&t.payload))
    return c->virtual_stage;
  if (const auto* p = std::get_if<Transfer>(&t.payload))
    return p->virtual_stage;
  return -1;
}

/// One step of a gradient group's communication: a GPU kernel (compression work; none when kernel_s is 0), then
/// a collective that waits for it (none: the step is only its kernel). `bytes` is the collective's payload in the
/// lowering's convention (sim/network/lowering/lowering.hpp).
struct WireStep {
  double kernel_s = 0;
  Collective collective = Collective::none;
  double bytes = 0;
};

/// What a strategy family records of how a gradient group goes on the wire, beyond its steps (GradientGroup::on_wire);
/// std::monostate: nothing (dense groups). Sparsification (top-k and its kin): the elements each worker sends.
struct Sparsified {
  std::int64_t selected = 0;
};
/// Quantisation: bits per element on the wire.
struct Quantised {
  double wire_bits = 0;
};
/// PowerSGD: the tensors sent as low-rank factors, and the elements each worker allreduces.
struct LowRank {
  int low_rank_matrices = 0;
  std::int64_t wire_elements = 0;
};
/// Parameter server (ps_push; also ByteScheduler over servers): the group's key is split evenly over servers
/// [shard_first, shard_first + shard_count) (dag/strategies/ps.cpp); server_s is the servers' work on the key before
/// its update is applied (BytePS's summation of the nodes' pushes on CPUs), seconds.
struct ServerSharded {
  int shard_first = 0;
  int shard_count = 0;
  double server_s = 0;
};
using GroupOnWire = std::variant<std::monostate, Sparsified, Quantised, LowRank, ServerSharded>;

/// A gradient group: consecutive tensors (in gradient-ready order) communicated together. First what the generic
/// chain builder (add_group_chains) and the reports read, then its strategy family's data (112 bytes in all).
struct GradientGroup {
  std::vector<int> tensors; ///< indices into the model's flattened tensor list (registration order)
  std::int64_t elements = 0;
  double bytes = 0;
  int ready_layer = -1;      ///< the layer whose backward completes the group (the lowest layer index in it)
  double launch_delay_s = 0; ///< extra wait after the group is ready (Horovod cycle)
  /// How the group goes on the wire, as a chain of steps run one after the other; empty: one dense allreduce of
  /// `bytes`. Sparsification and quantisation: {compression kernel + sparse collective, decompression kernel};
  /// PowerSGD: the hook's chain (dag/compression.hpp).
  std::vector<WireStep> steps{};
  Resource kernel_resource = Resource::gpu_compute; ///< the stream that runs the steps' kernels
  /// ByteScheduler: the group's communication priority (its layer: front layers first); -1: none.
  int priority = -1;
  GroupOnWire on_wire{}; ///< read across families with the accessors below, by a family with std::get_if

  /// The steps as built: `steps`, or the dense allreduce of `bytes` when there are none.
  [[nodiscard]] std::vector<WireStep> effective_steps() const;
  /// The first collective of the chain (Collective::none when the group has none).
  [[nodiscard]] Collective first_collective() const;
  /// Total time of the group's GPU kernels.
  [[nodiscard]] double kernel_s() const;
};

/// A group's family data, read alike whatever the family: 0 where its family has no such field (compression_totals,
/// powersgd_totals and server_shard_bytes rely on that).
[[nodiscard]] inline std::int64_t selected_of(const GradientGroup& g) {
  const auto* f = std::get_if<Sparsified>(&g.on_wire);
  return f != nullptr ? f->selected : 0;
}
[[nodiscard]] inline double wire_bits_of(const GradientGroup& g) {
  const auto* f = std::get_if<Quantised>(&g.on_wire);
  return f != nullptr ? f->wire_bits : 0.0;
}
[[nodiscard]] inline int low_rank_matrices_of(const GradientGroup& g) {
  const auto* f = std::get_if<LowRank>(&g.on_wire);
  return f != nullptr ? f->low_rank_matrices : 0;
}
[[nodiscard]] inline std::int64_t wire_elements_of(const GradientGroup& g) {
  const auto* f = std::get_if<LowRank>(&g.on_wire);
  return f != nullptr ? f->wire_elements : 0;
}
[[nodiscard]] inline int shard_first_of(const GradientGroup& g) {
  const auto* f = std::get_if<ServerSharded>(&g.on_wire);
  return f != nullptr ? f->shard_first : 0;
}
[[nodiscard]] inline int shard_count_of(const GradientGroup& g) {
  const auto* f = std::get_if<ServerSharded>(&g.on_wire);
  return f != nullptr ? f->shard_count : 0;
}
[[nodiscard]] inline double server_s_of(const GradientGroup& g) {
  const auto* f = std::get_if<ServerSharded>(&g.on_wire);
  return f != nullptr ? f->server_s : 0.0;
}

class IterationGraph {
public:
  using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, Task>;
  using Id = std::size_t;

  IterationGraph() = default;
  IterationGraph(const IterationGraph& other);
  IterationGraph& operator=(const IterationGraph& other);
  /// Boost's adjacency_list has no move operations (its swap copies too), so the graph is held by pointer and a move
  /// takes O(1): copying a DAG of 4 million tasks twice per run (into the plan, into the result) was a sixth of a run
  /// of 300,000 layers (#31 R28). The moved-from DAG is empty.
  IterationGraph(IterationGraph&& other);
  IterationGraph& operator=(IterationGraph&& other) noexcept;
  ~IterationGraph();

  Id add(const Task& task);
  void depend(Id before, Id after); ///< `after` may start only when `before` has finished

  /// Registers a communicator (an equal one is shared) and returns its index for Wire::communicator.
  int add_communicator(const Communicator& c);
  [[nodiscard]] const Communicator& communicator(int index) const;
  [[nodiscard]] const std::vector<Communicator>& communicators() const { return communicators_; }

  /// Where one data-parallel worker runs: its GPU, its node, and the group its collectives span.
  struct Placement {
    int gpu = 0;
    int node = 0;
    int gpus_per_node = 1;      ///< of the cluster: where the other replicas' host tasks run
    Communicator data_parallel; ///< empty: the worker alone
  };
  /// Places a one-worker DAG (build_iteration, build_ps_sync): host_cpu tasks on the worker's node's host, every
  /// other task on its GPU, every collective over its data-parallel communicator. The DAG then stands for every
  /// member of that group (its replicas; see replicas()).
  void place(const Placement& where);
  /// One of the DAG's GPUs, the data-parallel group (a communicator index) it belongs to, and its tensor-parallel group
  /// (-1: none; the tensor peers run the same tasks, tensor parallelism's collectives span them).
  struct ReplicaGroup {
    int gpu = 0;
    int communicator = -1;
    int tensor = -1;
  };
  /// Declares the DAG one data-parallel replica of a model spread over several GPUs (a pipeline's stages), and on each
  /// of them tensor rank 0 of its tensor-parallel group: each of its GPUs is one member of its data-parallel group and
  /// of its tensor group, all data-parallel groups of one size d and all tensor groups of one size t (replicas());
  /// place() does this for one GPU. A tensor peer sits at the same offset from its replica's GPU in every replica
  /// (tensor groups of consecutive ranks, as Megatron lays them out).
  void replicate(const std::vector<ReplicaGroup>& groups, int gpus_per_node);
  /// The devices that run tasks, in order (GPUs by rank, then hosts).
  [[nodiscard]] std::vector<Device> devices() const;

  /// Copies of the DAG, d x t: the DAG's tasks are copy 0's; copy r = k t + j (0 <= r < replicas()) runs what the DAG
  /// runs on a GPU on tensor peer j of the k-th member of that GPU's data-parallel group after it (in the group's
  /// order, wrapping round), and what it runs on a node's host on the host of the node of its first GPU there. 1 when
  /// the DAG was not placed or replicated.
  [[nodiscard]] int replicas() const;
  /// Size of the tensor-parallel groups (t): copies r and r' with r div t = r' div t are one data-parallel replica.
  [[nodiscard]] int tensor_peers() const;
  /// Where copy k runs what the DAG runs on `d` (copy 0: `d` itself).
  [[nodiscard]] Device replica_device(int k, Device d) const;

  /// A collective task runs as several instances, each shared by some copies: one over a data-parallel group per
  /// tensor rank (shared by the d copies of that rank), one over a tensor group per data-parallel replica (shared by
  /// its t copies), or one per copy (a point-to-point transfer between pipeline stages). How many there are:
  [[nodiscard]] int instances(const Task& task) const;
  /// The instance copy r's collective task `task` belongs to, 0 .. instances(task) - 1.
  [[nodiscard]] int instance_of(const Task& task, int r) const { return instance_of(axis(task), r); }
  /// The GPUs instance i of `task` runs over, in the communicator's order.
  [[nodiscard]] Communicator instance_communicator(const Task& task, int i) const;
  /// What a collective task's communicator spans: a data-parallel group, a tensor group, or neither (a transfer).
  enum class Axis : std::uint8_t { data, tensor, copy };
  [[nodiscard]] Axis axis(const Task& task) const;
  /// instance_of for a task of that axis (for callers that look the axis up once per task).
  [[nodiscard]] int instance_of(Axis axis, int r) const;

  [[nodiscard]] std::size_t size() const { return boost::num_vertices(*graph_); }
  [[nodiscard]] const Task& task(Id id) const { return (*graph_)[id]; }
  [[nodiscard]] Task& task(Id id) { return (*graph_)[id]; }
  [[nodiscard]] const Graph& graph() const { return *graph_; }
  [[nodiscard]] std::vector<Id> successors(Id id) const;
  [[nodiscard]] std::vector<Id> predecessors(Id id) const;

  /// Topological order; throws std::logic_error naming a task on a cycle if the graph is not a DAG.
  [[nodiscard]] std::vector<Id> topological_order() const;

  /// Longest path through the dependency edges by task durations (resources ignored): the lower bound on
  /// the iteration time with unlimited resources. Returns the tasks on it in order, and its length.
  struct CriticalPath {
    std::vector<Id> tasks;
    double length_s = 0;
  };
  [[nodiscard]] CriticalPath critical_path() const;

private:
  struct Replica {
    int gpu = 0;          ///< one of the DAG's GPUs (copy 0)
    int group = 0;        ///< communicator index of its data-parallel group
    int first = 0;        ///< its position in the group
    int tensor = -1;      ///< communicator index of its tensor group, -1: none
    int tensor_first = 0; ///< its position in the tensor group
  };
  [[nodiscard]] const Replica& replica_of(int gpu) const;
  struct Replication {
    std::vector<Replica> gpus; ///< empty: not replicated
    int gpus_per_node = 1;
    int data = 1;   ///< d, size of the data-parallel groups
    int tensor = 1; ///< t, size of the tensor groups
  };
  std::unique_ptr<Graph> graph_ = std::make_unique<Graph>();
  std::vector<Communicator> communicators_;
  Replication replication_;
  double priority_credit_bytes_ = 0;

public:
  /// ByteScheduler's credit (Task::priority): bytes of prioritised tasks a resource may hold unfinished at once;
  /// priorities take effect only in a graph with a credit (> 0).
  void set_priority_credit(double bytes) { priority_credit_bytes_ = bytes; }
  [[nodiscard]] double priority_credit() const { return priority_credit_bytes_; }
};

} // namespace ddlsim::dag
