// End-to-end tests of the `ddlsim` command line (docs/contracts.md, "Exit status"; docs/outputs.md, "summary.json"):
// every test spawns the real binary, checks its exit status and its one-line error messages, and reads the reports
// it writes. Bad inputs live in tests/data/bad/ (one defect each on top of valid_base.json); the DDP bucket oracle is
// torchvision's per-tensor list in tests/data/shared/model_zoo/resnet50_params.csv and PyTorch's
// compute_bucket_assignment_by_size.
#include "core/io.hpp"
#include "support/cli.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

using Catch::Contains;
using Catch::StartsWith;
using Catch::Matchers::WithinRel;
using nlohmann::json;
using nlohmann::ordered_json;
namespace fs = std::filesystem;

using ddlsim::test::Outcome;
using ddlsim::test::read_text;
using ddlsim::test::run_ddlsim;
using ddlsim::test::run_ok;
using ddlsim::test::TempDir;

namespace {

const std::string kSourceDir = DDLSIM_SOURCE_DIR;
const std::string kQuickstart = kSourceDir + "/scenarios/quickstart.json";

std::string bad_file(const std::string& name) {
  return kSourceDir + "/tests/data/bad/" + name;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  return lines;
}

std::string first_word(const std::string& line) {
  return line.substr(0, line.find(' '));
}

std::vector<std::string> split(const std::string& line, char sep) {
  std::vector<std::string> fields;
  std::size_t start = 0;
  while (true) {
    const auto at = line.find(sep, start);
    fields.push_back(line.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos)
      return fields;
    start = at + 1;
  }
}

json read_json(const fs::path& path) {
  return json::parse(read_text(path));
}

// The one-line error contract: exit 2, nothing on stdout, exactly one line on stderr that reads
// "ddlsim: FILE: /json/pointer: message" (the pointer part absent when the error is about the whole document).
void require_input_error(const Outcome& o, const std::string& file, const std::string& pointer,
                         const std::string& phrase) {
  INFO("stderr: " << o.err);
  CHECK(o.exit_code == 2);
  CHECK(o.out.empty());
  REQUIRE(!o.err.empty());
  CHECK(o.err.back() == '\n');
  CHECK(std::count(o.err.begin(), o.err.end(), '\n') == 1);
  const std::string prefix = "ddlsim: " + file + ": " + (pointer.empty() ? std::string() : pointer + ": ");
  CHECK_THAT(o.err, StartsWith(prefix));
  if (pointer.empty())
    CHECK_THAT(o.err.substr(prefix.size()), !StartsWith("/")); // no pointer where none is due
  CHECK_THAT(o.err, Contains(phrase));
}

struct TaskRow {
  std::string device, resource, kind, layer, group;
  double bytes = 0, start_s = 0, end_s = 0;
  std::string collective, communicator;
};

std::vector<TaskRow> read_tasks(const fs::path& csv) {
  const auto lines = lines_of(read_text(csv));
  REQUIRE(!lines.empty());
  REQUIRE(lines.front() == "device,resource,kind,layer,group,bytes,start_s,end_s,collective,communicator");
  std::vector<TaskRow> rows;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    INFO("tasks.csv line " << i + 1 << ": " << lines[i]);
    const auto f = split(lines[i], ',');
    REQUIRE(f.size() == 10);
    // A device: "gpu<rank>" or "host<node>".
    const std::string prefix = f[0].starts_with("gpu") ? "gpu" : "host";
    REQUIRE(f[0].starts_with(prefix));
    REQUIRE(f[0].size() > prefix.size());
    REQUIRE(std::all_of(f[0].begin() + static_cast<std::ptrdiff_t>(prefix.size()), f[0].end(),
                        [](char c) { return c >= '0' && c <= '9'; }));
    TaskRow r;
    r.device = f[0];
    r.resource = f[1];
    r.kind = f[2];
    r.layer = f[3];
    r.group = f[4];
    std::size_t used = 0;
    r.bytes = std::stod(f[5], &used);
    REQUIRE(used == f[5].size());
    r.start_s = std::stod(f[6], &used);
    REQUIRE(used == f[6].size());
    r.end_s = std::stod(f[7], &used);
    REQUIRE(used == f[7].size());
    r.collective = f[8];
    r.communicator = f[9];
    rows.push_back(r);
  }
  return rows;
}

// PyTorch DDP's bucket assignment (torch/csrc/distributed/c10d/reducer.cpp, compute_bucket_assignment_by_size):
// tensors in reverse registration order, a bucket closes as soon as its size reaches its limit; the first limit
// is 1 MiB, then bucket_cap. Returns {tensors, elements} per bucket, for fp32 gradients.
std::vector<std::pair<std::int64_t, std::int64_t>> pytorch_ddp_buckets(const std::vector<std::int64_t>& numel,
                                                                       double bucket_cap_bytes) {
  std::vector<std::pair<std::int64_t, std::int64_t>> buckets;
  double limit = 1024.0 * 1024.0;
  std::int64_t tensors = 0, elements = 0;
  for (auto it = numel.rbegin(); it != numel.rend(); ++it) {
    ++tensors;
    elements += *it;
    if (4.0 * static_cast<double>(elements) >= limit) {
      buckets.emplace_back(tensors, elements);
      tensors = elements = 0;
      limit = bucket_cap_bytes;
    }
  }
  if (tensors > 0)
    buckets.emplace_back(tensors, elements);
  return buckets;
}

std::vector<std::int64_t> resnet50_tensor_sizes() {
  const auto lines =
      lines_of(read_text(std::string(DDLSIM_SOURCE_DIR) + "/tests/data/shared/model_zoo/resnet50_params.csv"));
  REQUIRE(lines.size() == 162);
  REQUIRE(lines.front() == "index,name,shape,numel");
  std::vector<std::int64_t> sizes;
  for (std::size_t i = 1; i < lines.size(); ++i)
    sizes.push_back(std::stoll(split(lines[i], ',').at(3)));
  return sizes;
}

} // namespace

// ---- bad input -------------------------------------------------------------------------------------------------

