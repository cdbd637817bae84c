// Issue #15's defects, each with the input that exposed it (release build of 06bdd15): every one now exits 2 with
// one line naming the file and JSON path (or the path given on the command line), or runs to a finite result.
#include "support/cli.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using Catch::Contains;
using ddlsim::test::check_refused;
using ddlsim::test::Outcome;
using ddlsim::test::read_text;
using ddlsim::test::run_ddlsim;
using ddlsim::test::run_ok;
using ddlsim::test::TempDir;
using ddlsim::test::write_text;
namespace fs = std::filesystem;

namespace {

const std::string kQuickstart = std::string(DDLSIM_SOURCE_DIR) + "/scenarios/quickstart.json";

// Files directly in `dir`, by name.
std::vector<std::string> files_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir))
    names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

} // namespace

TEST_CASE("robustness: quantities out of their finite range exit 2 (#15 D1, D2, D3, D6)", "[cli][robustness]") {
  // Each on the engine the issue found it on: D1-D3 crashed or failed inside the flow engine, D6 passed the analytic
  // engine with infinite figures.
  const auto [engine, set, phrase] = GENERATE(table<std::string, std::string, std::string>({
      {"flow", "cluster.inter_node.bandwidth=1e308 EB/s",
       "/cluster/inter_node/bandwidth: '1e308 EB/s' is out of range"},
      {"flow", "cluster.inter_node.latency=1e300 s", "/cluster/inter_node/latency: '1e300 s' is out of range"},
      {"flow", "cluster.intra_node.latency=1e300 s", "/cluster/intra_node/latency"},
      {"flow", "data.loading_per_sample=1e300 s", "/data/loading_per_sample"},
      {"flow", "gpu.host_link=1e-300 B/s", "/gpu/host_link"},
      {"flow", "gpu.peak_flops=1e-300 FLOPS", "/gpu/peak_flops"},
      {"flow", "gpu.memory_bandwidth=1e-300 B/s", "/gpu/memory_bandwidth"},
      {"flow", "cluster.inter_node.bandwidth=1e-320 Gbps", "/cluster/inter_node/bandwidth"},
      {"analytic", "cluster.inter_node.latency=1e308 h", "/cluster/inter_node/latency"},
      {"analytic", "cluster.inter_node.bandwidth=5e-324 B/s", "between 1 B/s and 1 PB/s"},
  }));
  TempDir tmp;
  const auto o = run_ddlsim({"run", kQuickstart, "--engine", engine, "--set", set, "--out", tmp / "o"});
  check_refused(o, phrase);
  CHECK_FALSE(fs::exists(tmp / "o")); // refused before anything is written
}

TEST_CASE("robustness: Horovod's cycle time and a FLOP count out of range exit 2 (#15 D3, D6)", "[cli][robustness]") {
  TempDir tmp;
  check_refused(run_ddlsim({"run", kQuickstart, "--engine", "flow", "--set", "strategy.kind=fusion", "--set",
                            "strategy.cycle_time=1e300 s", "--out", tmp / "o"}),
                "/strategy/cycle_time");
  const std::string model =
      R"(model={"layers": [{"name": "a", "params": 100, "fwd_flops": 1e308}], "batch_per_gpu": 8})";
  check_refused(run_ddlsim({"check", kQuickstart, "--set", model}),
                "/model/layers/0/fwd_flops: '1e+308' is out of range: a FLOP count is 0 or between");
}

TEST_CASE("robustness: the extremes of every range run to finite figures on both engines", "[cli][robustness]") {
  // The range ends the validator accepts must not break an engine (SimGrid's clock included).
  const std::string set =
      GENERATE(as<std::string>{}, "cluster.inter_node.latency=1e7 s", "cluster.inter_node.bandwidth=1 B/s",
               "gpu.peak_flops=1 MFLOPS", "data.loading_per_sample=1e7 s", "cluster.inter_node.latency=1e-15 s");
  TempDir tmp;
  std::vector<double> iterations;
  for (const std::string engine : {"analytic", "flow"}) {
    run_ok({"run", kQuickstart, "--engine", engine, "--set", set, "--out", tmp / engine, "--no-trace"});
    const auto summary = nlohmann::json::parse(read_text(fs::path(tmp / engine) / "summary.json"));
    const double t = summary["iteration_time_s"].get<double>();
    CHECK(std::isfinite(t));
    CHECK(t > 0);
    iterations.push_back(t);
  }
  CHECK(iterations[1] == Approx(iterations[0]).epsilon(1e-3)); // contention-free: the engines agree
}

TEST_CASE("robustness: sizes that wrap 64-bit arithmetic exit 2 (#15 D7)", "[cli][robustness]") {
  const auto [layers, phrase] = GENERATE(table<std::string, std::string>({
      {R"([{"name": "a", "params": 10, "fwd_flops": 1, "activation_bytes": "1e308 EB"}])",
       "/model/layers/0/activation_bytes: '1e308 EB' is out of range"},
      {R"([{"name": "a", "params": [{"name": "w", "shape": [4294967296, 4294967296, 4]}], "fwd_flops": 1}])",
       "/model/layers/0/params/0/shape: more than 2^50 elements"},
      {R"([{"name": "a", "params": [{"name": "w", "shape": [9223372036854775807, 2]}], "fwd_flops": 1}])",
       "/model/layers/0/params/0/shape: more than 2^50 elements"},
      {R"([{"name": "a", "params": 9223372036854775807, "fwd_flops": 1}])", "/model/layers/0/params"},
  }));
  check_refused(run_ddlsim({"check", kQuickstart, "--set", R"(model={"batch_per_gpu": 8, "layers": )" + layers + "}"}),
                phrase);
}

