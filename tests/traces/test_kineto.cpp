// The trace reader and analysis on small made-up traces: both category spellings, launches joined to kernels by
// correlation id, backward operators joined to their forward layer by sequence number, host intervals from one
// operator to the next; and every malformed input as one InputError naming the file (and the JSON path).
#include "core/error.hpp"
#include "traces/analysis.hpp"
#include "traces/kineto.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

using namespace ddlsim;
using namespace ddlsim::traces;
using Catch::Matchers::Contains;
using Catch::Matchers::WithinAbs;

namespace {

// One step of a two-layer model (conv + relu, linear), old spellings (Operator, Runtime, Kernel) or new ones.
std::string tiny_trace(bool kineto_names, bool with_step = true, bool with_kernels = true) {
  const std::string op = kineto_names ? "cpu_op" : "Operator";
  const std::string rt = kineto_names ? "cuda_runtime" : "Runtime";
  const std::string kn = kineto_names ? "kernel" : "Kernel";
  std::string ev;
  const auto add = [&](const std::string& e) { ev += (ev.empty() ? "" : ",\n") + e; };
  const auto x = [&](const std::string& cat, const std::string& name, int tid, double ts, double dur,
                     const std::string& args) {
    add(fmt::format(R"({{"ph":"X","cat":"{}","name":"{}","pid":1,"tid":{},"ts":{},"dur":{},"args":{{{}}}}})", cat,
                    name, tid, ts, dur, args));
  };
  if (with_step)
    x(op, "ProfilerStep#1", 1, 1000, 1000, "");
  // forward on thread 1: conv (seq 10) launches kernel c1, relu (seq 11), linear (seq 12)
  x(op, "aten::conv2d", 1, 1100, 50, R"("Input Dims":[[8,3,32,32],[16,3,3,3],[16]],"Sequence number":10)");
  x(rt, "cudaLaunchKernel", 1, 1110, 10, R"("correlation":101)");
  x(op, "aten::relu_", 1, 1200, 20, R"("Input Dims":[[8,16,32,32]],"Sequence number":11)");
  x(rt, "cudaLaunchKernel", 1, 1205, 10, R"("correlation":102)");
  x(op, "aten::linear", 1, 1300, 40, R"("Input Dims":[[8,16384],[10,16384],[10]],"Sequence number":12)");
  x(rt, "cudaLaunchKernel", 1, 1310, 10, R"("correlation":103)");
  // backward on thread 2, reverse order
  x(op, "AddmmBackward", 2, 1500, 50, R"("Sequence number":12,"Fwd thread id":1)");
  x(rt, "cudaLaunchKernel", 2, 1510, 10, R"("correlation":201)");
  x(op, "ReluBackward1", 2, 1600, 30, R"("Sequence number":11,"Fwd thread id":1)");
  x(rt, "cudaLaunchKernel", 2, 1605, 10, R"("correlation":202)");
  x(op, "CudnnConvolutionBackward", 2, 1700, 60, R"("Sequence number":10,"Fwd thread id":1)");
  x(rt, "cudaLaunchKernel", 2, 1710, 10, R"("correlation":203)");
  x(op, "torch::autograd::AccumulateGrad", 2, 1780, 20, "");
  x(op, "Optimizer.step#SGD.step", 1, 1850, 100, "");
  x(rt, "cudaLaunchKernel", 1, 1860, 10, R"("correlation":301)");
  if (with_kernels) {
    const std::pair<int, double> kernels[] = {{101, 30}, {102, 5}, {103, 8}, {201, 16}, {202, 6}, {203, 40}, {301, 7}};
    double ts = 1120;
    for (const auto& [corr, dur] : kernels) {
      x(kn, fmt::format("k{}", corr), 7, ts, dur, fmt::format(R"("correlation":{})", corr));
      ts += corr < 200 ? 60 : 100;
    }
  }
  return fmt::format(R"({{"schemaVersion":1,"deviceProperties":[{{"name":"Tesla V100-SXM2-32GB"}}],
"traceEvents":[{}]}})",
                     ev);
}

