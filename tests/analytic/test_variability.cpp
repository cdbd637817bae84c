// Monte Carlo over iterations (issue #16): order statistics of exponential stragglers in closed form (c + mu H_p,
// with backups c + mu (H_{N+b} - H_b)), backup workers against enumeration, ps-ssp's stragglers between the barrier and
// free running, the factors' moments, reproducible draws, and the inputs the sampler refuses.
#include "core/error.hpp"
#include "core/json.hpp"
#include "sim/analytic/analytic.hpp"
#include "sim/spec/scenario.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>

using namespace ddlsim;
using namespace ddlsim::sim;
using Catch::Matchers::Contains;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;

namespace {

// p single-GPU workers of two calibrated layers (forward 1, 3 ms; backward 4, 2 ms: c = 10 ms of compute), a network
// of 1 PB/s without latency (an allreduce of 12 B takes ~1e-14 s), no update cost, no host launches: nothing but
// compute.
Json workers(int p) {
  Json doc = Json::parse(R"({
    "model": {"layers": [{"name": "a", "params": 1, "fwd_flops": 1}, {"name": "b", "params": 2, "fwd_flops": 1}],
              "batch_per_gpu": 4},
    "gpu": {"calibration": {"batch_per_gpu": 4,
                            "layers": {"a": {"forward": "1 ms", "backward": "2 ms"},
                                       "b": {"forward": "3 ms", "backward": "4 ms"}}}},
    "cluster": {"nodes": 1, "gpus_per_node": 1, "inter_node": {"bandwidth": "1 PB/s", "latency": "0 s"}},
    "strategy": {"kind": "bsp"}, "host": {"launch": "0 s"}
  })");
  doc["cluster"]["nodes"] = p;
  return doc;
}

RunResult run(const Json& doc) {
  return run_analytic(parse_scenario(doc, "v.json"));
}

double harmonic(int n) {
  double h = 0;
  for (int k = 1; k <= n; ++k)
    h += 1.0 / k;
  return h;
}

double mean_of(const std::vector<double>& x) {
  return std::accumulate(x.begin(), x.end(), 0.0) / static_cast<double>(x.size());
}
double sd_of(const std::vector<double>& x) {
  const double m = mean_of(x);
  double s = 0;
  for (double v : x)
    s += (v - m) * (v - m);
  return std::sqrt(s / static_cast<double>(x.size() - 1));
}

} // namespace

TEST_CASE("sim::variability exponential stragglers: the mean iteration is c + mu H_p, with b backups "
          "c + mu (H_{N+b} - H_b)",
          "[sim][variability]") {
  const double c = 10e-3, mu = 10e-3;
  SECTION("p workers, no backup") {
    for (int p : {1, 2, 8, 32}) {
      CAPTURE(p);
      Json doc = workers(p);
      doc["variability"] = {{"compute", {{"distribution", "exponential"}, {"mean", "10 ms"}}}, {"iterations", 10000}};
      const auto r = run(doc);
      REQUIRE(r.variability);
      CHECK(r.variability->copies == p);
      CHECK(r.variability->iteration_s.size() == 10000);
      CHECK_THAT(r.variability->deterministic_s, WithinRel(c, 1e-9));
      // E[max of p Exp(mu)] = mu H_p (Renyi); 10^4 samples: standard error <= 1.3 mu / 100
      CHECK_THAT(r.iteration_time_s, WithinRel(c + mu * harmonic(p), 0.01));
      // the breakdown still adds up to the (mean) iteration
      const auto& b = r.breakdown;
      CHECK_THAT(b.compute_s + b.compression_s + b.exposed_communication_s + b.idle_s,
                 WithinRel(r.iteration_time_s, 1e-9));
      CHECK_THAT(b.compute_s, WithinRel(c, 1e-6)); // copy 0 computes 10 ms in every sample
    }
  }
  SECTION("one worker: the percentiles of c + Exp(mu) are c + mu ln(1 / (1 - q))") {
    Json doc = workers(1);
    doc["variability"] = {{"compute", {{"distribution", "exponential"}, {"mean", "10 ms"}}}, {"iterations", 10000}};
    const auto r = run(doc);
    CHECK_THAT(r.variability->p50_s, WithinRel(c + mu * std::log(2.0), 0.02));
    CHECK_THAT(r.variability->p90_s, WithinRel(c + mu * std::log(10.0), 0.02));
    CHECK_THAT(r.variability->p99_s, WithinRel(c + mu * std::log(100.0), 0.03));
  }
  SECTION("N + b workers wait for the first N") {
    const int p = 8;
    for (int b : {1, 2, 4, 7}) {
      CAPTURE(b);
      Json doc = workers(p);
      doc["strategy"]["backup_workers"] = b;
      doc["variability"] = {{"compute", {{"distribution", "exponential"}, {"mean", "10 ms"}}}, {"iterations", 10000}};
      const auto r = run(doc);
      // the N-th smallest of N + b Exp(mu) has mean mu (H_{N+b} - H_b)
      CHECK_THAT(r.iteration_time_s, WithinRel(c + mu * (harmonic(p) - harmonic(b)), 0.01));
      CHECK(r.backup_workers == b);
      // throughput counts the N kept replicas' samples: N x batch / iteration
      CHECK_THAT(r.throughput_samples_per_s, WithinRel((p - b) * 4 / r.iteration_time_s, 1e-9));
    }
  }
}

