// dag strategies: PyTorch DDP's bucket rule, Horovod fusion cycles, MG-WFBP against brute force.
#include "dag/strategy.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <optional>
#include <random>

using namespace ddlsim::dag;
using Catch::Matchers::WithinRel;

namespace {

// One tensor per layer with the given element counts (registration order).
Model model_of(const std::vector<std::int64_t>& numels) {
  Model m;
  for (std::size_t l = 0; l < numels.size(); ++l)
    m.layers.push_back({.name = "l" + std::to_string(l),
                        .kind = "linear",
                        .params = {{"l" + std::to_string(l) + ".weight", {numels[l]}, numels[l]}},
                        .fwd_flops = 1,
                        .bwd_flops = 2,
                        .activation_bytes = 0,
                        .inputs = {}});
  return m;
}

std::vector<std::vector<int>> tensors_of(const std::vector<GradientGroup>& groups) {
  std::vector<std::vector<int>> out;
  for (const auto& g : groups)
    out.push_back(g.tensors);
  return out;
}

const CommCost kLinear = [](double bytes) { return 1e-3 + bytes * 1e-9; };

// The plan of the registered strategy `kind`.
std::vector<GradientGroup> plan(std::string_view kind, const StrategyInput& in) {
  const StrategyInfo* s = find_strategy(kind);
  REQUIRE(s != nullptr);
  return s->plan(in);
}

} // namespace

TEST_CASE("dag::ddp follows PyTorch's bucket rule", "[dag][ddp]") {
  // Reverse order 5,4,3,2,1,0; fp32. First limit 1 MiB: tensors 5 (0.5 MiB) + 4 (0.75 MiB) reach it and close
  // bucket 0. Then 25 MiB: 3 (10 MiB) + 2 (20 MiB) = 30 MiB >= 25 closes bucket 1; 1 + 0 remain as bucket 2.
  const std::int64_t mib_elems = 262144; // 1 MiB of fp32
  const auto model =
      model_of({mib_elems, mib_elems * 3, mib_elems * 20, mib_elems * 10, mib_elems * 3 / 4, mib_elems / 2});
  WorkerCosts costs;
  costs.bwd_s.assign(6, 1e-3);
  StrategyOptions options = BucketOptions{};
  auto& buckets = std::get<BucketOptions>(options);
  const StrategyInput in{model, costs, 4.0, kLinear, options};
  const auto groups = plan("ddp", in);
  CHECK(tensors_of(groups) == std::vector<std::vector<int>>{{5, 4}, {3, 2}, {1, 0}});
  CHECK(groups[0].ready_layer == 4);
  CHECK(groups[1].bytes == 30.0 * 1048576);
  SECTION("a bucket closes with the tensor that makes it reach the cap, however large") {
    buckets.first_bucket_bytes = 1.0;
    buckets.bucket_cap_bytes = 4.0 * 1048576; // 4 MiB
    const auto g2 = plan("ddp", in);
    CHECK(tensors_of(g2) == std::vector<std::vector<int>>{{5}, {4, 3}, {2}, {1, 0}});
  }
}

TEST_CASE("dag::fusion packs tensors ready in the same cycle up to the threshold", "[dag][fusion]") {
  const auto model = model_of({100, 100, 100, 100});
  WorkerCosts costs;
  costs.bwd_s = {1.0, 0.5, 0.25, 0.25}; // finish times: l3 0.25, l2 0.5, l1 1.0, l0 2.0
  StrategyOptions options = FusionOptions{};
  auto& fusion = std::get<FusionOptions>(options);
  fusion.cycle_time_s = 0.6; // ticks 0.6 (l3, l2), 1.2 (l1), 2.4 (l0)
  fusion.threshold_bytes = 1e9;
  const StrategyInput in{model, costs, 4.0, kLinear, options};
  auto groups = plan("fusion", in);
  REQUIRE(tensors_of(groups) == std::vector<std::vector<int>>{{3, 2}, {1}, {0}});
  CHECK_THAT(groups[0].launch_delay_s, WithinRel(0.1, 1e-12)); // ready at 0.5, launched at tick 0.6
  CHECK_THAT(groups[1].launch_delay_s, WithinRel(0.2, 1e-12));
  CHECK_THAT(groups[2].launch_delay_s, WithinRel(0.4, 1e-12));
  SECTION("threshold splits a cycle's tensors; threshold 0 disables fusion") {
    fusion.threshold_bytes = 400; // one tensor of 400 B per buffer
    CHECK(tensors_of(plan("fusion", in)) == std::vector<std::vector<int>>{{3}, {2}, {1}, {0}});
    fusion.threshold_bytes = 0;
    CHECK(plan("fusion", in).size() == 4);
  }
}

