// Layers from module annotations ("nn.Module: Conv2d_0", category python_function, as PyTorch's Python tracer writes
// them with with_stack=True) on a made-up three-step trace, checked against figures worked out by hand below; the same
// trace without its annotations keeps the layers of parameterised operators; the module classes' kinds.
#include "dag/workload.hpp"
#include "support/tiny_trace.hpp"
#include "traces/analysis.hpp"
#include "traces/import.hpp"
#include "traces/kineto.hpp"
#include "traces/modules.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <string>
#include <vector>

using namespace ddlsim;
using namespace ddlsim::traces;
using Catch::Matchers::WithinAbs;

namespace {

// Three identical steps 10 ms apart (the first left out as warm-up; the medians of the other two are their figures).
// Per step, times in us from the step's start; main thread 1, autograd thread 2, GPU stream 7:
//   ProfilerStep#N                  0 .. 2000
//   nn.Module: Net_0              100 .. 800
//     nn.Module: Conv2d_0         110 .. 260   aten::conv2d 120 +100 (seq 10), launches k1 (30 us)
//     nn.Module: BatchNorm2d_0    300 .. 420   aten::batch_norm 310 +80 (seq 11), launches k2 (12 us)
//     nn.Module: ReLU_0           430 .. 480   aten::relu_ 440 +20 (seq 12), launches k3 (5 us)
//     aten::flatten               500 +10      (Net_0's own operator: joins the layer before it)
//     nn.Module: Linear_0         550 .. 700   aten::linear 560 +60 (seq 14) > aten::addmm 565 +50, launches k4 (8 us)
//   aten::cross_entropy_loss      820 +30      (seq 15, outside every module: joins Linear_0), launches k5 (3 us)
//   backward on thread 2: NllLossBackward0 900 +40 (seq 15, k11 4 us), AddmmBackward0 950 +80 (seq 14, k12 16 us),
//     ReluBackward0 1050 +30 (seq 12, k13 6 us), CudnnBatchNormBackward0 1100 +60 (seq 11, k14 20 us),
//     ConvolutionBackward0 1180 +100 (seq 10, k15 40 us), AccumulateGrad 1300 +20 (no seq)
//   Optimizer.step#SGD.step      1400 +200 (k21 7 us)
std::string module_trace(bool with_modules) {
  std::string ev;
  const auto add = [&](const std::string& e) { ev += (ev.empty() ? "" : ",\n") + e; };
  for (int step = 1; step <= 3; ++step) {
    const double t0 = 10000.0 * step;
    const int c0 = 100 * step; // correlation ids of this step
    const auto x = [&](const char* cat, const std::string& name, int tid, double ts, double dur,
                       const std::string& args) {
      add(fmt::format(R"({{"ph":"X","cat":"{}","name":"{}","pid":1,"tid":{},"ts":{},"dur":{},"args":{{{}}}}})", cat,
                      name, tid, t0 + ts, dur, args));
    };
    const auto op = [&](const std::string& name, int tid, double ts, double dur, const std::string& args) {
      x("cpu_op", name, tid, ts, dur, args);
    };
    const auto module = [&](const std::string& name, double from, double to) {
      if (with_modules)
        x("python_function", "nn.Module: " + name, 1, from, to - from, R"("Python id":1,"Python parent id":0)");
    };
    const auto launch = [&](int tid, double ts, int corr, double kernel_ts, double kernel_us) {
      x("cuda_runtime", "cudaLaunchKernel", tid, ts, 5, fmt::format(R"("correlation":{})", c0 + corr));
      x("kernel", fmt::format("k{}", corr), 7, kernel_ts, kernel_us, fmt::format(R"("correlation":{})", c0 + corr));
    };
    x("user_annotation", fmt::format("ProfilerStep#{}", step), 1, 0, 2000, "");
    module("Net_0", 100, 800);
    module("Conv2d_0", 110, 260);
    op("aten::conv2d", 1, 120, 100, R"("Input Dims":[[8,3,32,32],[16,3,3,3],[16]],"Sequence number":10)");
    launch(1, 130, 1, 140, 30);
    module("BatchNorm2d_0", 300, 420);
    op("aten::batch_norm", 1, 310, 80,
       R"("Input Dims":[[8,16,32,32],[16],[16],[16],[16],[],[],[],[]],"Sequence number":11)");
    launch(1, 320, 2, 330, 12);
    module("ReLU_0", 430, 480);
    op("aten::relu_", 1, 440, 20, R"("Input Dims":[[8,16,32,32]],"Sequence number":12)");
    launch(1, 445, 3, 450, 5);
    op("aten::flatten", 1, 500, 10, R"("Input Dims":[[8,16,32,32],[],[]])");
    module("Linear_0", 550, 700);
    op("aten::linear", 1, 560, 60, R"("Input Dims":[[8,16384],[10,16384],[10]],"Sequence number":14)");
    op("aten::addmm", 1, 565, 50, R"("Input Dims":[[10],[8,16384],[16384,10]])");
    launch(1, 570, 4, 580, 8);
    op("aten::cross_entropy_loss", 1, 820, 30, R"("Input Dims":[[8,10],[8]],"Sequence number":15)");
    launch(1, 825, 5, 830, 3);
    const auto backward = [&](const std::string& name, double ts, double dur, int seq, int corr, double kernel_us) {
      op(name, 2, ts, dur, seq < 0 ? "" : fmt::format(R"("Sequence number":{},"Fwd thread id":1)", seq));
      if (corr > 0)
        launch(2, ts + 5, corr, ts + 10, kernel_us);
    };
    backward("NllLossBackward0", 900, 40, 15, 11, 4);
    backward("AddmmBackward0", 950, 80, 14, 12, 16);
    backward("ReluBackward0", 1050, 30, 12, 13, 6);
    backward("CudnnBatchNormBackward0", 1100, 60, 11, 14, 20);
    backward("ConvolutionBackward0", 1180, 100, 10, 15, 40);
    backward("torch::autograd::AccumulateGrad", 1300, 20, -1, 0, 0);
    op("Optimizer.step#SGD.step", 1, 1400, 200, "");
    launch(1, 1410, 21, 1420, 7);
  }
  return fmt::format(R"({{"schemaVersion":1,"deviceProperties":[{{"name":"Tesla V100-SXM2-32GB"}}],
"traceEvents":[{}]}})",
                     ev);
}

