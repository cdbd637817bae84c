// Shared machinery of the data-parallel strategies: tensor order, backward timing, the strategy registry and
// the builder that turns a gradient-group plan into the iteration DAG (see strategy.hpp).
#include "dag/strategy.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <optional>
#include <stdexcept>

namespace ddlsim::dag {

std::vector<TensorRef> flatten_tensors(const Model& model) {
  std::vector<TensorRef> out;
  out.reserve(model.tensor_count());
  for (std::size_t l = 0; l < model.layers.size(); ++l)
    for (const auto& p : model.layers[l].params)
      out.push_back({static_cast<int>(l), p.numel});
  return out;
}

std::vector<int> gradient_ready_order(const Model& model) {
  std::vector<int> order(model.tensor_count());
  for (std::size_t i = 0; i < order.size(); ++i)
    order[i] = static_cast<int>(order.size() - 1 - i);
  return order;
}

std::vector<double> backward_finish_times(const WorkerCosts& costs) {
  std::vector<double> finish(costs.bwd_s.size(), 0);
  double t = 0;
  for (std::size_t l = costs.bwd_s.size(); l-- > 0;) {
    t += costs.bwd_s[l];
    finish[l] = t;
  }
  return finish;
}

GradientGroup make_group(const Model& model, const std::vector<TensorRef>& tensors, const std::vector<int>& order,
                         std::size_t first, std::size_t last, double bytes_per_element) {
  GradientGroup g;
  g.ready_layer = static_cast<int>(model.layers.size());
  for (std::size_t k = first; k < last; ++k) {
    const int t = order[k];
    g.tensors.push_back(t);
    g.elements += tensors[static_cast<std::size_t>(t)].numel;
    g.ready_layer = std::min(g.ready_layer, tensors[static_cast<std::size_t>(t)].layer);
  }
  g.bytes = static_cast<double>(g.elements) * bytes_per_element;
  return g;
}

std::vector<GradientGroup>
optimal_consecutive_groups(const Model& model, const std::vector<TensorRef>& tensors, const std::vector<int>& order,
                           double bytes_per_element,
                           const std::function<double(std::size_t i, std::size_t j, double f)>& finish) {
  const std::size_t n = order.size();
  // best[j]: earliest finish of entries [0, j); cut[j]: start of the last group.
  std::vector<double> best(n + 1, std::numeric_limits<double>::infinity());
  std::vector<std::size_t> cut(n + 1, 0);
  best[0] = 0;
  for (std::size_t j = 1; j <= n; ++j)
    for (std::size_t i = 0; i < j; ++i)
      if (const double f = finish(i, j, best[i]); f < best[j]) {
        best[j] = f;
        cut[j] = i;
      }
  std::vector<std::size_t> bounds;
  for (std::size_t j = n; j > 0; j = cut[j])
    bounds.push_back(j);
  std::vector<GradientGroup> groups;
  std::size_t first = 0;
  for (auto it = bounds.rbegin(); it != bounds.rend(); ++it) {
    groups.push_back(make_group(model, tensors, order, first, *it, bytes_per_element));
    first = *it;
  }
  return groups;
}

std::span<const StrategyInfo> strategies() {
  static constexpr std::array<StrategyInfo, 15> kStrategies{{
      {"bsp", "one allreduce of all gradients after the backward pass", &plan_bsp},
      {"ddp", "PyTorch DDP buckets: reverse order, first_bucket then bucket_cap", &plan_ddp},
      {"fusion", "Horovod tensor fusion: ready tensors packed up to threshold every cycle_time", &plan_fusion},
      {"gtopk", "global top-k sparsification: log2 p rounds of tree merging, then a broadcast (Shi et al., ICDCS 2019)",
       &plan_gtopk},
      {"lags", "layer-wise top-k sparsification pipelined with backward (Shi et al., ECAI 2020)", &plan_lags},
      {"mg-wfbp", "MG-WFBP optimal merging of consecutive gradients (Shi et al., INFOCOM 2019)", &plan_mgwfbp},
      {"omgs", "optimal merging of layers for top-k sparsification (Shi et al., INFOCOM 2020)", &plan_omgs},
      {"powersgd",
       "PowerSGD low-rank compression per DDP bucket, PyTorch's powerSGD_hook (Vogels et al., NeurIPS 2019)",
       &plan_powersgd},
      {"ps-async", "parameter server, asynchronous: each worker pushes and pulls on its own (Li et al., OSDI 2014)",
       &plan_ps},
      {"ps-sync", "parameter server, synchronous: per-tensor push and pull overlapped with backward and forward",
       &plan_ps},
      {"qsgd", "QSGD stochastic quantisation to strategy.levels levels per DDP bucket, allgathered", &plan_qsgd},
      {"signsgd", "signSGD: 1-bit signs per DDP bucket, allgathered, majority vote (Bernstein et al., ICLR 2019)",
       &plan_signsgd},
      {"terngrad", "TernGrad: ternary gradients with a per-tensor scaler per DDP bucket, allgathered", &plan_terngrad},
      {"topk", "local top-k sparsification of the whole gradient, allgather of (value, index) pairs", &plan_topk},
      {"wfbp", "wait-free backpropagation: one allreduce per tensor as soon as it is ready", &plan_wfbp},
  }};
  return kStrategies;
}

const StrategyInfo* find_strategy(std::string_view name) {
  for (const auto& s : strategies())
    if (s.name == name)
      return &s;
  return nullptr;
}

double communication_finish_time(const std::vector<GradientGroup>& groups, const std::vector<double>& backward_finish,
                                 const CommCost& allreduce_time) {
  double free_at = 0;
  for (const auto& g : groups) {
    const double ready = backward_finish[static_cast<std::size_t>(g.ready_layer)] + g.launch_delay_s;
    free_at = std::max(free_at, ready) + allreduce_time(g.bytes);
  }
  return free_at;
}

IterationGraph build_iteration(const Model& model, const WorkerCosts& costs, const std::vector<GradientGroup>& groups,
                               bool communicate) {
  const std::size_t layers = model.layers.size();
  if (layers == 0)
    throw std::logic_error("build_iteration: the model has no layers");
  if (costs.fwd_s.size() != layers || costs.bwd_s.size() != layers)
    throw std::logic_error("build_iteration: costs do not match the model's layers");

  IterationGraph g;
  const auto load =
      g.add({.kind = TaskKind::data_load, .resource = Resource::host_cpu, .duration_s = costs.data_load_s});
  const auto h2d = g.add({.kind = TaskKind::h2d, .resource = Resource::gpu_compute, .duration_s = costs.h2d_s});
  // With prefetching, this iteration's batch was loaded during the previous one: the loader runs beside the
  // iteration and bounds it from below; without, the copy waits for the load.
  if (!costs.prefetch)
    g.depend(load, h2d);

  // Forward in model order on the GPU stream; the model's order is topological (checked when it is loaded).
  std::vector<IterationGraph::Id> fwd(layers), bwd(layers);
  for (std::size_t l = 0; l < layers; ++l) {
    fwd[l] = g.add({.kind = TaskKind::forward,
                    .resource = Resource::gpu_compute,
                    .layer = static_cast<int>(l),
                    .duration_s = costs.fwd_s[l]});
    g.depend(l == 0 ? h2d : fwd[l - 1], fwd[l]);
  }
  // Backward in reverse order, one layer after the other (a valid topological order of autograd's graph).
  for (std::size_t l = layers; l-- > 0;) {
    bwd[l] = g.add({.kind = TaskKind::backward,
                    .resource = Resource::gpu_compute,
                    .layer = static_cast<int>(l),
                    .duration_s = costs.bwd_s[l]});
    g.depend(l + 1 == layers ? fwd[layers - 1] : bwd[l + 1], bwd[l]);
  }
  const auto update =
      g.add({.kind = TaskKind::update, .resource = Resource::gpu_compute, .duration_s = costs.update_s});
  g.depend(bwd[0], update);

  if (!communicate)
    return g;
  IterationGraph::Id previous = 0; // the previous group's first collective
  bool have_previous = false;
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const auto& group = groups[i];
    IterationGraph::Id last = bwd[static_cast<std::size_t>(group.ready_layer)];
    if (group.launch_delay_s > 0) {
      const auto wait = g.add({.kind = TaskKind::delay,
                               .resource = Resource::none,
                               .group = static_cast<int>(i),
                               .duration_s = group.launch_delay_s});
      g.depend(last, wait);
      last = wait;
    }
    std::optional<IterationGraph::Id> first_comm;
    bool last_is_comm = false;
    for (const auto& stage : group.effective_stages()) {
      if (stage.kernel_s > 0) {
        const auto kernel = g.add({.kind = TaskKind::compression,
                                   .resource = group.kernel_resource,
                                   .group = static_cast<int>(i),
                                   .duration_s = stage.kernel_s});
        g.depend(last, kernel);
        last = kernel;
        last_is_comm = false;
      }
      if (stage.collective != Collective::none) {
        const auto comm = g.add({.kind = TaskKind::communication,
                                 .resource = Resource::comm,
                                 .group = static_cast<int>(i),
                                 .collective = stage.collective,
                                 .bytes = stage.bytes});
        g.depend(last, comm);
        if (!first_comm)
          first_comm = comm;
        last = comm;
        last_is_comm = true;
      }
    }
    // The end of the chain: a kernel, or a collective other than the one the launch order chains to the update.
    if (!last_is_comm || last != *first_comm)
      g.depend(last, update);
    if (first_comm) {
      if (have_previous)
        g.depend(previous, *first_comm); // groups are launched in plan order
      previous = *first_comm;
      have_previous = true;
    }
  }
  if (have_previous)
    g.depend(previous, update);
  return g;
}

} // namespace ddlsim::dag
