// Sharded data parallelism (issue #32): ZeRO's memory accounting (Rajbhandari et al., SC'20, Figure 1), the traffic of
// each stage against its closed form, the sharded iteration DAG's exposure against closed forms, FSDP's units of a
// GPT, the reduce-scatter merge against brute force, the refused combinations, and flow = analytic.
#include "dag/sharding.hpp"
#include "sim/analytic/analytic.hpp"
#include "sim/flow/flow_engine.hpp"
#include "sim/network/communicator.hpp"
#include "sim/network/lowering/evaluate.hpp"
#include "sim/plan/prepare.hpp"
#include "sim/plan/schedule.hpp"
#include "sim/report/report.hpp"
#include "sim/spec/scenario.hpp"
#include "support/run_in_child.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

using namespace ddlsim;
using namespace ddlsim::sim;
using Catch::Matchers::Contains;
using Catch::Matchers::WithinRel;

namespace {

// L identical layers of `params` parameters each (one tensor per layer), bf16, Adam, on `nodes` x `gpus` GPUs of a
// star; WFBP (one group per layer).
Json uniform_doc(int layers, std::int64_t params, int nodes, int gpus) {
  Json doc = Json::parse(R"({
    "model": {"batch_per_gpu": 1, "gradient_dtype": "bf16"},
    "gpu": {"peak_flops": "100 TFLOPS", "memory_bandwidth": "1 TB/s", "memory": "80 GiB"},
    "cluster": {"intra_node": {"bandwidth": "100 GB/s", "latency": "1 us"},
                "inter_node": {"bandwidth": "10 GB/s", "latency": "5 us"}, "topology": "star"},
    "optimizer": "adam",
    "strategy": {"kind": "wfbp"}
  })");
  Json list = Json::array();
  for (int l = 0; l < layers; ++l)
    list.push_back({{"name", "l" + std::to_string(l)}, {"params", params}, {"fwd_flops", 1e9}});
  doc["model"]["layers"] = list;
  doc["cluster"]["nodes"] = nodes;
  doc["cluster"]["gpus_per_node"] = gpus;
  return doc;
}

Json with_sharding(Json doc, const Json& sharding) {
  doc["sharding"] = sharding;
  return doc;
}

// A model of L layers with one tensor of n parameters each, and its costs: forward f, backward b per layer.
struct Uniform {
  dag::Model model;
  dag::WorkerCosts costs;
};

Uniform uniform(int layers, double f, double b) {
  Uniform u;
  for (int l = 0; l < layers; ++l) {
    dag::Layer layer;
    layer.name = "l" + std::to_string(l);
    layer.params.push_back({.name = layer.name + ".weight", .shape = {1000}, .numel = 1000});
    u.model.layers.push_back(std::move(layer));
  }
  u.costs.fwd_s.assign(static_cast<std::size_t>(layers), f);
  u.costs.bwd_s.assign(static_cast<std::size_t>(layers), b);
  return u;
}

// The makespan of a sharded schedule with every all-gather taking g and every reduce-scatter r.
double makespan(const Uniform& u, dag::ShardedSchedule schedule, double g, double r) {
  schedule.groups = dag::unit_groups(u.model, schedule.units, 2);
  for (auto& group : schedule.groups)
    group.steps = {{.collective = Collective::reduce_scatter, .bytes = group.bytes}};
  auto graph = dag::build_sharded_iteration(u.model, u.costs, schedule);
  for (std::size_t v = 0; v < graph.size(); ++v) {
    auto& t = graph.task(v);
    if (dag::collective_of(t) == Collective::allgather)
      t.duration_s = g;
    else if (dag::collective_of(t) == Collective::reduce_scatter)
      t.duration_s = r;
  }
  return makespan_of(sim::schedule(graph));
}

} // namespace

TEST_CASE("sharding: ZeRO's model state per parameter follows SC'20's table", "[sharding][memory]") {
  // Mixed-precision Adam (K = 12): stage 0 16, stage 1 4 + 12/N, stage 2 2 + 14/N, stage 3 16/N (SC'20, Figure 1).
  const int n = GENERATE(1, 8, 64);
  CAPTURE(n);
  const double N = n;
  for (const auto dtype : {dag::DType::fp16, dag::DType::bf16}) {
    CHECK_THAT(dag::zero_state_per_parameter(dag::Optimizer::adam, dtype, 0, n).total(), WithinRel(16.0, 1e-12));
    CHECK_THAT(dag::zero_state_per_parameter(dag::Optimizer::adam, dtype, 1, n).total(), WithinRel(4 + 12 / N, 1e-12));
    CHECK_THAT(dag::zero_state_per_parameter(dag::Optimizer::adam, dtype, 2, n).total(), WithinRel(2 + 14 / N, 1e-12));
    CHECK_THAT(dag::zero_state_per_parameter(dag::Optimizer::adam, dtype, 3, n).total(), WithinRel(16 / N, 1e-12));
  }
  // fp32 Adam: 4 + 4 + 8, stage 1 8 + 8/N (Megatron-Core's fp32 row, 8 + 8/d); SGD with momentum in bf16: K = 4 + 4.
  CHECK_THAT(dag::zero_state_per_parameter(dag::Optimizer::adam, dag::DType::fp32, 1, n).total(),
             WithinRel(8 + 8 / N, 1e-12));
  CHECK_THAT(dag::zero_state_per_parameter(dag::Optimizer::sgd_momentum, dag::DType::bf16, 2, n).total(),
             WithinRel(2 + 10 / N, 1e-12));
}

TEST_CASE("sharding: memory per GPU adds stage 3's gathered units to the sharded state", "[sharding][memory]") {
  // 8 layers of 10^6 parameters on 8 GPUs, bf16 Adam: state 16 x 8e6 / 8; prefetch p keeps p + 1 units gathered
  // (2 bytes each), the reduce buffer is one unit's gradients (2 bytes), activations as data parallelism's (0 here).
  const int prefetch = GENERATE(0, 1, 3);
  CAPTURE(prefetch);
  const auto s = parse_scenario(
      with_sharding(uniform_doc(8, 1000000, 1, 8), {{"stage", 3}, {"unit", "layer"}, {"prefetch", prefetch}}),
      "t.json");
  const auto r = run_analytic(s);
  REQUIRE(r.sharding);
  const auto& m = *r.sharding;
  CHECK_THAT(m.weights_bytes + m.gradients_bytes + m.optimizer_bytes, WithinRel(16.0 * 8e6 / 8, 1e-12));
  CHECK_THAT(m.gathered_bytes, WithinRel((prefetch + 1) * 1e6 * 2, 1e-12));
  CHECK_THAT(m.reduce_buffer_bytes, WithinRel(2e6, 1e-12));
  CHECK_THAT(r.peak_memory_bytes_per_gpu, WithinRel(m.total_bytes(), 1e-12));
  CHECK_THAT(m.unsharded_state_bytes, WithinRel(16.0 * 8e6, 1e-12));
  REQUIRE(m.fits);
  CHECK(*m.fits);
}

