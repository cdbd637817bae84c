// Tensor parallelism (issue #11, item 3): each GPU of a tensor group computes 1/t of every transformer layer (all of
// LayerNorm unless sequence parallelism splits it too), and per block and micro-batch 2 allreduces of b s h elements
// in forward and 2 in backward run on the compute stream over the group (reduce-scatter + allgather with sequence
// parallelism); recomputation repeats the forward's. Checked on the DAG the flow engine lowers (one task per
// collective) and on the analytic engine, which folds each pass's collectives into it.
#include "sim/analytic/analytic.hpp"
#include "sim/network/communicator.hpp"
#include "sim/network/lowering/evaluate.hpp"
#include "sim/plan/prepare.hpp"
#include "sim/plan/schedule.hpp"
#include "sim/spec/scenario.hpp"

#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

using namespace ddlsim;
using namespace ddlsim::sim;
using Catch::Matchers::WithinRel;

namespace {

// GPT-2 medium (24 blocks, h 1024, 16 heads, s 1024), bf16, 2 micro-batches of 2 sequences; `nodes` x 4 GPUs,
// `pipeline` stages of `tensor` GPUs (the rest data-parallel).
Json gpt(int nodes, int pipeline, int tensor, bool sequence_parallel = false, const std::string& recompute = "none") {
  Json doc = Json::parse(R"({
    "name": "tensor",
    "model": {"zoo": "gpt2-medium", "batch_per_gpu": 2, "gradient_dtype": "bf16"},
    "gpu": {"preset": "A100-SXM4-80GB", "efficiency": 0.5},
    "cluster": {"gpus_per_node": 4, "intra_node": {"bandwidth": "300 GB/s", "latency": "1 us"},
                "inter_node": {"bandwidth": "200 Gbps", "latency": "2 us"}, "nic": "per-gpu"},
    "strategy": {"kind": "ddp"},
    "optimizer": "adam"
  })");
  doc["cluster"]["nodes"] = nodes;
  doc["parallelism"] = {{"pipeline", pipeline}, {"tensor", tensor}, {"sequence_parallel", sequence_parallel}};
  doc["pipeline"] = {{"schedule", "1f1b"}, {"micro_batches", 2}, {"partition", "uniform"}, {"recompute", recompute}};
  return doc;
}

constexpr double kBsh = 2.0 * 1024 * 1024 * 2; // b s h elements in bf16: bytes of every tensor-group collective

// The tensor-group collectives of the DAG the flow engine lowers, by kind, on `gpu`.
std::map<Collective, int> tensor_collectives(const Plan& p, int gpu) {
  std::map<Collective, int> out;
  const auto& g = p.graph;
  for (std::size_t v = 0; v < g.size(); ++v) {
    const auto& t = g.task(v);
    if (dag::collective_of(t) == Collective::none || t.resource != dag::Resource::gpu_compute || t.device.index != gpu)
      continue;
    CHECK(dag::bytes_of(t) == kBsh);
    CHECK(g.axis(t) == dag::IterationGraph::Axis::tensor);
    ++out[dag::collective_of(t)];
  }
  return out;
}

// What parsing says of a scenario: its one-line error, or "accepted".
std::string tensor_error(const Json& doc) {
  try {
    (void)parse_scenario(doc, "t.json");
  } catch (const InputError& e) {
    return std::string(e.what());
  }
  return std::string("accepted");
}

} // namespace