TEST_CASE("dag::wfbp and bsp are the two extremes", "[dag][wfbp][bsp]") {
  const auto model = model_of({10, 20, 30});
  WorkerCosts costs;
  costs.bwd_s = {1, 1, 1};
  StrategyOptions options;
  const StrategyInput in{model, costs, 2.0, kLinear, options};
  CHECK(tensors_of(plan("wfbp", in)) == std::vector<std::vector<int>>{{2}, {1}, {0}});
  const auto bsp = plan("bsp", in);
  CHECK(tensors_of(bsp) == std::vector<std::vector<int>>{{2, 1, 0}});
  CHECK(bsp[0].bytes == 120.0);
  CHECK(bsp[0].ready_layer == 0);
}

TEST_CASE("dag::MgWfbp equals the brute-force optimum over all contiguous partitions", "[dag][mgwfbp]") {
  std::mt19937_64 rng(20261121);
  std::uniform_int_distribution<int> count(1, 11);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int instance = 0; instance < 200; ++instance) {
    const int m = count(rng);
    std::vector<std::int64_t> numels;
    for (int i = 0; i < m; ++i)
      numels.push_back(1 + static_cast<std::int64_t>(unit(rng) * 4e6));
    const auto model = model_of(numels);
    WorkerCosts costs;
    for (int i = 0; i < m; ++i)
      costs.bwd_s.push_back(unit(rng) * 5e-3);
    const double alpha = unit(rng) * 5e-3, beta = unit(rng) * 2e-9; // up to 5 ms start-up, 0.5 GB/s
    const CommCost cost = [=](double bytes) { return alpha + beta * bytes; };
    StrategyOptions options;
    const StrategyInput in{model, costs, 4.0, cost, options};
    const auto finish = backward_finish_times(costs);
    const double dp = communication_finish_time(plan("mg-wfbp", in), finish, cost);

    // Every contiguous partition of the m tensors (in ready order) is a bit mask of cut points.
    const auto tensors = flatten_tensors(model);
    const auto order = gradient_ready_order(model);
    double best = std::numeric_limits<double>::infinity();
    for (std::uint32_t mask = 0; mask < (1u << (m - 1)); ++mask) {
      std::vector<GradientGroup> groups;
      std::size_t first = 0;
      for (int k = 1; k <= m; ++k) {
        if (k == m || (mask >> (k - 1) & 1u)) {
          groups.push_back(make_group(model, tensors, order, first, static_cast<std::size_t>(k), 4.0));
          first = static_cast<std::size_t>(k);
        }
      }
      best = std::min(best, communication_finish_time(groups, finish, cost));
    }
    CAPTURE(instance, m, alpha, beta);
    REQUIRE_THAT(dp, WithinRel(best, 1e-12));
    // And therefore never later than WFBP (all singletons) or BSP (one group).
    CHECK(dp <= communication_finish_time(plan("wfbp", in), finish, cost) * (1 + 1e-12));
    CHECK(dp <= communication_finish_time(plan("bsp", in), finish, cost) * (1 + 1e-12));
  }
}

TEST_CASE("dag::MgWfbp merges when the start-up cost dominates and not when it is free", "[dag][mgwfbp]") {
  const auto model = model_of({1000, 1000, 1000, 1000});
  WorkerCosts costs;
  costs.bwd_s = {1e-3, 1e-3, 1e-3, 1e-3};
  StrategyOptions options;
  SECTION("huge alpha: one group") {
    const CommCost cost = [](double bytes) { return 1.0 + bytes * 1e-12; };
    const StrategyInput in{model, costs, 4.0, cost, options};
    CHECK(plan("mg-wfbp", in).size() == 1);
  }
  SECTION("zero alpha, slow link: nothing to gain from waiting, so WFBP's singletons are optimal") {
    const CommCost cost = [](double bytes) { return bytes * 1e-6; }; // 4 ms per tensor > 1 ms backward
    const StrategyInput in{model, costs, 4.0, cost, options};
    const auto finish = backward_finish_times(costs);
    // Closed form: the first tensor is ready at 1 ms, then 4 tensors x 4 ms back to back = 17 ms.
    CHECK_THAT(communication_finish_time(plan("mg-wfbp", in), finish, cost), WithinRel(0.017, 1e-9));
  }
}