TEST_CASE("cli: every malformed scenario exits 2 with one line naming file and JSON pointer", "[cli][errors]") {
  // file in tests/data/bad, the exact pointer ("" = the whole document), a key phrase of the message
  const auto [name, pointer, phrase] = GENERATE(table<std::string, std::string, std::string>({
      {"json_syntax_error.json", "", "invalid JSON at line 15, column 16"},
      {"empty.json", "", "invalid JSON at line 1, column 1"},
      {"top_level_array.json", "", "expected a JSON object at the top level"},
      {"unknown_top_key.json", "/enigne", "unknown key (did you mean 'engine'? allowed here: "},
      {"unknown_nested_key.json", "/cluster/inter_node/bandwith",
       "unknown key (did you mean 'bandwidth'? allowed here: bandwidth, efficiency, latency, transport)"},
      {"bandwidth_no_unit.json", "/cluster/inter_node/bandwidth", "10 has no unit"},
      {"bandwidth_bytes_not_rate.json", "/cluster/inter_node/bandwidth", "'GB' is an amount of data, not a rate"},
      {"unknown_unit.json", "/cluster/inter_node/bandwidth", "unknown unit 'Gbs' in '10 Gbs'"},
      {"negative_nodes.json", "/cluster/nodes", "-2 is out of range [1, "},
      {"zero_gpus_per_node.json", "/cluster/gpus_per_node", "0 is out of range [1, "},
      {"zero_batch.json", "/model/batch_per_gpu", "0 is out of range [1, "},
      {"missing_batch.json", "/model/batch_per_gpu", "missing required key"},
      {"nodes_wrong_type.json", "/cluster/nodes", "expected an integer, got a string"},
      {"unknown_zoo_model.json", "/model/zoo", "unknown model 'resnet51'"},
      {"zoo_and_layers.json", "/model", "give exactly one of \"zoo\", \"layers\" or \"workload\""},
      {"unknown_dtype.json", "/model/gradient_dtype", "unknown value 'fp8'"},
      {"unknown_strategy_kind.json", "/strategy/kind", "unknown value 'mgwfbp'"},
      {"strategy_key_for_other_kind.json", "/strategy/bucket_cap",
       "applies to strategy kinds 'ddp', 'powersgd', 'qsgd'"},
      {"density_out_of_range.json", "/strategy/density", "1.5 is outside (0, 1]"},
      {"zero_levels.json", "/strategy/levels", "0 is out of range [1, "},
      {"unknown_selection.json", "/strategy/selection", "unknown value 'heap'"},
      {"levels_for_other_kind.json", "/strategy/levels", "applies to strategy kind 'qsgd', not 'terngrad'"},
      {"fusion_cycle_time_no_unit.json", "/strategy/cycle_time", "5 has no unit"},
      {"unknown_allreduce.json", "/collectives/allreduce", "unknown allreduce algorithm 'butterfly-ish'"},
      {"cyclic_layers.json", "/model/layers", "layers form a cycle through: a, b, c"},
      {"unknown_layer_input.json", "/model/layers/2/inputs/1", "no layer named 'bb'"},
      {"layer_is_own_input.json", "/model/layers/1/inputs/0", "a layer cannot be its own input"},
      {"duplicate_layer_name.json", "/model/layers/2/name", "duplicate layer name 'a'"},
      {"negative_latency.json", "/cluster/intra_node/latency", "-5 us must be at least 0"},
      {"missing_inter_node.json", "/cluster/inter_node", "missing required key"},
      {"unknown_topology.json", "/cluster/topology", "unknown topology 'hypercube'"},
      {"fat_tree_leaves.json", "/cluster/topology/down",
       "the fat-tree has 6 leaves (product of down) but the cluster has 2 nodes"},
      {"torus_without_dimensions.json", "/cluster/topology/dimensions", "missing required key"},
      {"unknown_gpu_preset.json", "/gpu/preset", "unknown value 'V100'"},
      {"efficiency_out_of_range.json", "/gpu/efficiency", "1.5 is out of range"},
      // The calibration path is resolved relative to the scenario, and the message shows the resolved path.
      {"missing_calibration_file.json", "/gpu/calibration",
       "calibration file '" + bad_file("nope.json") + "' does not exist"},
      {"empty_name.json", "/name", "must not be empty"},
      {"bad_sweep_value.json", "/sweep/cluster.nodes/1", "cluster.nodes = -2: /cluster/nodes: -2 is out of range"},
      {"sweep_not_array.json", "/sweep/cluster.nodes", "expected a non-empty array of values"},
      {"sweep_unknown_key.json", "/sweep/cluster.nodez/0", "/cluster/nodez: unknown key"},
  }));
  const std::string file = bad_file(name);
  CAPTURE(file, pointer, phrase);
  REQUIRE(fs::exists(file));

  TempDir tmp;
  const std::string out = tmp / "out";
  SECTION("run") {
    const auto o = run_ddlsim({"run", file, "--out", out});
    if (pointer.starts_with("/sweep")) { // run runs the base and does not read the sweep block it ignores
      CHECK(o.exit_code == 0);
      CHECK(fs::exists(fs::path(out) / "summary.json"));
      return;
    }
    require_input_error(o, file, pointer, phrase);
    CHECK_FALSE(fs::exists(out)); // nothing written, not even the directory
  }
  SECTION("check") {
    const auto o = run_ddlsim({"check", file});
    require_input_error(o, file, pointer, phrase);
  }
}

TEST_CASE("cli: run ignores the sweep block, check and sweep validate it (#31 R02)", "[cli][run][sweep]") {
  // A sweep value the flow engine refuses (backup workers with variability, as scenarios/backup-workers.json sweeps
  // them): run on the flow engine runs the base; check names the refused value.
  const std::vector<std::string> sets{
      "--set", R"(variability={"iterations": 2, "compute": {"distribution": "lognormal", "cv": 0.1}})", "--set",
      R"(sweep={"strategy.backup_workers": [0, 1]})"};
  TempDir tmp;
  std::vector<std::string> run{"run", kQuickstart, "--engine", "flow", "--out", tmp / "out", "--no-trace"};
  run.insert(run.end(), sets.begin(), sets.end());
  const auto o = run_ddlsim(run);
  CHECK(o.exit_code == 0); // exit 2 at /sweep/strategy.backup_workers/1 before
  CHECK(fs::exists(fs::path(tmp / "out") / "summary.json"));
  std::vector<std::string> check{"check", kQuickstart, "--set", "engine=\"flow\""};
  check.insert(check.end(), sets.begin(), sets.end());
  require_input_error(run_ddlsim(check), kQuickstart, "/sweep/strategy.backup_workers/1", "the flow engine");
}