TEST_CASE("tensor parallelism: 2 + 2 collectives of b s h per block and micro-batch over the tensor group",
          "[pipeline][tensor]") {
  // 2 nodes x 4 GPUs: 2 stages of 4 tensor ranks (12 blocks each), 1 replica; stage 1 is GPUs 4-7.
  const auto plain = parse_scenario(gpt(2, 2, 4), "t.json");
  const auto p = prepare(plain, Engine::flow);
  const int blocks = 12, m = 2;
  CHECK(tensor_collectives(p, 0) == std::map<Collective, int>{{Collective::allreduce, 4 * blocks * m}});
  CHECK(tensor_collectives(p, 4) == std::map<Collective, int>{{Collective::allreduce, 4 * blocks * m}});
  // Their communicator is the stage's tensor group; the DAG stands for its 4 GPUs.
  for (std::size_t v = 0; v < p.graph.size(); ++v) {
    const auto& t = p.graph.task(v);
    if (dag::collective_of(t) == Collective::allreduce && t.resource == dag::Resource::gpu_compute)
      CHECK(p.graph.communicator(dag::communicator_of(t)).ranks ==
            (t.device.index == 0 ? std::vector<int>{0, 1, 2, 3} : std::vector<int>{4, 5, 6, 7}));
  }
  CHECK(p.graph.replicas() == 4);
  CHECK(p.graph.tensor_peers() == 4);
  CHECK(p.graph.replica_device(3, dag::Device::gpu(4)) == dag::Device::gpu(7));

  // Full recomputation repeats the forward's 2; sequence parallelism turns each allreduce into a reduce-scatter and an
  // allgather; selective recomputation repeats none.
  const auto full = prepare(parse_scenario(gpt(2, 2, 4, false, "full"), "t.json"), Engine::flow);
  CHECK(tensor_collectives(full, 0) == std::map<Collective, int>{{Collective::allreduce, 6 * blocks * m}});
  const auto sp = prepare(parse_scenario(gpt(2, 2, 4, true, "selective"), "t.json"), Engine::flow);
  CHECK(tensor_collectives(sp, 0) == std::map<Collective, int>{{Collective::allgather, 4 * blocks * m},
                                                               {Collective::reduce_scatter, 4 * blocks * m}});
  // Megatron-Core sends each tensor rank's whole activation to the next stage, its sequence shard with sequence
  // parallelism: b s h elements, or b s h / t.
  for (const auto* run : {&p, &sp})
    for (std::size_t v = 0; v < run->graph.size(); ++v)
      if (dag::collective_of(run->graph.task(v)) == Collective::point_to_point)
        CHECK(dag::bytes_of(run->graph.task(v)) == (run == &p ? kBsh : kBsh / 4));
}

TEST_CASE("tensor parallelism: 1/t of each layer's compute (LayerNorm whole without sequence parallelism), the "
          "collectives' closed forms on the compute stream",
          "[pipeline][tensor]") {
  for (bool sequence_parallel : {false, true}) {
    CAPTURE(sequence_parallel);
    const auto s = parse_scenario(gpt(2, 2, 4, sequence_parallel), "t.json");
    const auto r = run_analytic(s);
    const auto costs = compute_costs(s).worker;
    // Stage 0 holds the embeddings and blocks 0-11 (uniform: 12 blocks per stage).
    const auto& stage = r.pipeline->per_stage[0];
    double compute = 0;
    for (int l = stage.first_layer; l <= stage.last_layer; ++l) {
      const auto i = static_cast<std::size_t>(l);
      const double share = s.model.layers[i].kind == "layernorm" && !sequence_parallel ? 1.0 : 0.25;
      compute += (costs.fwd_s[i] + costs.bwd_s[i]) * share;
    }
    CHECK_THAT(stage.compute_s, WithinRel(2 * compute, 1e-12)); // m = 2 micro-batches
    // 4 allreduces per block and micro-batch (the ring's closed form), or 4 reduce-scatters and 4 allgathers (their
    // lowerings' times), of b s h on the node's 4 GPUs.
    Network node = s.cluster.network();
    node.nodes = 1;
    const LoweringShape shape{1, 4};
    const auto lowered = [&](Collective c) {
      return phase_synchronous_time(collective_lowering(s, c).lower(shape, kBsh, Granularity::aggregated), node);
    };
    const double per_block = sequence_parallel ? lowered(Collective::reduce_scatter) + lowered(Collective::allgather)
                                               : make_cost_model(*s.allreduce.algorithm, node)->cost(kBsh).time_s;
    CHECK_THAT(stage.tensor_communication_s, WithinRel(4 * 12 * 2 * per_block, 1e-9));
    // They are exposed communication, not compute: both stages' GPUs spend that long in them (12 blocks each), and
    // the breakdown is their mean.
    CHECK(r.breakdown.exposed_communication_s >= stage.tensor_communication_s * (1 - 1e-12));
  }
}

