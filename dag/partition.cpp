// Pipeline stage partitioning (dag/partition.hpp). `balanced` and `pipedream` share one exact dynamic programme over
// layer prefixes. It is not optimal_consecutive_groups (dag/strategy.hpp): that one chains finish times and lets the
// number of groups float, whereas a pipeline split has a fixed number of stages and a min-max objective. Nor is it
// torchgpipe's balance_by_time (torchgpipe/balance/blockpartition.py), which runs Bárány and Grinberg's block-partition
// heuristic ("the result might not be optimal"); the programme here is exact.
#include "dag/partition.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

namespace ddlsim::dag {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

void check_stages(const char* who, int stages, std::size_t layers) {
  if (stages < 1 || static_cast<std::size_t>(stages) > layers) {
    throw std::invalid_argument(
        fmt::format("{}: {} stages for {} layers (need 1 <= stages <= layers)", who, stages, layers));
  }
}

void check_amounts(const char* who, const char* what, const std::vector<double>& values) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i]) || values[i] < 0) {
      throw std::invalid_argument(fmt::format("{}: {} {} is {} (need a finite value >= 0)", who, what, i, values[i]));
    }
  }
}

/// prefix[j] = cost of layers [0, j). A stage [i, j) costs prefix[j] - prefix[i] everywhere below, so that the
/// programme, its reconstruction and a stage's reported cost compare the same floating-point numbers; with costs
/// >= 0 that difference is non-decreasing in j and non-increasing in i (rounding is monotone), all the proofs need.
std::vector<double> prefix_sums(const std::vector<double>& cost) {
  std::vector<double> prefix(cost.size() + 1, 0.0);
  for (std::size_t i = 0; i < cost.size(); ++i) {
    prefix[i + 1] = prefix[i] + cost[i];
  }
  return prefix;
}

/// The exact min-max split of layers into `stages` stages. A cut before layer i costs cut_s[i - 1]; an empty cut_s
/// means free cuts (balanced), which also allows a binary search in place of the full scan. best[t][j] is the
/// smallest bottleneck of layers [0, j) on t + 1 stages (infinite where no split exists):
///   best[t][j] = min over t <= i < j of max(best[t-1][i], cut_s[i-1], stage [i, j)).
std::vector<StageSpan> min_max_partition(const std::vector<double>& prefix, const std::vector<double>& cut_s,
                                         int stages) {
  const int n = static_cast<int>(prefix.size()) - 1;
  const auto stage_s = [&](int i, int j) {
    return prefix[static_cast<std::size_t>(j)] - prefix[static_cast<std::size_t>(i)];
  };
  const auto cut = [&](int i) { return cut_s.empty() ? 0.0 : cut_s[static_cast<std::size_t>(i - 1)]; };
  std::vector<std::vector<double>> best(static_cast<std::size_t>(stages), std::vector<double>(prefix.size(), kInf));
  for (int j = 1; j <= n; ++j) {
    best[0][static_cast<std::size_t>(j)] = stage_s(0, j);
  }
  for (int t = 1; t < stages; ++t) {
    const std::vector<double>& before = best[static_cast<std::size_t>(t) - 1];
    std::vector<double>& row = best[static_cast<std::size_t>(t)];
    // Stage t is [i, j) with t <= i < j; later stages still need a layer each.
    for (int j = t + 1; j <= n - (stages - 1 - t); ++j) {
      double value = kInf;
      if (cut_s.empty()) {
        // before[i] is non-decreasing in i and stage_s(i, j) non-increasing: the minimum of their maximum is at the
        // first i where before[i] >= stage_s(i, j), or just left of it.
        int lo = t;
        int hi = j;
        while (lo < hi) {
          const int mid = lo + (hi - lo) / 2;
          if (before[static_cast<std::size_t>(mid)] >= stage_s(mid, j)) {
            hi = mid;
          } else {
            lo = mid + 1;
          }
        }
        if (lo < j) {
          value = before[static_cast<std::size_t>(lo)];
        }
        if (lo > t) {
          value = std::min(value, stage_s(lo - 1, j));
        }
      } else {
        for (int i = t; i < j; ++i) {
          value = std::min(value, std::max({before[static_cast<std::size_t>(i)], cut(i), stage_s(i, j)}));
        }
      }
      row[static_cast<std::size_t>(j)] = value;
    }
  }
  // From the last stage back: each stage starts at the first layer that keeps the bottleneck optimal (with free cuts
  // the feasible starts form an interval, so every cut lands as early as in any optimal split).
  const double bottleneck = best[static_cast<std::size_t>(stages) - 1][static_cast<std::size_t>(n)];
  std::vector<StageSpan> spans(static_cast<std::size_t>(stages));
  int end = n;
  for (int t = stages - 1; t > 0; --t) {
    int first = t;
    while (first < end && !(stage_s(first, end) <= bottleneck && cut(first) <= bottleneck &&
                            best[static_cast<std::size_t>(t) - 1][static_cast<std::size_t>(first)] <= bottleneck)) {
      ++first;
    }
    assert(first < end && "min_max_partition: no start reaches the programme's optimum");
    spans[static_cast<std::size_t>(t)] = {first, end};
    end = first;
  }
  spans[0] = {0, end};
  return spans;
}

} // namespace

