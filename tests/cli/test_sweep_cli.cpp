// End-to-end tests of `ddlsim sweep`, `ddlsim merge` and `ddlsim plot` (docs/sweeps.md; sim/cli/sweep.hpp): points
// agree with single runs, zip groups advance together, a failing point is recorded and the others go on, a killed
// sweep resumes without losing a finished point and ends with the same table as an uninterrupted one, shards merge
// into the unsharded table, plots are valid PNG and SVG.
#include "support/cli.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <sys/file.h>
#include <thread>
#include <unistd.h>

using Catch::Contains;
using Catch::Matchers::WithinRel;
using ddlsim::test::read_text;
using ddlsim::test::run_ddlsim;
using ddlsim::test::run_ok;
using ddlsim::test::TempDir;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const std::string kQuickstart = std::string(DDLSIM_SOURCE_DIR) + "/scenarios/quickstart.json";

// RFC 4180 rows (quoted cells may hold commas, quotes and newlines).
std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows(1);
  std::string cell;
  bool quoted = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        cell += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cell += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      rows.back().push_back(cell);
      cell.clear();
    } else if (c == '\n') {
      rows.back().push_back(cell);
      cell.clear();
      rows.emplace_back();
    } else {
      cell += c;
    }
  }
  if (rows.back().empty())
    rows.pop_back();
  return rows;
}

std::size_t column(const std::vector<std::vector<std::string>>& rows, const std::string& name) {
  const auto& header = rows.at(0);
  const auto it = std::find(header.begin(), header.end(), name);
  REQUIRE(it != header.end());
  return static_cast<std::size_t>(it - header.begin());
}

// The table without the one column that measures the machine.
std::vector<std::vector<std::string>> without_wall_time(std::vector<std::vector<std::string>> rows) {
  const auto c = column(rows, "sim.wall_s");
  for (auto& r : rows)
    r.erase(r.begin() + static_cast<std::ptrdiff_t>(c));
  return rows;
}

std::vector<std::vector<std::string>> results(const std::string& dir) {
  return parse_csv(read_text(fs::path(dir) / "results.csv"));
}

// Complete lines only: a line cut short by a kill has no newline yet.
std::size_t lines_in(const fs::path& file) {
  const std::string text = read_text(file);
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

bool is_png(const fs::path& p) {
  const std::string data = read_text(p);
  return data.size() > 8 && data.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0;
}

bool is_svg(const fs::path& p) {
  const std::string data = read_text(p);
  return data.find("<svg") != std::string::npos && data.rfind("</svg>") != std::string::npos;
}

std::string stage_memory_column(int stage) {
  return "pipeline.per_stage." + std::to_string(stage) + ".peak_memory_bytes";
}

const std::string kNodesByStrategy = R"(sweep={"cluster.nodes": [1, 2, 4], "strategy.kind": ["wfbp", "ddp"]})";

} // namespace