TEST_CASE("sharding: bytes each GPU sends per iteration follow each stage's closed form", "[sharding][traffic]") {
  // L = 6 identical layers of P/L parameters, bf16 (e = 2), d = 8 GPUs of a star, ring collectives: stage 0 allreduces
  // 2(d-1)/d P e; stages 1-2 reduce-scatter and all-gather (d-1)/d P e each; stage 3 with resharding gathers every
  // unit twice but the last (kept for backward), (3 - 1/L)(d-1)/d P e; without resharding 2(d-1)/d P e.
  const int layers = 6;
  const std::int64_t per_layer = 1000000;
  const double P = layers * static_cast<double>(per_layer), e = 2, d = 8;
  const auto sent = [&](const Json& sharding) {
    Json doc = uniform_doc(layers, per_layer, 8, 1);
    if (!sharding.is_null())
      doc["sharding"] = sharding;
    return prepare(parse_scenario(doc, "t.json"), Engine::analytic).communication_bytes_per_worker;
  };
  const double ring = (d - 1) / d * P * e;
  CHECK_THAT(sent(Json()), WithinRel(2 * ring, 1e-9));
  CHECK_THAT(sent({{"stage", 0}}), WithinRel(2 * ring, 1e-9));
  CHECK_THAT(sent({{"stage", 1}}), WithinRel(2 * ring, 1e-9));
  CHECK_THAT(sent({{"stage", 2}}), WithinRel(2 * ring, 1e-9));
  CHECK_THAT(sent({{"stage", 3}, {"unit", "layer"}}), WithinRel((3 - 1.0 / layers) * ring, 1e-9));
  CHECK_THAT(sent({{"stage", 3}, {"unit", "layer"}, {"reshard_after_forward", false}}), WithinRel(2 * ring, 1e-9));
  // fp32 reductions of bf16 parameters: the reduce-scatter moves 4 bytes per element, the gathers 2.
  CHECK_THAT(sent({{"stage", 1}, {"reduce_dtype", "fp32"}}), WithinRel(ring + 2 * ring, 1e-9));
}

TEST_CASE("sharding: HSDP reduce-scatters in the shard group and allreduces each shard across the replicas",
          "[sharding][traffic]") {
  // 4 nodes x 2 GPUs, shard groups of s = 2 (a node), r = 4 replicas: per GPU the reduce-scatter (s-1)/s P e, the
  // allreduce of P/s across r: 2(r-1)/r P e / s, and the all-gather (s-1)/s P e (stage 1) or twice but the last unit's
  // (stage 3).
  const int layers = 4;
  const std::int64_t per_layer = 500000;
  const double P = layers * static_cast<double>(per_layer), e = 2, s = 2, r = 4;
  const double reduce = (s - 1) / s * P * e + 2 * (r - 1) / r * P * e / s, gather = (s - 1) / s * P * e;
  const auto plan = [&](const Json& sharding) {
    return prepare(parse_scenario(with_sharding(uniform_doc(layers, per_layer, 4, 2), sharding), "t.json"),
                   Engine::analytic);
  };
  const auto one = plan({{"stage", 1}, {"group", "node"}});
  CHECK_THAT(one.communication_bytes_per_worker, WithinRel(reduce + gather, 1e-9));
  REQUIRE(one.sharding);
  CHECK(one.sharding->shard_size == 2);
  CHECK(one.sharding->replicas == 4);
  CHECK_THAT(one.sharding->allreduce_bytes, WithinRel(2 * (r - 1) / r * P * e / s, 1e-9));
  const auto three = plan({{"stage", 3}, {"group", 2}, {"unit", "layer"}});
  CHECK_THAT(three.communication_bytes_per_worker, WithinRel(reduce + (2 - 1.0 / layers) * gather, 1e-9));
  // The copies: the replica group's members times the shard group's.
  CHECK(three.graph.replicas() == 8);
  CHECK(three.graph.tensor_peers() == 2);
}

TEST_CASE("sharding: stage 3 hides every gather but the first behind compute when a unit computes longer",
          "[sharding][closed-form]") {
  // L uniform units (one layer each), forward f, backward b, gather g, reduce-scatter r, prefetch 1, resharding:
  // forward g + L f (each next gather runs under the current forward, g < f), backward L b with the backward gathers
  // and reduce-scatters under it (g + r <= b), then the last reduce-scatter: g + L (f + b) + r.
  const int layers = GENERATE(2, 3, 6, 10);
  CAPTURE(layers);
  const auto u = uniform(layers, 1.0, 2.0);
  const dag::ShardedSchedule schedule{
      .stage = 3, .groups = {}, .units = dag::shard_units(u.model, dag::UnitKind::layer), .prefetch = 1};
  CHECK_THAT(makespan(u, schedule, 0.5, 0.5), WithinRel(0.5 + layers * 3.0 + 0.5, 1e-12));
  CHECK_THAT(makespan(u, schedule, 0.9, 1.1), WithinRel(0.9 + layers * 3.0 + 1.1, 1e-12));
}

TEST_CASE("sharding: stage 3 runs at the gathers' pace when a unit computes shorter than its gather",
          "[sharding][closed-form]") {
  // Without resharding, forward f < gather g: the gathers run back to back (prefetch 1 never waits, a unit's forward
  // ends before its successor's gather) and each forward waits for its gather: L g + f; then L b and the last
  // reduce-scatter. With prefetch 0 each gather waits for the previous unit's forward: L (g + f) + L b + r.
  const int layers = GENERATE(2, 5, 9);
  CAPTURE(layers);
  const auto u = uniform(layers, 1.0, 2.0);
  dag::ShardedSchedule schedule{.stage = 3,
                                .groups = {},
                                .units = dag::shard_units(u.model, dag::UnitKind::layer),
                                .prefetch = 1,
                                .reshard_after_forward = false};
  CHECK_THAT(makespan(u, schedule, 1.5, 0.5), WithinRel(layers * 1.5 + 1.0 + layers * 2.0 + 0.5, 1e-12));
  schedule.prefetch = 0;
  CHECK_THAT(makespan(u, schedule, 1.5, 0.5), WithinRel(layers * (1.5 + 1.0) + layers * 2.0 + 0.5, 1e-12));
}

