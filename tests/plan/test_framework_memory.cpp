// Memory as a framework holds it (sim/plan/memory.hpp, docs/memory.md): the loss's logits on the GPU that computes the
// loss, the fixed reserve once per GPU and the caching allocator's fragmentation on the tensors, in every memory
// report (data parallelism, pipeline stages, sharding); checked against closed forms, the refusals by message, and
// the measured peaks of Megatron-LM GPT runs on V100-SXM2-32GB (tests/data/memory/megatron-v100.json).
#include "core/io.hpp"
#include "dag/memory.hpp"
#include "sim/cli/run.hpp"
#include "sim/spec/scenario.hpp"

#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <cmath>
#include <string>

using namespace ddlsim;
using namespace ddlsim::sim;
using Catch::Matchers::Contains;
using Catch::Matchers::WithinRel;

namespace memtest {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kGiB = 1024.0 * kMiB;

// A GPT-2-style LM of 4 blocks (h 256, 4 heads, s 128, V 1000) on 2 nodes x 4 GPUs, fp16, Adam.
Json lm_doc() {
  return Json::parse(R"({
    "name": "lm",
    "model": {"zoo": "transformer", "batch_per_gpu": 2, "gradient_dtype": "fp16",
              "transformer": {"layers": 4, "hidden": 256, "heads": 4, "sequence": 128, "vocabulary": 1000}},
    "gpu": {"preset": "V100-SXM2-16GB", "efficiency": 0.5},
    "cluster": {"nodes": 2, "gpus_per_node": 4, "intra_node": {"bandwidth": "300 GB/s", "latency": "1 us"},
                "inter_node": {"bandwidth": "100 Gbps", "latency": "2 us"}, "nic": "per-gpu"},
    "strategy": {"kind": "ddp"},
    "optimizer": "adam"
  })");
}

// lm_doc with p stages of 1F1B over 4 micro-batches and t tensor ranks per stage.
Json pipeline_doc(int stages, int tensor) {
  Json doc = lm_doc();
  doc["parallelism"] = {{"pipeline", stages}, {"tensor", tensor}};
  doc["pipeline"] = {{"schedule", "1f1b"}, {"micro_batches", 4}, {"partition", "uniform"}};
  return doc;
}

Json with_memory(Json doc, const Json& memory) {
  doc["memory"] = memory;
  return doc;
}

RunResult run(const Json& doc) {
  return run_scenario(parse_scenario(doc, "t.json"));
}

} // namespace memtest

TEST_CASE("memory: the loss's logits are b s V 4 x 2 / t on the last stage and nothing on the others",
          "[memory][pipeline]") {
  // b = 2, s = 128, V = 1000: two fp32 copies of the logits (the cast for the loss and the softmax), over t.
  const double b = 2, s = 128, v = 1000;
  for (const int t : {1, 2}) {
    CAPTURE(t);
    const auto r = memtest::run(memtest::pipeline_doc(2, t));
    REQUIRE(r.pipeline);
    REQUIRE(r.pipeline->per_stage.size() == 2);
    CHECK(r.pipeline->per_stage[0].memory.logits_bytes == 0);
    CHECK_THAT(r.pipeline->per_stage[1].memory.logits_bytes, WithinRel(b * s * v * 4 * 2 / t, 1e-12));
    CHECK_THAT(dag::loss_logits_bytes(*parse_scenario(memtest::pipeline_doc(2, t), "t.json").model.transformer, 2, t),
               WithinRel(b * s * v * 8 / t, 1e-12));
  }
}

TEST_CASE("memory: without stages every rank computes the loss; a CNN holds no logits", "[memory]") {
  const auto lm = memtest::run(memtest::lm_doc());
  CHECK_THAT(lm.memory.logits_bytes, WithinRel(2.0 * 128 * 1000 * 8, 1e-12));
  Json cnn = memtest::lm_doc();
  cnn["model"] = {{"zoo", "resnet18"}, {"batch_per_gpu", 8}};
  CHECK(memtest::run(cnn).memory.logits_bytes == 0);
  // Sharding's report holds them too: stage 2 over the 8 GPUs.
  Json zero2 = memtest::lm_doc();
  zero2["sharding"] = {{"stage", 2}};
  const auto sharded = memtest::run(zero2);
  REQUIRE(sharded.sharding);
  CHECK_THAT(sharded.sharding->logits_bytes, WithinRel(2.0 * 128 * 1000 * 8, 1e-12));
  CHECK_THAT(sharded.memory.logits_bytes, WithinRel(sharded.sharding->logits_bytes, 1e-12));
}