TEST_CASE("sim::variability backup workers against enumeration of every draw", "[sim][variability]") {
  // Three workers, each iteration's compute 10 ms x one of {0.5, 5/6, 5/3} (samples 6, 10, 20 ms, mean 12 ms), drawn
  // once per worker and iteration: with b backups the iteration is the (3 - b)-th smallest of the three, whose
  // expectation and variance the 27 equally likely draws give exactly.
  const std::vector<double> factor{6.0 / 12, 10.0 / 12, 20.0 / 12};
  for (int b : {0, 1, 2}) {
    CAPTURE(b);
    double sum = 0, sum2 = 0;
    for (double f0 : factor)
      for (double f1 : factor)
        for (double f2 : factor) {
          std::vector<double> t{10e-3 * f0, 10e-3 * f1, 10e-3 * f2};
          std::sort(t.begin(), t.end());
          const double it = t[static_cast<std::size_t>(2 - b)];
          sum += it;
          sum2 += it * it;
        }
    const double mean = sum / 27, sd = std::sqrt(sum2 / 27 - mean * mean);
    Json doc = workers(3);
    doc["strategy"]["backup_workers"] = b;
    doc["variability"] = {{"compute", {{"distribution", "empirical"}, {"samples", {"6 ms", "10 ms", "20 ms"}}}},
                          {"iterations", 20000},
                          {"seed", 7}};
    const auto r = run(doc);
    // within four standard errors of the exact expectation
    CHECK_THAT(r.iteration_time_s, WithinAbs(mean, 4 * sd / std::sqrt(20000.0)));
    CHECK_THAT(sd_of(r.variability->iteration_s), WithinRel(sd, 0.03));
    // every sample is one of the three values
    for (double it : r.variability->iteration_s)
      CHECK(std::any_of(factor.begin(), factor.end(), [&](double f) { return std::abs(it - 10e-3 * f) < 1e-12; }));
  }
}