TEST_CASE("cli: --set KEY=null removes the key, so its default applies (#31)", "[cli][set]") {
  // `calibration=null` was refused ("expected an object, got null"); a key the scenario lacks stays absent.
  const auto o = run_ok({"check", kQuickstart, "--set", "calibration=null", "--set", "gpu.calibration=null"});
  CHECK_THAT(o.out, Contains("valid"));
  TempDir tmp;
  run_ok({"run", kQuickstart, "--out", tmp / "a", "--no-trace"});
  run_ok({"run", kQuickstart, "--out", tmp / "b", "--no-trace", "--set", "gpu.host_link=null"});
  const auto a = json::parse(read_text(fs::path(tmp / "a") / "summary.json"));
  const auto b = json::parse(read_text(fs::path(tmp / "b") / "summary.json"));
  CHECK(a.at("iteration_time_s") != b.at("iteration_time_s")); // the default host link, not 11.65 GB/s
}

TEST_CASE("cli: the base of the malformed scenarios is itself valid", "[cli][errors]") {
  // Every tests/data/bad file is valid_base.json plus one defect; if the base broke, every case would be moot.
  const auto o = run_ok({"check", bad_file("valid_base.json")});
  CHECK_THAT(o.out, Contains("valid"));
}

TEST_CASE("cli: a misspelled required key is reported as the unknown key the user wrote", "[cli][errors]") {
  // `bandwith` instead of `bandwidth`: the useful message points at the typo (as an unknown key, with the allowed
  // keys), not only at the missing `bandwidth`.
  const std::string file = bad_file("misspelled_nested_key.json");
  TempDir tmp;
  const auto o = run_ddlsim({"run", file, "--out", tmp / "out"});
  require_input_error(o, file, "/cluster/inter_node/bandwith", "unknown key");
  CHECK_FALSE(fs::exists(tmp / "out"));
}

TEST_CASE("cli: bad --set overrides exit 2 naming the scenario and the overridden pointer", "[cli][errors][set]") {
  const auto [assignment, pointer, phrase] = GENERATE(table<std::string, std::string, std::string>({
      {"cluster.nodes=-1", "/cluster/nodes", "-1 is out of range [1, "},
      {"cluster.nodes=\"8\"", "/cluster/nodes", "expected an integer, got a string"},
      {"cluster.nodez=2", "/cluster/nodez", "unknown key"},
      {"cluster.nodes.x=1", "/cluster/nodes", "cannot set 'cluster.nodes.x': /cluster/nodes is not an object"},
      {"strategy.kind=bogus", "/strategy/kind", "unknown value 'bogus'"},
      {R"(strategy={"kind":"ddp","bucket_cap":10})", "/strategy/bucket_cap", "10 has no unit"},
      {"cluster.inter_node.bandwidth=10 GB", "/cluster/inter_node/bandwidth", "'GB' is an amount of data"},
      {"engine=warp", "/engine", "unknown value 'warp'"},
      {"flow.symmetry=on", "/flow/symmetry", "unknown value 'on'"},
      {R"(strategy={"kind":"topk","density":0})", "/strategy/density", "0 is outside (0, 1]"},
      {R"(strategy={"kind":"gtopk","density":1.5})", "/strategy/density", "1.5 is outside (0, 1]"},
      {R"(strategy={"kind":"gtopk","density":"1%"})", "/strategy/density", "expected a number in (0, 1]"},
      {R"(strategy={"kind":"ddp","density":0.01})", "/strategy/density",
       "applies to strategy kinds 'topk', 'gtopk', 'lags', 'omgs', not 'ddp'"},
      {R"(strategy={"kind":"topk","selection":"magic"})", "/strategy/selection", "unknown value 'magic'"},
      {"nodes", "", "override 'nodes' is not of the form key.path=VALUE"},
      {"=3", "", "override '=3' is not of the form key.path=VALUE"},
      {"cluster..nodes=2", "", "malformed key 'cluster..nodes' in override"},
  }));
  CAPTURE(assignment, pointer, phrase);
  TempDir tmp;
  const std::string out = tmp / "out";
  SECTION("run") {
    const auto o = run_ddlsim({"run", kQuickstart, "--out", out, "--set", assignment});
    require_input_error(o, kQuickstart, pointer, phrase);
    CHECK_FALSE(fs::exists(out));
  }
  SECTION("check") {
    const auto o = run_ddlsim({"check", kQuickstart, "--set", assignment});
    require_input_error(o, kQuickstart, pointer, phrase);
  }
}

TEST_CASE("cli: bad PowerSGD keys exit 2 naming the scenario and /strategy/rank", "[cli][errors][powersgd]") {
  const auto [assignment, pointer, phrase] = GENERATE(table<std::string, std::string, std::string>({
      {R"(strategy={"kind":"powersgd","rank":0})", "/strategy/rank", "0 is below 1"},
      {R"(strategy={"kind":"powersgd","rank":2.5})", "/strategy/rank", "expected a positive integer"},
      {R"(strategy={"kind":"powersgd","rank":5000})", "/strategy/rank",
       "so no matrix can be compressed: the largest min(n, m) is 1024"},
      {R"(strategy={"kind":"ddp","rank":4})", "/strategy/rank", "applies to strategy kind 'powersgd', not 'ddp'"},
      {R"(strategy={"kind":"topk","compression_stream":"separate"})", "/strategy/compression_stream",
       "applies to strategy kind 'powersgd', not 'topk'"},
      {R"(strategy={"kind":"powersgd","compression_stream":"gpu2"})", "/strategy/compression_stream",
       "unknown value 'gpu2'"},
  }));
  CAPTURE(assignment, pointer, phrase);
  TempDir tmp;
  const auto o = run_ddlsim({"run", kQuickstart, "--out", tmp / "out", "--set", assignment});
  require_input_error(o, kQuickstart, pointer, phrase);
  CHECK_FALSE(fs::exists(tmp / "out"));
}

