// Compression strategies beyond whole-gradient Top-k / gTop-k (dag/compression.hpp, dag/strategies/): the
// selection algorithms' kernel models, layer-wise sparsification (LAGS), optimal merging for it (OMGS) and
// quantisation (QSGD, TernGrad, signSGD) on the gTop-k paper's star of single-GPU workers, where every allgather has
// the closed form log2(p) a + (p - 1) w b for w bytes per worker.
#include "dag/compression.hpp"
#include "dag/strategy.hpp"
#include "sim/cli/run.hpp"
#include "sim/network/lowering/evaluate.hpp"
#include "sim/plan/schedule.hpp"
#include "sim/report/report.hpp"
#include "sim/spec/scenario.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <random>

using namespace ddlsim;
using namespace ddlsim::sim;
using Catch::Matchers::WithinRel;

namespace {

constexpr double kAlpha = 2 * 25e-6; // per message: two NIC links of 25 us
constexpr double kBeta = 1 / 1.25e8; // per byte at 1 Gb/s
constexpr double kBandwidth = 900e9 * 0.642;

Json base(int nodes, int gpus_per_node, const std::string& kind) {
  Json doc = Json::parse(R"({"model": {"zoo": "resnet20-cifar", "batch_per_gpu": 128},
    "gpu": {"preset": "V100-SXM2-32GB", "efficiency": 0.642},
    "cluster": {"intra_node": {"bandwidth": "12 GB/s", "latency": "5 us"},
                "inter_node": {"bandwidth": "1 Gbps", "latency": "25 us"}},
    "strategy": {}})");
  doc["cluster"]["nodes"] = nodes;
  doc["cluster"]["gpus_per_node"] = gpus_per_node;
  doc["strategy"]["kind"] = kind;
  return doc;
}

Scenario compression_scenario(const Json& doc) {
  return parse_scenario(doc, "compression.json");
}

std::vector<const dag::Task*> tasks_of_kind(const RunResult& r, dag::TaskKind kind) {
  std::vector<const dag::Task*> out;
  for (std::size_t v = 0; v < r.graph.size(); ++v)
    if (r.graph.task(v).kind == kind)
      out.push_back(&r.graph.task(v));
  return out;
}

} // namespace

TEST_CASE("sim::selection algorithms change the compression time, not the traffic", "[sim][compression]") {
  auto doc = base(8, 1, "gtopk");
  double previous_compression = 0;
  double comm = -1;
  for (const char* selection : {"sampling", "threshold", "sort"}) {
    CAPTURE(selection);
    doc["strategy"]["selection"] = selection;
    const auto s = compression_scenario(doc);
    const auto r = run_scenario(s);
    const auto& g = r.groups.at(0);
    const auto cost =
        dag::sparsification_cost(s.strategy.get<dag::SparsificationOptions>().selection,
                                 static_cast<double>(g.elements), static_cast<double>(dag::selected_of(g)), 4);
    CHECK_THAT(g.steps.at(0).kernel_s, WithinRel(cost.seconds(kBandwidth), 1e-12));
    CHECK(g.steps.at(0).kernel_s > previous_compression);
    previous_compression = g.steps.at(0).kernel_s;
    if (comm >= 0)
      CHECK(r.communication_bytes_per_worker == comm);
    comm = r.communication_bytes_per_worker;
    CHECK(summary_json(s, r)["sparsification"]["selection"] == selection);
  }
}

TEST_CASE("sim::lags sparsifies and allgathers every tensor as soon as it is ready", "[sim][compression][lags]") {
  const int p = GENERATE(2, 4, 8, 16);
  CAPTURE(p);
  auto doc = base(p, 1, "lags");
  doc["strategy"]["density"] = 0.01;
  const auto s = compression_scenario(doc);
  const auto r = run_scenario(s);
  REQUIRE(r.groups.size() == s.model.tensor_count());
  const auto comms = tasks_of_kind(r, dag::TaskKind::communication);
  REQUIRE(comms.size() == r.groups.size());
  double sent = 0;
  for (std::size_t i = 0; i < r.groups.size(); ++i) {
    const auto& g = r.groups[i];
    REQUIRE(g.tensors.size() == 1);
    CHECK(dag::selected_of(g) == dag::selected_elements(g.elements, 0.01));
    // Recursive-doubling allgather of k pairs (8 bytes) per worker.
    const double w = static_cast<double>(dag::selected_of(g)) * 8;
    CHECK_THAT(comms[i]->duration_s, WithinRel(std::log2(p) * kAlpha + (p - 1) * w * kBeta, 1e-12));
    sent += (p - 1) * w;
  }
  CHECK_THAT(r.communication_bytes_per_worker, WithinRel(sent, 1e-12));
  // Every tensor's selection and its allgather start before backward ends: they are pipelined with it.
  double backward_end = 0, first_comm = 1e300;
  for (std::size_t v = 0; v < r.graph.size(); ++v) {
    const auto kind = r.graph.task(v).kind;
    if (kind == dag::TaskKind::backward)
      backward_end = std::max(backward_end, r.timing[v].end_s);
    if (kind == dag::TaskKind::communication)
      first_comm = std::min(first_comm, r.timing[v].start_s);
  }
  CHECK(first_comm < backward_end);
  const auto j = summary_json(s, r);
  CHECK(j["sparsification"]["groups"] == r.groups.size());
  CHECK(j["sparsification"]["elements"] == s.model.param_count());
}

