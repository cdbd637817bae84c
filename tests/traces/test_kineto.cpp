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
  CHECK(trace.device.name == "Tesla V100-SXM2-32GB");
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

namespace {

// The tiny trace with `metadata` (top-level keys, e.g. "distributedInfo": {...}) added.
std::string tiny_with(const std::string& metadata) {
  const std::string t = tiny_trace(true);
  return "{" + metadata + "," + t.substr(1);
}

// The tiny trace with one more event, a memcpy or a record_param_comms carrying `args`, at /traceEvents/23.
std::string tiny_with_event(const std::string& cat, const std::string& args, const std::string& timing = "") {
  const std::string t = tiny_trace(true);
  const auto end = t.rfind("]}");
  return t.substr(0, end) +
         fmt::format(R"(,{{"ph":"X","cat":"{}","name":"e","pid":1,"tid":1,{},"args":{{{}}}}})", cat,
                     timing.empty() ? R"("ts":1400,"dur":1)" : timing, args) +
         t.substr(end);
}

} // namespace

TEST_CASE("traces::parse_kineto range-checks distributedInfo's counts (#31 R06)", "[traces][kineto]") {
  // World sizes 0 and 2^32 divided by zero (SIGFPE) in the import; -3 was written out as gpus_per_node -3.
  const auto [info, where, phrase] = GENERATE(table<std::string, std::string, std::string>({
      {R"("world_size": 0)", "/distributedInfo/world_size", "from 1 to 1048576, not 0"},
      {R"("world_size": 4294967296)", "/distributedInfo/world_size", "not 4294967296"},
      {R"("world_size": 18446744073709551615)", "/distributedInfo/world_size", "not 18446744073709551615"},
      {R"("world_size": -3)", "/distributedInfo/world_size", "not -3"},
      {R"("world_size": 2.5)", "/distributedInfo/world_size", "not 2.5"},
      {R"("world_size": "16")", "/distributedInfo/world_size", "not a string"},
      {R"("world_size": 2, "rank": 2)", "/distributedInfo/rank", "a rank from 0 to 1, not 2"},
      {R"("world_size": 2, "rank": -1)", "/distributedInfo/rank", "not -1"},
  }));
  CAPTURE(info);
  REQUIRE_THROWS_WITH(parse_kineto(tiny_with(R"("distributedInfo": {)" + info + "}"), "t.json"),
                      Contains("t.json: " + where + ": expected") && Contains(phrase));
  const auto ok =
      parse_kineto(tiny_with(R"("distributedInfo": {"world_size": 16, "rank": 15, "backend": "nccl"})"), "t.json");
  CHECK(ok.world_size == 16);
  CHECK(ok.rank == 15);
  CHECK(ok.backend == "nccl");
}

TEST_CASE("traces::parse_kineto range-checks the events' counts, sizes and times (#31 R06, R08)", "[traces][kineto]") {
  // Each was read as it stood: negative or overflowing sizes became negative FLOPs or wrapped tensor sizes, 1e300 us
  // a 1e294 s optimizer step, 1.8e19 B a copy that the calibration's reader refuses.
  const auto [event, where, phrase] = GENERATE(table<std::string, std::string, std::string>({
      {tiny_with_event("cpu_op", R"("Input Dims": [[8, 3, -32, 32]])"), "/traceEvents/23/args/Input Dims/0",
       "expected sizes from 0 to 2^50, not -32"},
      {tiny_with_event("cpu_op", R"("Input Dims": [[], [1073741824, 1073741824]])"),
       "/traceEvents/23/args/Input Dims/1", "a tensor of more than 2^50 elements"},
      {tiny_with_event("cpu_op", R"("Input Dims": [[0, 1073741824, 1073741824]])"), "/traceEvents/23/args/Input Dims/0",
       "a tensor of more than 2^50 elements"},
      {tiny_with_event("cpu_op", R"("In msg nelems": -1)"), "/traceEvents/23/args/In msg nelems",
       "expected a count from 0 to 2^50, not -1"},
      {tiny_with_event("cpu_op", R"("Out msg nelems": 4611686018427387904)"), "/traceEvents/23/args/Out msg nelems",
       "not 4611686018427387904"},
      {tiny_with_event("cpu_op", R"("Group size": 4294967296)"), "/traceEvents/23/args/Group size",
       "from 0 to 1048576"},
      {tiny_with_event("gpu_memcpy", R"("bytes": 1.8e19)"), "/traceEvents/23/args/bytes",
       "from 0 to 2^50 (1 PiB), not 1.8e+19"},
      {tiny_with_event("gpu_memcpy", R"("bytes": -4)"), "/traceEvents/23/args/bytes", "not -4"},
      {tiny_with_event("cpu_op", "", R"("ts": 1400, "dur": 1e300)"), "/traceEvents/23/dur",
       "a duration is at most 1e13 us"},
      {tiny_with_event("cpu_op", "", R"("ts": 1e17, "dur": 1)"), "/traceEvents/23/ts", "within 2^53 us"},
  }));
  CAPTURE(where);
  REQUIRE_THROWS_WITH(parse_kineto(event, "t.json"), Contains("t.json: " + where + ": ") && Contains(phrase));
}

