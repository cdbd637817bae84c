// Issue #31's defects of `ddlsim calibrate` and of the calibration files it writes, end to end, each with the input
// that exposed it (release build of 2d42720): every one now exits 2 with one line naming the file and the line or
// JSON path, or writes, in well under a second, a file that `ddlsim check` reads.
#include "support/cli.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

using Catch::Contains;
using ddlsim::test::check_refused;
using ddlsim::test::Outcome;
using ddlsim::test::read_text;
using ddlsim::test::run_ddlsim;
using ddlsim::test::run_ok;
using ddlsim::test::TempDir;
using ddlsim::test::write_text;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

const std::string kQuickstart = std::string(DDLSIM_SOURCE_DIR) + "/scenarios/quickstart.json";

// Time of an all_reduce of `size` bytes in microseconds, as nccl-tests prints it: 20 us + size / (10 GB/s).
std::string linear_us(std::uint64_t size) {
  return fmt::format("{:.3f}", 20 + static_cast<double>(size) / 1e4);
}

// all_reduce_perf on 8 ranks of one host as nccl-tests 2.17 prints it: `sizes` rows 8 B apart from `first` B, each
// timed time_us(size) out of and in place (algbw and busbw 0: nccl-tests prints 0.00 below 5 MB/s, so busbw stays
// 1.75 x algbw to the printed digits only where both are 0).
std::string allreduce_log(std::size_t sizes, const std::function<std::string(std::uint64_t)>& time_us = linear_us,
                          std::uint64_t first = 8) {
  std::string text = "# Collective test starting: all_reduce_perf\n# nThread 1 nGpus 1\n#\n# Using devices\n";
  for (int r = 0; r < 8; ++r)
    text += fmt::format("#  Rank {:2} Group  0 Pid {} on host0 device {} [0x07] NVIDIA H100\n", r, 1000 + r, r);
  text += "#\n#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong\n";
  for (std::size_t i = 0; i < sizes; ++i) {
    const std::uint64_t size = first + 8 * i;
    const auto t = time_us(size);
    text += fmt::format("{:12} {:12} float sum -1 {} 0.00 0.00 0 {} 0.00 0.00 0\n", size, size / 4, t, t);
  }
  return text;
}

// The same as nccl-tests' -J JSON output, with `ngpus` GPUs per process.
std::string allreduce_json(std::size_t sizes, const json& ngpus = 1) {
  json results = json::array();
  for (std::size_t i = 0; i < sizes; ++i) {
    const std::uint64_t size = 8 + 8 * i;
    const json timing = {{"time", 20 + static_cast<double>(size) / 1e4}, {"alg_bw", 0}, {"bus_bw", 0}};
    results.push_back({{"size", size},
                       {"count", size / 4},
                       {"type", "float"},
                       {"redop", "sum"},
                       {"root", "    -1"},
                       {"out_of_place", timing},
                       {"in_place", timing}});
  }
  json devices = json::array();
  for (int r = 0; r < 8; ++r)
    devices.push_back({{"rank", r}, {"group", 0}, {"hostname", "host0"}});
  return json{{"version", 3},
              {"args", {"./all_reduce_perf"}},
              {"config", {{"nthreads", 1}, {"ngpus", ngpus}, {"devices", devices}}},
              {"results", results}}
      .dump();
}

// One probe statistic: every quantile `time_s`.
json probe_time(double time_s) {
  const std::string t = fmt::format("{} s", time_s);
  return {{"median", t},
          {"min", t},
          {"p10", t},
          {"p90", t},
          {"max", t},
          {"mean", t},
          {"noise", 0.001},
          {"samples", 10},
          {"warmup_samples", 1},
          {"stopped_by", "noise"}};
}

