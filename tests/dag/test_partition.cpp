// Tests of pipeline stage partitioning (dag/partition.hpp): uniform counts and their remainder rule (DeepSpeed's
// partition_uniform), Megatron's placement of embeddings and LM head on a zoo transformer, and the exact min-max and
// PipeDream (SOSP 2019, §3.1) programmes against brute force over every contiguous split of small random models.
#include "dag/partition.hpp"
#include "dag/zoo/zoo.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

using Catch::Matchers::Contains;
using Catch::Matchers::WithinRel;
using ddlsim::dag::build_zoo_model;
using ddlsim::dag::cut_activation_bytes;
using ddlsim::dag::Layer;
using ddlsim::dag::Model;
using ddlsim::dag::partition_balanced;
using ddlsim::dag::partition_explicit;
using ddlsim::dag::partition_pipedream;
using ddlsim::dag::partition_uniform;
using ddlsim::dag::StageSpan;

namespace Catch {
template <> struct StringMaker<StageSpan> {
  static std::string convert(const StageSpan& s) {
    std::ostringstream out;
    out << "[" << s.first << ", " << s.end << ")";
    return out.str();
  }
};
} // namespace Catch

namespace {

using Spans = std::vector<StageSpan>;

Model plain_model(int layers) {
  Model model;
  model.name = "plain";
  for (int i = 0; i < layers; ++i) {
    Layer layer;
    layer.name = "l" + std::to_string(i);
    model.layers.push_back(layer);
  }
  return model;
}

std::vector<int> layer_counts(const Spans& spans) {
  std::vector<int> counts;
  for (const StageSpan& s : spans) {
    counts.push_back(s.layers());
  }
  return counts;
}

/// Calls visit with every split of `layers` layers into `stages` non-empty contiguous stages.
void for_each_split(int layers, int stages, const std::function<void(const Spans&)>& visit) {
  Spans spans;
  const std::function<void(int)> extend = [&](int first) {
    const int left = stages - static_cast<int>(spans.size());
    if (left == 1) {
      spans.push_back({first, layers});
      visit(spans);
      spans.pop_back();
      return;
    }
    for (int end = first + 1; end <= layers - (left - 1); ++end) {
      spans.push_back({first, end});
      extend(end);
      spans.pop_back();
    }
  };
  extend(0);
}

/// The slowest of the stages (costs summed directly, layer by layer) and of the cuts between them (cut_s[c]: the cut
/// between layers c and c + 1; empty: free cuts).
double bottleneck(const Spans& spans, const std::vector<double>& cost, const std::vector<double>& cut_s = {}) {
  double worst = 0;
  for (const StageSpan& s : spans) {
    double stage = 0;
    for (int i = s.first; i < s.end; ++i) {
      stage += cost[static_cast<std::size_t>(i)];
    }
    worst = std::max(worst, stage);
    if (s.first > 0 && !cut_s.empty()) {
      worst = std::max(worst, cut_s[static_cast<std::size_t>(s.first) - 1]);
    }
  }
  return worst;
}

/// The documented tie rule: the last cut as early as possible, then the one before it, and so on.
bool earlier_late_cuts(const Spans& a, const Spans& b) {
  for (std::size_t t = a.size(); t-- > 1;) {
    if (a[t].first != b[t].first) {
      return a[t].first < b[t].first;
    }
  }
  return false;
}

/// Brute force: every optimal split (exact objective values, so integer costs make ties exact) and the one the tie
/// rule picks.
struct Optimum {
  double value = std::numeric_limits<double>::infinity();
  std::vector<Spans> all;
  Spans chosen;
};

Optimum brute_force(const std::vector<double>& cost, const std::vector<double>& cut_s, int stages) {
  Optimum best;
  for_each_split(static_cast<int>(cost.size()), stages, [&](const Spans& spans) {
    const double value = bottleneck(spans, cost, cut_s);
    if (value < best.value) {
      best = {value, {spans}, spans};
    } else if (value == best.value) {
      best.all.push_back(spans);
      if (earlier_late_cuts(spans, best.chosen)) {
        best.chosen = spans;
      }
    }
  });
  return best;
}

} // namespace