TEST_CASE("cli: a scenario path that does not exist exits 2 naming the path", "[cli][errors]") {
  TempDir tmp;
  const std::string missing = tmp / "no-such-scenario.json";
  const std::string out = tmp / "out";
  const auto o = run_ddlsim({"run", missing, "--out", out});
  require_input_error(o, missing, "", "cannot open file");
  CHECK_FALSE(fs::exists(out));
}

TEST_CASE("cli: bad command lines exit 2 with one line, --help exits 0", "[cli][errors]") {
  SECTION("no arguments") {
    const auto o = run_ddlsim({});
    CHECK(o.exit_code == 2);
    CHECK_THAT(o.err, StartsWith("ddlsim: "));
    CHECK(std::count(o.err.begin(), o.err.end(), '\n') == 1);
  }
  SECTION("unknown engine on the command line") {
    TempDir tmp;
    const auto o = run_ddlsim({"run", kQuickstart, "--engine", "warp", "--out", tmp / "out"});
    CHECK(o.exit_code == 2);
    CHECK_THAT(o.err, StartsWith("ddlsim: --engine: "));
    CHECK(std::count(o.err.begin(), o.err.end(), '\n') == 1);
    CHECK_FALSE(fs::exists(tmp / "out"));
  }
  SECTION("--help") {
    const auto o = run_ddlsim({"--help"});
    CHECK(o.exit_code == 0);
    CHECK_THAT(o.out, Contains("run") && Contains("check") && Contains("list"));
  }
}

// ---- run and its reports -----------------------------------------------------------------------------------------

TEST_CASE("cli: run writes summary.json and tasks.csv that agree with each other", "[cli][run]") {
  const json scenario = read_json(kQuickstart);
  const int workers = scenario["cluster"]["nodes"].get<int>() * scenario["cluster"]["gpus_per_node"].get<int>();
  const int batch = scenario["model"]["batch_per_gpu"].get<int>();
  REQUIRE(scenario["model"]["zoo"] == "resnet50");
  REQUIRE(scenario["model"]["gradient_dtype"] == "fp32");

  TempDir tmp;
  const fs::path dir = tmp / "reports";
  const auto started = std::chrono::steady_clock::now();
  const auto o = run_ok({"run", kQuickstart, "--out", dir.string()});
  const double process_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  CHECK_THAT(o.out, Contains(dir.string()));
  REQUIRE(fs::is_regular_file(dir / "summary.json"));
  REQUIRE(fs::is_regular_file(dir / "tasks.csv"));
  REQUIRE(fs::is_regular_file(dir / "timeline.json"));

  const json s = read_json(dir / "summary.json");
  INFO("summary.json: " << s.dump(2));
  // Every core field (docs/outputs.md, "summary.json"), with its type.
  CHECK(s.at("scenario") == "quickstart");
  CHECK(s.at("engine") == "analytic");
  REQUIRE(s.at("workers").is_number_integer());
  CHECK(s["workers"].get<int>() == workers);
  for (const char* key : {"iteration_time_s", "throughput_samples_per_s", "scaling_efficiency",
                          "communication_bytes_per_worker", "peak_memory_bytes_per_gpu"}) {
    CAPTURE(key);
    REQUIRE(s.at(key).is_number());
  }
  for (const char* key : {"compute", "compression", "exposed_communication", "idle"}) {
    CAPTURE(key);
    REQUIRE(s.at("breakdown_s").at(key).is_number());
    CHECK(s["breakdown_s"][key].get<double>() >= 0);
  }
  REQUIRE(s.at("sim").at("wall_s").is_number());
  REQUIRE(s["sim"].at("events").is_number_integer());
  REQUIRE(s["sim"].at("flows").is_number_integer());
  // sim.wall_s is the simulator's own run time in seconds: measured inside the process, so positive and no longer
  // than the whole process took (a time in milliseconds or microseconds would exceed it).
  CAPTURE(process_s);
  CHECK(s["sim"]["wall_s"].get<double>() > 0);
  CHECK(s["sim"]["wall_s"].get<double>() <= process_s);
  // The analytic engine simulates no network flows (the flow engine's count is checked with its reports below).
  CHECK(s["sim"]["flows"].get<std::int64_t>() == 0);
  REQUIRE(s.at("buckets").is_array());
  REQUIRE(!s["buckets"].empty());

  const double t = s["iteration_time_s"].get<double>();
  REQUIRE(t > 0);
  // The breakdown partitions the iteration.
  const auto& b = s["breakdown_s"];
  const double parts = b["compute"].get<double>() + b["compression"].get<double>() +
                       b["exposed_communication"].get<double>() + b["idle"].get<double>();
  CHECK_THAT(parts, WithinRel(t, 1e-9));
  CHECK(b["compute"].get<double>() > 0);
  // Throughput is workers x batch per iteration.
  CHECK_THAT(s["throughput_samples_per_s"].get<double>(), WithinRel(workers * batch / t, 1e-12));
  // Scaling efficiency is throughput / (workers x 1-GPU throughput) = T1 / T (single_gpu_iteration_s: extension).
  const double efficiency = s["scaling_efficiency"].get<double>();
  CHECK(efficiency > 0);
  CHECK(efficiency <= 1);
  CHECK_THAT(efficiency, WithinRel(s.at("single_gpu_iteration_s").get<double>() / t, 1e-12));
  CHECK(s["peak_memory_bytes_per_gpu"].get<double>() > 0);

  // Buckets cover every gradient of ResNet-50 exactly once: 25,557,032 parameters in 161 tensors (torchvision).
  std::int64_t tensors = 0, elements = 0;
  double bytes = 0;
  for (const auto& bucket : s["buckets"]) {
    REQUIRE(bucket.at("tensors").is_number_integer());
    REQUIRE(bucket.at("elements").is_number_integer());
    REQUIRE(bucket.at("bytes").is_number());
    CHECK(bucket["tensors"].get<std::int64_t>() > 0);
    CHECK(bucket["bytes"].get<double>() == 4.0 * bucket["elements"].get<double>()); // fp32 gradients
    tensors += bucket["tensors"].get<std::int64_t>();
    elements += bucket["elements"].get<std::int64_t>();
    bytes += bucket["bytes"].get<double>();
  }
  CHECK(tensors == 161);
  CHECK(elements == 25'557'032);
  // A ring allreduce of n bytes on p workers sends 2(p-1)/p n per worker.
  CHECK_THAT(s["communication_bytes_per_worker"].get<double>(),
             WithinRel(2.0 * (workers - 1) / workers * bytes, 1e-12));

  // tasks.csv: one row per task, times consistent with the summary.
  const auto rows = read_tasks(dir / "tasks.csv");
  REQUIRE(!rows.empty());
  // The analytic engine's events are its tasks, one list-scheduling step each.
  CHECK(s["sim"]["events"].get<std::int64_t>() == static_cast<std::int64_t>(rows.size()));
  double last_end = 0;
  std::map<std::string, int> forward_per_layer, backward_per_layer;
  std::map<int, double> comm_bytes_per_group;
  for (const auto& r : rows) {
    INFO(r.resource << " " << r.kind << " " << r.layer << " [" << r.start_s << ", " << r.end_s << "]");
    CHECK(!r.resource.empty());
    CHECK(!r.kind.empty());
    CHECK(r.start_s >= 0);
    CHECK(r.end_s >= r.start_s);
    last_end = std::max(last_end, r.end_s);
    if (r.kind == "forward")
      ++forward_per_layer[r.layer];
    if (r.kind == "backward")
      ++backward_per_layer[r.layer];
    if (r.kind == "communication") {
      REQUIRE(!r.group.empty());
      // Each bucket's ring allreduce over all 8 GPUs (#31: tasks.csv named neither).
      CHECK(r.collective == "allreduce");
      CHECK(r.communicator == fmt::format("data {} gpu0-{}", workers, workers - 1));
      const int g = std::stoi(r.group);
      CHECK(comm_bytes_per_group.count(g) == 0); // one allreduce per bucket
      comm_bytes_per_group[g] = r.bytes;
    }
  }
  CHECK_THAT(last_end, WithinRel(t, 1e-12));
  // Every layer runs forward and backward once (worker 0 stands for all: data parallelism is symmetric).
  const auto layers = s.at("model").at("layers").get<std::size_t>();
  CHECK(forward_per_layer.size() == layers);
  CHECK(backward_per_layer.size() == layers);
  for (const auto& [layer, n] : forward_per_layer)
    CHECK(n == 1);
  for (const auto& [layer, n] : backward_per_layer)
    CHECK(n == 1);
  // One communication task per bucket, in bucket order, carrying the bucket's bytes.
  REQUIRE(comm_bytes_per_group.size() == s["buckets"].size());
  int expected_group = 0;
  for (const auto& [g, group_bytes] : comm_bytes_per_group) {
    CAPTURE(g);
    REQUIRE(g == expected_group);
    CHECK(group_bytes == s["buckets"][static_cast<std::size_t>(g)]["bytes"].get<double>());
    ++expected_group;
  }
}