TEST_CASE("sweep: every point of the product runs, as ddlsim run would, and the standard plots are drawn",
          "[cli][sweep]") {
  TempDir tmp;
  const std::string out = tmp / "sweep";
  const auto o = run_ok({"sweep", kQuickstart, "--out", out, "-j", "2", "--set", kNodesByStrategy});
  CHECK_THAT(o.out, Contains("6 points: 6 run now, 0 already done, 0 failed"));
  CHECK_THAT(o.err, Contains("sweep: 6/6 points (100%), 0 failed")); // plain progress lines off a terminal
  const auto rows = results(out);
  REQUIRE(rows.size() == 7);
  CHECK(rows[0][0] == "point");
  CHECK(rows[0][1] == "cluster.nodes");
  CHECK(rows[0][2] == "strategy.kind");
  CHECK(rows[0][3] == "status");
  CHECK(rows[0].back() == "error");
  // Row-major: the first axis varies slowest.
  CHECK(rows[1][1] == "1");
  CHECK(rows[1][2] == "wfbp");
  CHECK(rows[2][1] == "1");
  CHECK(rows[2][2] == "ddp");
  CHECK(rows[6][1] == "4");
  // Point 5 (4 nodes, ddp) is what `ddlsim run` predicts for it.
  const std::string single = tmp / "single";
  run_ok({"run", kQuickstart, "--out", single, "--no-trace", "--set", "cluster.nodes=4", "--set", "strategy.kind=ddp"});
  const auto summary = json::parse(read_text(fs::path(single) / "summary.json"));
  CHECK(rows[6][column(rows, "status")] == "ok");
  CHECK_THAT(std::stod(rows[6][column(rows, "iteration_time_s")]),
             WithinRel(summary["iteration_time_s"].get<double>(), 1e-15));
  CHECK(rows[6][column(rows, "workers")] == "16");
  const auto j = json::parse(read_text(fs::path(out) / "results.json"));
  REQUIRE(j["points"].size() == 6);
  CHECK(j["swept_keys"] == json::array({"cluster.nodes", "strategy.kind"}));
  CHECK(j["points"][5]["params"]["strategy.kind"] == "ddp");
  CHECK(j["points"][5]["summary"]["iteration_time_s"] == summary["iteration_time_s"]);
  for (const char* plot : {"throughput", "speedup", "scaling_efficiency", "breakdown"}) {
    CAPTURE(plot);
    CHECK(is_png(fs::path(out) / (std::string(plot) + ".png")));
    CHECK(is_svg(fs::path(out) / (std::string(plot) + ".svg")));
    CHECK(fs::exists(fs::path(out) / (std::string(plot) + ".gp")));
    CHECK(fs::exists(fs::path(out) / (std::string(plot) + ".dat")));
  }
}

TEST_CASE("sweep: zipped keys advance together", "[cli][sweep]") {
  TempDir tmp;
  const std::string out = tmp / "zip";
  run_ok({"sweep", kQuickstart, "--out", out, "--no-plots", "--set",
          R"(sweep={"strategy.kind": ["bsp", "mg-wfbp"], "zip": [{"cluster.nodes": [1, 2, 8],
                    "cluster.inter_node.bandwidth": ["10 Gbps", "25 Gbps", "100 Gbps"]}]})"});
  const auto rows = results(out);
  REQUIRE(rows.size() == 7); // 2 x 3, not 2 x 3 x 3
  // Keys in the order the sweep block writes them (#15 D15), inside the zip group too.
  CHECK(rows[0][1] == "strategy.kind");
  CHECK(rows[0][2] == "cluster.nodes");
  CHECK(rows[0][3] == "cluster.inter_node.bandwidth");
  for (std::size_t r = 1; r < rows.size(); ++r) {
    const std::string nodes = rows[r][2], bw = rows[r][3];
    CHECK(
        ((nodes == "1" && bw == "10 Gbps") || (nodes == "2" && bw == "25 Gbps") || (nodes == "8" && bw == "100 Gbps")));
  }
}

TEST_CASE("sweep: a failing point is recorded with its error, the others go on, the exit status says so",
          "[cli][sweep][errors]") {
  TempDir tmp;
  const std::string out = tmp / "fail";
  // Each value is valid with the base scenario, but 3 nodes do not fill a fat-tree of 2 leaves.
  const auto o = run_ddlsim({"sweep", kQuickstart, "--out", out, "--no-plots", "--set",
                             R"(sweep={"cluster.nodes": [2, 3], "cluster.topology": ["star",
                               {"kind": "fat-tree", "down": [2], "up": [1], "parallel": [1],
                                "link": {"bandwidth": "100 Gbps", "latency": "1 us"}}]})"});
  CHECK(o.exit_code == 3);
  CHECK_THAT(o.err, Contains("1 of 4 points failed"));
  const auto rows = results(out);
  REQUIRE(rows.size() == 5);
  const auto status = column(rows, "status"), error = column(rows, "error");
  CHECK(rows[1][status] == "ok");
  CHECK(rows[2][status] == "ok");
  CHECK(rows[3][status] == "ok");
  CHECK(rows[4][status] == "failed");
  CHECK_THAT(rows[4][error], Contains("quickstart.json") && Contains("/cluster/topology") && Contains("leaves"));
  CHECK(rows[4][column(rows, "iteration_time_s")].empty());
}