TEST_CASE("sim::variability factors of mean 1: per task and per worker-iteration moments", "[sim][variability]") {
  SECTION("lognormal per task on one worker: mean 10 ms, variance cv^2 (1 + 9 + 16 + 4) ms^2") {
    Json doc = workers(1);
    doc["variability"] = {{"compute", {{"distribution", "lognormal"}, {"cv", 0.5}}}, {"iterations", 20000}};
    const auto r = run(doc);
    const auto& x = r.variability->iteration_s;
    const double sd = 0.5 * std::sqrt(30.0) * 1e-3;
    CHECK_THAT(mean_of(x), WithinAbs(10e-3, 4 * sd / std::sqrt(20000.0)));
    CHECK_THAT(sd_of(x), WithinRel(sd, 0.05));
  }
  SECTION("normal per iteration on one worker: the whole 10 ms scaled by one factor, sd 1 ms") {
    Json doc = workers(1);
    doc["variability"] = {{"compute", {{"distribution", "normal"}, {"cv", 0.1}, {"per", "iteration"}}},
                          {"iterations", 20000}};
    const auto r = run(doc);
    const auto& x = r.variability->iteration_s;
    CHECK_THAT(mean_of(x), WithinAbs(10e-3, 4 * 1e-3 / std::sqrt(20000.0)));
    CHECK_THAT(sd_of(x), WithinRel(1e-3, 0.03));
  }
  SECTION("communication: one lognormal factor per collective, shared by its members") {
    Json doc = workers(4);
    doc["cluster"]["inter_node"] = {{"bandwidth", "1 MB/s"}, {"latency", "0 s"}}; // 12 B: 18 us of ring
    doc["model"]["layers"][0]["params"] = 10000;                                  // 40,008 B: 60 ms
    doc["variability"] = {{"communication", {{"distribution", "lognormal"}, {"cv", 0.2}}}, {"iterations", 20000}};
    const auto r = run(doc);
    const double comm = r.variability->deterministic_s - 10e-3;
    REQUIRE(comm > 50e-3);
    const auto& x = r.variability->iteration_s;
    // iteration = 10 ms + comm x f: the 4 workers draw nothing of their own, so no max builds up
    CHECK_THAT(mean_of(x), WithinAbs(r.variability->deterministic_s, 4 * 0.2 * comm / std::sqrt(20000.0)));
    CHECK_THAT(sd_of(x), WithinRel(0.2 * comm, 0.05));
  }
}

TEST_CASE("sim::variability empirical samples from the scenario's measured steps", "[sim][variability]") {
  // measured.steps 5 ms and 15 ms (mean 10 ms): factors 0.5 and 1.5 of the worker's 10 ms, drawn per iteration, so
  // every sample is 5 or 15 ms.
  Json doc = workers(1);
  doc["measured"] = {{"steps", {"5 ms", "15 ms"}}};
  doc["variability"] = {{"compute", {{"distribution", "empirical"}, {"samples", "measured"}}}, {"iterations", 1000}};
  const auto r = run(doc);
  int low = 0, high = 0;
  for (double it : r.variability->iteration_s) {
    low += std::abs(it - 5e-3) < 1e-12 ? 1 : 0;
    high += std::abs(it - 15e-3) < 1e-12 ? 1 : 0;
  }
  CHECK(low + high == 1000);
  CHECK(low > 400);
  CHECK(high > 400);
}

TEST_CASE("sim::variability draws are reproducible: same seed, same samples; another seed, others",
          "[sim][variability]") {
  Json doc = workers(4);
  doc["variability"] = {{"compute", {{"distribution", "lognormal"}, {"cv", 0.3}}},
                        {"data_loading", {{"distribution", "exponential"}, {"mean", "1 ms"}}},
                        {"iterations", 200},
                        {"seed", 42}};
  const auto a = run(doc), b = run(doc);
  CHECK(a.variability->iteration_s == b.variability->iteration_s);
  doc["variability"]["seed"] = 43;
  const auto c = run(doc);
  CHECK(a.variability->iteration_s != c.variability->iteration_s);
  // without variability the figures are the deterministic schedule's
  doc.erase("variability");
  const auto d = run(doc);
  CHECK(!d.variability);
  CHECK(d.iteration_time_s == a.variability->deterministic_s);
}

