// Sweep expansion, shards and the results tables (sim/cli/sweep.hpp); the runner itself is tested end to end in
// tests/cli/test_sweep_cli.cpp.
#include "core/error.hpp"
#include "sim/cli/sweep.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

using namespace ddlsim;
using namespace ddlsim::sim;
using Catch::Contains;

TEST_CASE("sweep: the product of the axes, first axis slowest, zip groups as one axis", "[sweep]") {
  const std::vector<SweepAxis> axes{
      {"a", {1, 2}, -1}, {"z1", {"x", "y", "w"}, 0}, {"b", {true, false}, -1}, {"z2", {10, 20, 30}, 0}};
  const auto points = expand_sweep(axes);
  REQUIRE(points.size() == 2 * 3 * 2);
  for (std::size_t i = 0; i < points.size(); ++i) {
    CAPTURE(i);
    CHECK(points[i].index == i);
    REQUIRE(points[i].assignments.size() == 4);
    // Keys in declaration order; the zip group sits at its first key's place (second dimension).
    CHECK(points[i].assignments[0].first == "a");
    CHECK(points[i].assignments[1].first == "z1");
    CHECK(points[i].assignments[2].first == "b");
    CHECK(points[i].assignments[3].first == "z2");
    CHECK(points[i].assignments[0].second == (i / 6 == 0 ? 1 : 2));
    const std::size_t z = i / 2 % 3;
    CHECK(points[i].assignments[1].second == std::vector<Json>{"x", "y", "w"}[z]);
    CHECK(points[i].assignments[3].second == std::vector<Json>{10, 20, 30}[z]);
    CHECK(points[i].assignments[2].second == (i % 2 == 0));
  }
  CHECK(swept_keys(axes) == std::vector<std::string>{"a", "z1", "b", "z2"});
}

TEST_CASE("sweep: shards partition the points", "[sweep]") {
  const auto s = parse_shard("3/8");
  CHECK(s.index == 3);
  CHECK(s.count == 8);
  std::set<std::size_t> seen;
  for (int i = 0; i < 8; ++i) {
    const auto shard = parse_shard(std::to_string(i) + "/8");
    for (std::size_t p = 0; p < 100; ++p)
      if (shard.owns(p))
        CHECK(seen.insert(p).second);
  }
  CHECK(seen.size() == 100);
  for (const char* bad : {"8/8", "-1/8", "1/0", "1", "a/b", "1/8x", ""}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(parse_shard(bad), InputError);
  }
}

TEST_CASE("sweep: results.csv quotes what needs quoting and leaves failed rows' numbers empty", "[sweep]") {
  PointResult ok;
  ok.index = 0;
  ok.params = OrderedJson{{"strategy", "ddp"}, {"topology", {{"kind", "star"}}}};
  ok.ok = true;
  ok.summary = OrderedJson{{"scenario", "s"}, {"iteration_time_s", 0.25}, {"model", {{"name", "resnet50"}}}};
  PointResult bad;
  bad.index = 1;
  bad.params = OrderedJson{{"strategy", "a,b"}, {"topology", "ring"}};
  bad.error = "file.json: /x: say \"no\"";
  const auto csv = results_csv({"strategy", "topology"}, {ok, bad});
  const auto header = csv.substr(0, csv.find('\n'));
  CHECK(header.rfind("point,strategy,topology,status,scenario,engine,workers,iteration_time_s,", 0) == 0);
  CHECK_THAT(header, Contains(",model,allreduce,") && Contains(",error")); // strategy: the swept key's column only
  CHECK_THAT(csv, Contains("\n0,ddp,\"{\"\"kind\"\":\"\"star\"\"}\",ok,s,,,0.25,"));
  CHECK_THAT(csv, Contains(",resnet50,"));
  CHECK_THAT(csv, Contains("\n1,\"a,b\",ring,failed,,,,,"));
  CHECK_THAT(csv, Contains(",\"file.json: /x: say \"\"no\"\"\"\n"));
  const auto j = results_json("s", {"strategy", "topology"}, {ok, bad});
  CHECK(j["points"][0]["status"] == "ok");
  CHECK(j["points"][1]["error"] == bad.error);
  CHECK(j["points"][1]["params"]["strategy"] == "a,b");
}