TEST_CASE("memory: data parallelism holds the whole model's activations as one stage of one micro-batch", "[memory]") {
  // The LM in fp16 with Adam, without stages: its activations are a one-stage pipeline's with one micro-batch of b
  // (Korthikanti's 16-bit block formula for its 4 blocks, the other layers' outputs at 2 bytes), plus the input; its
  // state ZeRO's 2 + 2 + 12 bytes per parameter, as sharding stage 0 counts it.
  const auto s = parse_scenario(memtest::lm_doc(), "t.json");
  const auto dp = run_scenario(s);
  const auto& tf = *s.model.transformer;
  const dag::ActivationConfig fp16{.micro_batch = 2,
                                   .tensor_parallel = 1,
                                   .sequence_parallel = false,
                                   .recompute = dag::Recompute::none,
                                   .dtype = dag::DType::fp16};
  double other = 0;
  for (const auto& layer : s.model.layers)
    if (layer.block < 0)
      other += layer.activation_bytes / 2;
  const double blocks = 4 * dag::transformer_layer_activation_bytes(tf, fp16);
  CHECK_THAT(dp.memory.activation_bytes, WithinRel(blocks + 2 * other + 2 * s.model.input_bytes_per_sample, 1e-12));
  const double params = static_cast<double>(s.model.param_count());
  CHECK_THAT(dp.memory.weights_bytes + dp.memory.gradients_bytes + dp.memory.optimizer_bytes,
             WithinRel(16 * params, 1e-12));
  // a one-stage pipeline of one micro-batch of 2 holds the same activations
  Json one_stage = memtest::pipeline_doc(1, 1);
  one_stage["pipeline"]["micro_batches"] = 1;
  const auto staged = memtest::run(one_stage);
  CHECK_THAT(dp.memory.activation_bytes,
             WithinRel(staged.memory.activation_bytes + 2 * s.model.input_bytes_per_sample, 1e-12));
  // a CNN in fp32 keeps every layer's output at 4 bytes, and SGD's momentum: 12 bytes per parameter
  Json cnn = memtest::lm_doc();
  cnn["model"] = {{"zoo", "resnet18"}, {"batch_per_gpu", 8}};
  cnn["optimizer"] = "sgd-momentum";
  const auto c = parse_scenario(cnn, "t.json");
  double outputs = 0;
  for (const auto& layer : c.model.layers)
    outputs += layer.activation_bytes;
  const auto cr = run_scenario(c);
  CHECK_THAT(cr.memory.activation_bytes, WithinRel(8 * (outputs + c.model.input_bytes_per_sample), 1e-12));
  CHECK_THAT(cr.memory.optimizer_bytes, WithinRel(4.0 * static_cast<double>(c.model.param_count()), 1e-12));
}

TEST_CASE("memory: the reserve is added once per GPU, in every report", "[memory]") {
  // Each pair differs by the reserve alone: 1 GiB against none, fragmentation 0.
  Json zero2 = memtest::lm_doc();
  zero2["sharding"] = {{"stage", 2}};
  for (const Json& doc : {memtest::lm_doc(), memtest::pipeline_doc(2, 2), zero2}) {
    CAPTURE(doc.dump());
    const auto none = memtest::run(memtest::with_memory(doc, {{"reserve", "0 B"}, {"fragmentation", 0}}));
    const auto one = memtest::run(memtest::with_memory(doc, {{"reserve", "1 GiB"}, {"fragmentation", 0}}));
    CHECK(none.memory.reserve_bytes == 0);
    CHECK(one.memory.reserve_bytes == memtest::kGiB);
    CHECK_THAT(one.peak_memory_bytes_per_gpu - none.peak_memory_bytes_per_gpu, WithinRel(memtest::kGiB, 1e-9));
    CHECK_THAT(one.memory.total_bytes(), WithinRel(one.peak_memory_bytes_per_gpu, 1e-12));
    if (one.pipeline)
      for (std::size_t i = 0; i < one.pipeline->per_stage.size(); ++i)
        CHECK_THAT(one.pipeline->per_stage[i].peak_memory_bytes - none.pipeline->per_stage[i].peak_memory_bytes,
                   WithinRel(memtest::kGiB, 1e-9));
    if (one.sharding)
      CHECK_THAT(one.sharding->total_bytes() - none.sharding->total_bytes(), WithinRel(memtest::kGiB, 1e-9));
  }
  // The default: CUDA context 400 MiB, cuBLAS 64 MiB, NCCL 256 MiB.
  CHECK(memtest::run(memtest::lm_doc()).memory.reserve_bytes == 720 * memtest::kMiB);
}

TEST_CASE("memory: fragmentation is the factor times the tensors the allocator holds", "[memory]") {
  // total = tensors (1 + f) + reserve, tensors = weights + gradients + optimizer + activations + buffers + logits.
  for (const double f : {0.0, 0.21, 1.5}) {
    CAPTURE(f);
    const auto r = memtest::run(memtest::with_memory(memtest::pipeline_doc(2, 1), {{"fragmentation", f}}));
    for (const auto& st : r.pipeline->per_stage) {
      const auto& m = st.memory;
      const double tensors = m.weights_bytes + m.gradients_bytes + m.optimizer_bytes + m.activation_bytes +
                             m.buffer_bytes + m.logits_bytes;
      CHECK(m.fragmentation_bytes == f * tensors);
      CHECK_THAT(st.peak_memory_bytes, WithinRel(tensors * (1 + f) + m.reserve_bytes, 1e-12));
    }
  }
  CHECK(parse_scenario(memtest::lm_doc(), "t.json").memory.fragmentation == 0.21);
}