struct Expected {
  const char* name;
  const char* kind;
  double forward_host_us, forward_gpu_us, backward_host_us, backward_gpu_us;
  int kernels_forward;
};

void check_layers(const TraceAnalysis& a, const std::vector<Expected>& want) {
  REQUIRE(a.layers.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    const auto& l = a.layers[i];
    const auto& w = want[i];
    CAPTURE(i, l.name);
    CHECK(l.name == w.name);
    CHECK(l.kind == w.kind);
    CHECK_THAT(l.forward_host_s, WithinAbs(w.forward_host_us * 1e-6, 1e-12));
    CHECK_THAT(l.forward_gpu_s, WithinAbs(w.forward_gpu_us * 1e-6, 1e-12));
    CHECK_THAT(l.backward_host_s, WithinAbs(w.backward_host_us * 1e-6, 1e-12));
    CHECK_THAT(l.backward_gpu_s, WithinAbs(w.backward_gpu_us * 1e-6, 1e-12));
    CHECK(l.kernels_forward == w.kernels_forward);
  }
}

} // namespace

TEST_CASE("traces::analyse forms layers from leaf modules when the forward has nn.Module annotations",
          "[traces][modules]") {
  const auto a = analyse(parse_kineto(module_trace(true), "modules.json"));
  REQUIRE(a.steps.size() == 3);
  CHECK_FALSE(a.steps[0].used);
  CHECK(a.layers_from_modules);
  CHECK(a.batch == 8);
  // A leaf operator's host time runs from its start to the next leaf's (the last forward one's to the backward's start
  // at 900); a layer's is the sum over its operators:
  //   Conv2d_0       conv2d 120 -> 310                                        = 190 us
  //   BatchNorm2d_0  batch_norm 310 -> 440                                    = 130 us
  //   ReLU_0         relu_ 440 -> 500, + flatten 500 -> 560 (Net_0's own)     = 120 us
  //   Linear_0       linear 560 -> 820, + cross_entropy_loss 820 -> 900       = 340 us
  // GPU: the kernels launched inside them (Linear_0: k4 8 + k5 3 = 11 us). Backward by sequence number, each unit to
  // the next one's start: Linear_0 NllLoss 50 + Addmm 100 = 150 us (k11 4 + k12 16 = 20 us), ReLU_0 50 (6), BN 80
  // (20), Conv2d_0 ConvolutionBackward 120 + AccumulateGrad 20 (no sequence number: joins the layer before) = 140 (40).
  check_layers(a, {
                      {"Conv2d_0", "conv", 190, 30, 140, 40, 1},
                      {"BatchNorm2d_0", "bn", 130, 12, 80, 20, 1},
                      {"ReLU_0", "module", 120, 5, 50, 6, 1},
                      {"Linear_0", "linear", 340, 11, 150, 20, 2},
                  });
  // Parameters from the parameterised operator inside each module, named after it; none for ReLU.
  REQUIRE(a.layers[0].params.size() == 2);
  CHECK(a.layers[0].params[0].name == "Conv2d_0.weight");
  CHECK(a.layers[0].params[0].shape == std::vector<std::int64_t>{16, 3, 3, 3});
  CHECK(a.layers[0].params[1].shape == std::vector<std::int64_t>{16});
  REQUIRE(a.layers[1].params.size() == 2);
  CHECK(a.layers[1].params[0].name == "BatchNorm2d_0.weight");
  CHECK(a.layers[2].params.empty());
  CHECK(a.layers[2].op == "aten::relu_");
  CHECK(a.layers[2].input_shape == std::vector<std::int64_t>{8, 16, 32, 32});
  REQUIRE(a.layers[3].params.size() == 2);
  CHECK(a.layers[3].params[0].name == "Linear_0.weight");
  CHECK(a.layers[3].params[0].shape == std::vector<std::int64_t>{10, 16384});
  CHECK(a.layers[3].op == "aten::linear");
  // conv FLOPs per sample 2 x 16x3x3x3 x 32x32; linear 2 x 10x16384; the conv's activation the BN's input (fp32)
  CHECK_THAT(a.layers[0].fwd_flops, WithinAbs(2.0 * 432 * 1024, 1e-6));
  CHECK_THAT(a.layers[3].fwd_flops, WithinAbs(2.0 * 10 * 16384, 1e-6));
  CHECK_THAT(a.layers[0].activation_bytes, WithinAbs(4.0 * 16 * 32 * 32, 1e-9));
  // Host parts: forward 780 us (the four layers); other: Net_0's opening gap from the step's start 0 -> 120 us, and
  // the loss span's interval outside the backward window (820 -> 900 and 1320 -> 1400) less its operator's 80 us.
  CHECK_THAT(a.phases.forward_s, WithinAbs(780e-6, 1e-12));
  CHECK_THAT(a.phases.backward_s, WithinAbs(420e-6, 1e-12));
  CHECK_THAT(a.phases.other_host_s, WithinAbs(200e-6, 1e-12));
  CHECK_THAT(a.phases.optimizer_host_s, WithinAbs(600e-6, 1e-12));
}

