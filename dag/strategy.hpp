// Data-parallel strategies: each decides how gradient tensors are grouped into collectives and when each group
// is launched; the common builder turns that plan into the iteration DAG. A strategy is one file in dag/strategies/
// that defines its registry entry (StrategyInfo: name, family, the option keys it owns, their parser, its planner)
// plus one `ddlsim_strategy(...)` line in dag/CMakeLists.txt, from which CMake generates the registry
// (dag/strategy_registry.cpp.in); docs/architecture.md, "Adding a strategy".
#pragma once

#include "dag/compression.hpp"
#include "dag/graph.hpp"
#include "dag/model.hpp"

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace ddlsim {
class ObjectReader;
}

namespace ddlsim::dag {

/// Task costs of one worker, computed by the simulator from calibration, measurements or the roofline.
struct WorkerCosts {
  double data_load_s = 0;      ///< loading + preprocessing one batch on the host
  bool prefetch = true;        ///< the loader prepares the next batch during this iteration (DataLoader workers)
  double h2d_s = 0;            ///< host-to-device copy of one batch
  std::vector<double> fwd_s;   ///< per layer
  std::vector<double> bwd_s;   ///< per layer
  double update_s = 0;         ///< optimizer step
  double memory_bandwidth = 0; ///< effective GPU memory bandwidth (B/s) for memory-bound kernels (compression)
  double peak_flops = 0;       ///< effective GPU peak (FLOP/s) in the gradient dtype, for compression matmuls
  /// The host thread that issues the GPU's work (sim/plan/host.hpp): per layer, the time to issue its forward and
  /// backward kernels; per other GPU task (copy, collective, compression kernel); the optimizer step's; per
  /// iteration outside them. All zero: no host tasks.
  std::vector<double> fwd_host_s;
  std::vector<double> bwd_host_s;
  double launch_s = 0;
  double update_host_s = 0;
  double iteration_host_s = 0;
  /// Whether the host times were given (the scenario's `host.launch`, or measured host times in the calibration)
  /// rather than the default of one kernel launch per task: the host may then bound the step, and an iteration is
  /// measured in the steady state (unroll_iterations).
  bool host_times_given = false;
};

/// A parameter tensor in the model's flattened registration order.
struct TensorRef {
  int layer = 0;
  std::int64_t numel = 0;
};
[[nodiscard]] std::vector<TensorRef> flatten_tensors(const Model& model);

/// Time of one collective over the gradient group's bytes on this worker's cluster (the engine's own model).
using CommCost = std::function<double(double bytes)>;

// ---- Options: one struct per family, filled by the strategy's parser (StrategyInfo::parse) ----------------------

/// PyTorch DDP's gradient buckets (ddp, and the comm hooks that run per bucket: qsgd, terngrad, signsgd, powersgd).
struct BucketOptions {
  double first_bucket_bytes = 1048576.0; ///< PyTorch dist._DEFAULT_FIRST_BUCKET_BYTES = 1 MiB
  double bucket_cap_bytes = 26214400.0;  ///< PyTorch DDP bucket_cap_mb = 25 (MiB)
};

/// Horovod tensor fusion (fusion).
struct FusionOptions {
  double threshold_bytes = 134217728.0; ///< Horovod >= 0.21 HOROVOD_FUSION_THRESHOLD = 128 MiB
  double cycle_time_s = 1e-3;           ///< Horovod >= 0.21 HOROVOD_CYCLE_TIME = 1 ms
};

/// Top-k sparsification (topk, gtopk, lags, omgs).
struct SparsificationOptions {
  double density = 0.001;                        ///< fraction of gradient elements sent
  Selection selection = Selection::sort;         ///< how the top-k is selected
  std::optional<SelectionCurve> selection_curve; ///< measured cost of `selection` (calibration)
};

/// Quantisation per DDP bucket (qsgd, terngrad, signsgd).
struct QuantisationOptions {
  BucketOptions buckets;
  std::optional<int> levels; ///< qsgd: quantisation levels s (default 127, 8 bits per element); unset for the others
};

/// PowerSGD per DDP bucket (powersgd).
struct PowerSgdOptions {
  BucketOptions buckets;
  int rank = 4; ///< matrix approximation rank (strategy.rank)
  /// Compression kernels on a second GPU stream ("separate") instead of the compute stream ("inline").
  bool separate_compression_stream = false;
};

/// Parameter server (ps-sync, ps-async; dag/strategies/ps.cpp).
struct ParameterServerOptions {
  int servers = 0;                       ///< server shards; 0 = one (the parser's default is one per node)
  bool dedicated_servers = false;        ///< `placement`: "dedicated" hosts, or "colocated" on the workers' nodes
  std::int64_t bigarray_bound = 1000000; ///< MXNet MXNET_KVSTORE_BIGARRAY_BOUND: larger keys are split over all servers
  double worker_speed_spread = 0;        ///< ps-async, ps-ssp: worker w computes (1 + spread x w / (p-1)) times slower
  /// ps-ssp (Ho et al., NIPS 2013): a worker reads for iteration k + 1 only when every worker's pushes of iterations
  /// up to k - s are applied; -1: unbounded (ps-async).
  int staleness_bound = -1;
  /// `mode` "byteps" (ps-sync; Jiang et al., OSDI 2020): a node's GPUs reduce a key inside the node first and the
  /// node pushes it once (and pulls it once, then broadcasts it to its GPUs); keys are tensors cut into partitions
  /// of at most `partition_bytes`, each whole on one server, round-robin; the servers sum the nodes' pushes on
  /// CPUs at `server_sum_bandwidth` (bytes read per second). "kvstore" (default): every worker pushes its own.
  bool byteps = false;
  double partition_bytes = 4096000; ///< BytePS's BYTEPS_PARTITION_BYTES default
  double server_sum_bandwidth = 0;  ///< B/s of pushed bytes summed; set by the parser in byteps mode
  int nodes = 1;                    ///< the cluster's nodes (BytePS: pushes per key)
};

/// ByteScheduler (bytescheduler; Peng et al., SOSP 2019): tensors cut into partitions, sent by priority within a
/// credit. Counts in parameters, as bytescheduler/common/bytecore.py counts them.
struct ByteSchedulerOptions {
  std::int64_t partition = 1000000; ///< BYTESCHEDULER_PARTITION's default: parameters per partition
  std::int64_t credit = 4000000;    ///< BYTESCHEDULER_CREDIT's default: parameters handed to the engine, unfinished
  /// `backend` "ps": partitions pushed to and pulled from parameter servers (MXNet's KVStore, as ps-sync: `ps` holds
  /// `servers` and `placement`), push and pull both by priority; "allreduce" (default): NCCL allreduces.
  bool ps_backend = false;
  ParameterServerOptions ps;
};

/// The collectives of a traced run (traced; dag/strategies/traced.cpp), in launch order: each is ready after the
/// whole backward (`after_layer` -1) or after the backward of layer `after_layer`.
struct TracedOptions {
  struct Call {
    Collective collective = Collective::allreduce;
    double bytes = 0; ///< as the lowering counts it (allgather: gathered; reduce-scatter: input)
    int after_layer = -1;
  };
  std::vector<Call> calls;
};

/// A strategy's options: the alternative of its family (std::monostate for strategies without options).
using StrategyOptions =
    std::variant<std::monostate, BucketOptions, FusionOptions, SparsificationOptions, QuantisationOptions,
                 PowerSgdOptions, ParameterServerOptions, TracedOptions, ByteSchedulerOptions>;

/// The options of `o` as family struct T; a logic error if the strategy has other options.
template <class T> [[nodiscard]] const T& options_as(const StrategyOptions& o) {
  if (const T* t = std::get_if<T>(&o))
    return *t;
  throw std::logic_error("strategy options: the strategy's options are of another family");
}

/// An allreduce whose time is exactly affine in its payload, alpha + n * seconds_per_byte for every n >= 0 (every
/// closed form is; a measured table is not). Planners may use it to rank candidates in O(1) (MG-WFBP's planner then
/// runs in linear time); the times themselves still come from the CommCost.
struct AffineCost {
  double alpha_s = 0;
  double seconds_per_byte = 0;
};

struct StrategyInput {
  const Model& model;
  const WorkerCosts& costs;
  double bytes_per_element;
  const CommCost& allreduce_time;
  const StrategyOptions& options;
  int workers = 1; ///< data-parallel workers (sparsification sizes its allgather and decompression by it)
  /// Time of the allgather that carries sparse and quantised groups, by its payload (the gathered result); OMGS
  /// plans with it. The engine builds it on first call, so strategies that do not call it pay nothing.
  CommCost allgather_time = {};
  /// allreduce_time's alpha and beta when it is affine (AffineCost), else nullopt.
  std::optional<AffineCost> allreduce_affine = std::nullopt;
};

/// Gradient tensors in the order their gradients become ready: reverse registration order (autograd runs the
/// layers backwards; PyTorch DDP rebuilds its buckets in this order after the first iteration).
[[nodiscard]] std::vector<int> gradient_ready_order(const Model& model);

/// Completion time of each layer's backward, relative to the start of the backward pass (backward runs
/// layers L-1 .. 0 back to back on the GPU stream).
[[nodiscard]] std::vector<double> backward_finish_times(const WorkerCosts& costs);

/// Makes a group from consecutive entries [first, last) of `order`.
[[nodiscard]] GradientGroup make_group(const Model& model, const std::vector<TensorRef>& tensors,
                                       const std::vector<int>& order, std::size_t first, std::size_t last,
                                       double bytes_per_element);

/// The optimal split of `order` into consecutive groups (MG-WFBP, OMGS). finish(i, j, f) is the finish time of a
/// last group of entries [i, j) after groups that finish at f, non-decreasing in f: the dynamic programme
/// F[j] = min_i finish(i, j, F[i]) is then exact, O(n^2) calls. Ties keep the earliest cut.
[[nodiscard]] std::vector<GradientGroup>
optimal_consecutive_groups(const Model& model, const std::vector<TensorRef>& tensors, const std::vector<int>& order,
                           double bytes_per_element,
                           const std::function<double(std::size_t i, std::size_t j, double f)>& finish);

/// MG-WFBP's merge: the optimal split of `order` into consecutive groups sent one after another, a group of entries
/// [i, j) starting when entry j-1 is ready (`ready`, non-decreasing) and the previous group has finished, and taking
/// cost(bytes) (non-decreasing in bytes); prefix_bytes[k] is the bytes of entries [0, k). The same plan as
/// optimal_consecutive_groups with finish(i, j, f) = max(ready[j-1], f) + cost(prefix_bytes[j] - prefix_bytes[i])
/// (ties keep the earliest cut), in O(n) when `affine` describes cost, else in O(n^2).
[[nodiscard]] std::vector<GradientGroup> optimal_merge(const Model& model, const std::vector<TensorRef>& tensors,
                                                       const std::vector<int>& order, double bytes_per_element,
                                                       const std::vector<double>& ready,
                                                       const std::vector<double>& prefix_bytes, const CommCost& cost,
                                                       const std::optional<AffineCost>& affine);

using GroupPlanner = std::vector<GradientGroup> (*)(const StrategyInput&);

/// What a strategy is, for the code that is not the strategy: engines, reports and the parser ask the family and
/// the traits, never the name.
enum class StrategyFamily {
  dense,            ///< one allreduce per group of raw gradients (bsp, wfbp, mg-wfbp)
  buckets,          ///< PyTorch DDP buckets (ddp)
  fusion,           ///< Horovod tensor fusion (fusion)
  sparsification,   ///< top-k pairs, allgathered or merged by a tree (topk, gtopk, lags, omgs)
  quantisation,     ///< quantised DDP buckets, allgathered (qsgd, terngrad, signsgd)
  low_rank,         ///< low-rank factors per DDP bucket (powersgd)
  parameter_server, ///< push to and pull from server shards (ps-sync, ps-async)
  scheduled,        ///< prioritised partitions across the iteration barrier (bytescheduler)
};
/// The families' names, by enumerator (the one name table).
inline constexpr std::array<std::string_view, 8> kFamilyNames{
    "dense", "buckets", "fusion", "sparsification", "quantisation", "low-rank", "parameter-server", "scheduled"};
static_assert(kFamilyNames.size() == static_cast<std::size_t>(StrategyFamily::scheduled) + 1,
              "kFamilyNames: one name per StrategyFamily, in order");
[[nodiscard]] constexpr std::string_view family_name(StrategyFamily f) {
  return kFamilyNames.at(static_cast<std::size_t>(f));
}

/// Which planners try every group of consecutive gradient tensors: n (n + 1) / 2 candidates for n tensors, each timed
/// with a collective's cost model (sim/spec/limits.cpp bounds the work).
enum class GroupSearch : std::uint8_t {
  none,      ///< linear in the tensors
  allgather, ///< every candidate, timed with the allgather (OMGS)
  allreduce, ///< with the allreduce, every candidate where its cost is not affine in the payload (MG-WFBP)
};

struct StrategyTraits {
  GroupSearch group_search = GroupSearch::none;
  bool asynchronous = false; ///< workers proceed without a barrier (ps-async: the analytic queue model times it)
  /// Its DAG unrolls its own iterations (ps-sync's, ByteScheduler's kPsSyncIterations) or has one worker loop of its
  /// own (ps-async): the plan does not unroll it for a host steady state.
  bool own_iterations = false;
};

/// What a strategy's option parser may consult besides its own keys, passed explicitly by the scenario parser.
struct StrategyContext {
  std::string_view kind = {};   ///< the strategy's name (set by parse_strategy), for messages
  const Model* model = nullptr; ///< the scenario's model (PowerSGD checks its rank against it)
  int nodes = 1;                ///< cluster nodes (parameter servers: one per node by default)
  double memory_bandwidth = 0;  ///< GPU memory bandwidth, B/s; 0 = unknown (compression kernels need it)
  double peak_flops = 0;        ///< GPU peak, FLOP/s; 0 = unknown
  const std::map<std::string, SelectionCurve>* selection_curves = nullptr; ///< calibrated, by selection name
  std::string_view topology = "star"; ///< the network topology's name, for messages
  bool star_network = true;           ///< dedicated parameter-server hosts need a star
};

/// Iterations ps-sync and ByteScheduler unroll in their DAGs; the iteration time is the period between the last two
/// (steady state).
inline constexpr int kPsSyncIterations = 3;

/// What a family's DAG builder is given: the model, one worker's costs, the strategy's groups (launch order) and
/// options, and whether the worker communicates at all (a single worker without dedicated servers does not).
struct GraphInput {
  const Model& model;
  const WorkerCosts& costs;
  const std::vector<GradientGroup>& groups;
  const StrategyOptions& options;
  double bytes_per_element = 4; ///< of the gradients on the wire
  bool communicate = true;
};
/// Builds one worker's iteration DAG for a strategy and says what it did in `notes` (the run's notes). nullptr in
/// the registry: build_iteration, the data-parallel iteration every dense, compressed and low-rank strategy runs.
using GraphBuilder = IterationGraph (*)(const GraphInput& in, std::vector<std::string>& notes);

/// Reads the keys a strategy owns from the `strategy` object (ObjectReader, core/json.hpp) into its options;
/// errors are InputErrors naming the key's JSON path.
using OptionParser = StrategyOptions (*)(ObjectReader& r, const StrategyContext& ctx);

/// A strategy's registry entry: one constant-initialised `extern const StrategyInfo` per strategy, defined in its
/// file in dag/strategies/ (namespace ddlsim::dag::builtin) and registered by its `ddlsim_strategy` line in
/// dag/CMakeLists.txt.
struct StrategyInfo {
  std::string_view name;        ///< strategy.kind
  std::string_view description; ///< one line for `ddlsim list strategies`
  StrategyFamily family = StrategyFamily::dense;
  StrategyTraits traits = {};
  std::span<const std::string_view> keys = {}; ///< the keys of `strategy` it owns besides "kind"
  OptionParser parse = nullptr;                ///< reads `keys`; nullptr: no options (std::monostate)
  GroupPlanner plan = nullptr;
  GraphBuilder build = nullptr; ///< its DAG shape; nullptr: build_iteration