TEST_CASE("dag::partition_uniform gives equal layer counts, the first stages one more for the remainder",
          "[dag][partition]") {
  // DeepSpeed's partition_uniform: q = L / p layers each, the first L mod p stages one more.
  const auto [layers, stages, expected] = GENERATE(table<int, int, std::vector<int>>({
      {8, 4, {2, 2, 2, 2}},
      {10, 4, {3, 3, 2, 2}},
      {11, 3, {4, 4, 3}},
      {7, 7, {1, 1, 1, 1, 1, 1, 1}},
      {5, 1, {5}},
  }));
  CAPTURE(layers, stages);
  const Spans spans = partition_uniform(plain_model(layers), stages);
  CHECK(layer_counts(spans) == expected);
  REQUIRE(spans.size() == expected.size());
  CHECK(spans.front().first == 0);
  CHECK(spans.back().end == layers);
  for (std::size_t s = 1; s < spans.size(); ++s) {
    CHECK(spans[s].first == spans[s - 1].end);
  }
}

TEST_CASE("dag::build_zoo_model tags a transformer's layers with their block", "[dag][partition]") {
  const auto [name, prefix] = GENERATE(table<std::string, std::string>({
      {"gpt2", "transformer.h."},
      {"bert-base", "bert.encoder.layer."},
  }));
  const auto model = build_zoo_model(name);
  REQUIRE(model.has_value());
  for (const Layer& layer : model->layers) {
    CAPTURE(name, layer.name);
    if (layer.name.starts_with(prefix)) {
      const std::string rest = layer.name.substr(prefix.size());
      CHECK(layer.block == std::stoi(rest.substr(0, rest.find('.'))));
    } else {
      CHECK(layer.block == -1);
    }
  }
}

TEST_CASE("dag::partition_uniform puts gpt2's embeddings on the first stage, its head on the last, equal blocks",
          "[dag][partition]") {
  const auto model = build_zoo_model("gpt2");
  REQUIRE(model.has_value());
  const auto& layers = model->layers;
  const auto block_at = [&](int i) { return layers[static_cast<std::size_t>(i)].block; };
  const auto name_at = [&](int i) { return layers[static_cast<std::size_t>(i)].name; };

  // 12 blocks: 4 stages of 3; 5 stages of 3, 3, 2, 2, 2 (the first 12 mod 5 = 2 stages take the remainder).
  const auto [stages, blocks] = GENERATE(table<int, std::vector<int>>({
      {1, {12}},
      {4, {3, 3, 3, 3}},
      {5, {3, 3, 2, 2, 2}},
      {12, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
  }));
  CAPTURE(stages);
  const Spans spans = partition_uniform(*model, stages);
  REQUIRE(spans.size() == static_cast<std::size_t>(stages));
  CHECK(spans.front().first == 0);
  CHECK(spans.back().end == static_cast<int>(layers.size()));
  // Stage 0 opens with the embeddings (wte, wpe), the last stage closes with ln_f and lm_head.
  CHECK(name_at(0) == "transformer.wte");
  CHECK(name_at(1) == "transformer.wpe");
  CHECK(name_at(2) == "transformer.h.0.ln_1");
  CHECK(name_at(spans.back().end - 2) == "transformer.ln_f");
  CHECK(name_at(spans.back().end - 1) == "lm_head");
  int block = 0;
  for (std::size_t s = 0; s < spans.size(); ++s) {
    CAPTURE(s);
    if (s > 0) {
      CHECK(spans[s].first == spans[s - 1].end);
      CHECK(name_at(spans[s].first) == "transformer.h." + std::to_string(block) + ".ln_1");
    }
    int seen = 0;
    for (int i = spans[s].first; i < spans[s].end; ++i) {
      if (block_at(i) >= 0 && (i == 0 || block_at(i - 1) != block_at(i))) {
        ++seen;
      }
    }
    CHECK(seen == blocks[s]);
    block += blocks[s];
  }
}

TEST_CASE("dag::partition_uniform splits bert-base at its encoder layers", "[dag][partition]") {
  const auto model = build_zoo_model("bert-base");
  REQUIRE(model.has_value());
  const Spans spans = partition_uniform(*model, 4);
  REQUIRE(spans.size() == 4);
  for (std::size_t s = 1; s < 4; ++s) {
    CAPTURE(s);
    CHECK(model->layers[static_cast<std::size_t>(spans[s].first)].name ==
          "bert.encoder.layer." + std::to_string(3 * s) + ".attention.self.query");
  }
  CHECK(model->layers.front().block == -1);
  CHECK(model->layers.back().block == -1);
}

TEST_CASE("dag::partition_uniform keeps a layer between two blocks with the block before it", "[dag][partition]") {
  // Blocks: -1 | 0 0 | -1 | 1 1 | -1: stage 0 takes the leading layer, block 0 and the layer after it.
  Model model = plain_model(7);
  const std::vector<int> blocks = {-1, 0, 0, -1, 1, 1, -1};
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    model.layers[i].block = blocks[i];
  }
  CHECK(partition_uniform(model, 2) == Spans{{0, 4}, {4, 7}});
  CHECK(partition_uniform(model, 1) == Spans{{0, 7}});
}