TEST_CASE("sim::variability with ps-ssp: the barrier's c + mu H_p at bound 0, c + mu when it never binds, falling "
          "with the bound between",
          "[sim][variability][ssp]") {
  // Exponential stragglers once per worker and iteration (Ho et al.'s motivation for SSP): with s = 0 every key's pull
  // waits for the slowest worker's push, so each iteration lasts c + the largest of p delays, c + mu H_p on average
  // (ps-sync's Monte Carlo gives the same); a bound no worker reaches lets each go at c + mu; a bound s between
  // absorbs a straggler unless it falls s iterations behind. 2,000 iterations of 8 workers: the standard error of the
  // barrier's mean is ~0.3 ms of 45 ms.
  const double c = 10e-3, mu = 10e-3;
  const int p = 8;
  Json doc = workers(p);
  doc["strategy"] = {{"kind", "ps-ssp"}};
  doc["variability"] = {{"compute", {{"distribution", "exponential"}, {"mean", "10 ms"}}}, {"iterations", 2000}};
  double previous = 1;
  for (int bound : {0, 1, 4, 1000000}) {
    CAPTURE(bound);
    doc["strategy"]["staleness_bound"] = bound;
    const auto r = run(doc);
    REQUIRE(r.variability);
    CHECK(r.variability->copies == p);
    CHECK(r.variability->iteration_s.size() >= static_cast<std::size_t>(2000 * p));
    CHECK_THAT(r.variability->deterministic_s, WithinRel(c, 1e-6));
    CHECK(r.parameter_server->async->clock_lead_max <= bound);
    CHECK(r.iteration_time_s < previous);
    previous = r.iteration_time_s;
    if (bound == 0)
      CHECK_THAT(r.iteration_time_s, WithinRel(c + mu * harmonic(p), 0.02));
    if (bound == 1000000)
      CHECK_THAT(r.iteration_time_s, WithinRel(c + mu, 0.02));
    if (bound == 4) // the bound binds: some worker reaches it
      CHECK(r.parameter_server->async->clock_lead_max == 4);
  }
  // ps-sync's Monte Carlo of the same stragglers agrees with the barrier
  Json sync = doc;
  sync["strategy"] = {{"kind", "ps-sync"}};
  sync["variability"]["iterations"] = 4000;
  CHECK_THAT(run(sync).iteration_time_s, WithinRel(c + mu * harmonic(p), 0.02));
  // the same seed gives the same iterations
  doc["strategy"]["staleness_bound"] = 1;
  CHECK(run(doc).variability->iteration_s == run(doc).variability->iteration_s);
}

TEST_CASE("sim::variability refuses what it does not model, naming the path", "[sim][variability]") {
  const auto fails = [](Json doc, const std::string& pointer, const std::string& text) {
    CAPTURE(doc.dump());
    try {
      (void)run(doc);
      FAIL("no error");
    } catch (const InputError& e) {
      CHECK(e.pointer() == pointer);
      CHECK_THAT(e.detail(), Contains(text));
    }
  };
  const Json exp = {{"compute", {{"distribution", "exponential"}, {"mean", "1 ms"}}}};
  Json doc = workers(4);
  doc["variability"] = Json::object();
  fails(doc, "/variability", "gives no distribution");
  doc["variability"] = {{"compute", {{"distribution", "gamma"}}}};
  fails(doc, "/variability/compute/distribution", "gamma");
  doc["variability"] = {{"compute", {{"distribution", "lognormal"}}}};
  fails(doc, "/variability/compute/cv", "missing");
  doc["variability"] = {{"compute", {{"distribution", "normal"}, {"cv", 2}}}};
  fails(doc, "/variability/compute/cv", "");
  doc["variability"] = {{"compute", {{"distribution", "exponential"}, {"mean", "1 ms"}, {"per", "task"}}}};
  fails(doc, "/variability/compute/per", "once per worker and iteration");
  doc["variability"] = {{"compute", {{"distribution", "exponential"}, {"mean", "1"}}}};
  fails(doc, "/variability/compute/mean", "");
  doc["variability"] = {{"compute", {{"distribution", "empirical"}, {"samples", Json::array()}}}};
  fails(doc, "/variability/compute/samples", "1 to 1,000,000");
  doc["variability"] = {{"compute", {{"distribution", "empirical"}, {"samples", {"1 ms", "-1 ms"}}}}};
  fails(doc, "/variability/compute/samples/1", "");
  doc["variability"] = {{"compute", {{"distribution", "empirical"}, {"samples", "measured"}}}};
  fails(doc, "/variability/compute/samples", "measured.steps");
  doc["variability"] = exp;
  doc["measured"] = {{"steps", Json::array()}};
  fails(doc, "/measured/steps", "1 to 1,000,000 times");
  doc.erase("measured");
  doc["variability"] = exp;
  doc["variability"]["iterations"] = 0;
  fails(doc, "/variability/iterations", "");
  doc["variability"] = exp;
  doc["variability"]["iterations"] = 1000000;
  doc["cluster"]["nodes"] = 65536;
  fails(doc, "/variability/iterations", "task timings");
  doc = workers(4);
  doc["variability"] = exp;
  doc["variability"]["communication"] = {{"distribution", "normal"}, {"cv", 0.1}};
  doc["engine"] = "flow"; // the flow engine samples (tests/flow/test_variability_flow.cpp), but draws no collective
  fails(doc, "/variability/communication", "flow engine");
  doc = workers(4);
  doc["variability"] = exp;
  doc["strategy"] = {{"kind", "ps-async"}};
  fails(doc, "/variability", "ps-async");
  doc["strategy"] = {{"kind", "ps-ssp"}, {"staleness_bound", 1}};
  doc["gpu"]["comm_slowdown"] = 0.2;
  fails(doc, "/strategy/kind", "comm_slowdown");
  doc = workers(64);
  doc["strategy"] = {{"kind", "ps-ssp"}, {"staleness_bound", 1}};
  doc["variability"] = exp;
  doc["variability"]["iterations"] = 1000000;
  fails(doc, "/variability/iterations", "ps-ssp would replay");
  doc = workers(4);
  doc["variability"] = exp;
  doc["gpu"]["comm_slowdown"] = 0.2;
  fails(doc, "/variability", "comm_slowdown");
  doc = workers(4);
  doc["strategy"]["backup_workers"] = 4;
  fails(doc, "/strategy/backup_workers", "below the data-parallel degree");
  doc["strategy"] = {{"kind", "ps-async"}, {"backup_workers", 1}};
  fails(doc, "/strategy/backup_workers", "synchronous");
}