TEST_CASE("robustness: a scenario nested 100,000 levels deep exits 2, 256 levels are read (#15 D4)",
          "[cli][robustness]") {
  TempDir tmp;
  std::string deep;
  for (int i = 0; i < 100000; ++i)
    deep += R"({"a":)";
  deep += "1" + std::string(100000, '}');
  write_text(tmp / "deep.json", deep);
  check_refused(run_ddlsim({"check", tmp / "deep.json"}), "invalid JSON: nested deeper than 256 levels");
  std::string arrays = std::string(255, '[') + "1" + std::string(255, ']');
  write_text(tmp / "arrays.json", R"({"name": "x", "description": )" + arrays + "}");
  check_refused(run_ddlsim({"check", tmp / "arrays.json"}), "/description: expected a string"); // read, then judged
}

TEST_CASE("robustness: duplicate keys exit 2 naming the key's path (#15 D14)", "[cli][robustness]") {
  TempDir tmp;
  auto text = read_text(kQuickstart);
  const auto at = text.find("\"nodes\"");
  REQUIRE(at != std::string::npos);
  text.insert(at, R"("nodes": 16, )");
  write_text(tmp / "dup.json", text);
  check_refused(run_ddlsim({"check", tmp / "dup.json"}), "/cluster/nodes: invalid JSON: duplicate key");
  check_refused(run_ddlsim({"check", kQuickstart, "--set", R"(cluster={"nodes": 2, "nodes": 3})"}),
                "/cluster/nodes: invalid JSON: duplicate key");
}

TEST_CASE("robustness: an unusable --out exits 2 naming it, before the simulation (#15 D9)", "[cli][robustness]") {
  TempDir tmp;
  write_text(tmp / "file", "x");
  const std::string too_long(300, 'x');
  for (const std::string& out :
       std::vector<std::string>{tmp / "file", tmp / "file/sub", "/dev/null", "/proc/ddlsim-no", tmp / too_long}) {
    INFO("--out " << out);
    check_refused(run_ddlsim({"run", kQuickstart, "--out", out}), out + ": cannot write outputs here");
    check_refused(run_ddlsim({"sweep", kQuickstart, "--set", R"(sweep={"cluster.nodes": [1, 2]})", "--out", out}),
                  out + ": cannot write outputs here");
  }
  run_ok({"sweep", kQuickstart, "--set", R"(sweep={"cluster.nodes": [1, 2]})", "--out", tmp / "s", "--no-plots"});
  check_refused(run_ddlsim({"merge", tmp / "s", "--out", tmp / "file"}), "cannot write outputs here");
}

TEST_CASE("robustness: a run that cannot finish writing leaves the previous run's files, all of them (#15 D10)",
          "[cli][robustness]") {
  TempDir tmp;
  const std::string out = tmp / "o";
  run_ok({"run", kQuickstart, "--out", out});
  const auto before = files_in(out);
  const auto summary_before = read_text(fs::path(out) / "summary.json");
  const auto tasks_before = read_text(fs::path(out) / "tasks.csv");
  // Run again under a 45 KiB file size limit with SIGXFSZ at its default (which kills): timeline.json (~50 KiB)
  // cannot be written; tasks.csv (~37 KiB), written before it, must not replace the old one either.
  constexpr rlim_t kLimit = 45 * 1024;
  REQUIRE(fs::file_size(fs::path(out) / "timeline.json") > kLimit);
  REQUIRE(fs::file_size(fs::path(out) / "tasks.csv") < kLimit);
  rlimit old{};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &old) == 0);
  posix_spawnattr_t attr;
  REQUIRE(posix_spawnattr_init(&attr) == 0);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGXFSZ);
  REQUIRE(posix_spawnattr_setsigdefault(&attr, &defaults) == 0);
  REQUIRE(posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF) == 0);
  const std::string binary = ddlsim::test::ddlsim_binary();
  std::vector<std::string> args{binary, "run", kQuickstart, "--out", out, "--set", "cluster.inter_node.latency=9 us"};
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN); // this process writes nothing while the limit holds
  rlimit limited = old;
  limited.rlim_cur = kLimit;
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &limited) == 0);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, binary.c_str(), nullptr, &attr, argv.data(), environ);
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  posix_spawnattr_destroy(&attr);
  REQUIRE(spawned == 0);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status)); // not killed by SIGXFSZ
  CHECK(WEXITSTATUS(status) == 2);
  CHECK(files_in(out) == before); // no temporary file left behind
  CHECK(read_text(fs::path(out) / "summary.json") == summary_before);
  CHECK(read_text(fs::path(out) / "tasks.csv") == tasks_before);
}

TEST_CASE("robustness: merge needs every shard of one split, once, each complete (#15 D11)", "[cli][robustness]") {
  TempDir tmp;
  const std::string sweep = R"(sweep={"cluster.nodes": [1, 2, 3, 4]})";
  const auto shard = [&](const std::string& name, const std::string& which) {
    run_ok({"sweep", kQuickstart, "--set", sweep, "--shard", which, "--out", tmp / name});
    return tmp / name;
  };
  const auto a0 = shard("a0", "0/2"), a1 = shard("a1", "1/2"), b0 = shard("b0", "0/3");
  check_refused(run_ddlsim({"merge", a0, "--out", tmp / "m"}), "merge: shard 1/2 is missing");
  check_refused(run_ddlsim({"merge", a0, a0, a1, "--out", tmp / "m"}), "merge: shard 0/2 is given twice");
  check_refused(run_ddlsim({"merge", a0, b0, "--out", tmp / "m"}), "the shards of one sweep split it the same way");
  // A shard cut short (its last point's line removed) is not merged as if complete.
  const fs::path journal = fs::path(a1) / "points.jsonl";
  auto text = read_text(journal);
  text.erase(text.rfind('\n', text.size() - 2) + 1);
  write_text(journal.string(), text);
  check_refused(run_ddlsim({"merge", a0, a1, "--out", tmp / "m"}), "merge: shard 1/2 has 1 of its 2 points");
  run_ok({"sweep", kQuickstart, "--set", sweep, "--shard", "1/2", "--out", a1, "--resume"});
  CHECK_THAT(run_ok({"merge", a0, a1, "--out", tmp / "m", "--no-plots"}).out, Contains("4 points"));
}

