// Pipeline schedules (dag/pipeline.hpp) timed by the analytic scheduler against the closed forms of issue #11:
// uniform stages, per-micro-batch stage forward t_f and backward t_b, free or fixed-cost transfers.
#include "dag/pipeline.hpp"
#include "sim/analytic/analytic.hpp"
#include "sim/network/lowering/evaluate.hpp"
#include "sim/plan/schedule.hpp"
#include "sim/spec/scenario.hpp"

#include <catch2/catch.hpp>

#include <map>
#include <vector>

using namespace ddlsim;
using namespace ddlsim::dag;
using Catch::Matchers::WithinRel;

namespace {

const PipelineScheduleInfo* const kGpipe = &pipeline_schedule("gpipe");
const PipelineScheduleInfo* const kOneFOneB = &pipeline_schedule("1f1b");
const PipelineScheduleInfo* const kInterleaved = &pipeline_schedule("interleaved-1f1b");
const PipelineScheduleInfo* const kTwoBw = &pipeline_schedule("pipedream-2bw");
const PipelineScheduleInfo* const kPipeDream = &pipeline_schedule("pipedream");
const PipelineScheduleInfo* const kSpecTrain = &pipeline_schedule("spectrain");

// p ranks on GPUs 0 .. p-1 (one replica), v chunks each, every virtual stage t_f / v forward and t_b / v backward;
// no data loading, copies, updates or gradient groups.
PipelinePlan uniform(const PipelineScheduleInfo* schedule, int p, int m, int v, double tf, double tb) {
  PipelinePlan plan;
  plan.schedule = schedule;
  plan.micro_batches = m;
  plan.chunks = v;
  plan.gpus_per_node = p;
  for (int s = 0; s < p * v; ++s)
    plan.stages.push_back(
        {.first_layer = s, .end_layer = s + 1, .forward_s = tf / v, .backward_s = tb / v, .activation_bytes = 1e6});
  for (int r = 0; r < p; ++r)
    plan.ranks.push_back({.gpu = r, .groups = {}, .update_s = 0, .data_parallel = {{r}}});
  return plan;
}

// Sets every transfer's duration to c and returns the makespan.
double makespan(IterationGraph g, double c = 0) {
  for (std::size_t v = 0; v < g.size(); ++v)
    if (dag::collective_of(g.task(v)) == Collective::point_to_point)
      g.task(v).duration_s = c;
  return sim::makespan_of(sim::schedule(g));
}

std::vector<int> in_flight(const PipelineScheduleInfo* schedule, int p, int m, int v) {
  std::vector<int> out;
  for (int r = 0; r < p; ++r)
    out.push_back(in_flight_passes(pipeline_ops(*schedule, p, m, v, r)));
  return out;
}

} // namespace

TEST_CASE("pipeline: GPipe and 1F1B take (m + p - 1)(t_f + t_b) with free transfers", "[pipeline][closed-form]") {
  for (auto schedule : {kGpipe, kOneFOneB}) {
    CAPTURE(schedule->name);
    CHECK_THAT(makespan(build_pipeline(uniform(schedule, 4, 8, 1, 1, 2))), WithinRel(33.0, 1e-9));
    CHECK_THAT(makespan(build_pipeline(uniform(schedule, 8, 32, 1, 1, 2))), WithinRel(117.0, 1e-9));
    CHECK_THAT(makespan(build_pipeline(uniform(schedule, 1, 5, 1, 1, 2))), WithinRel(15.0, 1e-9));
  }
}

TEST_CASE("pipeline: interleaved 1F1B takes m(t_f + t_b) + (p - 1)(t_f + t_b) / v", "[pipeline][closed-form]") {
  const auto interleaved = kInterleaved;
  CHECK_THAT(makespan(build_pipeline(uniform(interleaved, 4, 8, 2, 1, 2))), WithinRel(28.5, 1e-9));
  CHECK_THAT(makespan(build_pipeline(uniform(interleaved, 4, 8, 4, 1, 2))), WithinRel(26.25, 1e-9));
  CHECK_THAT(makespan(build_pipeline(uniform(interleaved, 8, 32, 2, 1, 2))), WithinRel(106.5, 1e-9));
  // One chunk is 1F1B.
  CHECK_THAT(makespan(build_pipeline(uniform(interleaved, 4, 8, 1, 1, 2))), WithinRel(33.0, 1e-9));
  CHECK_THROWS_AS(pipeline_ops(*interleaved, 4, 6, 2, 0), std::invalid_argument); // m not divisible by p
}