  [[nodiscard]] constexpr bool owns(std::string_view key) const {
    for (const auto k : keys)
      if (k == key)
        return true;
    return false;
  }
};

/// Every registered strategy in registration order (the `ddlsim_strategy` lines of dag/CMakeLists.txt; generated).
[[nodiscard]] std::span<const StrategyInfo* const> registered_strategies();
/// Every registered strategy, sorted by name (listings and messages).
[[nodiscard]] std::vector<const StrategyInfo*> strategies();
[[nodiscard]] const StrategyInfo* find_strategy(std::string_view name);

/// A parsed strategy: its registry entry and its options.
struct Strategy {
  const StrategyInfo* info = nullptr;
  StrategyOptions options;

  [[nodiscard]] const StrategyInfo& entry() const {
    if (info == nullptr)
      throw std::logic_error("dag::Strategy: no strategy chosen (parse_strategy sets it)");
    return *info;
  }
  [[nodiscard]] std::string_view kind() const { return entry().name; }
  [[nodiscard]] StrategyFamily family() const { return entry().family; }
  [[nodiscard]] bool is(StrategyFamily f) const { return family() == f; }
  [[nodiscard]] bool asynchronous() const { return entry().traits.asynchronous; }
  template <class T> [[nodiscard]] const T& get() const { return options_as<T>(options); }
  template <class T> [[nodiscard]] const T* get_if() const { return std::get_if<T>(&options); }
  /// The parameter servers' options when the strategy pushes to and pulls from servers (ps-sync, ps-async, and
  /// bytescheduler over the ps backend), else nullptr.
  [[nodiscard]] const ParameterServerOptions* parameter_server() const {
    if (const auto* ps = get_if<ParameterServerOptions>())
      return ps;
    if (const auto* bs = get_if<ByteSchedulerOptions>(); bs != nullptr && bs->ps_backend)
      return &bs->ps;
    return nullptr;
  }
};

/// Parses the `strategy` object: "kind" from the registry, then the keys: one that the chosen kind does not own but
/// another does is an error naming the kinds that own it ("applies to strategy kinds 'a', 'b', not 'c'", in
/// registration order), the chosen kind's parser reads its own, and any other key is unknown.
[[nodiscard]] Strategy parse_strategy(ObjectReader& r, StrategyContext ctx);

// ---- Building blocks shared by several strategies ----------------------------------------------------------------

/// The whole gradient as one group after backward (BSP's plan).
[[nodiscard]] std::vector<GradientGroup> one_group_after_backward(const StrategyInput& in);
/// One group per tensor, in gradient-ready order (WFBP's plan).
[[nodiscard]] std::vector<GradientGroup> one_group_per_tensor(const StrategyInput& in);
/// PyTorch DDP's buckets (dag/strategies/ddp.cpp).
[[nodiscard]] std::vector<GradientGroup> ddp_buckets(const StrategyInput& in, const BucketOptions& buckets);

/// The option keys of a family, and their parsers (the keys' defaults and messages, in one place).
inline constexpr std::string_view kBucketKeys[] = {"first_bucket", "bucket_cap"};
inline constexpr std::string_view kSparsificationKeys[] = {"density", "selection"};
[[nodiscard]] BucketOptions parse_bucket_options(ObjectReader& r);
/// density, selection and the calibrated selection curve; fails unless the GPU's memory bandwidth is known.
[[nodiscard]] StrategyOptions parse_sparsification_options(ObjectReader& r, const StrategyContext& ctx);
/// Compression kernels are costed from the GPU's memory bandwidth: fails at "kind" without it.
void require_memory_bandwidth(ObjectReader& r, const StrategyContext& ctx);

/// MXNet KVStore's placement of key `key` (the tensor's index) of `numel` elements on `servers` servers
/// (dag/strategies/ps.cpp): {first server, number of servers it is split over}.
struct KeyShard {
  int first = 0;
  int count = 1;
};
[[nodiscard]] KeyShard shard_key(int key, std::int64_t numel, int servers, std::int64_t bigarray_bound);

/// The DAG ps-sync and ByteScheduler share, without a barrier between iterations: `iterations` consecutive iterations
/// of one worker (data load, host-to-device copy, forward, backward; the next copy after this backward, the next
/// load too without prefetching). After each iteration's backward, `after_backward(g, iteration, backward tasks by
/// layer, gates)` adds its communication and fills gates[l] with what layer l's next forward waits for. `who` names
/// the caller in logic errors (no layers, costs of another model, no iteration).
using AfterBackward = std::function<void(IterationGraph& g, int iteration, const std::vector<IterationGraph::Id>& bwd,
                                         std::vector<std::vector<IterationGraph::Id>>& gates)>;
[[nodiscard]] IterationGraph build_layerwise(const Model& model, const WorkerCosts& costs, int iterations,
                                             std::string_view who, const AfterBackward& after_backward);

/// ps-sync's DAG: `iterations` consecutive iterations of one worker, each pushing every group as soon as its
/// gradient is ready and pulling it back once pushed: a push and a pull stream with a lane per server (a key on one
/// server uses that server's lane, a split key every lane; pushes to different servers overlap); layer l's
/// forward in iteration i + 1 waits for the pulls of layer l's groups in iteration i. No worker-side update: the
/// servers apply it between push and pull (a delay task: the worker's update time for the group's share of the
/// parameters, divided among the servers holding it). Tasks carry their iteration index.
[[nodiscard]] IterationGraph build_ps_sync(const Model& model, const WorkerCosts& costs,
                                           const std::vector<GradientGroup>& groups, int iterations);

/// ByteScheduler's DAG over an allreduce: `iterations` consecutive iterations of one worker; each group (a partition)
/// is allreduced once its gradient is ready, with the group's priority; a layer's optimizer step (its share of the
/// update, on the GPU) follows its partitions' allreduces, and its forward in the next iteration waits only for that
/// step (ByteScheduler crosses the global barrier: Peng et al., SOSP 2019). The graph's priority credit is
/// `credit_bytes`. Tasks carry their iteration index.
[[nodiscard]] IterationGraph build_bytescheduler(const Model& model, const WorkerCosts& costs,
                                                 const std::vector<GradientGroup>& groups, int iterations,
                                                 double credit_bytes);

/// Sparsifies `group` at the SparsificationOptions' density for `collective` (allgather: Top-k, LAGS, OMGS;
/// global_topk: gTop-k): k pairs per worker, the collective's payload in the lowering's convention (allgather: the
/// gathered p x k pairs; gTop-k: one rank's k pairs) and its compression and decompression kernels (compression.hpp).
void sparsify_group(GradientGroup& group, const StrategyInput& in, Collective collective);

/// Quantises `group` with `q` (levels: the QuantisationOptions' levels) for an allgather of every worker's message, as
/// PyTorch's quantisation comm hooks do per DDP bucket; quantised values do not add, so they are gathered and decoded.
void quantise_group(GradientGroup& group, const StrategyInput& in, Quantiser q);

/// The quantisation strategies' plan: DDP's buckets, each quantised with `q` (quantise_group).
[[nodiscard]] std::vector<GradientGroup> plan_quantised_buckets(const StrategyInput& in, Quantiser q);

/// The options of a quantisation strategy without keys of its own (terngrad, signsgd): DDP's bucket keys, and the GPU's
/// memory bandwidth that costs its kernels.
[[nodiscard]] StrategyOptions parse_quantised_bucket_options(ObjectReader& r, const StrategyContext& ctx);

/// The whole gradient as one group after backward (BSP's group), sparsified for `collective`.
[[nodiscard]] std::vector<GradientGroup> plan_sparse_whole_model(const StrategyInput& in, Collective collective);

/// Finish time of the last gradient group's communication, relative to the start of backward, when groups are
/// sent one at a time in order on one communication stream: the quantity MG-WFBP minimises.
[[nodiscard]] double communication_finish_time(const std::vector<GradientGroup>& groups,
                                               const std::vector<double>& backward_finish,
                                               const CommCost& allreduce_time);

/// Builds the iteration DAG for `groups` (launch order). Without `communicate` no communication tasks are made.
/// Each group becomes the chain of its steps (GradientGroup::effective_steps): every step's kernel (a
/// compression task on the group's kernel_resource) waits for the previous task of the chain, its collective (a
/// communication task carrying collective and bytes; the engine gives its duration) for the kernel. The groups'
/// first collectives are launched in plan order (a dependency on the previous group's first collective, as DDP
/// launches its buckets in order); the later collectives of a chain queue on the comm resource in the order they
/// become ready, as the hook's callbacks launch them. The update waits for the end of every chain.
[[nodiscard]] IterationGraph build_iteration(const Model& model, const WorkerCosts& costs,
                                             const std::vector<GradientGroup>& groups, bool communicate);

/// `iterations` consecutive copies of a build_iteration DAG (Task::iteration 0, 1, ...): copy k + 1's host-to-device
/// copy waits for copy k's update (one GPU stream, and the forward reads the updated weights), and its data loading for
/// copy k's (one loader). With a batch loaded on the training thread (no prefetch), the host threads add the wait for
/// the previous iteration's launches (sim/plan/host.hpp). Throws std::logic_error on a DAG without exactly one data
/// loading, copy and update.
[[nodiscard]] IterationGraph unroll_iterations(const IterationGraph& one, int iterations);

/// Adds each group's chain (its launch delay, kernels and collectives, in order) to `g` on `device`, its collectives
/// over `communicator` (-1: set later by IterationGraph::place): a chain starts after `ready(group)`, the groups'
/// first collectives launch in plan order, and `update` waits for the end of every chain.
void add_group_chains(IterationGraph& g, const std::vector<GradientGroup>& groups,
                      const std::function<IterationGraph::Id(const GradientGroup&)>& ready, IterationGraph::Id update,
                      Device device, int communicator = -1);

} // namespace ddlsim::dag