TEST_CASE("robustness: sweeps too large to run, or to count, exit 2 before running (#15 D12)", "[cli][robustness]") {
  TempDir tmp;
  std::string values = "[";
  for (int i = 0; i < 65536; ++i)
    values += (i == 0 ? "" : ",") + std::to_string(i + 1);
  values += "]";
  // 4 axes of 65,536 values: 2^64 points, which wrapped to 0 in a 64-bit count.
  auto doc = nlohmann::json::parse(read_text(kQuickstart));
  doc["sweep"] =
      nlohmann::json::parse(R"({"model.batch_per_gpu": )" + values + R"(, "cluster.nodes": )" + values +
                            R"(, "cluster.gpus_per_node": )" + values + R"(, "data.prefetch": )" + values + "}");
  write_text(tmp / "huge.json", doc.dump());
  check_refused(run_ddlsim({"check", tmp / "huge.json"}), "/sweep: more than 1000000 points");
  check_refused(run_ddlsim({"sweep", tmp / "huge.json", "--out", tmp / "o"}), "/sweep: more than 1000000 points");
  // 10 axes of 100 values: 10^20 points.
  doc["sweep"] = nlohmann::json::object();
  std::string hundred = "[";
  for (int i = 0; i < 100; ++i)
    hundred += (i == 0 ? "" : ",") + std::to_string(i + 1);
  hundred += "]";
  for (const char* key : {"model.batch_per_gpu", "cluster.nodes", "cluster.gpus_per_node", "data.prefetch",
                          "strategy.kind", "engine", "name", "description", "gpu.efficiency", "host.launch"})
    doc["sweep"][key] = nlohmann::json::parse(hundred);
  write_text(tmp / "ten.json", doc.dump());
  check_refused(run_ddlsim({"check", tmp / "ten.json"}), "/sweep: more than 1000000 points");
}

TEST_CASE("robustness: sweep axes run in the order the file writes them (#15 D15)", "[cli][robustness]") {
  TempDir tmp;
  // strategy.kind written first: it varies slowest, although "cluster.nodes" sorts before it.
  run_ok({"sweep", kQuickstart, "--set", R"(sweep={"strategy.kind": ["wfbp", "ddp"], "cluster.nodes": [1, 2, 3]})",
          "--out", tmp / "s", "--no-plots"});
  const auto table = read_text(fs::path(tmp / "s") / "results.csv");
  std::istringstream in(table);
  std::string header, row;
  std::getline(in, header);
  CHECK_THAT(header, Catch::StartsWith("point,strategy.kind,cluster.nodes,"));
  std::vector<std::string> kinds;
  while (std::getline(in, row))
    kinds.push_back(row.substr(row.find(',') + 1, row.find(',', row.find(',') + 1) - row.find(',') - 1));
  CHECK(kinds == std::vector<std::string>{"wfbp", "wfbp", "wfbp", "ddp", "ddp", "ddp"});
}

TEST_CASE("robustness: control characters in user strings are escaped, a message stays one line (#15 D16)",
          "[cli][robustness]") {
  check_refused(run_ddlsim({"check", kQuickstart, "--set", "cluster.nodes=a\nb"}),
                "expected an integer, got a string (from --set cluster.nodes=a\\nb)");
  TempDir tmp;
  auto text = read_text(kQuickstart);
  text.insert(text.find('{') + 1, R"("calibration": "cal\u0000.json", )");
  write_text(tmp / "nul.json", text);
  write_text(tmp / "cal", "{}"); // the file a path cut at the NUL would open
  check_refused(run_ddlsim({"check", tmp / "nul.json"}), "cal\\x00.json");
}

TEST_CASE("robustness: --resume refuses a journal with points the sweep does not have (#15 D18)", "[cli][robustness]") {
  TempDir tmp;
  const std::string sweep = R"(sweep={"cluster.nodes": [1, 2]})";
  run_ok({"sweep", kQuickstart, "--set", sweep, "--out", tmp / "s", "--no-plots"});
  const fs::path journal = fs::path(tmp / "s") / "points.jsonl";
  const auto text = read_text(journal);
  const auto first = text.find('\n') + 1; // the first result, after the header
  const std::string result = text.substr(first, text.find('\n', first) + 1 - first);
  const auto at = result.find("\"index\":");
  REQUIRE(at != std::string::npos);
  std::string moved = result;
  moved.replace(at, 9, "\"index\":7"); // "index":0 or "index":1 (one digit: two points) -> "index":7
  write_text(journal.string(), text + moved);
  check_refused(run_ddlsim({"sweep", kQuickstart, "--set", sweep, "--out", tmp / "s", "--resume"}),
                "point 7 is not a point of shard 0/1 of this 2-point sweep");
  write_text(journal.string(), text + result); // the first finished point again (0 or 1, whichever finished first)
  check_refused(run_ddlsim({"sweep", kQuickstart, "--set", sweep, "--out", tmp / "s", "--resume"}),
                "point " + result.substr(at + 8, 1) + " is recorded twice");
}