TEST_CASE("pipeline: GPipe with a transfer time c takes m(t_f + t_b) + (p - 1)(t_f + t_b + 2c)",
          "[pipeline][closed-form]") {
  const double c = 0.25;
  for (int p : {2, 4, 6}) {
    CAPTURE(p);
    const int m = 8;
    CHECK_THAT(makespan(build_pipeline(uniform(kGpipe, p, m, 1, 1, 2)), c),
               WithinRel(m * 3.0 + (p - 1) * (3.0 + 2 * c), 1e-9));
  }
}

TEST_CASE("pipeline: micro-batches in flight per stage", "[pipeline][memory]") {
  CHECK(in_flight(kOneFOneB, 4, 8, 1) == std::vector<int>{4, 3, 2, 1});
  CHECK(in_flight(kGpipe, 4, 8, 1) == std::vector<int>{8, 8, 8, 8});
  CHECK(in_flight(kInterleaved, 4, 8, 2) == std::vector<int>{11, 9, 7, 5});
  // Fewer micro-batches than stages: 1F1B holds all of them on the first stages.
  CHECK(in_flight(kOneFOneB, 4, 2, 1) == std::vector<int>{2, 2, 2, 1});
}

TEST_CASE("pipeline: every rank runs each pass once, forward before backward", "[pipeline][order]") {
  for (auto [schedule, v] :
       {std::pair{kGpipe, 1}, std::pair{kOneFOneB, 1}, std::pair{kInterleaved, 2}, std::pair{kInterleaved, 4}}) {
    for (int r = 0; r < 4; ++r) {
      CAPTURE(schedule->name, v, r);
      const auto ops = pipeline_ops(*schedule, 4, 8, v, r);
      REQUIRE(ops.size() == static_cast<std::size_t>(2 * 8 * v));
      std::vector<int> seen(static_cast<std::size_t>(8 * v), 0); // 1 after the forward, 2 after the backward
      for (const auto& op : ops) {
        auto& state = seen[static_cast<std::size_t>(op.chunk * 8 + op.micro_batch)];
        CHECK(state == (op.forward ? 0 : 1));
        state = op.forward ? 1 : 2;
      }
      CHECK(std::all_of(seen.begin(), seen.end(), [](int s) { return s == 2; }));
    }
  }
}

TEST_CASE("pipeline: the bubble of the simulated schedule is the closed form's", "[pipeline][closed-form]") {
  // Each rank computes m(t_f + t_b) of the makespan; the rest is its bubble.
  for (auto [schedule, p, m, v] : {std::tuple{kGpipe, 4, 8, 1}, std::tuple{kOneFOneB, 8, 32, 1},
                                   std::tuple{kInterleaved, 4, 8, 2}, std::tuple{kInterleaved, 8, 32, 2}}) {
    CAPTURE(schedule->name, p, m, v);
    const double t = makespan(build_pipeline(uniform(schedule, p, m, v, 1, 2)));
    CHECK_THAT(1 - m * 3.0 / t, WithinRel(bubble_fraction_closed_form(*schedule, p, m, v), 1e-9));
  }
}

TEST_CASE("pipeline: PipeDream's steady state has no bubble: m (t_f + t_b) per iteration", "[pipeline][async]") {
  // p = 4, m = 8, t_f = 2, t_b = 4 per stage, free updates: unrolled m + 3p micro-batches, measured between the ends
  // of stage 0's backwards of micro-batches 2p - 1 and 2p - 1 + m.
  for (auto schedule : {kPipeDream, kTwoBw, kSpecTrain}) {
    CAPTURE(schedule->name);
    const int p = 4, m = 8;
    auto plan = uniform(schedule, p, m + 3 * p, 1, 2, 4);
    plan.update_every = schedule == kTwoBw ? m : 1;
    const auto g = build_pipeline(plan);
    const auto timing = sim::schedule(g);
    std::vector<double> ends(static_cast<std::size_t>(m + 3 * p), -1);
    for (std::size_t v = 0; v < g.size(); ++v)
      if (g.task(v).kind == TaskKind::backward && dag::virtual_stage_of(g.task(v)) == 0)
        ends[static_cast<std::size_t>(dag::micro_batch_of(g.task(v)))] = timing[v].end_s;
    const auto first = static_cast<std::size_t>(2 * p - 1);
    CHECK_THAT(ends[first + m] - ends[first], WithinRel(48.0, 1e-9));
    // Every period in the window is t_f + t_b: no stage waits.
    for (std::size_t j = first; j < first + m; ++j)
      CHECK_THAT(ends[j + 1] - ends[j], WithinRel(6.0, 1e-9));
    CHECK(bubble_fraction_closed_form(*schedule, p, m, 1) == 0);
  }
}