TEST_CASE("sweep: results.csv keeps the data-parallel columns and adds the pipeline figures after them",
          "[sweep][pipeline]") {
  PointResult dp;
  dp.index = 0;
  dp.params = OrderedJson{{"parallelism.pipeline", 1}};
  dp.ok = true;
  dp.summary = OrderedJson{{"scenario", "s"}, {"workers", 8}, {"iteration_time_s", 0.5}};
  const std::string kDataParallelHeader =
      "point,parallelism.pipeline,status,scenario,engine,workers,iteration_time_s,throughput_samples_per_s,"
      "scaling_efficiency,breakdown_s.compute,breakdown_s.compression,breakdown_s.exposed_communication,"
      "breakdown_s.idle,communication_bytes_per_worker,peak_memory_bytes_per_gpu,sim.wall_s,sim.events,sim.flows,"
      "model,strategy,allreduce,compute_source,single_gpu_iteration_s,critical_path_s";
  // parallelism.pipeline is swept: the pipeline columns leave out its summary field.
  SECTION("no point runs a pipeline: exactly the data-parallel columns") {
    const auto csv = results_csv({"parallelism.pipeline"}, {dp});
    CHECK(csv.substr(0, csv.find('\n')) == kDataParallelHeader + ",error");
  }
  SECTION("a pipeline point: parallelism, pipeline and per-stage memory columns, before error") {
    PointResult pp;
    pp.index = 1;
    pp.params = OrderedJson{{"parallelism.pipeline", 2}};
    pp.ok = true;
    pp.summary = OrderedJson::parse(R"({"scenario": "s", "workers": 8, "iteration_time_s": 0.25,
      "parallelism": {"data": 4, "pipeline": 2, "tensor": 1},
      "pipeline": {"schedule": "gpipe", "stages": 2, "micro_batches": 8, "virtual_stages": 1, "partition": "balanced",
                   "bubble_fraction": 0.125, "bubble_fraction_closed_form": 0.1111111111111111,
                   "per_stage": [{"peak_memory_bytes": 1000}, {"peak_memory_bytes": 2000}]}})");
    PointResult failed;
    failed.index = 2;
    failed.params = OrderedJson{{"parallelism.pipeline", 3}};
    failed.error = "s.json: /parallelism: not divisible";
    const auto csv = results_csv({"parallelism.pipeline"}, {dp, pp, failed});
    CHECK(csv.substr(0, csv.find('\n')) ==
          kDataParallelHeader +
              ",parallelism.data,parallelism.tensor,pipeline.schedule,pipeline.stages,"
              "pipeline.micro_batches,pipeline.virtual_stages,pipeline.partition,pipeline.bubble_fraction,"
              "pipeline.bubble_fraction_closed_form,model_flops_utilisation,fits_memory,"
              "pipeline.per_stage.0.peak_memory_bytes,pipeline.per_stage.1.peak_memory_bytes,error");
    // The data-parallel point: 8 replicas of one stage, no pipeline figures, memory not checked.
    CHECK_THAT(csv, Contains("\n0,1,ok,s,,8,0.5,") && Contains(",,8,1,,,,,,,,,,,,\n"));
    CHECK_THAT(csv, Contains("\n1,2,ok,s,,8,0.25,") &&
                        Contains(",,4,1,gpipe,2,8,1,balanced,0.125,0.1111111111111111,,true,1000,2000,\n"));
    CHECK_THAT(csv, Contains("\n2,3,failed,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,s.json: /parallelism: not divisible\n"));
  }
}

namespace {

// A results.csv header's column names.
std::vector<std::string> header_columns(const std::string& csv) {
  std::vector<std::string> out;
  std::string cell;
  for (const char c : csv.substr(0, csv.find('\n'))) {
    if (c == ',') {
      out.push_back(cell);
      cell.clear();
    } else {
      cell += c;
    }
  }
  out.push_back(cell);
  return out;
}

} // namespace

TEST_CASE("sweep: results.csv names each column once, a swept summary field as its swept key (#31)",
          "[sweep][pipeline]") {
  // gpt3-175b-hybrid's and powersgd-100gbps's axes: each was a column twice, as the key and as a summary field.
  const std::vector<std::string> keys{"strategy", "parallelism.tensor", "pipeline.micro_batches", "engine"};
  PointResult pp;
  pp.params = OrderedJson{{"strategy", {{"kind", "ddp"}}},
                          {"parallelism.tensor", 8},
                          {"pipeline.micro_batches", 64},
                          {"engine", "analytic"}};
  pp.ok = true;
  pp.summary = OrderedJson::parse(R"({"scenario": "s", "engine": "analytic", "workers": 8, "strategy": "ddp",
      "parallelism": {"data": 1, "pipeline": 1, "tensor": 8},
      "pipeline": {"schedule": "1f1b", "stages": 1, "micro_batches": 64, "per_stage": [{"peak_memory_bytes": 1}]}})");
  const auto csv = results_csv(keys, {pp});
  const auto columns = header_columns(csv);
  CAPTURE(csv);
  const std::set<std::string> distinct(columns.begin(), columns.end());
  CHECK(distinct.size() == columns.size());
  for (const auto& k : keys)
    CHECK(std::count(columns.begin(), columns.end(), k) == 1);
  // The swept keys' columns hold the values the point set.
  CHECK_THAT(csv, Contains("\n0,\"{\"\"kind\"\":\"\"ddp\"\"}\",8,64,analytic,ok,s,8,"));
}