TEST_CASE("sharding: FSDP's units of GPT-2 gather each block's parameters in param_dtype and reduce its gradients "
          "in reduce_dtype",
          "[sharding][fsdp]") {
  // GPT-2 small by hand: a block holds 12 h^2 + 13 h parameters (h = 768: 7,087,872); the embeddings (wte 50257 x
  // 768 + wpe 1024 x 768 = 39,383,808) are the first unit, the final LayerNorm (2 h = 1,536, the head tied to wte)
  // the last. bf16 gathers (2 bytes), fp32 reductions (4 bytes); each block gathered twice (resharded), the last unit
  // once.
  Json doc = uniform_doc(1, 1, 2, 4);
  doc["model"] = {{"zoo", "gpt2"}, {"batch_per_gpu", 1}, {"gradient_dtype", "bf16"}};
  doc["sharding"] = {{"stage", 3}, {"param_dtype", "bf16"}, {"reduce_dtype", "fp32"}};
  const auto p = prepare(parse_scenario(doc, "t.json"), Engine::analytic);
  std::map<int, std::vector<double>> gathers, reductions; // by reduce group: the bytes of each
  for (std::size_t v = 0; v < p.graph.size(); ++v) {
    const auto& t = p.graph.task(v);
    if (dag::collective_of(t) == Collective::allgather)
      gathers[dag::group_of(t)].push_back(dag::bytes_of(t));
    else if (dag::collective_of(t) == Collective::reduce_scatter)
      reductions[dag::group_of(t)].push_back(dag::bytes_of(t));
  }
  REQUIRE(p.groups.size() == 14); // embeddings, 12 blocks, final LayerNorm
  const double block = 12.0 * 768 * 768 + 13 * 768;
  // Groups in launch order: the last unit (final LayerNorm) first, the embeddings last.
  CHECK(gathers[0] == std::vector<double>{2 * 1536.0});
  CHECK(reductions[0] == std::vector<double>{4 * 1536.0});
  for (int g = 1; g <= 12; ++g) {
    CAPTURE(g);
    CHECK(gathers[g] == std::vector<double>{2 * block, 2 * block});
    CHECK(reductions[g] == std::vector<double>{4 * block});
  }
  CHECK(gathers[13] == std::vector<double>{2 * 39383808.0, 2 * 39383808.0});
  CHECK(reductions[13] == std::vector<double>{4 * 39383808.0});
}

TEST_CASE("sharding: MG-WFBP's merge of reduce-scatters is optimal by brute force", "[sharding][mgwfbp]") {
  // Random small models (3-8 layers of random sizes and backward times) on 4 GPUs: the groups mg-wfbp plans for the
  // reduce-scatters finish no later than any split of the layers into consecutive groups (all 2^(L-1)), timed with
  // the same reduce-scatter cost; never later than one group per layer (wfbp) or one group (bsp's).
  std::mt19937_64 rng(32);
  for (int instance = 0; instance < 40; ++instance) {
    const int layers = std::uniform_int_distribution<int>(3, 8)(rng);
    Json doc = uniform_doc(layers, 1, 1, 4);
    Json calibration = {
        {"format", "ddlsim-calibration"}, {"version", 2}, {"batch_per_gpu", 1}, {"layers", Json::object()}};
    for (int l = 0; l < layers; ++l) {
      doc["model"]["layers"][static_cast<std::size_t>(l)]["params"] =
          std::uniform_int_distribution<std::int64_t>(1000, 4000000)(rng);
      calibration["layers"]["l" + std::to_string(l)] = {
          {"forward", "1 ms"}, {"backward", fmt::format("{} us", std::uniform_int_distribution<int>(10, 3000)(rng))}};
    }
    doc["calibration"] = calibration;
    doc["strategy"] = {{"kind", "mg-wfbp"}};
    doc["sharding"] = {{"stage", 2}};
    const auto s = parse_scenario(doc, "t.json");
    const auto p = prepare(s, Engine::analytic);
    const auto layout = layout_of({0, 1, 2, 3}, s.cluster);
    const auto rs = make_cost_model(collective_lowering(s, Collective::reduce_scatter), layout.net);
    const dag::CommCost cost = [&](double bytes) { return rs->cost(bytes).time_s; };
    const auto finish = dag::backward_finish_times(p.costs.worker);
    const double planned = dag::communication_finish_time(p.groups, finish, cost);
    // Brute force: every split of the gradient-ready order (layers L-1 .. 0) into consecutive groups.
    double best = std::numeric_limits<double>::infinity();
    const auto tensors = dag::flatten_tensors(s.model);
    const auto order = dag::gradient_ready_order(s.model);
    for (unsigned mask = 0; mask < (1u << (layers - 1)); ++mask) {
      std::vector<dag::GradientGroup> groups;
      std::size_t first = 0;
      for (std::size_t k = 1; k <= order.size(); ++k)
        if (k == order.size() || (mask >> (k - 1) & 1u) != 0) {
          groups.push_back(dag::make_group(s.model, tensors, order, first, k, 2));
          first = k;
        }
      best = std::min(best, dag::communication_finish_time(groups, finish, cost));
      if (mask == 0)
        CHECK(planned <= dag::communication_finish_time(groups, finish, cost) * (1 + 1e-12)); // one group
    }
    CAPTURE(instance, layers);
    CHECK_THAT(planned, WithinRel(best, 1e-12));
  }
}