TEST_CASE("pipeline: weight versions and SpecTrain's prediction steps", "[pipeline][async]") {
  std::vector<int> pipedream, two_bw, gpipe;
  for (int r = 0; r < 4; ++r) {
    pipedream.push_back(kPipeDream->weight_versions(4, r, false));
    two_bw.push_back(kTwoBw->weight_versions(4, r, false));
    gpipe.push_back(kGpipe->weight_versions(4, r, false));
  }
  CHECK(pipedream == std::vector<int>{4, 3, 2, 1});
  CHECK(two_bw == std::vector<int>{2, 2, 2, 2});
  CHECK(gpipe == std::vector<int>{1, 1, 1, 1});
  CHECK(kSpecTrain->weight_versions(4, 0, true) == 2);
  std::vector<int> forward, backward, forward2, backward2;
  for (int k = 0; k < 4; ++k) {
    const auto v1 = prediction_steps(WeightPrediction::v1, 4, k);
    const auto v2 = prediction_steps(WeightPrediction::v2, 4, k);
    forward.push_back(v1.forward);
    backward.push_back(v1.backward);
    forward2.push_back(v2.forward);
    backward2.push_back(v2.backward);
  }
  CHECK(forward == std::vector<int>{3, 2, 2, 1});
  CHECK(backward == std::vector<int>{0, 0, 1, 1});
  CHECK(forward2 == std::vector<int>{3, 2, 1, 0});
  CHECK(backward2 == forward2);
}

namespace {
// SpecTrain's setting (Chen, Yang, Cheng 2018, §5): VGG-16 on one server of 4 GPUs.
sim::Scenario vgg16_pipeline(const std::string& schedule) {
  Json doc = Json::parse(R"({
    "name": "vgg16-pipe",
    "model": {"zoo": "vgg16", "batch_per_gpu": 32},
    "gpu": {"preset": "V100-PCIe-16GB", "efficiency": 1},
    "cluster": {"nodes": 1, "gpus_per_node": 4, "intra_node": {"bandwidth": "12 GB/s", "latency": "5 us"},
                "inter_node": {"bandwidth": "10 Gbps", "latency": "25 us"}},
    "strategy": {"kind": "wfbp"},
    "parallelism": {"pipeline": 4}
  })");
  doc["pipeline"] = {{"schedule", schedule}, {"micro_batches", 8}};
  return sim::parse_scenario(doc, "vgg16-pipe.json");
}
} // namespace

TEST_CASE("pipeline: SpecTrain keeps PipeDream's pace with fewer weight versions", "[pipeline][async]") {
  const auto pipedream = sim::run_analytic(vgg16_pipeline("pipedream"));
  const auto spectrain = sim::run_analytic(vgg16_pipeline("spectrain"));
  REQUIRE(pipedream.pipeline);
  REQUIRE(spectrain.pipeline);
  CHECK_THAT(spectrain.iteration_time_s, WithinRel(pipedream.iteration_time_s, 0.02));
  CHECK(spectrain.iteration_time_s > pipedream.iteration_time_s); // its kernels cost something
  CHECK(pipedream.pipeline->per_stage[0].weight_versions == 4);
  CHECK(spectrain.pipeline->per_stage[0].weight_versions == 2);
  CHECK(spectrain.pipeline->per_stage[0].peak_memory_bytes < pipedream.pipeline->per_stage[0].peak_memory_bytes);
  // One iteration is m micro-batches: throughput b m / iteration.
  CHECK_THAT(pipedream.throughput_samples_per_s, WithinRel(32.0 * 8 / pipedream.iteration_time_s, 1e-12));
}