TEST_CASE("tensor parallelism: with ring allgathers, sequence parallelism's collectives cost the allreduces'",
          "[pipeline][tensor]") {
  // A ring reduce-scatter and a ring allgather are the ring allreduce's two halves (Patarasuk & Yuan): the same
  // 2(t-1) steps of b s h / t.
  Json doc = gpt(2, 2, 4, false);
  doc["collectives"] = {{"allreduce", "ring"}, {"allgather", "ring"}};
  const auto plain = run_analytic(parse_scenario(doc, "t.json"));
  doc["parallelism"]["sequence_parallel"] = true;
  const auto sp = run_analytic(parse_scenario(doc, "t.json"));
  CHECK_THAT(sp.pipeline->per_stage[0].tensor_communication_s,
             WithinRel(plain.pipeline->per_stage[0].tensor_communication_s, 1e-12));
  // The default allgather (recursive doubling) takes log2 t rounds instead of t - 1: fewer latencies.
  doc.erase("collectives");
  const auto doubling = run_analytic(parse_scenario(doc, "t.json"));
  CHECK(doubling.pipeline->per_stage[0].tensor_communication_s < sp.pipeline->per_stage[0].tensor_communication_s);
  doc["collectives"] = {{"allgather", "butterfly"}};
  try {
    (void)parse_scenario(doc, "t.json");
    FAIL("an unknown allgather algorithm was accepted");
  } catch (const InputError& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("/collectives/allgather") && Catch::Contains("ring"));
  }
}

TEST_CASE("tensor parallelism: the analytic engine's folded passes time the DAG of separate collectives exactly",
          "[pipeline][tensor]") {
  for (const char* recompute : {"none", "full", "selective"}) {
    for (bool sequence_parallel : {false, true}) {
      CAPTURE(recompute, sequence_parallel);
      auto doc = gpt(4, 2, 4, sequence_parallel, recompute); // d = 2
      doc["host"] = {{"launch", "0 s"}}; // the host issues a folded pass and its parts alike, but not at one instant
      const auto s = parse_scenario(doc, "t.json");
      const auto folded = run_analytic(s);
      auto separate = prepare(s, Engine::flow);
      CHECK(separate.graph.size() > folded.graph.size());
      Timings timed;
      timed.timing = schedule(separate.graph);
      const auto r = finalize(s, std::move(separate), std::move(timed));
      CHECK_THAT(folded.iteration_time_s, WithinRel(r.iteration_time_s, 1e-12));
      CHECK_THAT(folded.breakdown.exposed_communication_s, WithinRel(r.breakdown.exposed_communication_s, 1e-9));
      CHECK_THAT(folded.breakdown.compute_s, WithinRel(r.breakdown.compute_s, 1e-9));
      CHECK_THAT(folded.communication_bytes_per_worker, WithinRel(r.communication_bytes_per_worker, 1e-12));
      for (std::size_t i = 0; i < 2; ++i) {
        CHECK_THAT(folded.pipeline->per_stage[i].compute_s, WithinRel(r.pipeline->per_stage[i].compute_s, 1e-9));
        CHECK_THAT(folded.pipeline->per_stage[i].tensor_communication_s,
                   WithinRel(r.pipeline->per_stage[i].tensor_communication_s, 1e-9));
      }
    }
  }
}

TEST_CASE("tensor parallelism: model FLOPs utilisation is Korthikanti's 72 B s L h^2 (1 + s/6h + V/12Lh) over peak",
          "[pipeline][tensor]") {
  const auto s = parse_scenario(gpt(2, 2, 4), "t.json");
  const auto r = run_analytic(s);
  // GPT-2 medium: L = 24, h = 1024, s = 1024, V = 50257; 4 sequences per iteration (b m d = 2 x 2 x 1).
  const double per_sequence = 72.0 * 1024 * 24 * 1024.0 * 1024 * (1 + 1024.0 / (6 * 1024) + 50257.0 / (12 * 24 * 1024));
  REQUIRE(r.model_flops_utilisation);
  CHECK_THAT(*r.model_flops_utilisation, WithinRel(4 * per_sequence / r.iteration_time_s / (8 * 312e12), 1e-12));
  // Not a transformer: no such figure.
  Json doc = gpt(2, 2, 1);
  doc["model"]["zoo"] = "resnet50";
  doc.erase("parallelism");
  doc.erase("pipeline");
  CHECK_FALSE(run_analytic(parse_scenario(doc, "r.json")).model_flops_utilisation);
}