// A ddlsim-probe file (docs/calibration.md#probe-file) of one layer at `batch` and `sizes` all_reduce sizes on 4
// ranks of one node, 20 us + size / (100 GB/s) each.
json probe_file(const json& batch, std::size_t sizes) {
  json measurements = json::array();
  measurements.push_back({{"group", "layer"},
                          {"layer", "conv1"},
                          {"kernel", "convolution"},
                          {"pass", "forward"},
                          {"time", probe_time(1e-4)}});
  for (std::size_t i = 0; i < sizes; ++i)
    for (const bool in_place : {false, true}) {
      const double bytes = 8.0 * static_cast<double>(i + 1);
      measurements.push_back({{"group", "collective"},
                              {"collective", "all_reduce"},
                              {"bytes", fmt::format("{} B", bytes)},
                              {"in_place", in_place},
                              {"ranks", 4},
                              {"nodes", 1},
                              {"time", probe_time(20e-6 + bytes / 1e11)}});
    }
  return {{"format", "ddlsim-probe"},
          {"version", 1},
          {"generator", "test"},
          {"plan", {{"file", "p.json"}, {"scenario", "s"}, {"model", "m"}, {"gpu", "g"}, {"batch_per_gpu", batch}}},
          {"dtype", "fp32"},
          {"device",
           {{"name", "GPU"},
            {"pci_bus_id", "0"},
            {"compute_capability", "9.0"},
            {"multiprocessors", 132},
            {"memory", "80 GB"},
            {"l2_cache", "50 MB"},
            {"memory_bus_width", 5120},
            {"clocks", json::object()},
            {"driver", "1"},
            {"cuda_runtime", "1"},
            {"cudnn", "1"},
            {"cublas", "1"},
            {"cusolver", "1"},
            {"nccl", "1"}}},
          {"communicator", {{"ranks", 4}, {"nodes", 1}, {"processes", 4}}},
          {"timing", json::object()},
          {"measurements", measurements}};
}

// The quickstart scenario on one node of `gpus` GPUs, calibrated by `calibration`.
std::string scenario_using(const TempDir& tmp, const std::string& calibration, int gpus) {
  json s = json::parse(read_text(kQuickstart));
  s["gpu"]["calibration"] = calibration;
  s["cluster"] = {{"nodes", 1},
                  {"gpus_per_node", gpus},
                  {"intra_node", {{"bandwidth", "12 GB/s"}, {"latency", "5 us"}}},
                  {"topology", "star"}};
  const std::string path = tmp / "scenario.json";
  write_text(path, s.dump(2));
  return path;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

} // namespace