namespace {

// A model whose layer l has tensors of the given element counts (none: a parameter-free layer).
dag::Model model_of(const std::vector<std::vector<std::int64_t>>& layers) {
  dag::Model m;
  for (std::size_t l = 0; l < layers.size(); ++l) {
    dag::Layer layer;
    layer.name = "l" + std::to_string(l);
    layer.kind = layers[l].empty() ? "relu" : "linear";
    for (std::size_t t = 0; t < layers[l].size(); ++t)
      layer.params.push_back({"w" + std::to_string(l) + "." + std::to_string(t), {layers[l][t]}, layers[l][t]});
    m.layers.push_back(layer);
  }
  return m;
}

// The finish of the last allgather of `groups` (sparsified by dag::sparsify_group, as the engine runs them) under
// OMGS's model (dag/strategies/omgs.cpp), simulated event by event rather than by the planner's recurrence: the GPU
// stream runs backward layer by layer; a group's selection starts on it as soon as its last gradient is ready and
// holds the stream for the time that grows with the elements (what selecting x elements in all costs, less what the
// earlier selections cost), so later layers finish later; its pairs are ready after the whole kernel time (launches
// included); the communication stream runs one allgather at a time, in plan order.
double simulate_omgs_model(const dag::StrategyInput& in, const std::vector<dag::GradientGroup>& groups) {
  const auto& options = std::get<dag::SparsificationOptions>(in.options);
  const double bw = in.costs.memory_bandwidth, density = options.density, e = in.bytes_per_element;
  const dag::SelectionCurve* curve = options.selection_curve ? &*options.selection_curve : nullptr;
  const auto streaming = [&](double elements) {
    return dag::compression_seconds(options.selection, curve, elements, density * elements, e, bw, true);
  };
  double gpu = 0, network = 0, selected = 0; // when each stream is free; elements selected so far
  std::size_t next = 0;
  for (std::size_t l = in.costs.bwd_s.size(); l-- > 0;) {
    gpu += in.costs.bwd_s[l];
    for (; next < groups.size() && groups[next].ready_layer == static_cast<int>(l); ++next) {
      const auto& step = groups[next].steps.at(0);
      const double pairs_ready = gpu + step.kernel_s;
      const double before = selected;
      selected += static_cast<double>(groups[next].elements);
      gpu += streaming(selected) - streaming(before);
      network = std::max(network, pairs_ready) + in.allgather_time(step.bytes);
    }
  }
  INFO("groups not ready at any layer: " << groups.size() - next);
  REQUIRE(next == groups.size());
  return network;
}

// The finish of the last allgather when the engine runs `groups`: the iteration DAG of dag::build_iteration,
// communication tasks timed by `allgather`, scheduled by the engine's list scheduler.
double engine_allgather_finish(const dag::StrategyInput& in, const std::vector<dag::GradientGroup>& groups) {
  auto graph = dag::build_iteration(in.model, in.costs, groups, true);
  for (std::size_t v = 0; v < graph.size(); ++v)
    if (graph.task(v).kind == dag::TaskKind::communication)
      graph.task(v).duration_s = in.allgather_time(dag::bytes_of(graph.task(v)));
  const auto timing = schedule(graph);
  double finish = 0;
  for (std::size_t v = 0; v < graph.size(); ++v)
    if (graph.task(v).kind == dag::TaskKind::communication)
      finish = std::max(finish, timing[v].end_s);
  return finish;
}

} // namespace