TEST_CASE("tensor parallelism: what the scenario may ask", "[pipeline][tensor][spec]") {
  Json cnn = gpt(2, 2, 2);
  cnn["model"]["zoo"] = "resnet50";
  CHECK_THAT(tensor_error(cnn), Catch::Contains("/parallelism/tensor") && Catch::Contains("not a transformer"));
  Json heads = gpt(2, 1, 8);
  heads["cluster"]["gpus_per_node"] = 8;
  heads["cluster"]["nodes"] = 1;
  heads["model"]["zoo"] = "gpt2-xl"; // 25 heads
  CHECK_THAT(tensor_error(heads), Catch::Contains("/parallelism/tensor") && Catch::Contains("25 attention heads"));
  Json sp = gpt(2, 2, 1, true);
  CHECK_THAT(tensor_error(sp), Catch::Contains("/parallelism/sequence_parallel"));
  // Tensor parallelism without a pipeline object: one stage of one micro-batch.
  Json alone = gpt(1, 1, 4);
  alone.erase("pipeline");
  const auto s = parse_scenario(alone, "t.json");
  REQUIRE(s.pipeline);
  CHECK(s.pipeline->micro_batches == 1);
  const auto r = run_analytic(s);
  CHECK(r.data_parallel == 1);
  CHECK(r.pipeline->per_stage.size() == 1);
  CHECK(r.pipeline->per_stage[0].tensor_communication_s > 0);
  Json ps = gpt(2, 1, 4);
  ps.erase("pipeline");
  ps["strategy"]["kind"] = "ps-sync";
  CHECK_THAT(tensor_error(ps), Catch::Contains("/strategy/kind") && Catch::Contains("tensor-parallel"));
}

TEST_CASE("tensor parallelism: the DAG's copies and the instances of its collectives", "[pipeline][tensor][graph]") {
  // 4 nodes x 4 GPUs, 2 stages, t = 4, d = 2: stage 0 is replica 0 on GPUs 0-3 and replica 1 on GPUs 4-7.
  const auto p = prepare(parse_scenario(gpt(4, 2, 4), "t.json"), Engine::flow);
  const auto& g = p.graph;
  CHECK(g.replicas() == 8); // d x t copies
  CHECK(g.tensor_peers() == 4);
  CHECK(g.replica_device(1, dag::Device::gpu(0)) == dag::Device::gpu(1)); // copy 1: tensor rank 1 of replica 0
  CHECK(g.replica_device(4, dag::Device::gpu(0)) == dag::Device::gpu(4)); // copy 4: tensor rank 0 of replica 1
  CHECK(g.replica_device(7, dag::Device::gpu(8)) == dag::Device::gpu(15));
  bool data = false, tensor = false, transfer = false;
  for (std::size_t v = 0; v < g.size(); ++v) {
    const auto& t = g.task(v);
    if (dag::collective_of(t) == Collective::none || t.device.index != 0)
      continue;
    switch (g.axis(t)) {
    case dag::IterationGraph::Axis::data: // one per tensor rank, shared by the replicas
      data = true;
      CHECK(g.instances(t) == 4);
      CHECK(g.instance_of(t, 6) == 2);
      CHECK(g.instance_communicator(t, 2).ranks == std::vector<int>{2, 6});
      break;
    case dag::IterationGraph::Axis::tensor: // one per replica, shared by its tensor ranks
      tensor = true;
      CHECK(g.instances(t) == 2);
      CHECK(g.instance_of(t, 6) == 1);
      CHECK(g.instance_communicator(t, 1).ranks == std::vector<int>{4, 5, 6, 7});
      break;
    case dag::IterationGraph::Axis::copy: // a transfer: one per copy
      transfer = true;
      CHECK(g.instances(t) == 8);
      CHECK(g.instance_of(t, 6) == 6);
      CHECK(g.instance_communicator(t, 6).ranks ==
            (std::get<dag::Transfer>(t.payload).dst == 8 ? std::vector<int>{6, 14} : std::vector<int>{14, 6}));
      break;
    }
  }
  CHECK((data && tensor && transfer));
}