TEST_CASE("dag::the strategy registry lists every strategy once, sorted by name", "[dag][registry]") {
  const auto registered = registered_strategies();
  const auto sorted = strategies();
  REQUIRE(sorted.size() == registered.size());
  REQUIRE(sorted.size() >= 15);
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    const StrategyInfo& s = *sorted[i];
    CAPTURE(s.name);
    if (i > 0)
      CHECK(sorted[i - 1]->name < s.name); // sorted, no name twice
    CHECK(find_strategy(s.name) == &s);
    CHECK_FALSE(s.description.empty());
    CHECK_FALSE(family_name(s.family).empty());
    CHECK(s.plan != nullptr);
    CHECK((s.parse != nullptr) == !s.keys.empty()); // a strategy with keys parses them, one without has none
    CHECK_FALSE(s.owns("kind"));
  }
  CHECK(find_strategy("bogus") == nullptr);
  // Families and traits, not names, tell the engines what a strategy is.
  CHECK(find_strategy("ps-async")->family == StrategyFamily::parameter_server);
  CHECK(find_strategy("ps-async")->traits.asynchronous);
  CHECK_FALSE(find_strategy("ps-sync")->traits.asynchronous);
  CHECK(find_strategy("omgs")->owns("density"));
  CHECK_FALSE(find_strategy("ddp")->owns("density"));
}

TEST_CASE("dag::optimal_merge's linear pass finds the quadratic programme's finish (#15 speed cliff)",
          "[dag][mg-wfbp]") {
  // Random models and affine costs, compute-bound, communication-bound and in between, with ties (equal ready times,
  // equal sizes): the linear pass's plan finishes when the O(n^2) programme's does, to rounding.
  std::mt19937_64 rng(20261124);
  int checked = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const std::size_t n = 1 + rng() % 120;
    std::vector<std::int64_t> numels(n);
    for (auto& e : numels)
      e = trial % 3 == 0 ? 1000 : static_cast<std::int64_t>(1 + rng() % 2000000); // every third: equal sizes
    const auto model = model_of(numels);
    WorkerCosts costs;
    costs.bwd_s.resize(n);
    for (auto& b : costs.bwd_s)
      b = trial % 5 == 0 ? 1e-3 : std::uniform_real_distribution<double>(0, 2e-3)(rng);
    const double alpha = std::uniform_real_distribution<double>(0, 1e-3)(rng);
    const double beta = std::pow(10.0, std::uniform_real_distribution<double>(-11, -8)(rng)); // 100 GB/s .. 100 MB/s
    const CommCost cost = [&](double bytes) { return alpha + bytes * beta; };
    const auto tensors = flatten_tensors(model);
    const auto order = gradient_ready_order(model);
    const auto finish = backward_finish_times(costs);
    std::vector<double> ready(n), prefix(n + 1, 0);
    for (std::size_t k = 0; k < n; ++k) {
      const auto& t = tensors[static_cast<std::size_t>(order[k])];
      ready[k] = finish[static_cast<std::size_t>(t.layer)];
      prefix[k + 1] = prefix[k] + static_cast<double>(t.numel) * 4;
    }
    const auto linear = optimal_merge(model, tensors, order, 4, ready, prefix, cost, AffineCost{alpha, beta});
    const auto quadratic = optimal_merge(model, tensors, order, 4, ready, prefix, cost, std::nullopt);
    const double t_linear = communication_finish_time(linear, finish, cost);
    const double t_quadratic = communication_finish_time(quadratic, finish, cost);
    CAPTURE(trial, n, alpha, beta, linear.size(), quadratic.size());
    CHECK_THAT(t_linear, WithinRel(t_quadratic, 1e-12));
    // and no other split does better: merging everything, or nothing
    double one_each = 0;
    for (std::size_t k = 0; k < n; ++k)
      one_each = std::max(one_each, ready[k]) + cost(prefix[k + 1] - prefix[k]);
    const double all_at_once = ready.back() + cost(prefix.back());
    CHECK(t_linear <= std::min(one_each, all_at_once) * (1 + 1e-12));
    ++checked;
  }
  CHECK(checked == 400);
}