TEST_CASE("cli: timeline.json is a Chrome trace with one event per non-empty task", "[cli][run][trace]") {
  // The analytic engine's representative worker, and the flow engine's 8 replicas on 2 nodes (each host serves 4).
  const auto engine =
      GENERATE(std::vector<std::string>{}, std::vector<std::string>{"--engine", "flow", "--set", "flow.symmetry=off"});
  CAPTURE(engine);
  TempDir tmp;
  const fs::path dir = tmp / "reports";
  std::vector<std::string> args{"run", kQuickstart, "--out", dir.string()};
  args.insert(args.end(), engine.begin(), engine.end());
  run_ok(args);
  const json summary = read_json(dir / "summary.json");
  const auto rows = read_tasks(dir / "tasks.csv");
  std::vector<TaskRow> busy_rows; // the tasks that take time, in task order as the trace lists them
  std::copy_if(rows.begin(), rows.end(), std::back_inserter(busy_rows),
               [](const TaskRow& r) { return r.end_s > r.start_s; });

  const json trace = read_json(dir / "timeline.json");
  REQUIRE(trace.is_object());
  REQUIRE(trace.contains("traceEvents"));
  REQUIRE(trace["traceEvents"].is_array());

  std::map<std::pair<int, int>, std::string> thread_names;
  std::map<int, std::string> process_names; // pid -> device
  std::set<std::pair<int, int>> used_threads;
  std::vector<json> complete_events;
  double last_end_us = 0;
  for (const auto& e : trace["traceEvents"]) {
    INFO("event: " << e.dump());
    REQUIRE(e.is_object());
    REQUIRE(e.contains("ph"));
    REQUIRE(e["ph"].is_string());
    REQUIRE(e.contains("pid"));
    REQUIRE(e["pid"].is_number_integer());
    REQUIRE(e.contains("tid"));
    REQUIRE(e["tid"].is_number_integer());
    REQUIRE(e.contains("name"));
    REQUIRE(e["name"].is_string());
    const std::pair thread{e["pid"].get<int>(), e["tid"].get<int>()};
    const auto ph = e["ph"].get<std::string>();
    if (ph == "X") {
      CHECK(!e["name"].get<std::string>().empty());
      REQUIRE(e.contains("cat"));
      REQUIRE(e["cat"].is_string());
      REQUIRE(e.contains("ts"));
      REQUIRE(e["ts"].is_number());
      REQUIRE(e.contains("dur"));
      REQUIRE(e["dur"].is_number());
      last_end_us = std::max(last_end_us, e["ts"].get<double>() + e["dur"].get<double>());
      used_threads.insert(thread);
      complete_events.push_back(e);
    } else if (ph == "M") {
      const auto name = e["name"].get<std::string>();
      CHECK((name == "process_name" || name == "thread_name"));
      REQUIRE(e.contains("args"));
      REQUIRE(e["args"].contains("name"));
      REQUIRE(e["args"]["name"].is_string());
      if (name == "thread_name")
        CHECK(thread_names.emplace(thread, e["args"]["name"].get<std::string>()).second); // named once
      if (name == "process_name")
        CHECK(process_names.emplace(thread.first, e["args"]["name"].get<std::string>()).second);
    } else {
      FAIL("unexpected event phase '" << ph << "'");
    }
  }
  for (const auto& [pid, tid] : used_threads) {
    CAPTURE(pid, tid);
    CHECK(thread_names.count({pid, tid}) == 1);
  }
  // The i-th complete event is the i-th task that takes time: its kind, on its resource's thread, from its start
  // for its duration, in microseconds (tasks.csv gives seconds).
  REQUIRE(!busy_rows.empty());
  REQUIRE(complete_events.size() == busy_rows.size());
  for (std::size_t i = 0; i < busy_rows.size(); ++i) {
    const auto& row = busy_rows[i];
    const auto& e = complete_events[i];
    INFO("task " << i << ": " << row.resource << " " << row.kind << " " << row.layer << " [" << row.start_s << ", "
                 << row.end_s << "]; event: " << e.dump());
    CHECK(e["cat"] == row.kind);
    const auto thread = thread_names.find({e["pid"].get<int>(), e["tid"].get<int>()});
    REQUIRE(thread != thread_names.end());
    // The stream's name (a host's streams name the replica's GPU when the host serves several).
    CHECK(thread->second.rfind(row.resource == "none" ? "waits" : row.resource, 0) == 0);
    const auto process = process_names.find(e["pid"].get<int>());
    REQUIRE(process != process_names.end());
    CHECK(process->second == row.device);
    CHECK_THAT(e["ts"].get<double>(), WithinRel(row.start_s * 1e6, 1e-12));
    CHECK_THAT(e["dur"].get<double>(), WithinRel((row.end_s - row.start_s) * 1e6, 1e-12));
    CHECK(e["dur"].get<double>() > 0);
  }
  // A thread is one stream: its events do not overlap.
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> spans;
  for (const auto& e : complete_events)
    spans[{e["pid"].get<int>(), e["tid"].get<int>()}].emplace_back(e["ts"].get<double>(),
                                                                   e["ts"].get<double>() + e["dur"].get<double>());
  for (auto& [thread, list] : spans) {
    CAPTURE(thread.first, thread.second);
    std::sort(list.begin(), list.end());
    for (std::size_t i = 1; i < list.size(); ++i)
      CHECK(list[i].first >= list[i - 1].second - 1e-6);
  }
  // Trace times are microseconds.
  CHECK_THAT(last_end_us, WithinRel(summary["iteration_time_s"].get<double>() * 1e6, 1e-9));

  SECTION("--no-trace writes no timeline.json") {
    const fs::path quiet = tmp / "quiet";
    run_ok({"run", kQuickstart, "--out", quiet.string(), "--no-trace"});
    CHECK(fs::is_regular_file(quiet / "summary.json"));
    CHECK(fs::is_regular_file(quiet / "tasks.csv"));
    CHECK_FALSE(fs::exists(quiet / "timeline.json"));
  }
}