TEST_CASE("traces::analyse keeps the operators' layers without module annotations", "[traces][modules]") {
  const auto a = analyse(parse_kineto(module_trace(false), "operators.json"));
  CHECK_FALSE(a.layers_from_modules);
  CHECK(a.batch == 8);
  // conv opens layer 0, batch_norm layer 1 (relu_ and flatten join it), linear layer 2 (the loss joins it):
  //   conv_0 120 -> 310 = 190; bn_1 310 -> 560 = 250 (backward: ReluBackward 50 + BN 80 = 130, kernels 6 + 20);
  //   linear_2 560 -> 900 = 340
  check_layers(a, {
                      {"conv_0", "conv", 190, 30, 140, 40, 1},
                      {"bn_1", "bn", 250, 17, 130, 26, 2},
                      {"linear_2", "linear", 340, 11, 150, 20, 2},
                  });
  CHECK(a.layers[0].params[0].name == "conv_0.weight");
  CHECK_THAT(a.phases.forward_s, WithinAbs(780e-6, 1e-12));
}

TEST_CASE("traces::detail::form_layers: repeated module calls, unknown classes, operators outside modules",
          "[traces][modules]") {
  using namespace ddlsim::traces::detail;
  std::vector<Event> events;
  const auto event = [&](Category cat, std::string name, std::vector<std::vector<std::int64_t>> dims = {}) {
    Event e;
    e.cat = cat;
    e.name = std::move(name);
    e.input_dims = std::move(dims);
    e.index = events.size();
    events.push_back(std::move(e));
  };
  event(Category::python, "nn.Module: Block_0");                           // 0
  event(Category::python, "nn.Module: Proj_0");                            // 1: first call
  event(Category::python, "nn.Module: Proj_0");                            // 2: second call
  event(Category::python, "nn.Module: Identity_0");                        // 3: no operator
  event(Category::cpu_op, "aten::mul", {{4, 8}, {}});                      // 4
  event(Category::cpu_op, "aten::linear", {{4, 8}, {16, 8}, {16}});        // 5
  event(Category::cpu_op, "aten::add", {{4, 16}, {4, 16}});                // 6
  event(Category::python, "torch/nn/modules/module.py(1747): _call_impl"); // 7
  event(Category::cpu_op, "aten::linear", {{4, 8}, {16, 8}, {16}});        // 8
  const auto at = [&](std::size_t i) { return &events[i]; };
  const std::vector<ForwardLeaf> leaves = {
      {at(4), {}},             // before every layer: joins the first
      {at(5), {at(0), at(1)}}, // Proj_0, first call
      {at(7), {at(0), at(3)}}, // a python leaf in a module without operators: joins the layer before
      {at(6), {at(0)}},        // Block_0's own operator: joins the layer before
      {at(8), {at(0), at(2)}}, // Proj_0 again: a layer of its own, without parameters (shared weights)
  };
  const Layering l = form_layers(leaves);
  CHECK(l.from_modules);
  REQUIRE(l.layers.size() == 2);
  CHECK(l.leaf_layer == std::vector<int>{0, 0, 0, 0, 1});
  CHECK(l.layers[0].name == "Proj_0");
  CHECK(l.layers[0].kind == "linear"); // class unknown: its parameterised operator's kind
  REQUIRE(l.layers[0].params.size() == 2);
  CHECK(l.layers[0].params[0].name == "Proj_0.weight");
  CHECK(l.layers[0].params[0].shape == std::vector<std::int64_t>{16, 8});
  CHECK(l.layers[0].input_shape == std::vector<std::int64_t>{4, 8});
  CHECK(l.layers[1].name == "Proj_0#2");
  CHECK(l.layers[1].kind == "linear");
  CHECK(l.layers[1].params.empty());
  CHECK_THAT(l.layers[1].fwd_flops, WithinAbs(2.0 * 16 * 8, 1e-9)); // computed again

  SECTION("without a module annotation around an operator: the operators' layers") {
    const Layering ops = form_layers({{at(4), {}}, {at(5), {}}, {at(7), {at(3)}}, {at(6), {}}, {at(8), {}}});
    CHECK_FALSE(ops.from_modules);
    REQUIRE(ops.layers.size() == 2);
    CHECK(ops.layers[0].name == "linear_0");
    CHECK(ops.layers[1].name == "linear_1");
    CHECK(ops.layers[1].params.size() == 2);
    CHECK(ops.leaf_layer == std::vector<int>{0, 0, 0, 0, 1});
  }
}