TEST_CASE("dag::partition_uniform rejects impossible stage counts and misnumbered blocks", "[dag][partition]") {
  REQUIRE_THROWS_WITH(partition_uniform(plain_model(3), 0), Contains("0 stages for 3 layers"));
  REQUIRE_THROWS_WITH(partition_uniform(plain_model(3), 4), Contains("4 stages for 3 layers"));
  const auto gpt2 = build_zoo_model("gpt2");
  REQUIRE(gpt2.has_value());
  REQUIRE_THROWS_WITH(partition_uniform(*gpt2, 13), Contains("13 stages for 12 blocks of gpt2"));
  Model skipped = plain_model(4);
  skipped.layers[1].block = 0;
  skipped.layers[2].block = 2;
  REQUIRE_THROWS_WITH(partition_uniform(skipped, 2), Contains("layer 'l2' is in block 2 after block 0"));
}

TEST_CASE("dag::partition_balanced is the brute-force min-max split and never worse than uniform", "[dag][partition]") {
  std::mt19937 rng(20260411);
  std::uniform_int_distribution<int> layers_of(1, 10);
  std::uniform_int_distribution<int> small_cost(0, 9); // integer costs: sums are exact, ties are real
  std::uniform_real_distribution<double> real_cost(0.0, 1.0);
  for (int trial = 0; trial < 200; ++trial) {
    const int layers = layers_of(rng);
    const int stages = std::uniform_int_distribution<int>(1, std::min(4, layers))(rng);
    const bool integer = trial % 2 == 0;
    std::vector<double> cost;
    for (int i = 0; i < layers; ++i) {
      cost.push_back(integer ? small_cost(rng) : real_cost(rng));
    }
    CAPTURE(trial, cost, stages);
    const Spans spans = partition_balanced(cost, stages);
    const Optimum best = brute_force(cost, {}, stages);
    CHECK_THAT(bottleneck(spans, cost), WithinRel(best.value, 1e-12));
    if (integer) {
      // Ties: every cut as early as in any optimal split (so also the brute-force pick of the tie rule).
      CHECK(spans == best.chosen);
      for (const Spans& other : best.all) {
        for (std::size_t t = 1; t < spans.size(); ++t) {
          CHECK(spans[t].first <= other[t].first);
        }
      }
    }
    // Issue #11's acceptance: never a larger bottleneck stage than uniform.
    CHECK(bottleneck(spans, cost) <= bottleneck(partition_uniform(plain_model(layers), stages), cost));
  }
}

TEST_CASE("dag::partition_balanced beats uniform on gpt2's per-layer FLOPs", "[dag][partition]") {
  const auto model = build_zoo_model("gpt2");
  REQUIRE(model.has_value());
  std::vector<double> cost;
  for (const Layer& layer : model->layers) {
    cost.push_back((layer.fwd_flops + layer.bwd_flops) * 1e-12); // seconds at 1 PFLOP/s (any rate: same split)
  }
  for (const int stages : {2, 4, 6, 12}) {
    CAPTURE(stages);
    const double balanced = bottleneck(partition_balanced(cost, stages), cost);
    const double uniform = bottleneck(partition_uniform(*model, stages), cost);
    CHECK(balanced <= uniform);
  }
}