std::vector<int> unit_starts(const Model& model) {
  const bool blocks =
      std::any_of(model.layers.begin(), model.layers.end(), [](const Layer& l) { return l.block >= 0; });
  std::vector<int> starts{0};
  int seen = 0; // the last block met
  for (std::size_t l = 1; l < model.layers.size(); ++l) {
    const int b = model.layers[l].block;
    if (!blocks || (b > 0 && b != seen))
      starts.push_back(static_cast<int>(l));
    if (b >= 0)
      seen = b;
  }
  return starts;
}

std::vector<StageSpan> partition_uniform(const Model& model, int stages) {
  constexpr const char* who = "uniform partition";
  const int layers = static_cast<int>(model.layers.size());
  check_stages(who, stages, model.layers.size());
  // starts[k]: the first layer of block k.
  std::vector<int> starts;
  for (int i = 0; i < layers; ++i) {
    const Layer& layer = model.layers[static_cast<std::size_t>(i)];
    const int blocks = static_cast<int>(starts.size());
    if (layer.block == blocks) {
      starts.push_back(i);
    } else if (layer.block != -1 && layer.block != blocks - 1) {
      throw std::invalid_argument(fmt::format("{}: layer '{}' is in block {} after block {} (blocks must be "
                                              "numbered 0, 1, ... in forward order, each one contiguous)",
                                              who, layer.name, layer.block, blocks - 1));
    }
  }
  const bool by_block = !starts.empty();
  const int units = by_block ? static_cast<int>(starts.size()) : layers;
  if (stages > units) {
    throw std::invalid_argument(fmt::format("{}: {} stages for {} blocks of {} (need at most one stage per block)", who,
                                            stages, units, model.name));
  }
  const int q = units / stages;
  const int r = units % stages;
  // The first unit of stage s, and the layer where that unit begins (stage 0 also takes the layers before block 0).
  const auto first_unit = [&](int s) { return s * q + std::min(s, r); };
  const auto first_layer = [&](int s) {
    if (s == 0) {
      return 0;
    }
    if (s == stages) {
      return layers;
    }
    return by_block ? starts[static_cast<std::size_t>(first_unit(s))] : first_unit(s);
  };
  std::vector<StageSpan> spans;
  spans.reserve(static_cast<std::size_t>(stages));
  for (int s = 0; s < stages; ++s) {
    spans.push_back({first_layer(s), first_layer(s + 1)});
  }
  return spans;
}

std::vector<StageSpan> partition_balanced(const std::vector<double>& layer_cost_s, int stages) {
  constexpr const char* who = "balanced partition";
  check_stages(who, stages, layer_cost_s.size());
  check_amounts(who, "the cost of layer", layer_cost_s);
  return min_max_partition(prefix_sums(layer_cost_s), {}, stages);
}