TEST_CASE("sweep: results.csv says whether every pipeline stage fits in the GPU's memory (#31)", "[sweep][pipeline]") {
  // exceeds_gpu_memory of the stages -> fits_memory: true when none exceeds, false when one does, empty without a
  // pipeline (data-parallel points are not checked).
  const auto point = [](std::size_t index, const std::string& per_stage) {
    PointResult r;
    r.index = index;
    r.params = OrderedJson{{"pipeline.micro_batches", index}};
    r.ok = true;
    r.summary =
        OrderedJson::parse(R"({"scenario": "s", "workers": 4)" +
                           (per_stage.empty() ? "" : R"(, "pipeline": {"per_stage": )" + per_stage + "}") + "}");
    return r;
  };
  const auto csv =
      results_csv({"pipeline.micro_batches"},
                  {point(0, R"([{"exceeds_gpu_memory": false}, {"exceeds_gpu_memory": false}])"),
                   point(1, R"([{"exceeds_gpu_memory": false}, {"exceeds_gpu_memory": true}])"), point(2, "")});
  const auto columns = header_columns(csv);
  const auto fits = std::find(columns.begin(), columns.end(), "fits_memory");
  REQUIRE(fits != columns.end());
  const auto at = static_cast<std::size_t>(fits - columns.begin());
  std::vector<std::string> cells;
  std::size_t line = csv.find('\n') + 1;
  for (; line < csv.size(); line = csv.find('\n', line) + 1)
    cells.push_back(header_columns(csv.substr(line))[at]);
  CHECK(cells == std::vector<std::string>{"true", "false", ""});
}

TEST_CASE("sweep: results.csv adds the sharding figures when some point shards its model state (#32)",
          "[sweep][sharding]") {
  PointResult dp;
  dp.index = 0;
  dp.params = OrderedJson{{"strategy.kind", "ddp"}};
  dp.ok = true;
  dp.summary = OrderedJson{{"scenario", "s"}, {"workers", 8}, {"iteration_time_s", 0.5}};
  PointResult sh;
  sh.index = 1;
  sh.params = OrderedJson{{"strategy.kind", "wfbp"}};
  sh.ok = true;
  sh.summary = OrderedJson::parse(R"({"scenario": "s", "workers": 8, "iteration_time_s": 0.25,
      "sharding": {"stage": 3, "shard_group": 8, "replicas": 1, "units": {"unit": "block", "count": 4},
                   "per_iteration": {"allgathers": 7, "allgather_bytes_sent": 700, "reduce_scatters": 4,
                                     "reduce_scatter_bytes_sent": 400, "allreduces": 0, "allreduce_bytes_sent": 0},
                   "exposed_allgather_s": 0.125, "exposed_reduce_s": 0.0625,
                   "memory_per_gpu": {"weights_bytes": 10, "total_bytes": 1000, "fits": false}}})");
  PointResult failed;
  failed.index = 2;
  failed.params = OrderedJson{{"strategy.kind", "topk"}};
  failed.error = "s.json: /strategy/kind: refused";
  const std::vector<std::string> kSharding{"sharding.stage",
                                           "sharding.shard_group",
                                           "sharding.replicas",
                                           "sharding.per_iteration.allgather_bytes_sent",
                                           "sharding.per_iteration.reduce_scatter_bytes_sent",
                                           "sharding.per_iteration.allreduce_bytes_sent",
                                           "sharding.exposed_allgather_s",
                                           "sharding.exposed_reduce_s",
                                           "sharding.memory_per_gpu.total_bytes",
                                           "sharding.memory_per_gpu.fits"};
  SECTION("no point shards: none of the sharding columns") {
    const auto columns = header_columns(results_csv({"strategy.kind"}, {dp, failed}));
    for (const auto& c : kSharding)
      CHECK(std::find(columns.begin(), columns.end(), c) == columns.end());
  }
  SECTION("a sharded point: the sharding columns before error; a point without sharding is stage 0") {
    const auto csv = results_csv({"strategy.kind"}, {dp, sh, failed});
    CAPTURE(csv);
    const auto columns = header_columns(csv);
    REQUIRE(columns.size() > kSharding.size() + 1);
    CHECK(std::vector<std::string>(columns.end() - static_cast<std::ptrdiff_t>(kSharding.size()) - 1,
                                   columns.end() - 1) == kSharding);
    CHECK(columns.back() == "error");
    CHECK_THAT(csv, Contains(",critical_path_s,sharding.stage,"));
    CHECK_THAT(csv, Contains("\n0,ddp,ok,s,,8,0.5,") && Contains(",0,,,,,,,,,,\n"));
    CHECK_THAT(csv, Contains("\n1,wfbp,ok,s,,8,0.25,") && Contains(",3,8,1,700,400,0,0.125,0.0625,1000,false,\n"));
    CHECK_THAT(csv, Contains("\n2,topk,failed,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,,s.json: /strategy/kind: refused\n"));
  }
  SECTION("a swept sharding key is a column once, holding the value the point set") {
    PointResult swept = sh;
    swept.params = OrderedJson{{"sharding.stage", 3}};
    const auto columns = header_columns(results_csv({"sharding.stage"}, {swept}));
    CHECK(std::count(columns.begin(), columns.end(), "sharding.stage") == 1);
    CHECK(std::count(columns.begin(), columns.end(), "sharding.memory_per_gpu.fits") == 1);
  }
}