TEST_CASE("sharding: the refused combinations exit with the path and the reason", "[sharding][errors]") {
  const auto fails = [](Json doc, const std::string& path, const std::string& text) {
    CAPTURE(doc.dump());
    try {
      (void)parse_scenario(doc, "t.json");
      FAIL("accepted");
    } catch (const InputError& e) {
      CHECK(e.pointer() == path);
      CHECK_THAT(e.what(), Contains(text));
    }
  };
  const Json base = uniform_doc(4, 1000, 2, 4);
  fails(with_sharding(base, {{"stage", 4}}), "/sharding/stage", "");
  fails(with_sharding(base, {{"stage", 1}, {"group", 3}}), "/sharding/group", "divides the data-parallel group of 8");
  fails(with_sharding(base, {{"stage", 1}, {"group", "rack"}}), "/sharding/group", "\"node\"");
  fails(with_sharding(base, {{"stage", 3}, {"unit", "blok"}}), "/sharding/unit", "\"layer\", \"block\"");
  fails(with_sharding(base, {{"stage", 3}, {"unit", "block"}}), "/sharding/unit", "has no blocks");
  fails(with_sharding(base, {{"stage", 1}, {"unit", "50 MB/s"}}), "/sharding/unit", "");
  fails(with_sharding(base, {{"stage", 1}, {"colour", 1}}), "/sharding/colour", "");
  Json bsp = with_sharding(base, {{"stage", 2}});
  bsp["strategy"] = {{"kind", "bsp"}};
  fails(bsp, "/strategy/kind", "holding every gradient unsharded");
  Json ddp = with_sharding(base, {{"stage", 3}});
  ddp["strategy"] = {{"kind", "ddp"}};
  fails(ddp, "/strategy/kind", "use wfbp");
  Json ps = with_sharding(base, {{"stage", 1}});
  ps["strategy"] = {{"kind", "ps-sync"}};
  fails(ps, "/strategy/kind", "parameter servers keep the model state");
  Json pipeline = with_sharding(base, {{"stage", 2}});
  pipeline["parallelism"] = {{"pipeline", 2}};
  pipeline["pipeline"] = {{"micro_batches", 2}};
  fails(pipeline, "/sharding/stage", "DeepSpeed refuses ZeRO stages 2 and 3 with pipeline parallelism");
  Json backup = with_sharding(base, {{"stage", 1}});
  backup["strategy"]["backup_workers"] = 1;
  fails(backup, "/strategy/backup_workers", "owns a shard");
}

TEST_CASE("sharding: stage 0 is today's data parallelism, its memory counted as the sharded stages count it",
          "[sharding]") {
  // The same schedule, traffic and memory as without the key; summary.sharding reports ZeRO's 16 bytes per parameter
  // for mixed-precision Adam (4 x 10^6 parameters), plus the largest group's gradients (one 10^6-parameter layer in
  // bf16) and no activations, as data parallelism's own figure counts them (the tensors; fragmentation and the
  // reserve come on top of both, docs/memory.md).
  const auto plain = run_analytic(parse_scenario(uniform_doc(4, 1000000, 2, 4), "t.json"));
  const auto zero =
      run_analytic(parse_scenario(with_sharding(uniform_doc(4, 1000000, 2, 4), {{"stage", 0}}), "t.json"));
  CHECK(zero.iteration_time_s == plain.iteration_time_s);
  CHECK(zero.communication_bytes_per_worker == plain.communication_bytes_per_worker);
  CHECK_THAT(plain.memory.tensor_bytes(), WithinRel(16 * 4e6 + 2e6, 1e-12));
  REQUIRE(zero.sharding);
  CHECK(zero.sharding->stage == 0);
  CHECK(zero.sharding->allreduces == 4);
  CHECK_THAT(zero.memory.tensor_bytes(), WithinRel(16 * 4e6 + 2e6, 1e-12));
  CHECK_THAT(zero.peak_memory_bytes_per_gpu, WithinRel(zero.sharding->total_bytes(), 1e-12));
  CHECK(!plain.sharding);
}

TEST_CASE("sharding: the flow engine times the sharded schedules as the analytic engine does", "[sharding][flow]") {
  // GPT-2 medium on 2 nodes x 4 GPUs, stage 3 over the data-parallel group and HSDP over a node, stage 1.
  const Json sharding = GENERATE(Json{{"stage", 3}}, Json{{"stage", 3}, {"group", "node"}},
                                 Json{{"stage", 1}, {"group", "node"}}, Json{{"stage", 2}});
  CAPTURE(sharding.dump());
  Json doc = uniform_doc(1, 1, 2, 4);
  doc["model"] = {{"zoo", "gpt2-medium"}, {"batch_per_gpu", 2}, {"gradient_dtype", "bf16"}};
  doc["sharding"] = sharding;
  const auto analytic = run_analytic(parse_scenario(doc, "t.json"));
  doc["engine"] = "flow";
  const auto report = test::run_in_child(
      [&](test::ChildReport& out) { out.values = {run_flow(parse_scenario(doc, "t.json")).iteration_time_s}; });
  REQUIRE(report.error.empty());
  CHECK_THAT(report.values.at(0), WithinRel(analytic.iteration_time_s, 0.01));
}

TEST_CASE("sharding: stage 1 exchanges compressed gradients as without sharding, then gathers the parameters",
          "[sharding][compression]") {
  // Top-k, QSGD and signSGD on 8 GPUs of a star: the groups and their exchange are the strategy's own (the same
  // bytes as without sharding), and each GPU adds a ring all-gather of its groups' parameters, (d-1)/d P e; the
  // sparse all-gathers keep their algorithm (recursive doubling) while the parameter gathers take the ring.
  const std::string kind = GENERATE("topk", "qsgd", "signsgd");
  CAPTURE(kind);
  Json doc = uniform_doc(6, 1000000, 8, 1);
  doc["strategy"] = {{"kind", kind}};
  const auto plain = prepare(parse_scenario(doc, "t.json"), Engine::analytic);
  doc["sharding"] = {{"stage", 1}};
  const auto sharded = prepare(parse_scenario(doc, "t.json"), Engine::analytic);
  REQUIRE(sharded.groups.size() == plain.groups.size());
  for (std::size_t i = 0; i < plain.groups.size(); ++i)
    CHECK(sharded.groups[i].effective_steps().size() == plain.groups[i].effective_steps().size());
  const double gather = 7.0 / 8 * 6e6 * 2;
  CHECK_THAT(sharded.communication_bytes_per_worker, WithinRel(plain.communication_bytes_per_worker + gather, 1e-9));
  REQUIRE(sharded.sharding);
  CHECK_THAT(sharded.sharding->allgather_bytes, WithinRel(gather, 1e-9));
  CHECK(sharded.sharding->reduce_scatters == 0);
  // Stages 2-3 and HSDP refuse compression, saying why.
  doc["sharding"] = {{"stage", 2}};
  CHECK_THROWS_WITH(parse_scenario(doc, "t.json"), Contains("compression shards with stage 1"));
  doc = uniform_doc(6, 1000000, 4, 2);
  doc["strategy"] = {{"kind", kind}};
  doc["sharding"] = {{"stage", 1}, {"group", "node"}};
  CHECK_THROWS_WITH(parse_scenario(doc, "t.json"), Contains("which a compressed exchange does not have"));
}

