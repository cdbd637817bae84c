// Tensor parallelism's parts of a pipeline plan (sim/plan/tensor_parallel.hpp).
#include "sim/plan/tensor_parallel.hpp"

#include "core/units.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

namespace ddlsim::sim {

namespace {

// The bytes of every tensor-group collective: b s h elements in the training format.
double tensor_collective_bytes(const Scenario& s) {
  const auto& tf = *s.model.transformer;
  return static_cast<double>(s.batch_per_gpu) * tf.sequence * tf.hidden * dtype_bytes(s.gradient_dtype);
}

} // namespace

int tensor_split(const dag::Layer& layer, int tensor) {
  if (layer.kind == "layernorm" || layer.kind == "rmsnorm")
    return 1;
  return layer.tensor_shards > 0 ? std::min(tensor, layer.tensor_shards) : tensor;
}

bool is_attention_core(const dag::Layer& layer) {
  return layer.kind == "attention" || layer.kind == "flash_attention";
}

// A block's first linear layer opens a column-parallel half, the first linear after attention's core closes it (a
// row-parallel layer), and the block's last linear closes the MLP.

std::vector<TensorRole> tensor_roles(const dag::Model& model) {
  std::vector<TensorRole> roles(model.layers.size(), TensorRole::none);
  std::size_t l = 0;
  while (l < model.layers.size()) {
    const int block = model.layers[l].block;
    std::size_t end = l + 1;
    while (end < model.layers.size() && model.layers[end].block == block)
      ++end;
    if (block >= 0) {
      std::optional<std::size_t> last_linear;
      bool open = false; // a column-parallel half has begun and its row-parallel layer not yet come
      for (std::size_t i = l; i < end; ++i) {
        if (model.layers[i].kind != "linear")
          continue;
        last_linear = i;
        if (!open) {
          roles[i] = TensorRole::column_entry;
          open = true;
        } else if (i > l && is_attention_core(model.layers[i - 1])) {
          roles[i] = TensorRole::row;
          open = false;
        }
      }
      if (last_linear && roles[*last_linear] == TensorRole::none)
        roles[*last_linear] = TensorRole::row;
    }
    l = end;
  }
  return roles;
}

// What one GPU of a tensor group computes: every layer's share (tensor_split), normalisations on the whole sequence
// unless sequence parallelism splits them too.
dag::WorkerCosts tensor_rank_costs(const Scenario& s, const dag::WorkerCosts& costs) {
  const auto& par = s.parallelism;
  auto out = costs;
  if (par.tensor == 1)
    return out;
  for (std::size_t l = 0; l < s.model.layers.size(); ++l) {
    const auto& layer = s.model.layers[l];
    const bool norm = layer.kind == "layernorm" || layer.kind == "rmsnorm";
    const int split = norm && par.sequence_parallel ? par.tensor : tensor_split(layer, par.tensor);
    out.fwd_s[l] /= split;
    out.bwd_s[l] /= split;
  }
  return out;
}

// A tensor rank's share of a layer's parameters: a tensor of n elements split over k = tensor_split ranks keeps
// ceil(n / k) (its shape's last dimension divided where it divides); normalisations' weights are repeated.
void shard_parameters(dag::Layer& layer, int tensor) {
  const int split = tensor_split(layer, tensor);
  if (split == 1)
    return;
  for (auto& p : layer.params) {
    p.numel = (p.numel + split - 1) / split;
    if (!p.shape.empty() && p.shape.back() % split == 0)
      p.shape.back() /= split;
    else
      p.shape = {p.numel};
  }
}

std::vector<dag::PassPart> forward_parts(const Scenario& s, const dag::WorkerCosts& costs,
                                         const std::vector<TensorRole>& roles, int first, int end,
                                         const std::vector<int>& gates) {
  const bool sp = s.parallelism.sequence_parallel;
  const double bytes = roles.empty() ? 0.0 : tensor_collective_bytes(s);
  std::vector<dag::PassPart> parts;
  dag::PassPart part;
  const auto close = [&](dag::Collective c) {
    part.collective = c;
    part.bytes = c == dag::Collective::none ? 0.0 : bytes;
    parts.push_back(part);
    part = {};
  };
  for (int l = first; l < end; ++l) {
    const auto i = static_cast<std::size_t>(l);
    const auto role = roles.empty() ? TensorRole::none : roles[i];
    if (sp && role == TensorRole::column_entry)
      close(dag::Collective::allgather);
    if (!gates.empty() && gates[i] >= 0) {
      if (part.compute_s > 0 || part.gather >= 0)
        close(dag::Collective::none);
      part.gather = gates[i];
    }
    part.compute_s += costs.fwd_s[i];
    if (role == TensorRole::row)
      close(sp ? dag::Collective::reduce_scatter : dag::Collective::allreduce);
  }
  parts.push_back(part);
  return parts;
}

StageParts tensor_parts(const Scenario& s, const dag::WorkerCosts& costs, const std::vector<TensorRole>& roles,
                        int first, int end) {
  const bool sp = s.parallelism.sequence_parallel;
  const double bytes = tensor_collective_bytes(s);
  StageParts out{.forward = forward_parts(s, costs, roles, first, end), .backward = {}};
  dag::PassPart part;
  const auto close = [&](dag::Collective c) {
    part.collective = c;
    part.bytes = bytes;
    out.backward.push_back(part);
    part = {};
  };
  for (int l = end - 1; l >= first; --l) {
    const auto role = roles[static_cast<std::size_t>(l)];
    if (sp && role == TensorRole::row)
      close(dag::Collective::allgather);
    part.compute_s += costs.bwd_s[static_cast<std::size_t>(l)];
    if (role == TensorRole::column_entry)
      close(sp ? dag::Collective::reduce_scatter : dag::Collective::allreduce);
  }
  out.backward.push_back(part);
  return out;
}

// What every rank repeats or replicates: the norms (unless sequence parallelism splits their work), and the
// key/value projections when t exceeds their heads.
std::string tensor_exceptions(const Scenario& s) {
  const auto& tf = *s.model.transformer;
  const int t = s.parallelism.tensor, groups = tf.query_groups();
  std::string out;
  if (!s.parallelism.sequence_parallel)
    out = fmt::format(" but {} (repeated on every rank)", tf.norm == dag::Norm::rmsnorm ? "RMSNorm" : "LayerNorm");
  if (t > groups)
    out += fmt::format("{} the key/value projections, 1/{} each (each of the {} key/value heads on {} ranks)",
                       out.empty() ? " but" : " and", groups, groups, t / groups);
  return out;
}

std::string tensor_parallel_note(const Scenario& s) {
  const auto& par = s.parallelism;
  return fmt::format(
      "tensor parallelism: {} GPUs per stage, each computing 1/{} of every layer{}; per transformer block and "
      "micro-batch {} of b s h = {} on the compute stream over the tensor group (recomputation repeats the "
      "forward's); the DAG holds tensor rank 0 of each stage, its peers run the same tasks",
      par.tensor, par.tensor, tensor_exceptions(s),
      par.sequence_parallel ? "2 allgathers and 2 reduce-scatters in forward and in backward (sequence parallelism)"
                            : "2 allreduces in forward and 2 in backward",
      format_bytes(static_cast<double>(s.batch_per_gpu) * s.model.transformer->sequence * s.model.transformer->hidden *
                   dtype_bytes(s.gradient_dtype)));
}

} // namespace ddlsim::sim
