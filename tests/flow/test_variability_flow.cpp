// Sampled iterations on the flow engine (issue #16, docs/variability.md): the deterministic iteration and the sampled
// ones run one after another in one simulation; every replica draws what the analytic engine's Monte Carlo draws for
// it (same seed, same order), so where nothing contends each sample equals the analytic one; where a link is shared
// the flows decide. Refusals name their paths.
#include "core/error.hpp"
#include "core/json.hpp"
#include "sim/analytic/analytic.hpp"
#include "sim/flow/flow_engine.hpp"
#include "sim/spec/scenario.hpp"
#include "support/run_in_child.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <stdexcept>

using namespace ddlsim;
using namespace ddlsim::sim;
using Catch::Matchers::Contains;
using Catch::Matchers::WithinRel;

namespace {

// p single-GPU workers of two calibrated layers (10 ms of compute) and 25 M parameters (a 100 MB allreduce, ~160 ms
// of ring on 10 Gb/s), on a star: one NIC per node, nothing shared but the switch, which does not limit.
Json workers(int p) {
  Json doc = Json::parse(R"({
    "model": {"layers": [{"name": "a", "params": 5000000, "fwd_flops": 1},
                         {"name": "b", "params": 20000000, "fwd_flops": 1}], "batch_per_gpu": 4},
    "gpu": {"calibration": {"batch_per_gpu": 4,
                            "layers": {"a": {"forward": "1 ms", "backward": "2 ms"},
                                       "b": {"forward": "3 ms", "backward": "4 ms"}}}},
    "cluster": {"nodes": 1, "gpus_per_node": 1, "inter_node": {"bandwidth": "10 Gbps", "latency": "25 us"}},
    "strategy": {"kind": "wfbp"}, "host": {"launch": "0 s"},
    "variability": {"compute": {"distribution": "lognormal", "cv": 0.3},
                    "data_loading": {"distribution": "exponential", "mean": "5 ms"},
                    "iterations": 200, "seed": 11}
  })");
  doc["cluster"]["nodes"] = p;
  return doc;
}

std::vector<double> flow_samples(const Json& doc) {
  const auto report = test::run_in_child([&](test::ChildReport& out) {
    auto r = run_flow(parse_scenario(doc, "v.json"));
    out.values = r.variability->iteration_s;
    out.values.push_back(r.iteration_time_s);
    out.values.push_back(r.variability->deterministic_s);
    out.values.push_back(static_cast<double>(r.variability->copies));
  });
  if (!report.error.empty())
    throw std::runtime_error(report.error);
  return report.values;
}

} // namespace

TEST_CASE("flow::sampled iterations draw what the analytic Monte Carlo draws: equal samples where nothing contends",
          "[flow][variability]") {
  // Lognormal compute per task and an exponential data-loading delay per worker and iteration, WFBP's allreduces
  // behind backward: each of 200 samples on 4 workers within 0.1 % of the analytic engine's (its closed forms and the
  // flows agree without contention; tests/flow/test_flow_engine.cpp).
  const Json doc = workers(4);
  const auto analytic = run_analytic(parse_scenario(doc, "v.json"));
  REQUIRE(analytic.variability);
  const auto& a = analytic.variability->iteration_s;
  const auto flow = flow_samples(doc);
  REQUIRE(flow.size() == a.size() + 3);
  for (std::size_t i = 0; i < a.size(); ++i) {
    CAPTURE(i);
    CHECK_THAT(flow[i], WithinRel(a[i], 1e-3));
  }
  CHECK_THAT(flow[a.size()], WithinRel(analytic.iteration_time_s, 1e-3));
  CHECK_THAT(flow[a.size() + 1], WithinRel(analytic.variability->deterministic_s, 1e-3));
  CHECK(flow[a.size() + 2] == 4);
  // the draws vary the samples: not all equal, and the mean above the deterministic iteration (the slowest of 4)
  CHECK(*std::max_element(a.begin(), a.end()) > 1.05 * *std::min_element(a.begin(), a.end()));
  CHECK(analytic.iteration_time_s > analytic.variability->deterministic_s);
}

TEST_CASE("flow::sampled iterations are reproducible: the same seed gives the same samples, another seed others",
          "[flow][variability]") {
  // Two GPUs per node sharing its NIC: every replica simulated (no node symmetry), each with its own draws.
  Json doc = workers(2);
  doc["cluster"]["gpus_per_node"] = 2;
  doc["cluster"]["intra_node"] = {{"bandwidth", "10 GB/s"}, {"latency", "2 us"}};
  doc["variability"]["iterations"] = 50;
  const auto first = flow_samples(doc);
  const auto again = flow_samples(doc);
  CHECK(first == again);
  doc["variability"]["seed"] = 12;
  CHECK(flow_samples(doc) != first);
}

TEST_CASE("flow::sampled iterations refuse what they do not model, naming the path", "[flow][variability][errors]") {
  const auto fails = [](Json doc, const std::string& pointer, const std::string& text) {
    CAPTURE(doc.dump());
    const auto report = test::run_in_child([&](test::ChildReport& out) {
      try {
        (void)run_flow(parse_scenario(doc, "v.json"));
        out.texts.push_back("no error");
      } catch (const InputError& e) {
        out.texts.push_back(e.pointer());
        out.texts.push_back(e.detail());
      }
    });
    REQUIRE(report.error.empty());
    REQUIRE(report.texts.size() == 2);
    CHECK(report.texts[0] == pointer);
    CHECK_THAT(report.texts[1], Contains(text));
  };
  Json doc = workers(4);
  doc["engine"] = "flow";
  Json comm = doc;
  comm["variability"]["communication"] = {{"distribution", "normal"}, {"cv", 0.1}};
  fails(comm, "/variability/communication", "flows");
  Json backups = doc;
  backups["strategy"]["backup_workers"] = 1;
  fails(backups, "/strategy/backup_workers", "analytic");
  Json big = workers(16);
  big["engine"] = "flow";
  big["variability"]["iterations"] = 1000000;
  fails(big, "/variability/iterations", "small cases");
}