TEST_CASE("sharding: offloaded state adds the copies and the host's step after the last reduction",
          "[sharding][offload][closed-form]") {
  // Stage 3 as above (g + L(f + b) + r without offload); each group's gradient shard copied to the host in c after its
  // reduce-scatter (c <= b: hidden but the last), the step on the host h, the parameter shard copied back in u:
  // g + L(f + b) + r + c + h + u.
  const int layers = GENERATE(2, 4, 7);
  CAPTURE(layers);
  auto u = uniform(layers, 1.0, 2.0);
  dag::ShardedSchedule schedule{
      .stage = 3, .groups = {}, .units = dag::shard_units(u.model, dag::UnitKind::layer), .prefetch = 1};
  schedule.offload_gradient_s.assign(static_cast<std::size_t>(layers), 0.25);
  schedule.update_s = 3.0;
  schedule.upload_s = 0.75;
  CHECK_THAT(makespan(u, schedule, 0.5, 0.5), WithinRel(0.5 + layers * 3.0 + 0.5 + 0.25 + 3.0 + 0.75, 1e-12));
}

TEST_CASE("sharding: offload moves the optimizer state to the host and costs its copies and step",
          "[sharding][offload]") {
  // 8 layers of 10^6 parameters on 8 GPUs, bf16 Adam, host link 20 GB/s, 10 GB/s of host memory traffic per GPU.
  // Each GPU's shard is P/8 = 10^6 parameters: its step moves 30 bytes per parameter (3 ms); it copies its gradient
  // shard down (2 bytes each) and, with the optimizer offloaded, its parameter shard up (2 bytes each); with the
  // parameters offloaded (stage 3) each unit's shard comes up before each gather (twice but the last unit).
  Json doc = uniform_doc(8, 1000000, 1, 8);
  doc["gpu"]["host_link"] = "20 GB/s";
  doc["sharding"] = {{"stage", 2}, {"offload", "optimizer"}, {"host_memory_bandwidth", "10 GB/s"}};
  const double shard = 1e6;
  const auto optimizer = run_analytic(parse_scenario(doc, "t.json"));
  REQUIRE(optimizer.sharding);
  CHECK(optimizer.sharding->offload == "optimizer");
  CHECK_THAT(optimizer.sharding->host_step_s, WithinRel(shard * 30 / 10e9, 1e-12));
  CHECK_THAT(optimizer.sharding->host_bytes, WithinRel(12 * shard, 1e-12));
  CHECK(optimizer.sharding->optimizer_bytes == 0);
  CHECK_THAT(optimizer.sharding->host_copy_bytes, WithinRel(2 * shard + 2 * shard, 1e-12));
  doc["sharding"] = {{"stage", 3}, {"unit", "layer"}, {"offload", "parameters"}, {"host_memory_bandwidth", "10 GB/s"}};
  const auto parameters = run_analytic(parse_scenario(doc, "t.json"));
  REQUIRE(parameters.sharding);
  CHECK_THAT(parameters.sharding->host_bytes, WithinRel(14 * shard, 1e-12));
  CHECK(parameters.sharding->weights_bytes == 0);
  CHECK_THAT(parameters.sharding->host_copy_bytes, WithinRel(2 * shard + (2 * 7 + 1) * 2 * shard / 8, 1e-12));
  // Refused: nothing sharded, parameters below stage 3, no host link.
  doc["sharding"] = {{"stage", 0}, {"offload", "optimizer"}};
  CHECK_THROWS_WITH(parse_scenario(doc, "t.json"), Contains("set sharding.stage 1-3"));
  doc["sharding"] = {{"stage", 2}, {"offload", "parameters"}};
  CHECK_THROWS_WITH(parse_scenario(doc, "t.json"), Contains("only with ZeRO stage 3"));
  doc["gpu"].erase("host_link");
  doc["sharding"] = {{"stage", 2}, {"offload", "optimizer"}};
  CHECK_THROWS_WITH(parse_scenario(doc, "t.json"), Contains("give gpu.host_link"));
}

TEST_CASE("sharding: the shipped comparison's layouts take the same time on both engines", "[sharding][flow]") {
  // scenarios/sharding-gpt.json's six layouts (DDP, ZeRO-1, ZeRO-2, FSDP, HSDP, FSDP with the optimizer offloaded)
  // for GPT-3 6.7B on 2 DGX A100-class nodes (16 GPUs, so that HSDP's allreduces cross the network): the flow engine
  // simulates the same groups' flows as the analytic engine costs them, within 1 %.
  const auto layout = GENERATE(table<std::string, int, std::string, std::string>({{"ddp", 0, "data", "none"},
                                                                                  {"ddp", 1, "data", "none"},
                                                                                  {"ddp", 2, "data", "none"},
                                                                                  {"wfbp", 3, "data", "none"},
                                                                                  {"wfbp", 3, "node", "none"},
                                                                                  {"wfbp", 3, "data", "optimizer"}}));
  const auto& [kind, stage, group, offload] = layout;
  CAPTURE(kind, stage, group, offload);
  const std::vector<std::string> set{"model.zoo=\"gpt3-6.7b\"",
                                     "cluster.nodes=2",
                                     "gpu.preset=\"A100-SXM4-80GB\"",
                                     "gpu.efficiency=0.52",
                                     "cluster.intra_node.bandwidth=\"300 GB/s\"",
                                     "cluster.inter_node.bandwidth=\"200 Gbps\"",
                                     fmt::format("strategy.kind=\"{}\"", kind),
                                     fmt::format("sharding.stage={}", stage),
                                     fmt::format("sharding.group=\"{}\"", group),
                                     fmt::format("sharding.offload=\"{}\"", offload)};
  const std::string file = std::string(DDLSIM_SOURCE_DIR) + "/scenarios/sharding-gpt.json";
  const auto analytic = run_analytic(load_scenario(file, set, SweepBlock::ignored));
  auto flow_set = set;
  flow_set.emplace_back("engine=\"flow\"");
  const auto report = test::run_in_child([&](test::ChildReport& out) {
    out.values = {run_flow(load_scenario(file, flow_set, SweepBlock::ignored)).iteration_time_s};
  });
  REQUIRE(report.error.empty());
  CHECK_THAT(report.values.at(0), WithinRel(analytic.iteration_time_s, 0.01));
}

