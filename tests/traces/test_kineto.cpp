// The trace reader and analysis on small made-up traces: both category spellings, launches joined to kernels by
// correlation id, backward operators joined to their forward layer by sequence number, host intervals from one
// operator to the next; and every malformed input as one InputError naming the file (and the JSON path).
#include "core/error.hpp"
#include "support/tiny_trace.hpp"
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
using ddlsim::test::gzip;
using ddlsim::test::tiny_trace;
using ddlsim::test::write_temp;

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
    REQUIRE_THROWS_WITH(
        parse_kineto(R"({"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":"soon","dur":1}]})", "ts.json"),
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

TEST_CASE("traces::parse_kineto takes a category or argument of another type as absent (found by fuzz_trace)",
          "[traces][kineto]") {
  // "cat": 5 threw nlohmann's type_error (an internal error); a correlation id of 1e300 was a cast out of range.
  const std::string text = R"({"traceEvents": [
    {"ph": "X", "cat": 5, "name": "k", "ts": 1, "dur": 2, "pid": 0, "tid": 0},
    {"ph": "X", "cat": "kernel", "name": "k", "ts": 3, "dur": 2, "pid": 0, "tid": 7,
     "args": {"correlation": 1e300, "Sequence number": 4.0}}]})";
  const auto trace = parse_kineto(text, "t.json");
  REQUIRE(trace.events.size() == 1); // the first is of no category ddlsim reads
  CHECK(trace.events[0].sequence == 4);
}