TEST_CASE("robustness: merge and --resume refuse a damaged journal: deep nesting, absurd points, bad summaries "
          "(#31 R20, R21)",
          "[cli][robustness]") {
  TempDir tmp;
  const std::string sweep = R"(sweep={"cluster.nodes": [1, 2]})";
  run_ok({"sweep", kQuickstart, "--set", sweep, "--out", tmp / "s", "--no-plots"});
  const fs::path journal = fs::path(tmp / "s") / "points.jsonl";
  const auto text = read_text(journal);
  const auto first = text.find('\n') + 1;
  const std::string header = text.substr(0, first);
  const std::string result = text.substr(first, text.find('\n', first) + 1 - first);
  const auto resume = [&] {
    return run_ddlsim({"sweep", kQuickstart, "--set", sweep, "--out", tmp / "s", "--resume", "--no-plots"});
  };
  const auto merge = [&] { return run_ddlsim({"merge", tmp / "s", "--out", tmp / "m", "--no-plots"}); };
  SECTION("a line nested 200,000 deep (R21: SIGSEGV before)") {
    std::string deep = result; // the point's params nested 200,000 arrays deep
    const auto at = deep.find("\"params\":");
    REQUIRE(at != std::string::npos);
    deep.insert(at + 9, std::string(200000, '[') + "0" + std::string(200000, ']') + ",\"was\":");
    write_text(journal.string(), header + deep);
    check_refused(resume(), "line 2: not a JSON line: nested deeper than 256 levels");
    check_refused(merge(), "line 2: not a JSON line: nested deeper than 256 levels");
  }
  SECTION("a header with 2^62 points (R20: merge hung before)") {
    std::string big = header;
    big.replace(big.find("\"points\":2"), 10, "\"points\":4611686018427387904");
    write_text(journal.string(), big + result);
    check_refused(merge(), "4611686018427387904 points: a sweep has 1 to 1000000");
  }
  SECTION("null and negative summaries (R20: merged with exit 0 before)") {
    for (const std::string& summary : {std::string("null"), std::string("-1")}) {
      INFO(summary);
      std::string bad = result;
      const auto at = bad.find("\"summary\":");
      REQUIRE(at != std::string::npos);
      bad.replace(at + 10, bad.size() - 2 - (at + 10), summary); // up to the closing brace and newline
      write_text(journal.string(), header + bad);
      check_refused(merge(), "its summary is not an object");
    }
    std::string negative = result;
    const auto at = negative.find("\"iteration_time_s\":");
    REQUIRE(at != std::string::npos);
    negative.insert(at + 19, "-");
    write_text(journal.string(), header + negative);
    check_refused(merge(), "its summary's iteration_time_s is not a finite number >= 0");
  }
}

TEST_CASE("robustness: --resume and merge refuse results computed from a calibration that changed since (#31 R27)",
          "[cli][robustness]") {
  TempDir tmp;
  const std::string calibration = tmp / "cal.json";
  write_text(calibration, R"({"version": 2, "source": "a", "host": {"launch": "5 us"}})");
  const std::string sweep = R"(sweep={"cluster.nodes": [1, 2]})";
  const std::string uses = "calibration=\"" + calibration + "\"";
  const auto shard = [&](const std::string& s) {
    return run_ddlsim(
        {"sweep", kQuickstart, "--set", uses, "--set", sweep, "--out", tmp / s, "--shard", s.substr(1), "--no-plots"});
  };
  REQUIRE(shard("s0/2").exit_code == 0);
  const auto journal = read_text(fs::path(tmp / "s0/2") / "points.jsonl");
  CHECK_THAT(journal.substr(0, journal.find('\n')), Contains(calibration)); // the header records the input
  write_text(calibration, R"({"version": 2, "source": "b", "host": {"launch": "5 us"}})");
  // --resume: the results of the old calibration would be mixed with the new one's
  check_refused(run_ddlsim({"sweep", kQuickstart, "--set", uses, "--set", sweep, "--out", tmp / "s0/2", "--shard",
                            "0/2", "--resume", "--no-plots"}),
                "--resume: an input changed since these results were computed: " + calibration + " (fingerprint");
  // merge: shard 1 ran on the new calibration, shard 0 on the old one
  REQUIRE(shard("s1/2").exit_code == 0);
  check_refused(run_ddlsim({"merge", tmp / "s0/2", tmp / "s1/2", "--out", tmp / "m", "--no-plots"}),
                "merge: this shard read other inputs than");
}

TEST_CASE("robustness: an error line quotes at most ~200 characters of a user string (#31 R13)", "[cli][robustness]") {
  TempDir tmp;
  auto doc = nlohmann::json::parse(read_text(kQuickstart));
  const std::string huge(1000000, 'x');
  const auto refused = [&](const nlohmann::json& d, const std::string& phrase) {
    write_text(tmp / "long.json", d.dump());
    const auto o = run_ddlsim({"check", tmp / "long.json"});
    check_refused(o, phrase);
    CHECK(o.err.size() < 1500); // a 1 MB line before
  };
  SECTION("a preset name") {
    doc["gpu"] = {{"preset", huge}};
    refused(doc, "unknown value 'xxxx");
  }
  SECTION("a key") {
    doc[huge] = 1;
    refused(doc, "... (1000001 characters) ...xxxx"); // the pointer, then: unknown key
  }
  SECTION("a model name") {
    doc["model"]["zoo"] = huge;
    refused(doc, "unknown model 'xxx");
  }
}