namespace {

// Every split of positions [0, n) into consecutive groups, by a mask of the n - 1 cuts.
std::vector<dag::GatherGroup> split_of(unsigned mask, int n) {
  std::vector<dag::GatherGroup> split;
  int first = 0;
  for (int k = 1; k <= n; ++k)
    if (k == n || (mask >> (k - 1) & 1u) != 0) {
      split.push_back({first, k});
      first = k;
    }
  return split;
}

// The least gather_sequence_end over every split (2^(n-1) of them).
double brute_force_end(const std::vector<double>& compute, const std::vector<double>& bytes, const dag::AffineCost& c,
                       double busy) {
  const int n = static_cast<int>(compute.size());
  double best = n == 0 ? busy : std::numeric_limits<double>::infinity();
  for (unsigned mask = 0; n > 0 && mask < (1u << (n - 1)); ++mask)
    best = std::min(best, dag::gather_sequence_end(split_of(mask, n), compute, bytes, c, busy));
  return best;
}

// The parameter all-gathers of a sharded plan in issue order (task order): their bytes.
std::vector<double> gather_bytes(const dag::IterationGraph& g) {
  std::vector<double> out;
  for (std::size_t v = 0; v < g.size(); ++v)
    if (dag::gathers_parameters(g.task(v)))
      out.push_back(dag::bytes_of(g.task(v)));
  return out;
}

} // namespace

TEST_CASE("sharding: the gather groups' planner is optimal by brute force", "[sharding][mgwfbp][gather-merge]") {
  // Random sequences of 1-10 units (compute 0.05-3 ms, 1 kB-8 MB each), alpha 1 us-1 ms, 10-200 GB/s, compute queued
  // before the first group (busy) or none: optimal_gather_split ends no later than any of the 2^(n-1) splits, nor
  // than one group per unit or one group. plan_gather_groups' backward: the units before the last forward group in
  // backward order, after that group's backward, also optimal among all their splits.
  std::mt19937_64 rng(3203);
  std::uniform_real_distribution<double> unit(0, 1);
  const auto log_uniform = [&](double lo, double hi) { return lo * std::pow(hi / lo, unit(rng)); };
  int merged = 0, split = 0;
  for (int instance = 0; instance < 300; ++instance) {
    const int n = std::uniform_int_distribution<int>(1, 10)(rng);
    std::vector<double> forward(static_cast<std::size_t>(n)), backward(forward.size()), bytes(forward.size());
    for (std::size_t u = 0; u < forward.size(); ++u) {
      forward[u] = log_uniform(5e-5, 3e-3);
      backward[u] = log_uniform(1e-4, 6e-3);
      bytes[u] = log_uniform(1e3, 8e6);
    }
    const dag::AffineCost cost{log_uniform(1e-6, 1e-3), 1 / log_uniform(10e9, 200e9)};
    const double busy = instance % 2 == 0 ? 0.0 : log_uniform(1e-5, 5e-3);
    CAPTURE(instance, n, cost.alpha_s, cost.seconds_per_byte, busy);
    const auto planned = dag::optimal_gather_split(forward, bytes, cost, busy);
    const double end = dag::gather_sequence_end(planned, forward, bytes, cost, busy);
    CHECK_THAT(end, WithinRel(brute_force_end(forward, bytes, cost, busy), 1e-12));
    std::vector<dag::GatherGroup> per_unit;
    for (int u = 0; u < n; ++u)
      per_unit.push_back({u, u + 1});
    CHECK(end <= dag::gather_sequence_end(per_unit, forward, bytes, cost, busy) * (1 + 1e-12));
    CHECK(end <= dag::gather_sequence_end({{0, n}}, forward, bytes, cost, busy) * (1 + 1e-12));
    merged += static_cast<int>(planned.size()) < n ? 1 : 0;
    split += planned.size() > 1 ? 1 : 0;

    const auto both = dag::plan_gather_groups(forward, backward, bytes, cost, true);
    CHECK(both.forward == dag::optimal_gather_split(forward, bytes, cost));
    const int kept = both.forward.back().first_unit;
    std::vector<double> reversed_s, reversed_bytes;
    for (int u = kept; u-- > 0;) {
      reversed_s.push_back(backward[static_cast<std::size_t>(u)]);
      reversed_bytes.push_back(bytes[static_cast<std::size_t>(u)]);
    }
    double kept_s = 0;
    for (int u = kept; u < n; ++u)
      kept_s += backward[static_cast<std::size_t>(u)];
    std::vector<dag::GatherGroup> positions; // unit range [a, e) is positions [kept - e, kept - a)
    int next = 0;
    for (const auto& x : both.backward) {
      CHECK(x.end_unit == kept - next);
      positions.push_back({kept - x.end_unit, kept - x.first_unit});
      next = kept - x.first_unit;
    }
    CHECK(next == kept);
    CHECK_THAT(dag::gather_sequence_end(positions, reversed_s, reversed_bytes, cost, kept_s),
               WithinRel(brute_force_end(reversed_s, reversed_bytes, cost, kept_s), 1e-12));
    CHECK(dag::plan_gather_groups(forward, backward, bytes, cost, false).backward.empty());
  }
  // Both regimes occur: gathers merged, and more than one group.
  CHECK(merged > 25);
  CHECK(split > 25);
}