TEST_CASE("cli: a pipeline's slices name stage, micro-batch and chunk, its transfers their GPUs (#31)",
          "[cli][run][trace][pipeline]") {
  // The quickstart's 8 GPUs as 2 replicas of a 4-stage interleaved pipeline (v = 2, m = 4): stage s of replica k on
  // GPU k + 2 s. The flow engine lists both replicas, the analytic engine replica 0.
  const auto engine = GENERATE(as<std::string>{}, "analytic", "flow");
  CAPTURE(engine);
  TempDir tmp;
  const fs::path dir = tmp / "reports";
  run_ok({"run", kQuickstart, "--out", dir.string(), "--engine", engine, "--set", R"(parallelism={"pipeline": 4})",
          "--set", R"(pipeline={"schedule": "interleaved-1f1b", "micro_batches": 4, "virtual_stages": 2})"});
  const json trace = read_json(dir / "timeline.json");
  std::map<int, std::string> process_names; // pid -> device
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "process_name")
      process_names[e["pid"].get<int>()] = e["args"]["name"].get<std::string>();
  const std::regex pass(R"((fwd|bwd) s([0-3]) mb([0-3]) c([01]))");
  const std::regex transfer(R"(p2p gpu([0-7])->gpu([0-7]) mb[0-3] c[01] \(.+\))");
  std::map<std::string, std::set<std::string>> passes; // device -> its passes' names
  std::size_t transfers = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X")
      continue;
    const auto name = e["name"].get<std::string>();
    const auto& device = process_names.at(e["pid"].get<int>());
    INFO(device << ": " << name);
    std::smatch m;
    if (e["cat"] == "forward" || e["cat"] == "backward") {
      REQUIRE(std::regex_match(name, m, pass));
      // The stage's GPU: replica k = rank mod 2 runs stage s on GPU k + 2 s.
      const int gpu = std::stoi(device.substr(3));
      CHECK(std::stoi(m[2].str()) == gpu / 2);
      CHECK(passes[device].insert(name).second); // each pass once per GPU
    } else if (name.starts_with("p2p")) {
      REQUIRE(std::regex_match(name, m, transfer));
      CHECK("gpu" + m[1].str() == device);                                     // the sender's p2p stream
      CHECK(std::abs(std::stoi(m[1].str()) - std::stoi(m[2].str())) % 2 == 0); // within the sender's replica
      ++transfers;
    } else {
      CHECK_THAT(name, !Contains("point_to_point") && !Contains("#-1")); // #31: "point_to_point #-1"
    }
  }
  // Every GPU of a listed replica runs 2 chunks x 4 micro-batches forward and backward.
  REQUIRE(passes.size() == (engine == "flow" ? 8U : 4U));
  for (const auto& [device, names] : passes)
    CHECK(names.size() == 2 * 2 * 4);
  // Between 8 virtual stages, 7 cuts, each crossed forward and backward by every micro-batch, per replica.
  CHECK(transfers == (engine == "flow" ? 2U : 1U) * 7 * 2 * 4);

  // tasks.csv: a transfer is a point_to_point over its sender and receiver.
  for (const auto& r : read_tasks(dir / "tasks.csv")) {
    if (r.resource != "p2p")
      continue;
    INFO(r.device << ": " << r.communicator);
    CHECK(r.collective == "point_to_point");
    CHECK_THAT(r.communicator, StartsWith("pair 2 " + r.device + " gpu"));
  }
}