TEST_CASE("calibrate: 20,000 sizes fit in well under a second; more rows than the limit exit 2 (#31 R03)",
          "[cli][calibrate][robustness]") {
  // The piecewise fit was O(n³) time and O(n²) memory: 3,200 sizes took 57 s, 10^6 were killed at 23 GB.
  TempDir tmp;
  const std::string text = tmp / "ar.txt", js = tmp / "ar.json", probe = tmp / "probe.json";
  write_text(text, allreduce_log(20'000));
  write_text(js, allreduce_json(20'000));
  write_text(probe, probe_file(16, 5'000).dump());
  for (const auto& args :
       std::vector<std::vector<std::string>>{{"--nccl-tests", text}, {"--nccl-tests", js}, {"--probe", probe}}) {
    CAPTURE(args);
    std::vector<std::string> command{"calibrate"};
    command.insert(command.end(), args.begin(), args.end());
    command.insert(command.end(), {"--out", tmp / "c.json"});
    const auto start = std::chrono::steady_clock::now();
    const auto o = run_ok(command);
    CHECK(seconds_since(start) < 20); // about 0.2 s on the release build
    CHECK_THAT(o.out, Contains("1 alpha-beta segment, worst fit error 0.0 %"));
  }

  write_text(text, allreduce_log(100'001));
  check_refused(run_ddlsim({"calibrate", "--nccl-tests", text, "--out", tmp / "c.json"}),
                "ar.txt: line 100015: more than 100000 rows, the most ddlsim reads from one log");
  // -J JSON of more results: tests/calibrate/test_nccl_tests.cpp
  write_text(text, allreduce_log(60'000));
  check_refused(
      run_ddlsim({"calibrate", "--nccl-tests", text, text, "--out", tmp / "c.json"}),
      "ar.txt: the logs up to this one have 120000 rows, more than the 100000 ddlsim calibrates from at once");
  CHECK_FALSE(fs::exists(tmp / "c.json.tmp"));
}

TEST_CASE("calibrate: -J JSON whose ngpus is 0 or does not fit an int exits 2 (#31 R04)",
          "[cli][calibrate][robustness]") {
  // Each failed inside busbw_factor: "internal error: busbw_factor: 0 ranks", exit 1.
  const json ngpus = GENERATE(json(0), json(2147483648LL), json(4294967296LL));
  TempDir tmp;
  const std::string js = tmp / "ar.json";
  write_text(js, allreduce_json(30, ngpus));
  check_refused(run_ddlsim({"calibrate", "--nccl-tests", js, "--out", tmp / "c.json"}),
                fmt::format("ar.json: /config/ngpus: {} is out of range [1, 1048576]", ngpus.dump()));
  CHECK_FALSE(fs::exists(tmp / "c.json"));
}

TEST_CASE("calibrate: --ranks out of range says the range of ranks (#31 R05)", "[cli][calibrate][robustness]") {
  // It said "Value 0 not in range 0.000000 to 1797693134862315708145274237317043567980705675258449965989174768...":
  // 309 digits.
  TempDir tmp;
  const std::string log = tmp / "ar.txt";
  std::string text = allreduce_log(30);
  text.erase(0, text.find("#  size")); // the table alone: no listing, so the ranks come from --ranks
  write_text(log, text);
  for (const std::string ranks : {"0", "1048577", "-3"}) {
    const auto o = run_ddlsim(
        {"calibrate", "--nccl-tests", log, "--collective", "all_reduce", "--ranks", ranks, "--out", tmp / "c.json"});
    check_refused(o, "ddlsim: --ranks: Value " + ranks + " not in range 1 to 1048576");
    CHECK(o.err.size() < 100);
  }
  const auto o =
      run_ok({"calibrate", "--nccl-tests", log, "--collective", "all_reduce", "--ranks", "8", "--out", tmp / "c.json"});
  CHECK_THAT(o.out, Contains("allreduce           8 ranks"));
}

TEST_CASE("calibrate: a calibration whose alpha-beta segments overlap exits 2 from check and run (#31 R11)",
          "[cli][calibrate][robustness]") {
  // `check` passed it; `run` failed with "internal error: PiecewiseAlphaBeta::from_segments: segments out of order or
  // overlapping", exit 1.
  TempDir tmp;
  const std::string log = tmp / "ar.txt", calibration = tmp / "calibration.json";
  write_text(log, allreduce_log(30));
  run_ok({"calibrate", "--nccl-tests", log, "--out", calibration});
  json c = json::parse(read_text(calibration));
  const json segment = c["collectives"][0]["segments"][0];
  json first = segment, second = segment;
  first["last_size"] = "128 B";
  second["first_size"] = "64 B";
  c["collectives"][0]["segments"] = {first, second};
  write_text(calibration, c.dump(2));
  const std::string scenario = scenario_using(tmp, calibration, 8);
  const std::string phrase =
      "calibration.json: /collectives/0/segments/1/first_size: segments must be in size order, each after the "
      "last_size of the one before";
  check_refused(run_ddlsim({"check", scenario}), phrase);
  check_refused(run_ddlsim({"run", scenario, "--out", tmp / "o"}), phrase);
  // In order, they are read.
  second["first_size"] = "136 B";
  c["collectives"][0]["segments"] = {first, second};
  write_text(calibration, c.dump(2));
  run_ok({"check", scenario});
}

TEST_CASE("calibrate: what it writes, its reader reads; what it cannot write is refused or said (#31 R12)",
          "[cli][calibrate][robustness]") {
  TempDir tmp;
  const std::string log = tmp / "ar.txt", out = tmp / "c.json";
  SECTION("times and sizes beyond what a calibration holds: exit 2 naming the line, nothing written") {
    // Written as '1e-306 s' and '2251799813685248 B', which `check` then refused.
    write_text(log, allreduce_log(5, [](std::uint64_t) { return std::string("1e-300"); }));
    check_refused(run_ddlsim({"calibrate", "--nccl-tests", log, "--out", out}),
                  "ar.txt: line 15: time '1e-306 s' is out of range: a time is 0 or between 1e-15 s and 1e7 s");
    write_text(log, allreduce_log(5, linear_us, std::uint64_t{1} << 51));
    check_refused(run_ddlsim({"calibrate", "--nccl-tests", log, "--out", out}),
                  "ar.txt: line 15: size '2251799813685248 B' is out of range: a size is 0 or between 1 B and 1 PiB");
    CHECK_FALSE(fs::exists(out));
  }
  SECTION("a probe file's batch or communicator beyond an int: exit 2 naming the JSON path") {
    // The batch was written as -2147483648.
    const std::string probe = tmp / "probe.json";
    write_text(probe, probe_file(2147483648LL, 5).dump());
    check_refused(run_ddlsim({"calibrate", "--probe", probe, "--out", out}),
                  "probe.json: /plan/batch_per_gpu: 2147483648 is out of range [1, 16777216]");
    json p = probe_file(16, 5);
    p["communicator"]["ranks"] = 4294967300LL;
    write_text(probe, p.dump());
    check_refused(run_ddlsim({"calibrate", "--probe", probe, "--out", out}), "probe.json: /communicator/ranks");
    CHECK_FALSE(fs::exists(out));
  }
  SECTION("a fit beyond what a calibration holds is left out with a note; the file is read") {
    // 1,000 s + 200,000 s per byte: a beta above 1 s/B, written, and refused by `check`.
    write_text(
        log, allreduce_log(5, [](std::uint64_t s) { return fmt::format("{}", 1e9 + 2e11 * static_cast<double>(s)); }));
    const auto o = run_ok({"calibrate", "--nccl-tests", log, "--out", out});
    CHECK_THAT(o.out, Contains("note: all_reduce over 8 ranks on 1 nodes: its alpha-beta fit") &&
                          Contains("the table alone is kept"));
    CHECK(json::parse(read_text(out))["collectives"][0]["segments"].empty());
    run_ok({"check", scenario_using(tmp, out, 8)});
  }
  SECTION("a beta below what a calibration states is written as 0 with a note; the file is read") {
    write_text(
        log, allreduce_log(5, [](std::uint64_t s) { return fmt::format("{}", 20 + 1e-11 * static_cast<double>(s)); }));
    const auto o = run_ok({"calibrate", "--nccl-tests", log, "--out", out});
    CHECK_THAT(o.out, Contains("a beta below 1e-15 s/B, the least a calibration holds, is written as 0"));
    CHECK(json::parse(read_text(out))["collectives"][0]["segments"][0]["beta"] == "0 s/B");
    run_ok({"check", scenario_using(tmp, out, 8)});
  }
  SECTION("anything else the reader would refuse is refused before writing, naming the entry") {
    // A host-to-device copy of 1 PiB in 1 ns: 1e24 B/s, above the 1 PB/s a calibration holds.
    json p = probe_file(16, 5);
    p["measurements"].push_back(
        {{"group", "h2d"}, {"host_memory", "pinned"}, {"bytes", "1125899906842624 B"}, {"time", probe_time(1e-9)}});
    const std::string probe = tmp / "probe.json";
    write_text(probe, p.dump());
    const auto o = run_ddlsim({"calibrate", "--probe", probe, "--out", out});
    check_refused(o, "c.json: /host/h2d_bandwidth: '1.12589990684262");
    CHECK_THAT(o.err, Contains("e+24 B/s' is out of range: a bandwidth is 0 or between 1 B/s and 1 PB/s; not written"));
    CHECK_FALSE(fs::exists(out));
  }
}

TEST_CASE("calibrate: --collective takes a scenario's spelling as well as nccl-tests' (#31)",
          "[cli][calibrate][robustness]") {
  // `--collective allreduce` was refused: "unknown nccl-tests collective 'allreduce'".
  TempDir tmp;
  const std::string log = tmp / "ar.txt";
  std::string text = allreduce_log(30);
  text.erase(0, text.find('\n') + 1); // no "# Collective test starting:" line, as before nccl-tests 2.16.7
  write_text(log, text);
  run_ok({"calibrate", "--nccl-tests", log, "--collective", "all_reduce", "--out", tmp / "a.json"});
  run_ok({"calibrate", "--nccl-tests", log, "--collective", "allreduce", "--out", tmp / "b.json"});
  CHECK(read_text(tmp / "a.json") == read_text(tmp / "b.json"));
  check_refused(run_ddlsim({"calibrate", "--nccl-tests", log, "--collective", "allreduc", "--out", tmp / "c.json"}),
                "--collective: unknown collective 'allreduc' (expected all_reduce, all_gather, reduce_scatter, "
                "broadcast, reduce, alltoall, sendrecv, gather or scatter as nccl-tests names them, or allreduce, "
                "allgather, point_to_point as scenarios do)");
}

namespace {
// A version 2 probe file of one layer and one GEMM of the sweep (4096^3, bf16) on an H100, `change` applied to the
// GEMM's measurement.
json gemm_probe(const std::function<void(json&)>& change) {
  json p = probe_file(16, 0);
  p["version"] = 2;
  p["dtype"] = "bf16";
  p["device"]["name"] = "NVIDIA H100 80GB HBM3";
  json g = {{"group", "gemm"}, {"m", 4096}, {"n", 4096}, {"k", 4096}, {"dtype", "bf16"}, {"time", probe_time(2e-4)}};
  change(g);
  p["measurements"].push_back(g);
  return p;
}
} // namespace

TEST_CASE("calibrate --probe: a malformed GEMM sweep or gemm entry exits 2 naming the file and JSON path",
          "[cli][calibrate][robustness][gemm]") {
  TempDir tmp;
  const std::string probe = tmp / "probe.json", out = tmp / "c.json";
  const auto refused = [&](const json& p, const std::string& phrase) {
    write_text(probe, p.dump());
    check_refused(run_ddlsim({"calibrate", "--probe", probe, "--out", out}), phrase);
    CHECK_FALSE(fs::exists(out));
  };
  refused(gemm_probe([](json& g) { g.erase("m"); }), "probe.json: /measurements/1/m: missing required key");
  refused(gemm_probe([](json& g) { g["k"] = 0; }), "probe.json: /measurements/1/k: 0 is out of range");
  refused(gemm_probe([](json& g) { g["time"] = probe_time(-2e-4); }), "probe.json: /measurements/1/time/median");
  refused(gemm_probe([](json& g) { g["dtype"] = "fp16"; }),
          "probe.json: /measurements/1/dtype: differs from the file's \"dtype\" (bf16)");
  json unknown = gemm_probe([](json&) {});
  unknown["device"]["name"] = "NVIDIA GeForce RTX 4090";
  refused(unknown, "probe.json: /device/name: 'NVIDIA GeForce RTX 4090' is no GPU preset's device");
  json v1 = gemm_probe([](json&) {});
  v1["version"] = 1;
  refused(v1, "probe.json: /measurements/1/group: the \"gemm\" group needs \"version\": 2");

  // the file it writes is read; a gemm entry made malformed is refused by check and run
  write_text(probe, gemm_probe([](json&) {}).dump());
  run_ok({"calibrate", "--probe", probe, "--out", out});
  const json good = json::parse(read_text(out));
  REQUIRE(good.contains("gemm"));
  const std::string scenario = scenario_using(tmp, out, 1);
  run_ok({"check", scenario});
  for (const auto& [key, value, phrase] :
       {std::tuple<std::string, json, std::string>{"ceiling", 0, "c.json: /gemm/ceiling: expected a fraction"},
        {"ceiling", 1.5, "c.json: /gemm/ceiling: 1.5 is out of range"},
        {"ceilling", 0.8, "c.json: /gemm/ceilling: unknown key"},
        {"dtype", "int8", "c.json: /gemm/dtype"}}) {
    CAPTURE(key);
    json bad = good;
    bad["gemm"][key] = value;
    write_text(out, bad.dump(2));
    check_refused(run_ddlsim({"check", scenario}), phrase);
    check_refused(run_ddlsim({"run", scenario, "--out", tmp / "o"}), phrase);
  }
  json v1_calibration = good;
  v1_calibration["version"] = 1;
  write_text(out, v1_calibration.dump(2));
  check_refused(run_ddlsim({"check", scenario}), "c.json: /gemm: \"gemm\" needs \"version\": 2");
}