TEST_CASE("traces::detail::module_kind from the module's class", "[traces][modules]") {
  using ddlsim::traces::detail::module_kind;
  const auto [module, kind] = GENERATE(table<std::string, std::string>({
      {"Conv2d_3", "conv"},
      {"Conv1d_0", "conv"},
      {"ConvTranspose3d_1", "conv"},
      {"LazyConv2d_0", "conv"},
      {"Linear_0", "linear"},
      {"NonDynamicallyQuantizableLinear_0", "linear"},
      {"BatchNorm2d_12", "bn"},
      {"SyncBatchNorm_0", "bn"},
      {"LayerNorm_4", "ln"},
      {"GroupNorm_0", "ln"},
      {"Embedding_0", "embedding"},
      {"EmbeddingBag_2", "embedding"},
      {"MaxPool2d_0", "pool"},
      {"AdaptiveAvgPool2d_0", "pool"},
      {"ReLU_7", ""},
      {"Conv1D_0", ""}, // Hugging Face GPT-2's Conv1D is a linear layer: its operator (addmm) says so
      {"Bottleneck_15", ""},
  }));
  CAPTURE(module);
  CHECK(module_kind(module) == kind);
}

TEST_CASE("traces::import_trace names every layer once, whatever the modules are called (#31 R08)",
          "[traces][modules]") {
  // Module names as a trace writes them: "Conv2d_0#2" is what the import calls Conv2d_0's second call too, and a layer
  // "backward" would be taken for the whole backward by a traced collective's "after". The workload reader refused
  // the repeated name ("duplicate layer name").
  std::string text = module_trace(true);
  const auto rename = [&](const std::string& from, const std::string& to) {
    for (auto p = text.find(from); p != std::string::npos; p = text.find(from, p + to.size()))
      text.replace(p, from.size(), to);
  };
  rename("nn.Module: BatchNorm2d_0", "nn.Module: Conv2d_0#2");
  rename("nn.Module: ReLU_0", "nn.Module: backward");
  rename("nn.Module: Linear_0", "nn.Module: Conv2d_0");
  const auto path = ddlsim::test::write_temp("renamed-modules.json", text);
  const auto im = import_trace(path, {});
  std::filesystem::remove(path);
  std::vector<std::string> names;
  for (const auto& l : im.model.layers)
    names.push_back(l.name);
  CHECK(names == std::vector<std::string>{"Conv2d_0", "Conv2d_0#2", "backward~2", "Conv2d_0#2~2"});
  CHECK_NOTHROW(dag::parse_layers(Json::parse(dag::workload_json(im.model).dump())["layers"], "w.json", "/layers"));
  CHECK(im.calibration.layers.size() == 4);
}