TEST_CASE("robustness: a rename that fails puts back the files already replaced (#31 R17)", "[cli][robustness]") {
  TempDir tmp;
  const std::string out = tmp / "o";
  run_ok({"run", kQuickstart, "--out", out});
  const auto tasks_before = read_text(fs::path(out) / "tasks.csv");
  // summary.json, renamed last, cannot be replaced: a directory stands there.
  fs::remove(fs::path(out) / "summary.json");
  fs::create_directory(fs::path(out) / "summary.json");
  check_refused(run_ddlsim({"run", kQuickstart, "--out", out, "--set", "cluster.inter_node.latency=\"9 us\""}),
                "cannot move the file into place");
  CHECK(read_text(fs::path(out) / "tasks.csv") == tasks_before); // the new one stood beside the old summary before
  for (const auto& name : files_in(out))
    CHECK_THAT(name, !Contains(".old.") && !Contains(".tmp."));
}

TEST_CASE("robustness: an --out in use by another ddlsim is refused; a killed run's temporaries are removed "
          "(#31 R18, R19)",
          "[cli][robustness]") {
  TempDir tmp;
  const std::string out = tmp / "o";
  run_ok({"run", kQuickstart, "--out", out});
  SECTION("in use") {
    const int fd = ::open((fs::path(out) / ".ddlsim.lock").c_str(), O_RDWR | O_CLOEXEC);
    REQUIRE(fd >= 0);
    REQUIRE(::flock(fd, LOCK_EX | LOCK_NB) == 0); // as a sweep writing there holds it
    check_refused(run_ddlsim({"run", kQuickstart, "--out", out}), "is in use by another ddlsim command");
    check_refused(
        run_ddlsim({"sweep", kQuickstart, "--set", R"(sweep={"cluster.nodes": [1, 2]})", "--out", out, "--no-plots"}),
        "is in use by another ddlsim command");
    ::close(fd);
    run_ok({"run", kQuickstart, "--out", out}); // released
  }
  SECTION("temporaries") {
    for (const char* name : {"summary.json.tmp.4194301", "tasks.csv.old.77", "plot.gp.log.12", "plot.gp.run.12"})
      write_text(fs::path(out) / name, "left by a killed run");
    write_text(fs::path(out) / "notes.tmp.txt", "not ours");
    run_ok({"run", kQuickstart, "--out", out});
    const auto names = files_in(out);
    CHECK(std::count(names.begin(), names.end(), "notes.tmp.txt") == 1);
    for (const auto& name : names)
      CHECK_THAT(name, !Contains(".tmp.4") && !Contains(".old.") && !Contains(".gp."));
  }
}

TEST_CASE("robustness: without gnuplot a sweep finishes with a note; plot says what is missing; a newline in "
          "plot --out exits 2 (#31 R16)",
          "[cli][robustness]") {
  TempDir tmp;
  const std::string old_path = std::getenv("PATH") != nullptr ? std::getenv("PATH") : "";
  ::setenv("PATH", (tmp / "nothing-here").c_str(), 1); // ddlsim is spawned by its full path
  const auto sweep = run_ddlsim(
      {"sweep", kQuickstart, "--set", R"(sweep={"cluster.nodes": [1, 2]})", "--out", tmp / "s", "--jobs", "1"});
  const auto plot = run_ddlsim({"plot", fs::path(tmp / "s") / "results.csv", "--out", tmp / "p.png"});
  ::setenv("PATH", old_path.c_str(), 1);
  CHECK(sweep.exit_code == 0); // internal error, exit 1, before
  CHECK_THAT(sweep.out, Contains("note: ") && Contains("gnuplot is not on PATH"));
  CHECK(fs::exists(fs::path(tmp / "s") / "results.csv"));
  check_refused(plot, "gnuplot is not on PATH");
  check_refused(run_ddlsim({"plot", fs::path(tmp / "s") / "results.csv", "--out", tmp / "a\nb.png"}),
                "a control character");
}

TEST_CASE("robustness: tasks.csv quotes layer names with commas, quotes and line breaks (RFC 4180, #31 R26)",
          "[cli][robustness]") {
  TempDir tmp;
  auto doc = nlohmann::json::parse(read_text(kQuickstart));
  const std::vector<std::string> names{"conv, 1", "say \"hi\"", "two\nlines"};
  doc["model"] = {{"batch_per_gpu", 8}, {"layers", nlohmann::json::array()}};
  for (std::size_t i = 0; i < names.size(); ++i)
    doc["model"]["layers"].push_back({{"name", names[i]},
                                      {"params", 1000},
                                      {"fwd_flops", "1 GFLOP"},
                                      {"inputs", i == 0 ? nlohmann::json::array() : nlohmann::json{names[i - 1]}}});
  write_text(tmp / "named.json", doc.dump());
  run_ok({"run", tmp / "named.json", "--out", tmp / "o", "--no-trace"});
  const auto csv = read_text(fs::path(tmp / "o") / "tasks.csv");
  CHECK_THAT(csv, Contains(",\"conv, 1\",") && Contains(",\"say \"\"hi\"\"\",") && Contains(",\"two\nlines\","));
  // Every row has the header's 10 fields, counted as RFC 4180 reads them.
  std::size_t fields = 1, rows = 0;
  bool quoted = false;
  for (std::size_t i = 0; i < csv.size(); ++i) {
    const char c = csv[i];
    if (c == '"')
      quoted = !quoted;
    else if (c == ',' && !quoted)
      ++fields;
    else if (c == '\n' && !quoted) {
      CHECK(fields == 10);
      fields = 1;
      ++rows;
    }
  }
  CHECK(rows > 3);
}

