// Pipeline schedules (dag/pipeline.hpp) timed by the analytic scheduler against the closed forms of issue #11:
// uniform stages, per-micro-batch stage forward t_f and backward t_b, free or fixed-cost transfers.
#include "dag/pipeline.hpp"
#include "sim/plan/schedule.hpp"

#include <catch2/catch.hpp>

#include <vector>

using namespace ddlsim;
using namespace ddlsim::dag;
using Catch::Matchers::WithinRel;

namespace {

// p ranks on GPUs 0 .. p-1 (one replica), v chunks each, every virtual stage t_f / v forward and t_b / v backward;
// no data loading, copies, updates or gradient groups.
PipelinePlan uniform(PipelineSchedule schedule, int p, int m, int v, double tf, double tb) {
  PipelinePlan plan;
  plan.schedule = schedule;
  plan.micro_batches = m;
  plan.chunks = v;
  plan.gpus_per_node = p;
  for (int s = 0; s < p * v; ++s)
    plan.stages.push_back(
        {.first_layer = s, .end_layer = s + 1, .forward_s = tf / v, .backward_s = tb / v, .activation_bytes = 1e6});
  for (int r = 0; r < p; ++r)
    plan.ranks.push_back({.gpu = r, .groups = {}, .update_s = 0, .data_parallel = {{r}}});
  return plan;
}

// Sets every transfer's duration to c and returns the makespan.
double makespan(IterationGraph g, double c = 0) {
  for (std::size_t v = 0; v < g.size(); ++v)
    if (g.task(v).collective == Collective::point_to_point)
      g.task(v).duration_s = c;
  return sim::makespan_of(sim::schedule(g));
}

std::vector<int> in_flight(PipelineSchedule schedule, int p, int m, int v) {
  std::vector<int> out;
  for (int r = 0; r < p; ++r)
    out.push_back(in_flight_passes(pipeline_ops(schedule, p, m, v, r)));
  return out;
}

} // namespace

TEST_CASE("pipeline: GPipe and 1F1B take (m + p - 1)(t_f + t_b) with free transfers", "[pipeline][closed-form]") {
  for (auto schedule : {PipelineSchedule::gpipe, PipelineSchedule::one_f_one_b}) {
    CAPTURE(pipeline_schedule_name(schedule));
    CHECK_THAT(makespan(build_pipeline(uniform(schedule, 4, 8, 1, 1, 2))), WithinRel(33.0, 1e-9));
    CHECK_THAT(makespan(build_pipeline(uniform(schedule, 8, 32, 1, 1, 2))), WithinRel(117.0, 1e-9));
    CHECK_THAT(makespan(build_pipeline(uniform(schedule, 1, 5, 1, 1, 2))), WithinRel(15.0, 1e-9));
  }
}

TEST_CASE("pipeline: interleaved 1F1B takes m(t_f + t_b) + (p - 1)(t_f + t_b) / v", "[pipeline][closed-form]") {
  const auto interleaved = PipelineSchedule::interleaved_1f1b;
  CHECK_THAT(makespan(build_pipeline(uniform(interleaved, 4, 8, 2, 1, 2))), WithinRel(28.5, 1e-9));
  CHECK_THAT(makespan(build_pipeline(uniform(interleaved, 4, 8, 4, 1, 2))), WithinRel(26.25, 1e-9));
  CHECK_THAT(makespan(build_pipeline(uniform(interleaved, 8, 32, 2, 1, 2))), WithinRel(106.5, 1e-9));
  // One chunk is 1F1B.
  CHECK_THAT(makespan(build_pipeline(uniform(interleaved, 4, 8, 1, 1, 2))), WithinRel(33.0, 1e-9));
  CHECK_THROWS_AS(pipeline_ops(interleaved, 4, 6, 2, 0), std::invalid_argument); // m not divisible by p
}

TEST_CASE("pipeline: GPipe with a transfer time c takes m(t_f + t_b) + (p - 1)(t_f + t_b + 2c)",
          "[pipeline][closed-form]") {
  const double c = 0.25;
  for (int p : {2, 4, 6}) {
    CAPTURE(p);
    const int m = 8;
    CHECK_THAT(makespan(build_pipeline(uniform(PipelineSchedule::gpipe, p, m, 1, 1, 2)), c),
               WithinRel(m * 3.0 + (p - 1) * (3.0 + 2 * c), 1e-9));
  }
}

TEST_CASE("pipeline: micro-batches in flight per stage", "[pipeline][memory]") {
  CHECK(in_flight(PipelineSchedule::one_f_one_b, 4, 8, 1) == std::vector<int>{4, 3, 2, 1});
  CHECK(in_flight(PipelineSchedule::gpipe, 4, 8, 1) == std::vector<int>{8, 8, 8, 8});
  CHECK(in_flight(PipelineSchedule::interleaved_1f1b, 4, 8, 2) == std::vector<int>{11, 9, 7, 5});
  // Fewer micro-batches than stages: 1F1B holds all of them on the first stages.
  CHECK(in_flight(PipelineSchedule::one_f_one_b, 4, 2, 1) == std::vector<int>{2, 2, 2, 1});
}

TEST_CASE("pipeline: every rank runs each pass once, forward before backward", "[pipeline][order]") {
  for (auto [schedule, v] :
       {std::pair{PipelineSchedule::gpipe, 1}, std::pair{PipelineSchedule::one_f_one_b, 1},
        std::pair{PipelineSchedule::interleaved_1f1b, 2}, std::pair{PipelineSchedule::interleaved_1f1b, 4}}) {
    for (int r = 0; r < 4; ++r) {
      CAPTURE(pipeline_schedule_name(schedule), v, r);
      const auto ops = pipeline_ops(schedule, 4, 8, v, r);
      REQUIRE(ops.size() == static_cast<std::size_t>(2 * 8 * v));
      std::vector<int> seen(static_cast<std::size_t>(8 * v), 0); // 1 after the forward, 2 after the backward
      for (const auto& op : ops) {
        auto& state = seen[static_cast<std::size_t>(op.chunk * 8 + op.micro_batch)];
        CHECK(state == (op.forward ? 0 : 1));
        state = op.forward ? 1 : 2;
      }
      CHECK(std::all_of(seen.begin(), seen.end(), [](int s) { return s == 2; }));
    }
  }
}

TEST_CASE("pipeline: the bubble of the simulated schedule is the closed form's", "[pipeline][closed-form]") {
  // Each rank computes m(t_f + t_b) of the makespan; the rest is its bubble.
  for (auto [schedule, p, m, v] :
       {std::tuple{PipelineSchedule::gpipe, 4, 8, 1}, std::tuple{PipelineSchedule::one_f_one_b, 8, 32, 1},
        std::tuple{PipelineSchedule::interleaved_1f1b, 4, 8, 2},
        std::tuple{PipelineSchedule::interleaved_1f1b, 8, 32, 2}}) {
    CAPTURE(pipeline_schedule_name(schedule), p, m, v);
    const double t = makespan(build_pipeline(uniform(schedule, p, m, v, 1, 2)));
    CHECK_THAT(1 - m * 3.0 / t, WithinRel(bubble_fraction_closed_form(schedule, p, m, v), 1e-9));
  }
}