TEST_CASE("sharding: stage 3's DAG gathers each gather group with one all-gather", "[sharding][closed-form]") {
  // 4 units of one layer, forward f = 1, backward b = 2, every all-gather g = 1.5 > f (its bytes do not matter here),
  // reduce-scatters r = 0.5, two gather groups {0, 1} and {2, 3}.
  const auto u = uniform(4, 1.0, 2.0);
  dag::ShardedSchedule schedule{.stage = 3,
                                .groups = {},
                                .units = dag::shard_units(u.model, dag::UnitKind::layer),
                                .prefetch = 1,
                                .reshard_after_forward = false};
  schedule.forward_gathers = {{0, 2}, {2, 4}};
  SECTION("without resharding, one all-gather per group") {
    // Group 2's gather runs under group 1's forward (g <= 2f): g + 4f, then 4b and the last reduce-scatter; one group
    // per unit waits for each gather: 4g + f + 4b + r.
    CHECK_THAT(makespan(u, schedule, 1.5, 0.5), WithinRel(1.5 + 4 * 1.0 + 4 * 2.0 + 0.5, 1e-12));
    auto per_unit = schedule;
    per_unit.forward_gathers.clear();
    CHECK_THAT(makespan(u, per_unit, 1.5, 0.5), WithinRel(4 * 1.5 + 1.0 + 4 * 2.0 + 0.5, 1e-12));
    const auto g = dag::build_sharded_iteration(u.model, u.costs, schedule);
    CHECK(gather_bytes(g) == std::vector<double>{2 * 2000.0, 2 * 2000.0}); // two units of 1000 parameters, 2 bytes
  }
  SECTION("the prefetch counts groups") {
    // Prefetch 0: group 2's gather waits for group 1's forward: 2 (g + 2f) + 4b + r.
    schedule.prefetch = 0;
    CHECK_THAT(makespan(u, schedule, 1.5, 0.5), WithinRel(2 * (1.5 + 2 * 1.0) + 4 * 2.0 + 0.5, 1e-12));
  }
  SECTION("with resharding, the last group keeps its parameters and the backward regathers the others") {
    // Backward: group {2, 3} computes at once (2b) while {0, 1} is regathered in one all-gather (g <= 2b), each
    // reduce-scatter under the next unit's backward (g, r <= b): g + 4 (f + b) + r, three all-gathers.
    schedule.reshard_after_forward = true;
    schedule.backward_gathers = {{0, 2}};
    CHECK_THAT(makespan(u, schedule, 1.5, 0.5), WithinRel(1.5 + 4 * (1.0 + 2.0) + 0.5, 1e-12));
    CHECK(gather_bytes(dag::build_sharded_iteration(u.model, u.costs, schedule)).size() == 3);
    // Without backward groups given, each resharded unit is regathered alone: units 1 and 0.
    schedule.backward_gathers.clear();
    CHECK(gather_bytes(dag::build_sharded_iteration(u.model, u.costs, schedule)) ==
          std::vector<double>{4000.0, 4000.0, 2000.0, 2000.0});
  }
  SECTION("offloaded parameters: one fetch per group, its units' fetches summed") {
    // Each unit's fetch 0.25: a group's copy 0.5 before its gather; the first gather waits for it: 0.5 more.
    schedule.fetch_unit_s.assign(4, 0.25);
    const auto g = dag::build_sharded_iteration(u.model, u.costs, schedule);
    std::vector<double> copies;
    for (std::size_t v = 0; v < g.size(); ++v)
      if (g.task(v).resource == dag::Resource::copy)
        copies.push_back(g.task(v).duration_s);
    CHECK(copies == std::vector<double>{0.5, 0.5});
    CHECK_THAT(makespan(u, schedule, 1.5, 0.5), WithinRel(0.5 + 1.5 + 4 * 1.0 + 4 * 2.0 + 0.5, 1e-12));
  }
  SECTION("groups that do not cover the units are a logic error") {
    schedule.forward_gathers = {{0, 2}, {3, 4}};
    CHECK_THROWS_WITH(dag::build_sharded_iteration(u.model, u.costs, schedule),
                      Contains("do not cover the units in order"));
    schedule.forward_gathers = {{0, 2}, {2, 4}};
    schedule.reshard_after_forward = true;
    schedule.backward_gathers = {{0, 1}};
    CHECK_THROWS_WITH(dag::build_sharded_iteration(u.model, u.costs, schedule),
                      Contains("do not cover the resharded units"));
  }
}

namespace {

// Many small layers (10^4 parameters, 10 us of forward each) on 16 nodes x 1 GPU: a ring all-gather's latency,
// 15 x 2 x 5 us, is 15 times a layer's forward.
Json small_layers_doc(int layers, const std::string& strategy, int prefetch) {
  Json doc = uniform_doc(layers, 10000, 16, 1);
  doc["strategy"] = {{"kind", strategy}};
  doc["sharding"] = {{"stage", 3}, {"unit", "layer"}, {"prefetch", prefetch}};
  return doc;
}

} // namespace

TEST_CASE("sharding: MG-WFBP merges stage 3's all-gathers where their start-up cost dominates",
          "[sharding][mgwfbp][gather-merge]") {
  // 48 layers: wfbp gathers each unit alone (48 in forward, 47 in backward); mg-wfbp merges them into fewer groups,
  // exposes less of them, and the iteration is shorter. Each group is one all-gather of its units' parameters, and
  // the memory holds prefetch + 1 consecutive groups in either direction (the backward's sequence starting with the
  // last forward group).
  const int prefetch = GENERATE(0, 1, 2);
  CAPTURE(prefetch);
  const auto wfbp = run_analytic(parse_scenario(small_layers_doc(48, "wfbp", prefetch), "t.json"));
  const auto s = parse_scenario(small_layers_doc(48, "mg-wfbp", prefetch), "t.json");
  const auto mg = run_analytic(s);
  REQUIRE(wfbp.sharding);
  REQUIRE(mg.sharding);
  CHECK(wfbp.sharding->forward_gather_groups == 48);
  CHECK(wfbp.sharding->backward_gather_groups == 47);
  CHECK(mg.sharding->forward_gather_groups < 48);
  CHECK(mg.sharding->backward_gather_groups < 47);
  CHECK(mg.sharding->allgathers == mg.sharding->forward_gather_groups + mg.sharding->backward_gather_groups);
  CHECK(mg.iteration_time_s < wfbp.iteration_time_s);
  CHECK(mg.sharding->exposed_allgather_s < wfbp.sharding->exposed_allgather_s);
  bool noted = false;
  for (const auto& note : mg.notes)
    noted = noted || note.find(fmt::format("{} gather groups in forward", mg.sharding->forward_gather_groups)) !=
                         std::string::npos;
  CHECK(noted);
  // Memory: the windows of prefetch + 1 consecutive gathers in each direction, from the plan's DAG.
  const auto p = prepare(s, Engine::analytic);
  const auto bytes = gather_bytes(p.graph);
  const auto forward = static_cast<std::size_t>(mg.sharding->forward_gather_groups);
  REQUIRE(bytes.size() == forward + static_cast<std::size_t>(mg.sharding->backward_gather_groups));
  std::vector<double> backward{bytes[forward - 1]};
  backward.insert(backward.end(), bytes.begin() + static_cast<std::ptrdiff_t>(forward), bytes.end());
  const std::vector<double> ahead(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(forward));
  double most = 0;
  const std::vector<const std::vector<double>*> sequences{&ahead, &backward};
  for (const auto* sequence : sequences)
    for (std::size_t j = 0; j < sequence->size(); ++j) {
      double sum = 0;
      for (std::size_t k = j; k < std::min(sequence->size(), j + static_cast<std::size_t>(prefetch) + 1); ++k)
        sum += (*sequence)[k];
      most = std::max(most, sum);
    }
  CHECK_THAT(mg.sharding->gathered_bytes, WithinRel(most, 1e-12));
  CHECK(mg.sharding->gathered_bytes > wfbp.sharding->gathered_bytes);
  CHECK_THAT(wfbp.sharding->gathered_bytes, WithinRel((prefetch + 1) * 10000 * 2.0, 1e-12));
  CHECK_THAT(mg.peak_memory_bytes_per_gpu, WithinRel(mg.sharding->total_bytes(), 1e-12));
}

