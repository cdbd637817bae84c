// Data-parallel strategies: each decides how gradient tensors are grouped into collectives and when each group
// is launched; the common builder turns that plan into the iteration DAG. Adding a strategy is one file in
// dag/strategies/ plus one line in the registry (strategy.cpp).
#pragma once

#include "dag/compression.hpp"
#include "dag/graph.hpp"
#include "dag/model.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

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
};

/// A parameter tensor in the model's flattened registration order.
struct TensorRef {
  int layer = 0;
  std::int64_t numel = 0;
};
[[nodiscard]] std::vector<TensorRef> flatten_tensors(const Model& model);

/// Time of one collective over the gradient group's bytes on this worker's cluster (the engine's own model).
using CommCost = std::function<double(double bytes)>;

struct StrategyOptions {
  std::string kind = "wfbp";
  double first_bucket_bytes = 1048576.0;         ///< PyTorch dist._DEFAULT_FIRST_BUCKET_BYTES = 1 MiB
  double bucket_cap_bytes = 26214400.0;          ///< PyTorch DDP bucket_cap_mb = 25 (MiB)
  double fusion_threshold_bytes = 134217728.0;   ///< Horovod >= 0.21 HOROVOD_FUSION_THRESHOLD = 128 MiB
  double cycle_time_s = 1e-3;                    ///< Horovod >= 0.21 HOROVOD_CYCLE_TIME = 1 ms
  double density = 0.001;                        ///< sparsification: fraction of gradient elements sent
  Selection selection = Selection::sort;         ///< sparsification: how the top-k is selected
  int levels = 127;                              ///< qsgd: quantisation levels s (8 bits per element)
  std::optional<SelectionCurve> selection_curve; ///< sparsification: measured cost of `selection` (calibration)
  int rank = 4;                                  ///< PowerSGD: matrix approximation rank (strategy.rank)
  /// PowerSGD: compression kernels on a second GPU stream ("separate") instead of the compute stream ("inline").
  bool separate_compression_stream = false;
  // Parameter server (ps-sync, ps-async; dag/strategies/ps.cpp).
  int servers = 0;                       ///< server shards; 0 = one per node (set by the scenario parser)
  bool dedicated_servers = false;        ///< `placement`: "dedicated" hosts, or "colocated" on the workers' nodes
  std::int64_t bigarray_bound = 1000000; ///< MXNet MXNET_KVSTORE_BIGARRAY_BOUND: larger keys are split over all servers
  double worker_speed_spread = 0;        ///< ps-async: worker w computes (1 + spread x w / (p-1)) times slower
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

using GroupPlanner = std::vector<GradientGroup> (*)(const StrategyInput&);

struct StrategyInfo {
  std::string_view name;
  std::string_view description;
  GroupPlanner plan;
};

/// Every built-in strategy, sorted by name.
[[nodiscard]] std::span<const StrategyInfo> strategies();
[[nodiscard]] const StrategyInfo* find_strategy(std::string_view name);

// The planners, one per file in dag/strategies/.
std::vector<GradientGroup> plan_bsp(const StrategyInput& in);
std::vector<GradientGroup> plan_wfbp(const StrategyInput& in);
std::vector<GradientGroup> plan_ddp(const StrategyInput& in);
std::vector<GradientGroup> plan_fusion(const StrategyInput& in);
std::vector<GradientGroup> plan_mgwfbp(const StrategyInput& in);
std::vector<GradientGroup> plan_topk(const StrategyInput& in);
std::vector<GradientGroup> plan_gtopk(const StrategyInput& in);
std::vector<GradientGroup> plan_lags(const StrategyInput& in);
std::vector<GradientGroup> plan_omgs(const StrategyInput& in);
std::vector<GradientGroup> plan_qsgd(const StrategyInput& in);
std::vector<GradientGroup> plan_terngrad(const StrategyInput& in);
std::vector<GradientGroup> plan_signsgd(const StrategyInput& in);
std::vector<GradientGroup> plan_powersgd(const StrategyInput& in);
std::vector<GradientGroup> plan_ps(const StrategyInput& in);

/// Whether `kind` is a parameter-server strategy (ps-sync, ps-async).
[[nodiscard]] bool is_parameter_server(std::string_view kind);

/// MXNet KVStore's placement of key `key` (the tensor's index) of `numel` elements on `servers` servers
/// (dag/strategies/ps.cpp): {first server, number of servers it is split over}.
struct KeyShard {
  int first = 0;
  int count = 1;
};
[[nodiscard]] KeyShard shard_key(int key, std::int64_t numel, int servers, std::int64_t bigarray_bound);

/// ps-sync's DAG: `iterations` consecutive iterations of one worker, each pushing every group as soon as its
/// gradient is ready and pulling it back once pushed: a push and a pull stream with a lane per server (a key on one
/// server uses that server's lane, a split key every lane; pushes to different servers overlap); layer l's
/// forward in iteration i + 1 waits for the pulls of layer l's groups in iteration i. No worker-side update: the
/// servers apply it between push and pull (a delay task: the worker's update time for the group's share of the
/// parameters, divided among the servers holding it). Tasks carry their iteration index.
[[nodiscard]] IterationGraph build_ps_sync(const Model& model, const WorkerCosts& costs,
                                           const std::vector<GradientGroup>& groups, int iterations);

/// Sparsifies `group` at in.options.density for `collective` (allgather: Top-k, LAGS, OMGS; global_topk: gTop-k):
/// k pairs per worker, the collective's payload in the lowering's convention (allgather: the gathered p x k pairs;
/// gTop-k: one rank's k pairs) and its compression and decompression kernels (compression.hpp).
void sparsify_group(GradientGroup& group, const StrategyInput& in, Collective collective);

/// Quantises `group` with `q` (levels: in.options.levels) for an allgather of every worker's message, as PyTorch's
/// quantisation comm hooks do per DDP bucket; quantised values do not add, so they are gathered and decoded.
void quantise_group(GradientGroup& group, const StrategyInput& in, Quantiser q);

/// The whole gradient as one group after backward (BSP's group), sparsified for `collective`.
[[nodiscard]] std::vector<GradientGroup> plan_sparse_whole_model(const StrategyInput& in, Collective collective);

/// Finish time of the last gradient group's communication, relative to the start of backward, when groups are
/// sent one at a time in order on one communication stream: the quantity MG-WFBP minimises.
[[nodiscard]] double communication_finish_time(const std::vector<GradientGroup>& groups,
                                               const std::vector<double>& backward_finish,
                                               const CommCost& allreduce_time);

/// Builds the iteration DAG for `groups` (launch order). Without `communicate` no communication tasks are made.
/// Each group becomes the chain of its stages (GradientGroup::effective_stages): every stage's kernel (a
/// compression task on the group's kernel_resource) waits for the previous task of the chain, its collective (a
/// communication task carrying collective and bytes; the engine gives its duration) for the kernel. The groups'
/// first collectives are launched in plan order (a dependency on the previous group's first collective, as DDP
/// launches its buckets in order); the later collectives of a chain queue on the comm resource in the order they
/// become ready, as the hook's callbacks launch them. The update waits for the end of every chain.
[[nodiscard]] IterationGraph build_iteration(const Model& model, const WorkerCosts& costs,
                                             const std::vector<GradientGroup>& groups, bool communicate);

} // namespace ddlsim::dag