TEST_CASE("sweep: killed mid-way and resumed, no finished point is lost and the table is the uninterrupted one",
          "[cli][sweep][resume]") {
  TempDir tmp;
  // Flow-engine points each run in their own process (~tens of ms): slow enough to kill the sweep mid-way.
  const std::string sweep = R"(sweep={"cluster.nodes": [2, 3, 4, 5, 6, 7, 8, 9], "strategy.kind": ["wfbp", "ddp",
                                       "mg-wfbp", "bsp", "fusion"]})";
  const std::vector<std::string> base{"sweep",       kQuickstart, "--set", sweep,       "--set",
                                      "engine=flow", "-j",        "1",     "--no-plots"};
  auto with = [&](std::vector<std::string> extra) {
    auto args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  const std::string killed = tmp / "killed";
  const fs::path journal = fs::path(killed) / "points.jsonl";
  {
    // Spawn, wait for a few finished points, then SIGKILL: no handler, no clean-up.
    const pid_t pid = ddlsim::test::spawn_ddlsim(with({"--out", killed}), tmp / "killed.out", tmp / "killed.err");
    for (int i = 0; i < 20000 && (!fs::exists(journal) || lines_in(journal) < 6); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    REQUIRE(WIFSIGNALED(status)); // killed, not finished
  }
  // The killed sweep's forked point processes inherited its lock and hold it until they notice and end: a resume
  // started at once is told the directory is in use (as a user would be); wait, bounded, for the lock to be free.
  const std::string lock = (fs::path(killed) / ".ddlsim.lock").string();
  for (int i = 0; i < 30000; ++i) {
    const int fd = ::open(lock.c_str(), O_RDWR | O_CLOEXEC);
    const bool free = fd >= 0 && ::flock(fd, LOCK_EX | LOCK_NB) == 0;
    if (fd >= 0)
      ::close(fd);
    if (free)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const std::size_t done_before = lines_in(journal) - 1; // minus the header
  REQUIRE(done_before >= 5);
  REQUIRE(done_before < 40);
  const auto resumed = run_ok(with({"--out", killed, "--resume"}));
  CHECK_THAT(resumed.out,
             Contains(std::to_string(40 - done_before) + " run now, " + std::to_string(done_before) + " already done"));
  const std::string clean = tmp / "clean";
  run_ok(with({"--out", clean}));
  CHECK(without_wall_time(results(killed)) == without_wall_time(results(clean)));
  // Resuming a finished sweep runs nothing; resuming with another scenario is refused.
  CHECK_THAT(run_ok(with({"--out", killed, "--resume"})).out, Contains("0 run now, 40 already done"));
  auto other = with({"--out", killed, "--resume", "--set", "cluster.gpus_per_node=2"});
  const auto refused = run_ddlsim(other);
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.err, Contains("points.jsonl") && Contains("different sweep"));
}

TEST_CASE("sweep: shards run disjoint points and merge into the unsharded table", "[cli][sweep][shard]") {
  TempDir tmp;
  const std::string all = tmp / "all";
  run_ok({"sweep", kQuickstart, "--out", all, "--no-plots", "--set", kNodesByStrategy});
  std::vector<std::string> merge{"merge", "--out", tmp / "merged"};
  std::size_t rows_seen = 0;
  for (int i = 0; i < 4; ++i) {
    const std::string dir = tmp / ("shard" + std::to_string(i));
    run_ok({"sweep", kQuickstart, "--out", dir, "--set", kNodesByStrategy, "--shard", std::to_string(i) + "/4"});
    const auto rows = results(dir);
    for (std::size_t r = 1; r < rows.size(); ++r)
      CHECK(std::stoi(rows[r][0]) % 4 == i);
    rows_seen += rows.size() - 1;
    CHECK_FALSE(fs::exists(fs::path(dir) / "throughput.png")); // a shard's points are a sample: no plots
    merge.push_back(dir);
  }
  CHECK(rows_seen == 6);
  const auto merged = run_ok(merge);
  CHECK_THAT(merged.out, Contains("6 points"));
  CHECK(without_wall_time(results(tmp / "merged")) == without_wall_time(results(all)));
  CHECK(is_png(fs::path(tmp / "merged") / "throughput.png"));
}

TEST_CASE("sweep: bad command lines exit 2 with one clear line", "[cli][sweep][errors]") {
  TempDir tmp;
  const auto [args, phrase] = GENERATE(table<std::vector<std::string>, std::string>({
      {{"--shard", "2/2"}, "--shard: '2/2': need 0 <= I < N"},
      {{"--shard", "x"}, "'x' is not of the form I/N"},
      {{"--set", "sweep={\"cluster.nodes\": []}"}, "/sweep/cluster.nodes: expected a non-empty array"},
      {{"--set", "sweep={\"cluster.nodez\": [1]}"}, "unknown key"},
      {{"-j", "0"}, "--jobs: Value 0 not in range 1 to 4096"},                 // #15 D17: no 300-digit bound
      {{"--set", "name=\xff"}, "an override (--set) is not valid UTF-8 text"}, // #15 D8
  }));
  CAPTURE(args, phrase);
  std::vector<std::string> all{"sweep", kQuickstart, "--out", tmp / "x", "--set", kNodesByStrategy};
  all.insert(all.end(), args.begin(), args.end());
  const auto o = run_ddlsim(all);
  CHECK(o.exit_code == 2);
  CHECK_THAT(o.err, Contains(phrase));
  const auto lines = std::count(o.err.begin(), o.err.end(), '\n');
  CHECK(lines == 1);
  // Without a sweep block there is nothing to sweep.
  const auto none = run_ddlsim({"sweep", kQuickstart, "--out", tmp / "y"});
  CHECK(none.exit_code == 2);
  CHECK_THAT(none.err, Contains("/sweep") && Contains("no \"sweep\" block"));
}

TEST_CASE("plot: a custom plot of a results table as SVG or PNG, with its data and script", "[cli][plot]") {
  TempDir tmp;
  const std::string out = tmp / "sweep";
  run_ok({"sweep", kQuickstart, "--out", out, "--no-plots", "--set", kNodesByStrategy});
  const std::string svg = tmp / "custom.svg";
  run_ok({"plot", out + "/results.csv", "--x", "cluster.nodes", "--y", "iteration_time_s", "--group", "strategy.kind",
          "--out", svg});
  CHECK(is_svg(svg));
  CHECK(fs::exists(tmp / "custom.gp"));
  CHECK(fs::exists(tmp / "custom.dat"));
  const auto defaults = run_ok({"plot", out + "/results.csv"});
  CHECK(is_png(fs::path(out) / "plot-throughput_samples_per_s-vs-workers.png"));
  const auto bad = run_ddlsim({"plot", out + "/results.csv", "--y", "no_such_column"});
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Contains("results.csv") && Contains("no_such_column") && Contains("iteration_time_s"));
}