TEST_CASE("dag::partition_balanced tie-breaking and errors", "[dag][partition]") {
  SECTION("equal costs and zero-cost layers go to the later stages") {
    // [1, 1, 1, 1] on 3 stages: bottleneck 2; the earliest cuts give [1] [1] [1, 1].
    CHECK(partition_balanced({1, 1, 1, 1}, 3) == Spans{{0, 1}, {1, 2}, {2, 4}});
    // A zero-cost layer joins the stage after the cut: [2] [0, 2].
    CHECK(partition_balanced({2, 0, 2}, 2) == Spans{{0, 1}, {1, 3}});
    CHECK(partition_balanced({0, 0, 0}, 3) == Spans{{0, 1}, {1, 2}, {2, 3}});
    CHECK(partition_balanced({5}, 1) == Spans{{0, 1}});
  }
  SECTION("errors") {
    REQUIRE_THROWS_WITH(partition_balanced({1, 2}, 0), Contains("balanced partition: 0 stages for 2 layers"));
    REQUIRE_THROWS_WITH(partition_balanced({1, 2}, 3), Contains("3 stages for 2 layers"));
    REQUIRE_THROWS_WITH(partition_balanced({}, 1), Contains("1 stages for 0 layers"));
    REQUIRE_THROWS_WITH(partition_balanced({1, -2}, 1), Contains("the cost of layer 1 is -2"));
    REQUIRE_THROWS_WITH(partition_balanced({std::nan(""), 1}, 1), Contains("the cost of layer 0 is nan"));
  }
}

TEST_CASE("dag::partition_pipedream is the brute-force optimum of PipeDream's objective", "[dag][partition]") {
  std::mt19937 rng(20191027); // SOSP 2019
  std::uniform_int_distribution<int> layers_of(1, 10);
  std::uniform_int_distribution<int> small(0, 9);
  std::uniform_real_distribution<double> real(0.0, 1.0);
  for (int trial = 0; trial < 200; ++trial) {
    const int layers = layers_of(rng);
    const int stages = std::uniform_int_distribution<int>(1, std::min(4, layers))(rng);
    const bool integer = trial % 2 == 0;
    // Integer costs and bytes with a power-of-two bandwidth keep 2 * bytes / bandwidth exact.
    const double bandwidth = integer ? std::ldexp(1.0, std::uniform_int_distribution<int>(0, 3)(rng)) : 2.5;
    std::vector<double> cost;
    std::vector<double> cut_bytes;
    for (int i = 0; i < layers; ++i) {
      cost.push_back(integer ? small(rng) : real(rng));
      if (i + 1 < layers) {
        cut_bytes.push_back(integer ? small(rng) : real(rng));
      }
    }
    std::vector<double> cut_s;
    for (const double b : cut_bytes) {
      cut_s.push_back(2.0 * b / bandwidth);
    }
    CAPTURE(trial, cost, cut_bytes, bandwidth, stages);
    const Spans spans = partition_pipedream(cost, cut_bytes, bandwidth, stages);
    const Optimum best = brute_force(cost, cut_s, stages);
    CHECK_THAT(bottleneck(spans, cost, cut_s), WithinRel(best.value, 1e-12));
    if (integer) {
      CHECK(spans == best.chosen); // the last cut as early as possible, then the one before it, ...
    }
  }
}