TEST_CASE("sharding: MG-WFBP's gather groups of a scenario are optimal by brute force", "[sharding][mgwfbp]") {
  // Random small models (3-9 layers of random sizes, forward and backward times) on 16 nodes x 1 GPU, stage 3 per
  // layer with mg-wfbp: the forward's gather groups in the plan's DAG end the forward (as the planner's model times
  // it, with the ring all-gather's alpha and beta over the shard group) no later than any split of the layers.
  std::mt19937_64 rng(3204);
  for (int instance = 0; instance < 20; ++instance) {
    const int layers = std::uniform_int_distribution<int>(3, 9)(rng);
    Json doc = small_layers_doc(layers, "mg-wfbp", 1);
    Json calibration = {
        {"format", "ddlsim-calibration"}, {"version", 2}, {"batch_per_gpu", 1}, {"layers", Json::object()}};
    std::vector<double> forward, bytes;
    for (int l = 0; l < layers; ++l) {
      const auto params = std::uniform_int_distribution<std::int64_t>(1000, 2000000)(rng);
      doc["model"]["layers"][static_cast<std::size_t>(l)]["params"] = params;
      const int fwd_us = std::uniform_int_distribution<int>(10, 2000)(rng);
      calibration["layers"]["l" + std::to_string(l)] = {{"forward", fmt::format("{} us", fwd_us)},
                                                        {"backward", fmt::format("{} us", 2 * fwd_us)}};
      bytes.push_back(static_cast<double>(params) * 2);
    }
    doc["calibration"] = calibration;
    const auto s = parse_scenario(doc, "t.json");
    const auto p = prepare(s, Engine::analytic);
    REQUIRE(p.sharding);
    forward = p.costs.worker.fwd_s;
    // The planner's alpha and beta: the ring all-gather over the 16 GPUs, affine in its payload on this star.
    std::vector<int> ranks(16);
    for (int r = 0; r < 16; ++r)
      ranks[static_cast<std::size_t>(r)] = r;
    const auto model = make_cost_model(*s.sharding->gather_algorithm, layout_of(ranks, s.cluster).net);
    const double t1 = model->cost(1e6).time_s, t2 = model->cost(2e6).time_s;
    const dag::AffineCost cost{2 * t1 - t2, (t2 - t1) / 1e6};
    // The plan's forward groups, from its gathers' bytes.
    std::vector<dag::GatherGroup> planned;
    const auto gathered = gather_bytes(p.graph);
    int next = 0;
    for (int j = 0; j < p.sharding->forward_gather_groups; ++j) {
      double sum = 0;
      int end = next;
      while (end < layers && sum < gathered[static_cast<std::size_t>(j)])
        sum += bytes[static_cast<std::size_t>(end++)];
      REQUIRE(sum == gathered[static_cast<std::size_t>(j)]);
      planned.push_back({next, end});
      next = end;
    }
    REQUIRE(next == layers);
    CAPTURE(instance, layers, planned.size());
    CHECK_THAT(dag::gather_sequence_end(planned, forward, bytes, cost),
               WithinRel(brute_force_end(forward, bytes, cost, 0), 1e-9));
  }
}

TEST_CASE("sharding: the summary accepts a GPU that holds only its shard of the weights", "[sharding][report]") {
  // 48 layers of 10^4 parameters on 16 single-GPU nodes at stage 3: each GPU holds 1/16 of the bf16 weights, the
  // gathered units and no activations, less than the whole model's 2 bytes per parameter that the summary's check
  // once required of every GPU; with the parameters offloaded it holds none of them. No reserve and no
  // fragmentation, which would hide the shard.
  Json doc = uniform_doc(48, 10000, 16, 1);
  doc["memory"] = {{"reserve", "0 B"}, {"fragmentation", 0}};
  doc["gpu"]["host_link"] = "20 GB/s";
  doc["sharding"] = {{"stage", 3}, {"unit", "layer"}};
  const auto s = parse_scenario(doc, "t.json");
  const auto r = run_analytic(s);
  REQUIRE(r.peak_memory_bytes_per_gpu < 2 * 48 * 10000.0);
  CHECK_NOTHROW(summary_json(s, r));
  doc["sharding"]["offload"] = "parameters";
  const auto offloaded = parse_scenario(doc, "t.json");
  CHECK_NOTHROW(summary_json(offloaded, run_analytic(offloaded)));
}

TEST_CASE("sharding: reshard_after_forward \"all\" gathers every unit twice: 3(d-1)/d P e", "[sharding][traffic]") {
  // The issue's closed form for stage 3 with resharding: every unit, the last one included (FSDP2's
  // reshard_after_forward=True given to every module), all-gathered before its forward and again before its backward,
  // and reduce-scattered once: 3(d-1)/d P e on L = 6 layers over d = 8 GPUs, bf16; the default keeps the last unit.
  const double P = 6e6, e = 2, d = 8, ring = (d - 1) / d * P * e;
  Json doc =
      with_sharding(uniform_doc(6, 1000000, 8, 1), {{"stage", 3}, {"unit", "layer"}, {"reshard_after_forward", "all"}});
  const auto all = prepare(parse_scenario(doc, "t.json"), Engine::analytic);
  CHECK_THAT(all.communication_bytes_per_worker, WithinRel(3 * ring, 1e-9));
  REQUIRE(all.sharding);
  CHECK(all.sharding->allgathers == 12);
  CHECK(all.sharding->reshard_last_unit);
  // The last unit's second gather runs when the forward ends, exposed: one more gather than the default's closed
  // form g + L(f + b) + r.
  const auto u = uniform(6, 1.0, 2.0);
  dag::ShardedSchedule schedule{
      .stage = 3, .groups = {}, .units = dag::shard_units(u.model, dag::UnitKind::layer), .prefetch = 1};
  schedule.reshard_last = true;
  CHECK_THAT(makespan(u, schedule, 0.5, 0.5), WithinRel(0.5 + 0.5 + 6 * 3.0 + 0.5, 1e-12));
  doc["sharding"]["reshard_after_forward"] = "yes";
  CHECK_THROWS_WITH(parse_scenario(doc, "t.json"),
                    Contains("expected true (every unit but the last), false or \"all\""));
}