TEST_CASE("sweep: pipeline keys sweep (schedules zipped with their virtual stages), the table carries the bubble, "
          "the plots draw it",
          "[cli][sweep][pipeline]") {
  TempDir tmp;
  const std::string out = tmp / "pipeline";
  // The quickstart's 8 GPUs as 2 replicas of a 4-stage ResNet-50 pipeline.
  const auto o = run_ok({"sweep", kQuickstart, "--out", out, "-j", "2", "--set", R"(parallelism={"pipeline": 4})",
                         "--set", R"(pipeline={"micro_batches": 4})", "--set",
                         R"(sweep={"pipeline.micro_batches": [4, 8, 16], "zip": [{"pipeline.schedule":
                            ["gpipe", "1f1b", "interleaved-1f1b"], "pipeline.virtual_stages": [1, 1, 2]}]})"});
  CHECK_THAT(o.out, Contains("9 points: 9 run now, 0 already done, 0 failed"));
  const auto rows = results(out);
  REQUIRE(rows.size() == 10);
  CHECK(rows[0][1] == "pipeline.micro_batches");
  CHECK(rows[0][2] == "pipeline.schedule");
  CHECK(rows[0][3] == "pipeline.virtual_stages");
  CHECK(rows[0][4] == "status");
  // Each column once: the summary fields of the swept keys are left out (#31).
  const auto summary_column = [&](const std::string& name) {
    const auto& header = rows[0];
    CHECK(std::count(header.begin(), header.end(), name) == 1);
    const auto it = std::find(header.begin(), header.end(), name);
    REQUIRE(it != header.end());
    return static_cast<std::size_t>(it - header.begin());
  };
  CHECK(summary_column("pipeline.schedule") == 2);
  CHECK(summary_column("pipeline.micro_batches") == 1);
  CHECK(summary_column("pipeline.virtual_stages") == 3);
  CHECK(rows[0].back() == "error");
  CHECK(std::find(rows[0].begin(), rows[0].end(), "pipeline.per_stage.3.peak_memory_bytes") != rows[0].end());
  CHECK(std::find(rows[0].begin(), rows[0].end(), "pipeline.per_stage.4.peak_memory_bytes") == rows[0].end());
  for (std::size_t r = 1; r < rows.size(); ++r) {
    CAPTURE(r);
    const auto& row = rows[r];
    REQUIRE(row[4] == "ok");
    CHECK(row[summary_column("parallelism.data")] == "2");
    CHECK(row[summary_column("parallelism.pipeline")] == "4");
    CHECK(row[summary_column("parallelism.tensor")] == "1");
    CHECK(row[summary_column("pipeline.stages")] == "4");
    // Closed form: (p - 1)/(v m + p - 1) (Narayanan et al. 2021, section 2.2).
    const double m = std::stod(row[1]), v = std::stod(row[3]);
    CHECK_THAT(std::stod(row[summary_column("pipeline.bubble_fraction_closed_form")]),
               WithinRel(3 / (v * m + 3), 1e-12));
    const double bubble = std::stod(row[summary_column("pipeline.bubble_fraction")]);
    CHECK(bubble > 0);
    CHECK(bubble < 1);
    double peak = 0;
    for (int st = 0; st < 4; ++st)
      peak = std::max(peak, std::stod(row[summary_column(stage_memory_column(st))]));
    CHECK(peak > 0);
  }
  // A point is what `ddlsim run` predicts for it, the whole summary in results.json.
  const std::string single = tmp / "single";
  run_ok({"run", kQuickstart, "--out", single, "--no-trace", "--set", R"(parallelism={"pipeline": 4})", "--set",
          R"(pipeline={"schedule": "interleaved-1f1b", "micro_batches": 16, "virtual_stages": 2})"});
  const auto summary = json::parse(read_text(fs::path(single) / "summary.json"));
  CHECK(rows[9][1] == "16");
  CHECK(rows[9][2] == "interleaved-1f1b");
  CHECK_THAT(std::stod(rows[9][summary_column("pipeline.bubble_fraction")]),
             WithinRel(summary["pipeline"]["bubble_fraction"].get<double>(), 1e-15));
  CHECK_THAT(std::stod(rows[9][summary_column("iteration_time_s")]),
             WithinRel(summary["iteration_time_s"].get<double>(), 1e-15));
  const auto j = json::parse(read_text(fs::path(out) / "results.json"));
  CHECK(j["points"][8]["summary"]["pipeline"]["per_stage"] == summary["pipeline"]["per_stage"]);
  // fits_memory: no stage over the V100's 32 GB (GPipe's 16 micro-batches of 64 images are not).
  for (std::size_t r = 1; r < rows.size(); ++r) {
    CAPTURE(r);
    bool fits = true;
    for (const auto& stage : j["points"][r - 1]["summary"]["pipeline"]["per_stage"])
      fits = fits && !stage["exceeds_gpu_memory"].get<bool>();
    CHECK(rows[r][summary_column("fits_memory")] == (fits ? "true" : "false"));
  }
  CHECK(rows[7][summary_column("fits_memory")] == "false"); // GPipe, 16 micro-batches: 43.6 GB
  CHECK(rows[8][summary_column("fits_memory")] == "true");  // 1F1B holds 4: 10.9 GB
  // The standard plots include the bubble against the micro-batch count, with its closed form.
  CHECK(is_png(fs::path(out) / "bubble.png"));
  CHECK(is_svg(fs::path(out) / "bubble.svg"));
  const std::string dat = read_text(fs::path(out) / "bubble.dat");
  CHECK_THAT(dat, Contains("gpipe, closed form") && Contains("pipeline.schedule=interleaved-1f1b, closed form"));
  // A custom plot of the bubble against the micro-batch count, one line per schedule.
  const std::string svg = tmp / "bubble.svg";
  run_ok({"plot", out + "/results.csv", "--x", "pipeline.micro_batches", "--y", "pipeline.bubble_fraction", "--group",
          "pipeline.schedule", "--out", svg});
  CHECK(is_svg(svg));
  const std::string custom = read_text(tmp / "bubble.dat");
  CHECK_THAT(custom, Contains("pipeline.schedule=gpipe") && Contains("pipeline.schedule=interleaved-1f1b"));
}