std::string write_temp(const std::string& name, const std::string& bytes) {
  const auto path = std::filesystem::temp_directory_path() / fmt::format("ddlsim-test-traces-{}-{}", ::getpid(), name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path.string();
}

std::string gzip(const std::string& text) {
  z_stream zs{};
  REQUIRE(deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&zs, static_cast<uLong>(text.size())), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  zs.avail_in = static_cast<uInt>(text.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&zs, Z_FINISH) == Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

} // namespace

TEST_CASE("traces::analyse joins launches, kernels and backward operators into layers", "[traces][kineto]") {
  const bool kineto_names = GENERATE(false, true);
  CAPTURE(kineto_names);
  const auto trace = parse_kineto(tiny_trace(kineto_names), "tiny.json");
  CHECK(trace.device_name == "Tesla V100-SXM2-32GB");
  const auto a = analyse(trace);
  REQUIRE(a.steps.size() == 1);
  CHECK(a.batch == 8);
  // conv opens layer 0 (relu joins it), linear layer 1
  REQUIRE(a.layers.size() == 2);
  CHECK(a.layers[0].kind == "conv");
  CHECK(a.layers[0].params.size() == 2);
  CHECK(a.layers[0].params[0].shape == std::vector<std::int64_t>{16, 3, 3, 3});
  CHECK(a.layers[1].kind == "linear");
  // GPU: the kernels launched inside each layer's operators (by correlation)
  CHECK_THAT(a.layers[0].forward_gpu_s, WithinAbs(35e-6, 1e-12)); // k101 + k102
  CHECK_THAT(a.layers[1].forward_gpu_s, WithinAbs(8e-6, 1e-12));
  CHECK_THAT(a.layers[1].backward_gpu_s, WithinAbs(16e-6, 1e-12)); // AddmmBackward (seq 12)
  CHECK_THAT(a.layers[0].backward_gpu_s, WithinAbs(46e-6, 1e-12)); // ReluBackward1 + conv backward
  // host: from an operator's start to the next one's: conv 1100 -> linear 1300 (relu joins conv); linear 1300 -> the
  // backward's start 1500; backward units to the next unit, the last to the end of the last one (AccumulateGrad joins
  // the conv layer)
  CHECK_THAT(a.layers[0].forward_host_s, WithinAbs(200e-6, 1e-12));
  CHECK_THAT(a.layers[1].forward_host_s, WithinAbs(200e-6, 1e-12));
  CHECK_THAT(a.layers[1].backward_host_s, WithinAbs(100e-6, 1e-12));
  CHECK_THAT(a.layers[0].backward_host_s, WithinAbs(200e-6, 1e-12));
  CHECK_THAT(a.phases.optimizer_host_s, WithinAbs(150e-6, 1e-12)); // to the step's end
  CHECK_THAT(a.phases.optimizer_gpu_s, WithinAbs(7e-6, 1e-12));
  CHECK_THAT(a.phases.step_s, WithinAbs(1e-3, 1e-12));
}

TEST_CASE("traces::read_kineto reads gzip'd traces", "[traces][kineto]") {
  const auto path = write_temp("ok.json.gz", gzip(tiny_trace(true)));
  CHECK(read_kineto(path).events.size() > 10);
  std::filesystem::remove(path);
}

TEST_CASE("traces: malformed traces are one InputError naming the file and where", "[traces][kineto]") {
  SECTION("not JSON") {
    REQUIRE_THROWS_WITH(parse_kineto("{\"traceEvents\": [ {\"ph\": \"X\",, }", "bad.json"),
                        Contains("bad.json") && Contains("/traceEvents/0") && Contains("not valid JSON at byte"));
  }
  SECTION("not a Chrome trace") {
    REQUIRE_THROWS_WITH(parse_kineto("[1, 2]", "list.json"), Contains("list.json") && Contains("traceEvents"));
    REQUIRE_THROWS_WITH(parse_kineto("{\"x\": 1}", "obj.json"), Contains("obj.json: /traceEvents: missing"));
  }
  SECTION("an event with a bad field") {
    REQUIRE_THROWS_WITH(parse_kineto(R"({"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":"soon","dur":1}]})",
                                     "ts.json"),
                        Contains("ts.json: /traceEvents/0/ts") && Contains("not a number"));
  }
  SECTION("truncated gzip") {
    const std::string whole = gzip(tiny_trace(true));
    const auto path = write_temp("cut.json.gz", whole.substr(0, whole.size() / 2));
    REQUIRE_THROWS_WITH(read_kineto(path), Contains(path) && Contains("truncated gzip stream"));
    std::filesystem::remove(path);
  }
  SECTION("no ProfilerStep") {
    REQUIRE_THROWS_WITH(analyse(parse_kineto(tiny_trace(true, false), "nostep.json")),
                        Contains("nostep.json") && Contains("no ProfilerStep#N span"));
  }
  SECTION("no kernels") {
    REQUIRE_THROWS_WITH(analyse(parse_kineto(tiny_trace(true, true, false), "nokernel.json")),
                        Contains("nokernel.json") && Contains("no GPU kernels"));
  }
}