TEST_CASE("robustness: partitions too small for memory are refused by check, with the count (#31 R01)",
          "[cli][robustness]") {
  // ResNet-50's 25.6 M parameters: ByteScheduler's partition of 10 parameters, 1 parameter, BytePS's 4 B.
  const auto [strategy, pointer] = GENERATE(table<std::string, std::string>({
      {R"({"kind": "bytescheduler", "partition": 10})", "/strategy/partition"},
      {R"({"kind": "bytescheduler", "partition": 1})", "/strategy/partition"},
      {R"({"kind": "ps-sync", "mode": "byteps", "partition_bytes": "4 B"})", "/strategy/partition_bytes"},
  }));
  CAPTURE(strategy);
  check_refused(run_ddlsim({"check", kQuickstart, "--set", "strategy=" + strategy}),
                pointer + ": cuts the gradients into ");
  check_refused(run_ddlsim({"check", kQuickstart, "--set", "strategy=" + strategy}), "the limit is 100000");
}

TEST_CASE("robustness: per-message flows beyond the limit are refused by check (#31 R23)", "[cli][robustness]") {
  // 16,384 GPUs per message: 537 M flows per allreduce; SIGABRT after check passed, before.
  check_refused(run_ddlsim({"check", kQuickstart, "--set", "engine=\"flow\"", "--set",
                            R"(flow={"granularity": "per-message"})", "--set", "cluster.nodes=4096"}),
                "/flow/granularity: \"per-message\" on 16384 GPUs times ~5.37e+08 flows per allreduce");
  run_ok({"check", kQuickstart, "--set", "engine=\"flow\"", "--set", R"(flow={"granularity": "per-message"})", "--set",
          "cluster.nodes=1024"}); // 4,096 GPUs: at the limit
}

TEST_CASE("robustness: merge searches beyond a minute are refused by check, with the estimate (#31 R28)",
          "[cli][robustness]") {
  // A transformer of 10,000 blocks has 120,004 gradient tensors: OMGS would time 7.2e9 candidate groups (~3 min; check
  // and run ran them). MG-WFBP plans in linear time where its allreduce is affine, else it searches as OMGS does (two
  // sockets, the allreduce lowered anew for each candidate: 2,000 blocks, 24,004 tensors, are too many).
  const auto transformer = [](int blocks) {
    return fmt::format(R"(model={{"zoo": "transformer", "transformer": {{"layers": {}, "hidden": 64, "heads": 4, )"
                       R"("sequence": 128, "vocabulary": 1000}}, "batch_per_gpu": 8}})",
                       blocks);
  };
  const std::string two_sockets =
      R"(cluster.intra_node={"bandwidth": "12 GB/s", "latency": "5 us", )"
      R"("fabric": "two-sockets", "host_link": {"bandwidth": "20 GB/s", "latency": "1 us"}})";
  check_refused(run_ddlsim({"check", kQuickstart, "--set", transformer(10000), "--set", "strategy.kind=omgs"}),
                "/model/transformer/layers: 120004 gradient tensors: strategy 'omgs' tries every group of consecutive "
                "tensors, 7.2e+09 candidates each timed with the allgather's cost (3 terms) (~26 ns each): ~187 s; the "
                "limit is 60 s, about 67936 tensors here");
  check_refused(run_ddlsim({"check", kQuickstart, "--set", transformer(2000), "--set", two_sockets}),
                "24004 gradient tensors: strategy 'mg-wfbp' tries every group of consecutive tensors, 2.88e+08 "
                "candidates each timed with the allreduce lowered anew (8 flows) (~420 ns each): ~121 s");
  // PipeDream's partition tries every cut of every stage: 2,048 stages over 10,000 blocks, 6.5e10 candidates.
  check_refused(run_ddlsim({"check", kQuickstart, "--set", transformer(10000), "--set", "cluster.nodes=512", "--set",
                            R"(parallelism={"pipeline": 2048})", "--set",
                            R"(pipeline={"schedule": "gpipe", "micro_batches": 16, "partition": "pipedream"})"}),
                "/pipeline/partition: \"pipedream\" tries every cut for each of 2048 stages over 10000 units (layers, "
                "or blocks): 6.47e+10 candidates, ~78 s at ~1.2 ns each; the limit is 60 s");
  run_ok({"check", kQuickstart, "--set", transformer(2000)}); // over a switch: affine, linear
  run_ok({"check", kQuickstart, "--set", transformer(200), "--set", "strategy.kind=omgs"});
}

TEST_CASE("robustness: ps-async's queue model beyond a minute is refused by check, with the estimate (#31 R24)",
          "[cli][robustness]") {
  // At the pair limit, 16,384 workers x 1,024 servers = 2^24 pairs: 3.7e9 events, a run of ~14 min that check passed.
  check_refused(run_ddlsim({"check", kQuickstart, "--set", R"(strategy={"kind": "ps-async", "servers": 1024})", "--set",
                            "cluster.nodes=4096"}),
                "/strategy/servers: 1024 servers x 16384 workers: ps-async's queue model simulates ~3.7e+09 events "
                "((2 S + 3) per worker and iteration, up to 110 iterations each), ~370 s; the limit is 60 s (~2659 "
                "workers with 1024 servers)");
  // A worker speed spread runs the faster workers longer.
  check_refused(run_ddlsim({"check", kQuickstart, "--set",
                            R"(strategy={"kind": "ps-async", "servers": 1024, "worker_speed_spread": 1})", "--set",
                            "cluster.nodes=512"}),
                "up to 220 iterations each");
  run_ok({"check", kQuickstart, "--set", R"(strategy={"kind": "ps-async", "servers": 1024})", "--set",
          "cluster.nodes=256"}); // 1,024 workers: ~23 s
}

TEST_CASE("robustness: a scenario name that is not a plain file name exits 2 (#15 D19)", "[cli][robustness]") {
  TempDir tmp;
  for (const std::string& name : std::vector<std::string>{"..", ".", "/", "/tmp/x", "a/b", std::string(201, 'n')}) {
    INFO("name " << name);
    check_refused(run_ddlsim({"run", kQuickstart, "--set", "name=" + name}),
                  "cannot name the output directory out/<name>");
  }
}