TEST_CASE("sweep: results.csv carries the sharding figures of each point, stage 0 included", "[cli][sweep][sharding]") {
  TempDir tmp;
  const std::string out = tmp / "sharding";
  // The quickstart's 8 GPUs (MG-WFBP) with each ZeRO stage.
  const auto o = run_ok({"sweep", kQuickstart, "--out", out, "--no-plots", "--set", "optimizer=adam", "--set",
                         R"(sweep={"sharding.stage": [0, 1, 2, 3]})"});
  CHECK_THAT(o.out, Contains("4 points: 4 run now, 0 already done, 0 failed"));
  const auto rows = results(out);
  REQUIRE(rows.size() == 5);
  CHECK(rows[0][1] == "sharding.stage");
  CHECK(std::count(rows[0].begin(), rows[0].end(), "sharding.stage") == 1);
  CHECK(rows[0].back() == "error");
  // Stage 0 given shards nothing: one-GPU shards, the 8 GPUs all replicas, its allreduces, and its memory counted
  // by ZeRO's accounting as the sharded points' (the point's peak memory).
  CHECK(rows[1][column(rows, "sharding.shard_group")] == "1");
  CHECK(rows[1][column(rows, "sharding.replicas")] == "8");
  CHECK(rows[1][column(rows, "sharding.per_iteration.allgather_bytes_sent")] == "0");
  CHECK(rows[1][column(rows, "sharding.per_iteration.allreduce_bytes_sent")] != "0");
  CHECK(rows[1][column(rows, "sharding.memory_per_gpu.total_bytes")] ==
        rows[1][column(rows, "peak_memory_bytes_per_gpu")]);
  // Each sharded point's cells are its summary's figures, as `ddlsim run` writes them.
  const auto j = json::parse(read_text(fs::path(out) / "results.json"));
  for (std::size_t r = 2; r < rows.size(); ++r) {
    CAPTURE(r);
    const auto& row = rows[r];
    REQUIRE(row[column(rows, "status")] == "ok");
    const auto& sh = j["points"][r - 1]["summary"]["sharding"];
    CHECK(row[1] == std::to_string(r - 1));
    CHECK(row[column(rows, "sharding.shard_group")] == "8");
    CHECK(row[column(rows, "sharding.replicas")] == "1");
    CHECK(row[column(rows, "sharding.memory_per_gpu.total_bytes")] == sh["memory_per_gpu"]["total_bytes"].dump());
    CHECK(row[column(rows, "sharding.memory_per_gpu.total_bytes")] == row[column(rows, "peak_memory_bytes_per_gpu")]);
    CHECK(row[column(rows, "sharding.memory_per_gpu.fits")] == "true"); // ResNet-50 in a V100's 32 GB
    CHECK(row[column(rows, "sharding.per_iteration.allgather_bytes_sent")] ==
          sh["per_iteration"]["allgather_bytes_sent"].dump());
    CHECK(row[column(rows, "sharding.per_iteration.reduce_scatter_bytes_sent")] ==
          sh["per_iteration"]["reduce_scatter_bytes_sent"].dump());
    CHECK(row[column(rows, "sharding.per_iteration.allreduce_bytes_sent")] == "0");
    CHECK_THAT(std::stod(row[column(rows, "sharding.exposed_allgather_s")]),
               WithinRel(sh["exposed_allgather_s"].get<double>(), 1e-15));
    CHECK_THAT(std::stod(row[column(rows, "sharding.exposed_reduce_s")]),
               WithinRel(sh["exposed_reduce_s"].get<double>(), 1e-15));
  }
  // Stage 3 gathers each layer twice but the last, and reduce-scatters it once: about 3/2 of stage 1's traffic.
  const double stage1 = std::stod(rows[2][column(rows, "communication_bytes_per_worker")]);
  const double stage3 = std::stod(rows[4][column(rows, "communication_bytes_per_worker")]);
  CHECK(stage3 > 1.4 * stage1);
  CHECK(stage3 < 1.5 * stage1);
  // The stage-3 point is what `ddlsim run` predicts for it.
  const std::string single = tmp / "single";
  run_ok({"run", kQuickstart, "--out", single, "--no-trace", "--set", "optimizer=adam", "--set", "sharding.stage=3"});
  const auto summary = json::parse(read_text(fs::path(single) / "summary.json"));
  CHECK(j["points"][3]["summary"]["sharding"] == summary["sharding"]);
}