TEST_CASE("sim::omgs equals the brute-force optimum over all contiguous partitions", "[dag][compression][omgs]") {
  std::mt19937_64 rng(20261122);
  std::uniform_int_distribution<int> layer_count(1, 8), tensors_per_layer(0, 2);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int instance = 0; instance < 150; ++instance) {
    // Up to 10 tensors over 1 to 8 layers, some without parameters; layer 0 (the last backward) has one or two.
    std::vector<std::vector<std::int64_t>> layers(static_cast<std::size_t>(layer_count(rng)));
    std::size_t n = 0;
    for (std::size_t l = 0; l < layers.size(); ++l) {
      const int count = tensors_per_layer(rng);
      layers[l].resize(n < 9 ? static_cast<std::size_t>(l == 0 ? std::max(count, 1) : count) : 0);
      for (auto& numel : layers[l])
        numel = 1 + static_cast<std::int64_t>(unit(rng) * 8e6);
      n += layers[l].size();
    }
    const auto model = model_of(layers);
    dag::WorkerCosts costs;
    costs.memory_bandwidth = 100e9 + unit(rng) * 800e9;
    costs.fwd_s.assign(layers.size(), 0.0);
    for (std::size_t l = 0; l < layers.size(); ++l)
      costs.bwd_s.push_back(unit(rng) * 5e-3);
    const double alpha = unit(rng) * 5e-3, beta = unit(rng) * 8e-9;
    const dag::CommCost allgather = [=](double bytes) { return alpha + beta * bytes; };
    dag::SparsificationOptions options;
    options.density = 0.0005 + unit(rng) * 0.05;
    options.selection = static_cast<dag::Selection>(instance % 3);
    if (instance % 5 == 4) // a measured selection curve in place of the traffic model
      options.selection_curve = dag::SelectionCurve{unit(rng) * 1e-4, unit(rng) * 1e-10, unit(rng) * 1e-8};
    const dag::StrategyOptions strategy_options = options;
    const dag::StrategyInput in{model, costs, 4.0, allgather, strategy_options, 1 + instance % 16, allgather};
    CAPTURE(instance, layers, alpha, beta, options.density, dag::selection_name(options.selection),
            options.selection_curve.has_value());

    const auto plan = dag::find_strategy("omgs")->plan(in);
    const auto order = dag::gradient_ready_order(model);
    // A contiguous partition of the tensors in ready order, each group allgathered.
    std::vector<int> covered;
    for (const auto& g : plan) {
      CHECK(g.first_collective() == dag::Collective::allgather);
      covered.insert(covered.end(), g.tensors.begin(), g.tensors.end());
    }
    REQUIRE(covered == order);
    const double omgs = simulate_omgs_model(in, plan);

    // Every contiguous partition of the n tensors (in ready order) is a bit mask of cut points.
    const auto tensors = dag::flatten_tensors(model);
    double best = std::numeric_limits<double>::infinity();
    std::uint32_t best_mask = 0;
    for (std::uint32_t mask = 0; mask < (1u << (n - 1)); ++mask) {
      std::vector<dag::GradientGroup> groups;
      std::size_t first = 0;
      for (std::size_t k = 1; k <= n; ++k)
        if (k == n || (mask >> (k - 1) & 1u)) {
          groups.push_back(dag::make_group(model, tensors, order, first, k, 4.0));
          dag::sparsify_group(groups.back(), in, dag::Collective::allgather);
          first = k;
        }
      if (const double f = simulate_omgs_model(in, groups); f < best) {
        best = f;
        best_mask = mask;
      }
    }
    CAPTURE(plan.size(), best_mask);
    // No contiguous partition finishes earlier (the plan is one of them, so it is the optimum).
    CHECK(omgs <= best * (1 + 1e-12));
    // Never later than LAGS (every tensor alone) or Top-k of the whole gradient (one group).
    const auto topk_plan = dag::find_strategy("topk")->plan(in);
    const double lags = simulate_omgs_model(in, dag::find_strategy("lags")->plan(in));
    const double topk = simulate_omgs_model(in, topk_plan);
    CHECK(omgs <= lags * (1 + 1e-12));
    CHECK(omgs <= topk * (1 + 1e-12));
    // The model's costs are the engine's: Top-k's one group, ready when the backward pass ends, meets nothing on
    // either stream, so the engine's schedule of its DAG ends its allgather when the model does.
    REQUIRE(topk_plan.size() == 1);
    REQUIRE(topk_plan[0].ready_layer == 0);
    CHECK_THAT(engine_allgather_finish(in, topk_plan), WithinRel(topk, 1e-12));
  }
}