TEST_CASE("robustness: a device as input is refused, not read until memory runs out (#15 D20)", "[cli][robustness]") {
  check_refused(run_ddlsim({"check", "/dev/zero"}), "/dev/zero: is a device, not a file");
  check_refused(run_ddlsim({"check", kQuickstart, "--set", "calibration=/dev/zero"}), "/dev/zero: is a device");
  check_refused(run_ddlsim({"check", kQuickstart, "--set", R"(model={"workload": "/dev/zero", "batch_per_gpu": 8})"}),
                "/dev/zero: is a device");
}

TEST_CASE("robustness: clusters too large for memory or time are refused up front with an estimate (#15 D13)",
          "[cli][robustness]") {
  const auto [sets, phrase] = GENERATE(table<std::vector<std::string>, std::string>({
      {{"strategy.kind=ps-async", "cluster.nodes=65536"},
       "/strategy/servers: 65536 servers x 262144 workers = 17179869184 server-worker pairs would need ~736.0 GiB"},
      {{"strategy.kind=ps-async", "cluster.nodes=8192"}, "the limit is 16777216: use fewer servers"},
      {{"strategy.kind=topk", "cluster.nodes=1048576", "cluster.gpus_per_node=1024"},
       "/cluster: 1048576 nodes x 1024 GPUs = 1073741824 GPUs; the limit is 1048576 GPUs"},
      {{"collectives.allreduce=\"halving-doubling\"", "cluster.nodes=1048576", "cluster.gpus_per_node=1024"},
       "the limit is 1048576 GPUs"},
      {{"engine=flow", "cluster.nodes=262144", "cluster.gpus_per_node=2"},
       "/cluster: 524288 GPUs (and servers) would need ~8 GiB on the flow engine"},
      {{"engine=flow", "strategy.kind=ps-sync", "cluster.nodes=128", "cluster.gpus_per_node=8"},
       "128 servers x 1024 workers = 131072 server-worker pairs, each a push and a pull of every key on the flow"},
  }));
  std::vector<std::string> args{"check", kQuickstart};
  for (const auto& s : sets) {
    args.push_back("--set");
    args.push_back(s);
  }
  check_refused(run_ddlsim(args), phrase);
}

TEST_CASE("robustness: the limits themselves are accepted (#15 D13)", "[cli][robustness]") {
  // At each limit exactly (running them takes seconds to a minute on the release build: docs/scenario.md, "Limits").
  for (const auto& sets : std::vector<std::vector<std::string>>{
           {"cluster.nodes=1024", "cluster.gpus_per_node=1024", "strategy.kind=topk"},
           {"engine=flow", "cluster.nodes=65536", "cluster.gpus_per_node=4"},
           {"cluster.nodes=1024", "cluster.gpus_per_node=4", "strategy.kind=ps-sync", "strategy.servers=4096"},
           {"engine=flow", "cluster.nodes=16", "cluster.gpus_per_node=8", "strategy.kind=ps-sync",
            "strategy.servers=256"}}) {
    std::vector<std::string> args{"check", kQuickstart};
    for (const auto& s : sets) {
      args.push_back("--set");
      args.push_back(s);
    }
    run_ok(args);
  }
}

TEST_CASE("robustness: found by the mutation run: uneven parallel groups and too many micro-batches exit 2",
          "[cli][robustness]") {
  const std::string spectrain = std::string(DDLSIM_SOURCE_DIR) + "/scenarios/spectrain-vgg16.json";
  // 3 nodes x 4 GPUs, 4 stages: a stage's data-parallel group of 3 GPUs straddles two nodes unevenly (was exit 1,
  // "internal error: communicator has more GPUs on node 1 than on node 0").
  check_refused(run_ddlsim({"check", spectrain, "--set", "cluster.nodes=3"}),
                "/parallelism: stage 1's data-parallel group (GPUs 3, 4, 5) is uneven over the nodes");
  // A fat-tree with 65,536 up-links per leaf switch ran for over a minute building SimGrid's platform.
  check_refused(run_ddlsim({"check", std::string(DDLSIM_SOURCE_DIR) + "/scenarios/fat-tree-oversubscribed.json",
                            "--set", "cluster.topology.up=[65536, 1]"}),
                "/cluster/topology/up: the fat-tree has 327680 switches and 1310720 links; the limit is 262144");
  // 8 stages x 13 virtual stages of GPT-3's 96 blocks (was exit 1, "uniform partition: 104 stages for 96 blocks").
  check_refused(run_ddlsim({"check", std::string(DDLSIM_SOURCE_DIR) + "/scenarios/gpt3-175b-hybrid.json", "--set",
                            "pipeline.virtual_stages=13"}),
                "/pipeline: 104 virtual stages (8 stages x 13) for a transformer of 96 blocks");
  // Found by fuzz_scenario: a calibration path longer than the system allows was "filesystem error: status: File
  // name too long" (an exception out of std::filesystem::exists), exit 1.
  check_refused(run_ddlsim({"check", kQuickstart, "--set", "calibration=" + std::string(5000, 'c')}), "does not exist");
  // 2^20 micro-batches on 4 stages ran for over a minute.
  check_refused(run_ddlsim({"check", spectrain, "--set", "pipeline.micro_batches=1048576"}),
                "/pipeline/micro_batches: 1048576 micro-batches x 4 virtual stages = 4194304 micro-batch passes");
}