TEST_CASE("cli: tasks.csv names a tensor-parallel collective's group (#31)", "[cli][run][tensor]") {
  // GPT-2 on the quickstart's 2 x 4 GPUs, t = 4 (one group per node), p = 2, d = 1: stage s's tensor group is
  // gpu4s-4s+3; its transfers go between tensor peers, gpu j and gpu 4 + j. The flow engine lowers every tensor
  // collective (the analytic engine folds them into the passes).
  TempDir tmp;
  const fs::path dir = tmp / "reports";
  run_ok({"run", kQuickstart, "--out", dir.string(), "--no-trace", "--engine", "flow", "--set", "model.zoo=gpt2",
          "--set", "model.batch_per_gpu=4", "--set", R"(parallelism={"pipeline": 2, "tensor": 4})", "--set",
          R"(pipeline={"micro_batches": 2})"});
  std::set<std::string> communicators;
  for (const auto& r : read_tasks(dir / "tasks.csv"))
    if (!r.collective.empty())
      communicators.insert(r.device + " " + r.collective + " " + r.communicator);
  CHECK(communicators.contains("gpu0 allreduce tensor 4 gpu0-3"));
  CHECK(communicators.contains("gpu4 allreduce tensor 4 gpu4-7"));
  CHECK(communicators.contains("gpu0 point_to_point pair 2 gpu0 gpu4"));
  CHECK(communicators.contains("gpu4 point_to_point pair 2 gpu4 gpu0"));
  CHECK(communicators.contains("gpu2 allreduce tensor 4 gpu0-3"));
  CHECK(communicators.contains("gpu2 point_to_point pair 2 gpu2 gpu6"));
}

TEST_CASE("cli: the same scenario gives byte-identical reports", "[cli][run][determinism]") {
  TempDir tmp;
  const fs::path a = tmp / "a", b = tmp / "b";
  run_ok({"run", kQuickstart, "--out", a.string()});
  run_ok({"run", kQuickstart, "--out", b.string()});
  CHECK(read_text(a / "tasks.csv") == read_text(b / "tasks.csv"));
  CHECK(read_text(a / "timeline.json") == read_text(b / "timeline.json"));
  // sim.wall_s is the simulator's own run time on this machine, the one field that may differ between runs;
  // everything else, including key order and number formatting, must be identical.
  auto without_wall_time = [](const fs::path& file) {
    auto j = ordered_json::parse(read_text(file));
    REQUIRE(j.at("sim").contains("wall_s"));
    j["sim"].erase("wall_s");
    return j.dump(2);
  };
  CHECK(without_wall_time(a / "summary.json") == without_wall_time(b / "summary.json"));
}

TEST_CASE("cli: the flow engine gives byte-identical reports and link statistics", "[cli][run][determinism][flow]") {
  // Each run is its own process (SimGrid's engine is one per process); the oversubscribed fat-tree exercises
  // contention, segmentation and the link tracker.
  TempDir tmp;
  const fs::path a = tmp / "a", b = tmp / "b";
  const std::string scenario = std::string(DDLSIM_SOURCE_DIR) + "/scenarios/fat-tree-oversubscribed.json";
  run_ok({"run", scenario, "--out", a.string()});
  run_ok({"run", scenario, "--out", b.string()});
  CHECK(read_text(a / "tasks.csv") == read_text(b / "tasks.csv"));
  CHECK(read_text(a / "links.csv") == read_text(b / "links.csv"));
  CHECK(read_text(a / "timeline.json") == read_text(b / "timeline.json"));
  auto j = ordered_json::parse(read_text(a / "summary.json"));
  CHECK(j["engine"] == "flow");
  CHECK(j["sim"]["flows"].get<double>() > 0);
  REQUIRE(j["links"].size() > 0);
  // links.csv has one row per link direction, as summary.links.
  const std::string csv = read_text(a / "links.csv");
  CHECK(static_cast<std::size_t>(std::count(csv.begin(), csv.end(), '\n')) == j["links"].size() + 1);
}

// ---- --set -----------------------------------------------------------------------------------------------------

TEST_CASE("cli: --set overrides scenario keys", "[cli][run][set]") {
  TempDir tmp;
  auto summary_with = [&](const std::vector<std::string>& sets) {
    std::vector<std::string> args{"run", kQuickstart, "--out", tmp / "out", "--no-trace"};
    for (const auto& s : sets) {
      args.emplace_back("--set");
      args.push_back(s);
    }
    run_ok(args);
    return read_json(tmp.path() / "out" / "summary.json");
  };
  const json base = summary_with({});
  REQUIRE(base["strategy"] == "mg-wfbp");

  SECTION("strategy.kind as a plain string and as a JSON string") {
    for (const std::string value : {"wfbp", "\"wfbp\""}) {
      CAPTURE(value);
      const json s = summary_with({"strategy.kind=" + value});
      CHECK(s["strategy"] == "wfbp");
      // WFBP: one allreduce per gradient tensor.
      REQUIRE(s["buckets"].size() == 161);
      for (const auto& bucket : s["buckets"])
        CHECK(bucket["tensors"] == 1);
      CHECK(s["buckets"].size() != base["buckets"].size());
    }
  }
  SECTION("a whole object: DDP with a 10 MiB bucket cap follows PyTorch's bucket rule") {
    const json s = summary_with({R"(strategy={"kind":"ddp","bucket_cap":"10 MiB"})"});
    CHECK(s["strategy"] == "ddp");
    const auto expected = pytorch_ddp_buckets(resnet50_tensor_sizes(), 10.0 * 1024 * 1024);
    REQUIRE(s["buckets"].size() == expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
      CAPTURE(i);
      CHECK(s["buckets"][i]["tensors"].get<std::int64_t>() == expected[i].first);
      CHECK(s["buckets"][i]["elements"].get<std::int64_t>() == expected[i].second);
    }
    // The default cap (25 MiB) gives fewer, larger buckets.
    const json d = summary_with({"strategy.kind=ddp"});
    CHECK(d["buckets"].size() == pytorch_ddp_buckets(resnet50_tensor_sizes(), 25.0 * 1024 * 1024).size());
    CHECK(d["buckets"].size() < s["buckets"].size());
  }
  SECTION("one GPU: no communication, perfect scaling") {
    const json s = summary_with({"cluster.nodes=1", "cluster.gpus_per_node=1"});
    CHECK(s["workers"] == 1);
    CHECK_THAT(s["scaling_efficiency"].get<double>(), WithinRel(1.0, 1e-12));
    CHECK(s["buckets"].empty());
    CHECK(s["communication_bytes_per_worker"].get<double>() == 0);
    CHECK(s["breakdown_s"]["exposed_communication"].get<double>() == 0);
    CHECK_THAT(s["throughput_samples_per_s"].get<double>(),
               WithinRel(64.0 / s["iteration_time_s"].get<double>(), 1e-12));
  }
}