TEST_CASE("traces::analyse refuses a batch larger than a scenario takes (#31 R08)", "[traces][kineto]") {
  // 2^25 was written as batch_per_gpu, which the scenario refuses; 2^31 + 8 wrapped to a negative int.
  const std::string batch = GENERATE(as<std::string>{}, "33554432", "2147483656");
  std::string text = tiny_trace(true);
  text.replace(text.find("[8,3,32,32]"), 11, "[" + batch + ",3,32,32]");
  REQUIRE_THROWS_WITH(analyse(parse_kineto(text, "t.json")),
                      Contains("t.json: a batch of " + batch +
                               " (the first size of aten::conv2d's input) is more "
                               "than 16777216"));
}

TEST_CASE("traces::parse_kineto refuses a device name or backend that is not a string (#31 R07)", "[traces][kineto]") {
  // Each was nlohmann's type_error, an internal error (exit 1).
  const auto [metadata, where, phrase] = GENERATE(table<std::string, std::string, std::string>({
      {R"("deviceProperties": [{"name": 7}])", "/deviceProperties/0/name", "expected a string, not an integer"},
      {R"("deviceProperties": [{"name": null}])", "/deviceProperties/0/name", "expected a string, not null"},
      {R"("deviceProperties": [7])", "/deviceProperties/0", "expected an object"},
      {R"("deviceProperties": {"name": "A100"})", "/deviceProperties", "expected an array of objects"},
      {R"("distributedInfo": {"backend": 7})", "/distributedInfo/backend", "expected a string, not an integer"},
      {R"("distributedInfo": [16])", "/distributedInfo", "expected an object"},
      // What a scenario of a GPU without a preset takes from deviceProperties (#31 R10) is range-checked too.
      {R"("deviceProperties": [{"name": "X", "totalGlobalMem": -1}])", "/deviceProperties/0/totalGlobalMem",
       "expected a memory size in bytes from 1048576 to 1125899906842624, not -1"},
      {R"("deviceProperties": [{"name": "X", "totalGlobalMem": "80GB"}])", "/deviceProperties/0/totalGlobalMem",
       "expected a memory size in bytes from 1048576 to 1125899906842624, not a string"},
      {R"("deviceProperties": [{"name": "X", "numSms": 0}])", "/deviceProperties/0/numSms",
       "expected a number of multiprocessors from 1 to 65536, not 0"},
      {R"("deviceProperties": [{"name": "X", "computeMinor": 10}])", "/deviceProperties/0/computeMinor",
       "expected a version from 0 to 9, not 10"},
  }));
  CAPTURE(metadata);
  std::string text = tiny_trace(true); // its own deviceProperties replaced
  const std::string own = R"("deviceProperties":[{"name":"Tesla V100-SXM2-32GB"}],)";
  REQUIRE(text.find(own) != std::string::npos);
  const std::string replaced = text.replace(text.find(own), own.size(), metadata + ",");
  REQUIRE_THROWS_WITH(parse_kineto(replaced, "t.json"), Contains("t.json: " + where + ": " + phrase));
}

TEST_CASE("traces::parse_kineto bounds what one event nests and holds (#31 R09)", "[traces][kineto]") {
  SECTION("nesting") {
    const std::string deep = std::string(300, '[') + std::string(300, ']');
    REQUIRE_THROWS_WITH(parse_kineto(tiny_with_event("cpu_op", R"("x": )" + deep), "t.json"),
                        Contains("t.json: /traceEvents/23: nested deeper than 256 levels"));
  }
  SECTION("values") {
    std::string many = "[0";
    for (int i = 0; i < (1 << 22); ++i)
      many += ",0";
    REQUIRE_THROWS_WITH(parse_kineto(tiny_with_event("cpu_op", R"("x": )" + many + "]"), "t.json"),
                        Contains("t.json: /traceEvents/23: more than 4194304 values in one event"));
  }
}