TEST_CASE(
    "scenarios: every shipped scenario is valid, listed in docs/scenarios.md, and its sweep runs without a failure",
    "[cli][sweep][scenarios]") {
  const fs::path dir = fs::path(DDLSIM_SOURCE_DIR) / "scenarios";
  const std::string listed = read_text(fs::path(DDLSIM_SOURCE_DIR) / "docs" / "scenarios.md");
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".json")
      files.push_back(e.path());
  std::sort(files.begin(), files.end());
  REQUIRE(files.size() >= 7);
  TempDir tmp;
  for (const auto& f : files) {
    CAPTURE(f.filename().string());
    CHECK_THAT(listed, Contains("`scenarios/" + f.filename().string() + "`"));
    run_ok({"check", f.string()});
    const auto doc = json::parse(read_text(f));
    if (!doc.contains("sweep"))
      continue;
    const std::string out = tmp / f.stem().string();
    std::vector<std::string> args{"sweep", f.string(), "--out", out, "--no-plots"};
    // The asan preset sets DDLSIM_SWEEP_TEST_SHARD (e.g. 0/2): under the sanitizers every scenario runs one shard of
    // its sweep (the test suite's time budget), the dev build runs every point.
    if (const char* shard = std::getenv("DDLSIM_SWEEP_TEST_SHARD"); shard != nullptr && *shard != '\0') {
      args.push_back("--shard");
      args.push_back(shard);
    }
    const auto o = run_ok(args);
    CHECK_THAT(o.out, Contains(" 0 failed"));
  }
}