// ---- list, check -------------------------------------------------------------------------------------------------

TEST_CASE("cli: list shows what is built in, one per line", "[cli][list]") {
  SECTION("models") {
    const auto lines = lines_of(run_ok({"list", "models"}).out);
    for (const char* model : {"resnet50", "vgg16", "bert-base", "gpt2"}) {
      CAPTURE(model);
      CHECK(std::count(lines.begin(), lines.end(), model) == 1);
    }
  }
  SECTION("strategies") {
    // Exactly the strategies implemented today; extend this list when a strategy is registered.
    std::vector<std::string> names;
    for (const auto& line : lines_of(run_ok({"list", "strategies"}).out))
      names.push_back(first_word(line));
    CHECK(names == std::vector<std::string>{"bsp", "bytescheduler", "ddp", "fusion", "gtopk", "lags", "mg-wfbp", "omgs",
                                            "powersgd", "ps-async", "ps-ssp", "ps-sync", "qsgd", "signsgd", "terngrad",
                                            "topk", "traced", "wfbp"});
  }
  SECTION("collectives") {
    std::set<std::string> algorithms;
    for (const auto& line : lines_of(run_ok({"list", "collectives"}).out)) {
      std::istringstream words(line);
      std::string collective, algorithm;
      words >> collective >> algorithm;
      REQUIRE_FALSE(algorithm.empty());
      algorithms.insert(collective + " " + algorithm);
    }
    CHECK(algorithms == std::set<std::string>{"allreduce halving-doubling", "allreduce hierarchical", "allreduce nvls",
                                              "allreduce ring", "allreduce tree", "allgather recursive-doubling",
                                              "allgather ring", "reduce_scatter ring", "broadcast ring",
                                              "broadcast tree"});
  }
  SECTION("gpus") {
    std::set<std::string> families;
    for (const auto& line : lines_of(run_ok({"list", "gpus"}).out))
      families.insert(first_word(line).substr(0, 4));
    for (const char* family : {"V100", "A100", "H100", "H200", "B200", "GB20", "L40S", "MI30", "MI25"}) {
      CAPTURE(family);
      CHECK(families.count(family) == 1);
    }
  }
  SECTION("an unknown list exits 2") {
    const auto o = run_ddlsim({"list", "nonsense"});
    CHECK(o.exit_code == 2);
    CHECK(o.out.empty());
    CHECK_THAT(o.err, StartsWith("ddlsim: ") && Contains("nonsense"));
    CHECK(std::count(o.err.begin(), o.err.end(), '\n') == 1);
  }
}

TEST_CASE("cli: check accepts the shipped quickstart scenario", "[cli][check]") {
  const auto o = run_ok({"check", kQuickstart});
  CHECK_THAT(o.out, Contains("valid"));
  CHECK(o.err.empty());
}

TEST_CASE("cli: calibrate turns nccl-tests logs into a version-2 calibration, the same bytes every time",
          "[cli][calibrate]") {
  const std::string log =
      std::string(DDLSIM_SOURCE_DIR) + "/tests/data/shared/nccl-tests/h100_2x8_allreduce_8B-8GiB.txt";
  TempDir tmp;
  const std::string out = tmp / "calibration.json";
  const auto o = run_ok({"calibrate", "--nccl-tests", log, "--collective", "all_reduce", "--out", out});
  CHECK_THAT(o.out, Contains("allreduce") && Contains("16 ranks") && Contains("wrote " + out));
  const auto first = ddlsim::read_file(out);
  const auto doc = json::parse(first);
  CHECK(doc.at("version") == 2);
  REQUIRE(doc.at("collectives").size() == 1);
  CHECK(doc.at("collectives")[0].at("ranks") == 16);
  CHECK(doc.at("collectives")[0].at("nodes") == 2);
  CHECK(doc.at("collectives")[0].at("table").size() == 31);
  run_ok({"calibrate", "--nccl-tests", log, "--collective", "all_reduce", "--out", out});
  CHECK(ddlsim::read_file(out) == first);
  // A log that does not name its collective, without --collective: exit 2 saying so.
  const auto unnamed = run_ddlsim({"calibrate", "--nccl-tests", log, "--out", out});
  CHECK(unnamed.exit_code == 2);
  CHECK_THAT(unnamed.err, Contains("--collective"));

  // A truncated log: exit 2, the file and the line named, nothing written.
  const std::string cut = tmp / "cut.txt";
  const auto text = ddlsim::read_file(log);
  ddlsim::write_file_atomic(cut, text.substr(0, text.find("  1048576 ") + 30));
  const std::string none = tmp / "none.json";
  const auto bad = run_ddlsim({"calibrate", "--nccl-tests", cut, "--collective", "all_reduce", "--out", none});
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, StartsWith("ddlsim: " + cut) && Contains("line"));
  CHECK_FALSE(fs::exists(none));
}