TEST_CASE("robustness: check refuses what run refuses from its plan: the samplers' limits (#31 R25)",
          "[cli][robustness]") {
  // 100,000 sampled iterations of GPT-3's 128 DAG copies of 10,978 tasks (~418 s): `check` passed, `run` refused.
  const std::string gpt3 = std::string(DDLSIM_SOURCE_DIR) + "/scenarios/gpt3-175b-hybrid.json";
  const std::string variability = R"(variability={"compute": {"distribution": "lognormal", "cv": 0.1}, )"
                                  R"("iterations": 100000})";
  check_refused(run_ddlsim({"check", gpt3, "--set", variability}),
                "/variability/iterations: 100000 iterations x 128 DAG copies x 10978 tasks");
  // The flow engine's sampler: 200,000 iterations of the quickstart's 8 copies of 449 tasks (~188 s, ~85 GiB).
  check_refused(
      run_ddlsim({"check", kQuickstart, "--set", "engine=\"flow\"", "--set",
                  R"(variability={"compute": {"distribution": "lognormal", "cv": 0.1}, "iterations": 200000})"}),
      "/variability/iterations: 200000 sampled iterations of 8 DAG copies");
}

TEST_CASE("robustness: a refusal after --out was taken leaves no output directory (#31 R25)", "[cli][robustness]") {
  // The README promises no output on exit 2; a refusal from the plan left the directory (and its lock) behind.
  TempDir dir;
  const std::string variability = R"(variability={"compute": {"distribution": "lognormal", "cv": 0.1}, )"
                                  R"("iterations": 100000})";
  const std::string gpt3 = std::string(DDLSIM_SOURCE_DIR) + "/scenarios/gpt3-175b-hybrid.json";
  check_refused(run_ddlsim({"run", gpt3, "--out", dir / "made/out/", "--set", variability}), "/variability/iterations");
  CHECK_FALSE(fs::exists(fs::path(dir / "made")));
  fs::create_directories(fs::path(dir / "kept"));
  check_refused(run_ddlsim({"run", gpt3, "--out", dir / "kept/out", "--set", variability}), "/variability/iterations");
  CHECK(fs::exists(fs::path(dir / "kept")));
  CHECK_FALSE(fs::exists(fs::path(dir / "kept/out")));
}

namespace {

// Runs ddlsim with `args` under a file size limit of `limit` bytes, SIGXFSZ ignored (inherited through exec, so
// that gnuplot's writes fail with EFBIG as on a full disk, instead of killing it); returns its exit status.
int run_with_file_limit(std::vector<std::string> args, rlim_t limit) {
  const std::string binary = ddlsim::test::ddlsim_binary();
  args.insert(args.begin(), binary);
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  rlimit old{};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &old) == 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN); // this process writes nothing while the limit holds
  rlimit limited = old;
  limited.rlim_cur = limit;
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &limited) == 0);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, binary.c_str(), nullptr, nullptr, argv.data(), environ);
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  REQUIRE(spawned == 0);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  return WEXITSTATUS(status);
}

} // namespace

TEST_CASE("robustness: a plot that the disk cannot hold keeps the previous image, data and script (#31 R15)",
          "[cli][robustness]") {
  // gnuplot exits 0 when its writes fail: a 4 KiB file size limit left a 4,096-byte SVG (of ~18 KiB) in place of
  // the previous image, with exit 0, and the new .dat and .gp beside it.
  TempDir tmp;
  run_ok({"sweep", kQuickstart, "--set", R"(sweep={"cluster.nodes": [1, 2, 4]})", "--out", tmp / "s", "--no-plots"});
  const std::string extension = GENERATE(".svg", ".png");
  const fs::path image = fs::path(tmp / "s") / ("p" + extension);
  run_ok({"plot", tmp / "s/results.csv", "--out", image.string()});
  REQUIRE(fs::file_size(image) > 8192);
  const auto before = files_in(tmp / "s");
  const std::string old_image = read_text(image);
  const std::string old_script = read_text(fs::path(tmp / "s") / "p.gp");
  CHECK(run_with_file_limit({"plot", tmp / "s/results.csv", "--out", image.string(), "--y", "iteration_time_s"},
                            4096) == 2);
  CHECK(files_in(tmp / "s") == before); // no temporary left, nothing replaced
  CHECK(read_text(image) == old_image);
  CHECK(read_text(fs::path(tmp / "s") / "p.gp") == old_script);
}

TEST_CASE("robustness: a misspelt model, GPU or strategy name gets a did-you-mean (#31, a new user's edge)",
          "[cli][robustness]") {
  const auto [set, phrase] = GENERATE(table<std::string, std::string>({
      {"model.zoo=resnet5", "/model/zoo: unknown model 'resnet5' (did you mean 'resnet50'"},
      {"gpu.preset=v100-sxm2", "unknown value 'v100-sxm2' (did you mean 'V100-SXM2-16GB' or 'V100-SXM2-32GB'?)"},
      {"strategy.kind=mgwfbp", "/strategy/kind: unknown value 'mgwfbp' (did you mean 'mg-wfbp'?)"},
  }));
  check_refused(run_ddlsim({"check", kQuickstart, "--set", set}), phrase);
}

TEST_CASE("robustness: FP8 on a GPU without FP8 tensor cores exits 2 naming the file and the preset (#33 item 4)",
          "[cli][robustness]") {
  check_refused(run_ddlsim({"run", kQuickstart, "--set", "model.compute_dtype=fp8"}),
                "scenarios/quickstart.json: /gpu/preset: V100-SXM2-32GB has no FP8 tensor cores, which "
                "model.compute_dtype fp8 needs");
  check_refused(run_ddlsim({"check", kQuickstart, "--set", "model.compute_dtype=fp4"}),
                "/model/compute_dtype: unknown value 'fp4'");
}