TEST_CASE("sim::omgs merges small tensors and beats LAGS and Top-k on a slow network", "[sim][compression][omgs]") {
  auto doc = base(16, 1, "omgs");
  doc["model"]["zoo"] = "resnet50";
  doc["model"]["batch_per_gpu"] = 32;
  const auto omgs = run_scenario(compression_scenario(doc));
  doc["strategy"]["kind"] = "lags";
  const auto lags = run_scenario(compression_scenario(doc));
  doc["strategy"]["kind"] = "topk";
  const auto topk = run_scenario(compression_scenario(doc));
  CHECK(omgs.groups.size() > 1);
  CHECK(omgs.groups.size() < lags.groups.size());
  CHECK(omgs.iteration_time_s < lags.iteration_time_s);
  CHECK(omgs.iteration_time_s < topk.iteration_time_s);
}

TEST_CASE("sim::quantisation allgathers every DDP bucket at its bits per element", "[sim][compression][quantisation]") {
  const auto [kind, bits] = GENERATE(table<std::string, double>({{"qsgd", 8}, {"terngrad", 2}, {"signsgd", 1}}));
  const int p = GENERATE(2, 8, 32);
  CAPTURE(kind, p);
  auto doc = base(p, 1, kind);
  doc["model"]["zoo"] = "resnet50";
  doc["model"]["batch_per_gpu"] = 32;
  const auto s = compression_scenario(doc);
  const auto r = run_scenario(s);
  auto dense_doc = doc;
  dense_doc["strategy"]["kind"] = "ddp";
  const auto buckets = run_scenario(compression_scenario(dense_doc)).groups;
  REQUIRE(r.groups.size() == buckets.size()); // DDP's buckets, as PyTorch's comm hooks see them
  const auto comms = tasks_of_kind(r, dag::TaskKind::communication);
  double sent = 0;
  for (std::size_t i = 0; i < r.groups.size(); ++i) {
    const auto& g = r.groups[i];
    CHECK(g.tensors == buckets[i].tensors);
    const double m = static_cast<double>(g.elements);
    const double scales = kind == "qsgd" ? 4 * std::ceil(m / 512) : 4.0 * static_cast<double>(g.tensors.size());
    const double w = m * bits / 8 + scales;
    CHECK(dag::wire_bits_of(g) == bits);
    CHECK_THAT(comms[i]->duration_s, WithinRel(std::log2(p) * kAlpha + (p - 1) * w * kBeta, 1e-12));
    const auto encode = dag::quantisation_cost(kind == "qsgd"       ? dag::Quantiser::qsgd
                                               : kind == "terngrad" ? dag::Quantiser::terngrad
                                                                    : dag::Quantiser::signsgd,
                                               m, w, 4);
    CHECK_THAT(g.steps.at(0).kernel_s, WithinRel(encode.seconds(kBandwidth), 1e-12));
    // Decoding reads every worker's message and accumulates it: p (w + 2 m e) + 2 m e, p + 1 kernels.
    CHECK_THAT(g.steps.at(1).kernel_s,
               WithinRel((p * (w + 8 * m) + 8 * m) / kBandwidth + (p + 1) * dag::kKernelLaunchS, 1e-12));
    sent += (p - 1) * w;
  }
  CHECK_THAT(r.communication_bytes_per_worker, WithinRel(sent, 1e-12));
  const auto j = summary_json(s, r);
  REQUIRE(j.contains("quantisation"));
  CHECK(j["quantisation"]["bits_per_element"] == bits);
  CHECK(j["quantisation"]["elements"] == s.model.param_count());
  CHECK_FALSE(j.contains("sparsification"));
}

TEST_CASE("sim::qsgd's levels set its bits; an allgather of quantised gradients grows with p", "[sim][compression]") {
  auto doc = base(32, 1, "qsgd");
  doc["model"]["zoo"] = "resnet50";
  doc["model"]["batch_per_gpu"] = 32;
  doc["strategy"]["levels"] = 7;
  const auto four_bit = run_scenario(compression_scenario(doc));
  CHECK(dag::wire_bits_of(four_bit.groups[0]) == 4);
  doc["strategy"]["levels"] = 127;
  const auto eight_bit = run_scenario(compression_scenario(doc));
  CHECK(four_bit.communication_bytes_per_worker < eight_bit.communication_bytes_per_worker);
  // At 32 workers, gathering 8 bits per element from every worker (31 / 4 of the gradient's fp32 bytes) moves more
  // than the ring allreduce's 2 (p - 1) / p: 8-bit QSGD by allgather loses to the dense allreduce on traffic.
  doc["strategy"] = {{"kind", "bsp"}};
  const auto dense = run_scenario(compression_scenario(doc));
  CHECK(eight_bit.communication_bytes_per_worker > dense.communication_bytes_per_worker);
}