TEST_CASE("dag::partition_pipedream avoids a costly cut and equals balanced at infinite bandwidth",
          "[dag][partition]") {
  SECTION("a cut whose transfer is the bottleneck moves") {
    // Costs [1, 1, 1, 1] on 2 stages: balanced cuts in the middle (2 | 2). Sending 200 B there at 100 B/s takes
    // 2 * 200 / 100 = 4 s, so PipeDream cuts after layer 0 (1 | 3 = 3 s) rather than after layer 2 (3 | 1, a tie
    // broken towards the earlier last cut).
    CHECK(partition_balanced({1, 1, 1, 1}, 2) == Spans{{0, 2}, {2, 4}});
    CHECK(partition_pipedream({1, 1, 1, 1}, {0, 200, 0}, 100, 2) == Spans{{0, 1}, {1, 4}});
  }
  SECTION("infinite bandwidth reduces to balanced") {
    std::mt19937 rng(7);
    std::uniform_real_distribution<double> real(0.0, 1.0);
    for (int trial = 0; trial < 100; ++trial) {
      const int layers = std::uniform_int_distribution<int>(1, 40)(rng);
      const int stages = std::uniform_int_distribution<int>(1, std::min(8, layers))(rng);
      std::vector<double> cost;
      std::vector<double> cut_bytes;
      for (int i = 0; i < layers; ++i) {
        cost.push_back(real(rng));
        if (i + 1 < layers) {
          cut_bytes.push_back(1e9 * real(rng));
        }
      }
      CAPTURE(trial, cost, stages);
      CHECK(partition_pipedream(cost, cut_bytes, std::numeric_limits<double>::infinity(), stages) ==
            partition_balanced(cost, stages));
    }
  }
  SECTION("errors") {
    REQUIRE_THROWS_WITH(partition_pipedream({1, 1}, {0}, 1, 3), Contains("pipedream partition: 3 stages for 2 layers"));
    REQUIRE_THROWS_WITH(partition_pipedream({1, 1, 1}, {0}, 1, 2), Contains("1 cut sizes for 3 layers"));
    REQUIRE_THROWS_WITH(partition_pipedream({1, 1}, {-1}, 1, 2), Contains("the bytes crossing cut 0 is -1"));
    REQUIRE_THROWS_WITH(partition_pipedream({1, 1}, {0}, 0, 2), Contains("bandwidth 0 B/s (need > 0)"));
    REQUIRE_THROWS_WITH(partition_pipedream({1, 1}, {0}, std::nan(""), 2), Contains("bandwidth nan B/s"));
  }
}

TEST_CASE("dag::partition_explicit checks the layer counts", "[dag][partition]") {
  CHECK(partition_explicit({2, 3, 1}, 6) == Spans{{0, 2}, {2, 5}, {5, 6}});
  CHECK(partition_explicit({4}, 4) == Spans{{0, 4}});
  REQUIRE_THROWS_WITH(partition_explicit({}, 6), Contains("explicit partition: no stages"));
  REQUIRE_THROWS_WITH(partition_explicit({2, 0, 4}, 6), Contains("stage 1 has 0 layers (need at least 1)"));
  REQUIRE_THROWS_WITH(partition_explicit({2, -1, 5}, 6), Contains("stage 1 has -1 layers"));
  REQUIRE_THROWS_WITH(partition_explicit({2, 3}, 6), Contains("the 2 stages hold 5 layers, the model has 6"));
  REQUIRE_THROWS_WITH(partition_explicit({4, 4}, 6), Contains("the 2 stages hold 8 layers, the model has 6"));
}

TEST_CASE("dag::cut_activation_bytes counts every output that crosses a cut", "[dag][partition]") {
  Model model = plain_model(4);
  for (std::size_t i = 0; i < 4; ++i) {
    model.layers[i].activation_bytes = static_cast<double>(1 << i); // 1, 2, 4, 8
  }
  SECTION("a chain sends the last layer's output") {
    CHECK(cut_activation_bytes(model) == std::vector<double>{1, 2, 4});
  }
  SECTION("a skip connection from layer 0 to layer 3 crosses every cut") {
    model.layers[3].inputs = {0, 2};
    CHECK(cut_activation_bytes(model) == std::vector<double>{1, 1 + 2, 1 + 4});
  }
  SECTION("fewer than two layers have no cut; a forward read is an error") {
    CHECK(cut_activation_bytes(plain_model(1)).empty());
    model.layers[1].inputs = {2};
    REQUIRE_THROWS_WITH(cut_activation_bytes(model), Contains("layer 'l1' reads layer 2, which does not precede it"));
  }
}