std::vector<StageSpan> partition_pipedream(const std::vector<double>& layer_cost_s,
                                           const std::vector<double>& cut_bytes, double bandwidth_bytes_per_s,
                                           int stages) {
  constexpr const char* who = "pipedream partition";
  check_stages(who, stages, layer_cost_s.size());
  check_amounts(who, "the cost of layer", layer_cost_s);
  if (cut_bytes.size() + 1 != layer_cost_s.size()) {
    throw std::invalid_argument(fmt::format("{}: {} cut sizes for {} layers (need one per cut between consecutive "
                                            "layers, {})",
                                            who, cut_bytes.size(), layer_cost_s.size(), layer_cost_s.size() - 1));
  }
  check_amounts(who, "the bytes crossing cut", cut_bytes);
  if (std::isnan(bandwidth_bytes_per_s) || bandwidth_bytes_per_s <= 0) {
    throw std::invalid_argument(fmt::format("{}: bandwidth {} B/s (need > 0)", who, bandwidth_bytes_per_s));
  }
  // Activations forward and their gradients backward, each cut_bytes (PipeDream's 2 * C_i).
  std::vector<double> cut_s(cut_bytes.size());
  for (std::size_t c = 0; c < cut_bytes.size(); ++c) {
    cut_s[c] = 2.0 * cut_bytes[c] / bandwidth_bytes_per_s;
  }
  return min_max_partition(prefix_sums(layer_cost_s), cut_s, stages);
}

std::vector<StageSpan> partition_explicit(const std::vector<int>& layers_per_stage, int layers) {
  constexpr const char* who = "explicit partition";
  if (layers_per_stage.empty()) {
    throw std::invalid_argument(fmt::format("{}: no stages (need one layer count per stage)", who));
  }
  std::vector<StageSpan> spans;
  spans.reserve(layers_per_stage.size());
  std::int64_t held = 0;
  for (std::size_t s = 0; s < layers_per_stage.size(); ++s) {
    const int count = layers_per_stage[s];
    if (count < 1) {
      throw std::invalid_argument(fmt::format("{}: stage {} has {} layers (need at least 1)", who, s, count));
    }
    const std::int64_t first = held;
    held += count;
    if (held <= layers) {
      spans.push_back({static_cast<int>(first), static_cast<int>(held)});
    }
  }
  if (held != layers) {
    throw std::invalid_argument(
        fmt::format("{}: the {} stages hold {} layers, the model has {}", who, layers_per_stage.size(), held, layers));
  }
  return spans;
}

std::vector<double> cut_activation_bytes(const Model& model) {
  const std::size_t n = model.layers.size();
  if (n < 2) {
    return {};
  }
  // last_reader[i]: the last layer that reads layer i's output (i itself when none does).
  std::vector<std::size_t> last_reader(n);
  for (std::size_t i = 0; i < n; ++i) {
    last_reader[i] = i;
  }
  for (std::size_t j = 0; j < n; ++j) {
    const Layer& layer = model.layers[j];
    if (layer.inputs.empty() && j > 0) {
      last_reader[j - 1] = j;
    }
    for (const int r : layer.inputs) {
      if (r < 0 || static_cast<std::size_t>(r) >= j) {
        throw std::invalid_argument(
            fmt::format("cut activation bytes: layer '{}' reads layer {}, which does not precede it", layer.name, r));
      }
      last_reader[static_cast<std::size_t>(r)] = std::max(last_reader[static_cast<std::size_t>(r)], j);
    }
  }
  // Cut c lies between layers c and c + 1: layer i's output crosses cuts i .. last_reader[i] - 1.
  std::vector<double> bytes(n - 1, 0.0);
  for (std::size_t i = 0; i + 1 < n; ++i) {
    for (std::size_t c = i; c < last_reader[i]; ++c) {
      bytes[c] += model.layers[i].activation_bytes;
    }
  }
  return bytes;
}

} // namespace ddlsim::dag