TEST_CASE("sim::variability with zero spread replays every shipped scenario's deterministic iteration",
          "[sim][variability][scenarios]") {
  // cv 0 and a 0 s delay draw nothing that changes a task: every sample must be the deterministic iteration, read off
  // the replay of every copy in the schedule's stream order as finalize reads the list schedule (makespan, ps-sync's
  // and the asynchronous pipelines' windows, host steady state). Scenarios whose strategy the sampler refuses are
  // skipped (ps-async, ByteScheduler's credit).
  const std::filesystem::path dir = std::filesystem::path(DDLSIM_SOURCE_DIR) / "scenarios";
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".json")
      files.push_back(e.path());
  std::sort(files.begin(), files.end());
  // and, beside each scenario as shipped, the windows it may not reach: ps-sync's unrolled iterations, PipeDream-2BW
  std::vector<std::pair<std::filesystem::path, Json>> cases;
  for (const auto& f : files)
    cases.emplace_back(f, Json::object());
  cases.emplace_back(dir / "quickstart.json", Json{{"strategy", {{"kind", "ps-sync"}}}});
  cases.emplace_back(dir / "spectrain-vgg16.json",
                     Json{{"pipeline", {{"schedule", "pipedream-2bw"}, {"weight_prediction", nullptr}}}});
  int replayed = 0;
  for (const auto& [f, patch] : cases) {
    CAPTURE(f.filename().string(), patch.dump());
    Json doc = load_json_file(f.string());
    doc.merge_patch(patch);
    doc.erase("sweep");
    doc["engine"] = "analytic";
    doc["variability"] = {{"compute", {{"distribution", "normal"}, {"cv", 0}}},
                          {"data_loading", {{"distribution", "exponential"}, {"mean", "0 s"}}},
                          {"communication", {{"distribution", "lognormal"}, {"cv", 0}, {"per", "iteration"}}},
                          {"iterations", 2}};
    const auto s = parse_scenario(doc, f.string());
    if (s.strategy.asynchronous() || s.strategy.kind() == "bytescheduler")
      continue;
    const auto r = run_analytic(s);
    REQUIRE(r.variability);
    for (double it : r.variability->iteration_s)
      CHECK_THAT(it, WithinRel(r.variability->deterministic_s, 1e-12));
    ++replayed;
  }
  CHECK(replayed >= 10);
}