TEST_CASE("sim::LinearLoweringCost equals the phase-synchronous cost of the lowering", "[sim][lowering]") {
  const auto [nodes, gpus, nic_per_gpu] =
      GENERATE(table<int, int, bool>({{1, 4, false}, {5, 1, false}, {4, 4, false}, {6, 2, true}, {16, 8, false}}));
  Network net;
  net.nodes = nodes;
  net.gpus_per_node = gpus;
  net.nic_per_gpu = nic_per_gpu;
  net.intra = {12e9, 5e-6};
  net.inter = {1.25e9, 25e-6};
  const LoweringShape shape{nodes, gpus};
  for (const auto& lowering : lowerings()) {
    if (lowering.collective == Collective::point_to_point && shape.workers() < 2)
      continue;
    CAPTURE(nodes, gpus, nic_per_gpu, collective_name(lowering.collective), lowering.algorithm);
    const LinearLoweringCost linear(lowering, shape, net);
    for (const double bytes : {1.0, 1000.0, 65536.0, 3.3e7, 1e9})
      CHECK_THAT(linear(bytes),
                 WithinRel(phase_synchronous_time(lowering.lower(shape, bytes, Granularity::aggregated), net), 1e-12));
  }
}

TEST_CASE("sim::a calibrated selection cost curve replaces the traffic model", "[sim][compression][calibration]") {
  auto doc = base(8, 1, "gtopk");
  doc["strategy"]["selection"] = "sampling";
  doc["gpu"]["calibration"] = Json::parse(R"({"selection": {
      "sampling": {"fixed": "100 us", "per_element": "50 ps", "per_selected": "2 ns"},
      "sort": {"per_element": "1 ns"}}})");
  const auto s = compression_scenario(doc);
  REQUIRE(s.strategy.get<dag::SparsificationOptions>().selection_curve);
  const auto r = run_scenario(s);
  const auto& g = r.groups.at(0);
  const double m = static_cast<double>(g.elements), k = static_cast<double>(dag::selected_of(g));
  // Error feedback keeps its traffic model (4 m e, three kernels); the selection takes the curve.
  CHECK_THAT(g.steps.at(0).kernel_s,
             WithinRel(4 * m * 4 / kBandwidth + 3 * dag::kKernelLaunchS + 100e-6 + 50e-12 * m + 2e-9 * k, 1e-12));
  bool noted = false;
  for (const auto& n : r.notes)
    noted = noted || n.find("from the calibration's cost curve") != std::string::npos;
  CHECK(noted);
  SECTION("without a curve for the chosen selection, the traffic model stays") {
    doc["strategy"]["selection"] = "threshold";
    const auto t = compression_scenario(doc);
    CHECK_FALSE(t.strategy.get<dag::SparsificationOptions>().selection_curve);
    const auto rt = run_scenario(t);
    const auto& h = rt.groups.at(0);
    CHECK_THAT(h.steps.at(0).kernel_s,
               WithinRel(dag::sparsification_cost(dag::Selection::threshold, m, k, 4).seconds(kBandwidth), 1e-12));
  }
  SECTION("bad curves exit with the pointer") {
    const auto [curves, pointer, phrase] = GENERATE(table<std::string, std::string, std::string>({
        {R"({"heap": {"per_element": "1 ns"}})", "/gpu/calibration/selection/heap", "unknown selection"},
        {R"({"sort": {"fixed": "1 us"}})", "/gpu/calibration/selection/sort/per_element", "missing required key"},
        {R"({"sort": {"per_element": "1"}})", "/gpu/calibration/selection/sort/per_element", "has no unit"},
        {R"({"sort": {"per_element": "1 ns", "per_elem": "1 ns"}})", "/gpu/calibration/selection/sort/per_elem",
         "unknown key"},
    }));
    CAPTURE(curves);
    doc["gpu"]["calibration"] = Json::parse(std::string(R"({"selection": )") + curves + "}");
    try {
      (void)compression_scenario(doc);
      FAIL("accepted a bad selection curve");
    } catch (const InputError& e) {
      CHECK(e.pointer() == pointer);
      CHECK_THAT(e.detail(), Catch::Contains(phrase));
    }
  }
  SECTION("a calibration must give layers or selection curves") {
    doc["gpu"]["calibration"] = Json::parse(R"({"source": "nothing"})");
    REQUIRE_THROWS_WITH(compression_scenario(doc), Catch::Contains("gives \"layers\", \"selection\" or both"));
  }
}