TEST_CASE("tensor parallelism: grouped-query attention's key and value projections split over at most their heads, "
          "replicated beyond; RMSNorm repeated",
          "[pipeline][tensor][decoder]") {
  // Llama 3 8B's blocks (32 query heads, 8 key/value heads), 2 of them at s = 1024, on one stage of t GPUs.
  const int t = GENERATE(4, 8, 16);
  CAPTURE(t);
  Json doc = gpt(t / 4, 1, t);
  doc["model"] = Json::parse(R"({"zoo": "llama3-8b", "batch_per_gpu": 1, "gradient_dtype": "bf16",
                                 "transformer": {"layers": 2, "sequence": 1024}})");
  const auto s = parse_scenario(doc, "t.json");
  const auto r = run_analytic(s);
  const auto costs = compute_costs(s).worker;
  double compute = 0;
  for (std::size_t i = 0; i < s.model.layers.size(); ++i) {
    const auto& layer = s.model.layers[i];
    const bool kv = layer.name.ends_with("k_proj") || layer.name.ends_with("v_proj");
    const double share = layer.kind == "rmsnorm" ? 1.0 : kv ? 1.0 / std::min(t, 8) : 1.0 / t;
    compute += (costs.fwd_s[i] + costs.bwd_s[i]) * share;
  }
  CHECK_THAT(r.pipeline->per_stage[0].compute_s, WithinRel(2 * compute, 1e-12)); // m = 2 micro-batches
  const bool noted = std::any_of(r.notes.begin(), r.notes.end(), [](const std::string& n) {
    return n.find("but RMSNorm (repeated on every rank) and the key/value projections, 1/8 each (each of the 8 "
                  "key/value heads on 2 ranks)") != std::string::npos;
  });
  CHECK(noted == (t == 16));
}

TEST_CASE("tensor parallelism: a decoder's key/value heads and MLP width must split", "[pipeline][tensor][decoder]") {
  Json doc = gpt(2, 1, 8);
  doc["cluster"]["gpus_per_node"] = 8;
  doc["cluster"]["nodes"] = 1;
  doc["model"]["zoo"] = "transformer";
  doc["model"]["transformer"] = Json::parse(R"({"layers": 2, "hidden": 1024, "heads": 16, "sequence": 256,
                                                "vocabulary": 1000, "kv_heads": 12})");
  // 12 key/value heads do not divide 16 query heads
  CHECK_THAT(tensor_error(doc), Catch::Contains("/model/transformer/kv_heads") && Catch::Contains("must divide heads"));
  doc["model"]["transformer"]["heads"] = 32;
  doc["model"]["transformer"]["kv_heads"] = 4;
  doc["parallelism"]["tensor"] = 8;
  // 8 ranks for 4 key/value heads: replicated on 2 ranks each with separate projections (Llama), refused with the
  // parametric decoder's fused c_attn
  CHECK_THAT(tensor_error(doc), Catch::Contains("/parallelism/tensor") && Catch::Contains("fused"));
  doc["model"] = Json::parse(R"({"zoo": "llama2-7b", "batch_per_gpu": 1, "gradient_dtype": "bf16",
                                 "transformer": {"layers": 2, "sequence": 256, "kv_heads": 4}})");
  CHECK(tensor_error(doc) == "accepted");
  doc["model"]["zoo"] = "transformer";
  doc["model"]["transformer"] = Json::parse(R"({"layers": 2, "hidden": 1024, "heads": 32, "sequence": 256,
                                                "vocabulary": 1000})");
  doc["model"]["transformer"]["kv_heads"] = 16;
  doc["parallelism"]["tensor"] = 8;
  CHECK(tensor_error(doc) == "accepted");
  doc["model"]["transformer"]["heads"] = 48;
  doc["model"]["transformer"]["hidden"] = 1536;
  doc["model"]["transformer"]["kv_heads"] = 6;
  doc["parallelism"]["tensor"] = 4; // 4 neither divides 6 nor is a multiple of it
  doc["cluster"]["gpus_per_node"] = 4;
  CHECK_THAT(tensor_error(doc), Catch::Contains("/parallelism/tensor") && Catch::Contains("6 key/value heads"));
  doc["model"]["transformer"]["kv_heads"] = 12;
  doc["model"]["transformer"]["mlp"] = "swiglu";
  doc["model"]["transformer"]["ffn_hidden"] = 4098;
  CHECK_THAT(tensor_error(doc), Catch::Contains("/parallelism/tensor") && Catch::Contains("MLP width 4098"));
}