TEST_CASE("memory: a stage that no longer fits is reported so", "[memory][pipeline]") {
  // 16 GiB of V100 less a 15.99 GiB reserve leaves too little for the stages.
  const auto r = memtest::run(memtest::with_memory(memtest::pipeline_doc(2, 1), {{"reserve", "15.99 GiB"}}));
  CHECK(r.memory.fits == std::optional<bool>(false));
  CHECK(r.pipeline->per_stage[0].exceeds_gpu_memory);
  CHECK(memtest::run(memtest::pipeline_doc(2, 1)).memory.fits == std::optional<bool>(true));
}

TEST_CASE("memory: bad keys and absurd values exit with the path", "[memory][errors]") {
  const auto fails = [](const Json& doc, const std::string& path, const std::string& text) {
    CAPTURE(doc.dump());
    try {
      (void)parse_scenario(doc, "t.json");
      FAIL("accepted");
    } catch (const InputError& e) {
      CHECK(e.pointer() == path);
      CHECK_THAT(e.what(), Contains(text));
    }
  };
  fails(memtest::with_memory(memtest::lm_doc(), {{"reserv", "1 GiB"}}), "/memory/reserv", "");
  fails(memtest::with_memory(memtest::lm_doc(), {{"reserve", "100 GiB"}}), "/memory/reserve", "less than 64 GiB");
  fails(memtest::with_memory(memtest::lm_doc(), {{"reserve", "16 GiB"}}), "/memory/reserve",
        "leaves nothing of the GPU's 16 GiB");
  fails(memtest::with_memory(memtest::lm_doc(), {{"reserve", "1 GB/s"}}), "/memory/reserve", "");
  fails(memtest::with_memory(memtest::lm_doc(), {{"reserve", "-1 MiB"}}), "/memory/reserve", "");
  fails(memtest::with_memory(memtest::lm_doc(), {{"fragmentation", 5}}), "/memory/fragmentation", "");
  fails(memtest::with_memory(memtest::lm_doc(), {{"fragmentation", -0.1}}), "/memory/fragmentation", "");
  fails(memtest::with_memory(memtest::lm_doc(), 3), "/memory", "");
}

namespace memtest {

// A run of tests/data/memory/megatron-v100.json as a scenario: GPT with the run's shape on V100-SXM2-32GB nodes of 4,
// fp16, Adam, 1F1B over its micro-batches, full recomputation, tensor 4 (d = 1).
Json megatron_doc(const Json& run) {
  const int p = run.at("pipeline").get<int>(), t = run.at("tensor").get<int>();
  Json doc = Json::parse(R"({
    "name": "megatron-v100",
    "model": {"zoo": "transformer", "gradient_dtype": "fp16"},
    "gpu": {"preset": "V100-SXM2-32GB", "efficiency": 0.5},
    "cluster": {"gpus_per_node": 4, "intra_node": {"bandwidth": "150 GB/s", "latency": "1 us"},
                "inter_node": {"bandwidth": "100 Gbps", "latency": "2 us"}, "nic": "per-gpu"},
    "strategy": {"kind": "ddp"},
    "pipeline": {"schedule": "1f1b", "partition": "uniform", "recompute": "full"},
    "optimizer": "adam"
  })");
  doc["model"]["batch_per_gpu"] = run.at("micro_batch");
  doc["model"]["transformer"] = {{"layers", run.at("layers")},
                                 {"hidden", run.at("hidden")},
                                 {"heads", run.at("heads")},
                                 {"sequence", run.at("sequence")},
                                 {"vocabulary", run.at("vocabulary")}};
  doc["cluster"]["nodes"] = p * t / 4;
  doc["parallelism"] = {{"pipeline", p}, {"tensor", t}};
  doc["pipeline"]["micro_batches"] = run.at("micro_batches");
  return doc;
}

} // namespace memtest

TEST_CASE("memory: Megatron-LM GPT on V100 within 17 % of the allocator's measured peak", "[memory][measured]") {
  // What the caching allocator holds (tensors + fragmentation, the measured max_memory_reserved) for the first, second
  // and last stage of five runs: -15.9 % to -6.8 % (before the framework's parts: -42.4 % to -23.0 %). The rest is
  // memory the runs allocate at their peak that ddlsim does not model (docs/memory.md).
  const Json data = Json::parse(read_file(std::string(DDLSIM_SOURCE_DIR) + "/tests/data/memory/megatron-v100.json"));
  for (const auto& run_data : data.at("runs")) {
    const auto r = memtest::run(memtest::megatron_doc(run_data));
    REQUIRE(r.pipeline);
    for (const auto& stage : run_data.at("stages")) {
      const auto i = stage.at("stage").get<std::size_t>();
      const auto& m = r.pipeline->per_stage.at(i).memory;
      const double measured = stage.at("max_reserved_mib").get<double>() * memtest::kMiB;
      const double allocator = m.total_bytes() - m.reserve_bytes;
      CAPTURE(run_data.at("log").get<std::string>(), i, allocator / memtest::kMiB, measured / memtest::kMiB);
      CHECK(std::abs(allocator / measured - 1) < 0.17);
    }
  }
}