TEST_CASE("pipeline: a hybrid's stages reduce over their own data-parallel groups", "[pipeline][hybrid]") {
  // 2 nodes x 4 GPUs, 2 stages, 4 replicas: stage 0 is GPUs 0-3 (node 0), stage 1 GPUs 4-7 (node 1) (Megatron's
  // order); each stage's allreduces run over its node's 4 GPUs, the ring's closed form on 1 x 4 intra-node links.
  Json doc = Json::parse(R"({
    "name": "hybrid",
    "model": {"layers": [], "batch_per_gpu": 2},
    "gpu": {"peak_flops": "10 TFLOPS", "memory_bandwidth": "900 GB/s"},
    "cluster": {"nodes": 2, "gpus_per_node": 4, "intra_node": {"bandwidth": "100 GB/s", "latency": "2 us"},
                "inter_node": {"bandwidth": "10 Gbps", "latency": "25 us"}},
    "strategy": {"kind": "bsp"},
    "parallelism": {"pipeline": 2},
    "pipeline": {"schedule": "1f1b", "micro_batches": 4, "partition": [2, 2]}
  })");
  for (int l = 0; l < 4; ++l)
    doc["model"]["layers"].push_back(
        {{"name", "l" + std::to_string(l)}, {"params", 1000000 * (l + 1)}, {"fwd_flops", "1 GFLOP"}});
  const auto s = sim::parse_scenario(doc, "hybrid.json");
  const auto r = sim::run_analytic(s);
  sim::Network node;
  node.nodes = 1;
  node.gpus_per_node = 4;
  node.intra = s.cluster.intra;
  node.inter = s.cluster.inter;
  const auto ring = sim::make_cost_model(*s.allreduce.algorithm, node);
  std::map<int, double> reduced; // bytes allreduced by each stage's GPU
  int transfers = 0;
  for (std::size_t v = 0; v < r.graph.size(); ++v) {
    const auto& t = r.graph.task(v);
    if (dag::collective_of(t) == Collective::allreduce) {
      CAPTURE(t.device.index, dag::bytes_of(t));
      CHECK_THAT(t.duration_s, WithinRel(ring->cost(dag::bytes_of(t)).time_s, 1e-12));
      reduced[t.device.index] += dag::bytes_of(t);
      const auto& group = r.graph.communicator(dag::communicator_of(t)).ranks;
      CHECK(group == (t.device.index == 0 ? std::vector<int>{0, 1, 2, 3} : std::vector<int>{4, 5, 6, 7}));
    }
    if (const auto* p = std::get_if<dag::Transfer>(&t.payload)) {
      ++transfers;
      CHECK(p->wire.collective == Collective::point_to_point);
      CHECK(((p->src == 0 && p->dst == 4) || (p->src == 4 && p->dst == 0)));
    }
  }
  // bsp: one allreduce of each stage's whole gradient (layers 0-1: 3 M parameters, layers 2-3: 7 M), fp32.
  CHECK(reduced == std::map<int, double>{{0, 3e6 * 4}, {4, 7e6 * 4}});
  CHECK(transfers == 2 * 4); // one forward and one backward crossing per micro-batch
  CHECK(r.data_parallel == 4);
  CHECK(r.graph.replicas() == 4);
  CHECK(r.graph.replica_device(3, dag::Device::gpu(4)) == dag::Device::gpu(7));
}

TEST_CASE("pipeline: tied word embeddings are allreduced between the first and the last stage before their update",
          "[pipeline][hybrid]") {
  // A GPT-2-style LM (tied embeddings: V h = 1000 x 256) over 3 stages and t = 2 on 2 nodes x 4 GPUs, bf16, 2
  // replicas: GPUs 0 (stage 0) and 8 (stage 2) allreduce V h / t bf16 elements between them (Megatron-LM's embedding
  // group), after their data-parallel reduction, before their optimizer step; stage 1 takes no part. Untied, none.
  Json doc = Json::parse(R"({
    "name": "tied",
    "model": {"zoo": "transformer", "batch_per_gpu": 2, "gradient_dtype": "bf16",
              "transformer": {"layers": 6, "hidden": 256, "heads": 4, "sequence": 128, "vocabulary": 1000}},
    "gpu": {"preset": "A100-SXM4-80GB", "efficiency": 0.5},
    "cluster": {"nodes": 3, "gpus_per_node": 4, "intra_node": {"bandwidth": "300 GB/s", "latency": "1 us"},
                "inter_node": {"bandwidth": "100 Gbps", "latency": "2 us"}, "nic": "per-gpu"},
    "strategy": {"kind": "ddp"},
    "parallelism": {"pipeline": 3, "tensor": 2},
    "pipeline": {"schedule": "1f1b", "micro_batches": 4, "partition": "uniform"}
  })");
  // the allreduces between stages 0 and 2 (a data-parallel group stays inside its stage)
  const auto across = [](const sim::RunResult& r) {
    std::vector<std::size_t> found;
    for (std::size_t v = 0; v < r.graph.size(); ++v) {
      const auto& t = r.graph.task(v);
      if (t.kind == TaskKind::communication && dag::collective_of(t) == Collective::allreduce &&
          r.graph.communicator(dag::communicator_of(t)).ranks == std::vector<int>{0, 8})
        found.push_back(v);
    }
    return found;
  };
  const auto tied = sim::run_analytic(sim::parse_scenario(doc, "tied.json"));
  const auto found = across(tied);
  REQUIRE(found.size() == 1);
  CHECK(dag::bytes_of(tied.graph.task(found[0])) == 1000.0 * 256 / 2 * 2);
  int updates_after = 0;
  for (const auto next : tied.graph.successors(found[0])) {
    CHECK(tied.graph.task(next).kind == TaskKind::update);
    ++updates_after;
  }
  CHECK(updates_after == 2);
  doc["model"]["transformer"]["tied_embeddings"] = false;
  CHECK(across(sim::run_analytic(sim::parse_scenario(doc, "untied.json"))).empty());
}
