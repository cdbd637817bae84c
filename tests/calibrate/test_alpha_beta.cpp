// The piecewise α-β fit (calibrate/alpha_beta.hpp) and its evaluation (dag/measured.hpp) against closed forms: data
// made of one, two or three α-β regimes (Hockney: t = α + β·s) must come back as those segments, exactly; noisy data
// keeps the small messages' relative error small. The table alone: tests/dag/test_measured.cpp.
#include "calibrate/alpha_beta.hpp"
#include "support/nccl_data.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <stdexcept>
#include <vector>

using namespace ddlsim::calibrate;
using Catch::Contains;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;
using ddlsim::dag::AlphaBetaSegment;
using ddlsim::dag::Estimate;
using ddlsim::dag::MeasuredTable;
using ddlsim::dag::predict;
using ddlsim::dag::SizeTime;

namespace {

using ddlsim::test::kGiB;
using ddlsim::test::kMiB;

// 8 B, 16 B, ..., 1 GiB (28 sizes, an nccl-tests sweep -b 8 -e 1G -f 2) timed by `time`.
std::vector<SizeTime> sweep(const std::function<double(double)>& time) {
  std::vector<SizeTime> points;
  for (double s = 8; s <= kGiB; s *= 2)
    points.push_back({s, time(s)});
  return points;
}

} // namespace

TEST_CASE("calibrate::fit_piecewise recovers one α-β line exactly", "[calibrate][fit]") {
  // t = 20 us + s / (10 GB/s)
  const double alpha = 20e-6, beta = 1e-10;
  const auto points = sweep([&](double s) { return alpha + beta * s; });
  const auto fit = fit_piecewise(points);
  REQUIRE(fit.segments().size() == 1);
  const AlphaBetaSegment& seg = fit.segments()[0];
  CHECK_THAT(seg.alpha_s, WithinRel(alpha, 1e-9));
  CHECK_THAT(seg.beta_s_per_byte, WithinRel(beta, 1e-9));
  CHECK(seg.first_size_bytes == 8);
  CHECK(seg.last_size_bytes == kGiB);
  CHECK(seg.points == 28);
  CHECK(seg.max_relative_error < 1e-9);
  CHECK(seg.mean_relative_error <= seg.max_relative_error);
  // Beyond the sizes: the same line, flagged.
  const Estimate above = fit.time(8 * kGiB);
  CHECK(above.extrapolated);
  CHECK_THAT(above.time_s, WithinRel(alpha + beta * 8 * kGiB, 1e-9));
  const Estimate below = fit.time(4);
  CHECK(below.extrapolated);
  CHECK_THAT(below.time_s, WithinRel(alpha + beta * 4, 1e-9));
  CHECK_FALSE(fit.time(12345).extrapolated);
}

TEST_CASE("calibrate::fit_piecewise finds the regimes of a protocol switch", "[calibrate][fit]") {
  SECTION("two regimes: (5 us, 2 GB/s) up to 1 MiB, (50 us, 20 GB/s) above") {
    const auto points = sweep([](double s) { return s <= kMiB ? 5e-6 + s / 2e9 : 50e-6 + s / 20e9; });
    const auto fit = fit_piecewise(points);
    REQUIRE(fit.segments().size() == 2);
    const auto& small = fit.segments()[0];
    const auto& large = fit.segments()[1];
    CHECK(small.first_size_bytes == 8);
    CHECK(small.last_size_bytes == kMiB);
    CHECK(large.first_size_bytes == 2 * kMiB);
    CHECK(large.last_size_bytes == kGiB);
    CHECK_THAT(small.alpha_s, WithinRel(5e-6, 1e-9));
    CHECK_THAT(small.beta_s_per_byte, WithinRel(1 / 2e9, 1e-9));
    CHECK_THAT(large.alpha_s, WithinRel(50e-6, 1e-9));
    CHECK_THAT(large.beta_s_per_byte, WithinRel(1 / 20e9, 1e-9));
    // Between the segments, each side of the gap's middle (1.5 MiB) takes its own segment.
    CHECK_THAT(fit.time(1.25 * kMiB).time_s, WithinRel(5e-6 + 1.25 * kMiB / 2e9, 1e-9));
    CHECK_THAT(fit.time(1.75 * kMiB).time_s, WithinRel(50e-6 + 1.75 * kMiB / 20e9, 1e-9));
    CHECK_FALSE(fit.time(1.75 * kMiB).extrapolated);
  }
  SECTION("three regimes, as NCCL's LL, LL128 and Simple protocols") {
    const auto points = sweep([](double s) {
      if (s <= 64 * 1024.0)
        return 10e-6 + s / 1e9;
      if (s <= 16 * kMiB)
        return 60e-6 + s / 8e9;
      return 400e-6 + s / 40e9;
    });
    const auto fit = fit_piecewise(points);
    REQUIRE(fit.segments().size() == 3);
    CHECK(fit.segments()[0].last_size_bytes == 64 * 1024.0);
    CHECK(fit.segments()[1].last_size_bytes == 16 * kMiB);
    CHECK_THAT(fit.segments()[2].beta_s_per_byte, WithinRel(1 / 40e9, 1e-9));
    for (const auto& seg : fit.segments())
      CHECK(seg.max_relative_error < 1e-9);
  }
}

TEST_CASE("calibrate::fit_piecewise weighs small messages by their relative error", "[calibrate][fit]") {
  // t = 20 us + s / (10 GB/s), each point off by +-1 % in turn. Plain least squares on times would fit the 1 GiB
  // rows (0.1 s, +-1 ms of noise) and miss the 20 us latency by far more than it is; relative residuals keep every
  // point, 8 B as 1 GiB, near its 1 %.
  const double alpha = 20e-6, beta = 1e-10;
  int sign = 1;
  auto points = sweep([&](double s) { return (alpha + beta * s) * (1 + 0.01 * (sign = -sign)); });
  const auto fit = fit_piecewise(points);
  CAPTURE(fit.segments().size());
  CHECK_THAT(fit.segments().front().alpha_s, WithinRel(alpha, 0.02));
  CHECK_THAT(fit.segments().back().beta_s_per_byte, WithinRel(beta, 0.02));
  for (const auto& p : points) {
    CAPTURE(p.size_bytes);
    CHECK_THAT(fit.time(p.size_bytes).time_s, WithinRel(p.time_s, 0.021));
  }
  for (const auto& seg : fit.segments())
    CHECK(seg.points >= 3);
}

TEST_CASE("calibrate::fit_piecewise extrapolates monotonically and refuses too few points", "[calibrate][fit]") {
  SECTION("a segment that slopes down holds its edge value outside the sizes") {
    // Five points falling by 1 us per doubling, one segment (min_segment_points = 5): beta < 0.
    const std::vector<SizeTime> points{{1e3, 100e-6}, {2e3, 99e-6}, {4e3, 98e-6}, {8e3, 97e-6}, {16e3, 96e-6}};
    const auto fit = fit_piecewise(points, {.min_segment_points = 5});
    REQUIRE(fit.segments().size() == 1);
    const auto& seg = fit.segments()[0];
    REQUIRE(seg.beta_s_per_byte < 0);
    CHECK(fit.time(1e6).time_s == seg.time(16e3));
    CHECK(fit.time(1e6).extrapolated);
    CHECK(fit.time(0).time_s == seg.time(1e3)); // alpha would be above the smallest size's time
  }
  SECTION("options and point counts") {
    const std::vector<SizeTime> two{{8, 1e-5}, {16, 1e-5}};
    CHECK_THROWS_WITH(fit_piecewise(two), "fit_piecewise: 2 point(s), fewer than the 3 one segment needs "
                                          "(FitOptions::min_segment_points)");
    CHECK_THROWS_WITH(fit_piecewise(two, {.min_segment_points = 1}),
                      Contains("min_segment_points is 1; a segment needs at least 2 points"));
    CHECK_THROWS_WITH(fit_piecewise(two, {.min_segment_points = 2, .noise_floor = 0}), Contains("noise_floor is 0"));
    CHECK(fit_piecewise(two, {.min_segment_points = 2}).segments().size() == 1);
  }
}

TEST_CASE("dag::predict uses the table inside and the fit outside", "[calibrate][fit]") {
  // Fit and table disagree on purpose: the table is the measurement, the fit only the line through it.
  const std::vector<SizeTime> points{{1e3, 10e-6}, {2e3, 11e-6}, {4e3, 15e-6}, {8e3, 19e-6}};
  const MeasuredTable table(points);
  const auto fit = fit_piecewise(points);
  const Estimate inside = predict(table, fit, 3e3);
  CHECK_FALSE(inside.extrapolated);
  CHECK_THAT(inside.time_s, WithinRel(13e-6, 1e-12)); // halfway from 11 to 15 us
  const Estimate outside = predict(table, fit, 16e3);
  CHECK(outside.extrapolated);
  CHECK_THAT(outside.time_s, WithinRel(fit.segments().back().time(16e3), 1e-12));
  CHECK_THAT(outside.time_s, !WithinAbs(table.time(16e3).time_s, 1e-9)); // not the table's fallback
}

TEST_CASE("calibrate::fit_piecewise fits as many sizes as a log may have, in near-linear time (#31 R03)",
          "[calibrate][fit]") {
  // 100,000 sizes 8 B apart (kMaxNcclRows): (5 us, 2 GB/s) up to the switch, (50 us, 20 GB/s) after it. Fitted with
  // every point a candidate breakpoint, this took O(n³) time and n² doubles (80 GB here; 3,200 sizes took 78 s);
  // beyond kExactFitPoints a breakpoint falls at the bound of one of kCandidateBlocks blocks of 391 points.
  const std::size_t n = 100'000, step = (n + kCandidateBlocks - 1) / kCandidateBlocks;
  REQUIRE(step == 391);
  const auto points_switching_at = [&](std::size_t first_large) {
    std::vector<SizeTime> points;
    for (std::size_t i = 0; i < n; ++i) {
      const double s = 8.0 * static_cast<double>(i + 1);
      points.push_back({s, i < first_large ? 5e-6 + s / 2e9 : 50e-6 + s / 20e9});
    }
    return points;
  };
  SECTION("a switch at a block's bound: both regimes exactly") {
    const std::size_t at = 100 * step;
    const auto fit = fit_piecewise(points_switching_at(at));
    REQUIRE(fit.segments().size() == 2);
    const auto& small = fit.segments()[0];
    const auto& large = fit.segments()[1];
    CHECK(small.points == at);
    CHECK(large.first_size_bytes == 8.0 * static_cast<double>(at + 1));
    CHECK_THAT(small.alpha_s, WithinRel(5e-6, 1e-9));
    CHECK_THAT(small.beta_s_per_byte, WithinRel(1 / 2e9, 1e-9));
    CHECK_THAT(large.alpha_s, WithinRel(50e-6, 1e-9));
    CHECK_THAT(large.beta_s_per_byte, WithinRel(1 / 20e9, 1e-9));
  }
  SECTION("a switch inside a block: placed within that block, the regimes beside it exactly") {
    const std::size_t at = 100 * step + 150;
    const auto fit = fit_piecewise(points_switching_at(at));
    REQUIRE(fit.segments().size() >= 2);
    REQUIRE(fit.segments().size() <= 3); // the block holding the switch may be a segment of its own
    for (const auto& seg : fit.segments())
      CHECK(static_cast<std::size_t>(seg.first_size_bytes / 8 - 1) % step == 0); // starts at a block's bound
    const auto& first = fit.segments().front();
    const auto& last = fit.segments().back();
    CHECK(first.points >= at - step);
    CHECK(n - static_cast<std::size_t>(last.first_size_bytes / 8 - 1) >= n - at - step);
    CHECK_THAT(first.time(8), WithinRel(5e-6 + 8 / 2e9, 1e-9));
    CHECK_THAT(last.beta_s_per_byte, WithinRel(1 / 20e9, 1e-9));
  }
}

TEST_CASE("calibrate::fit_piecewise on many sizes only bytes apart near 1 PiB stays finite", "[calibrate][fit]") {
  // 2,000 sizes 1 B apart below 1 PiB: the size column is the constant column to 12 digits, so a block's normal
  // equations are singular to working precision and its segment is measured by α alone.
  std::vector<SizeTime> points;
  for (int i = 0; i < 2000; ++i)
    points.push_back({1125899906842624.0 - 2000 + i, 1e-3 * (1 + 1e-4 * std::sin(i))});
  const auto fit = fit_piecewise(points);
  for (const auto& seg : fit.segments()) {
    CHECK(std::isfinite(seg.alpha_s));
    CHECK(std::isfinite(seg.beta_s_per_byte));
    CHECK(seg.max_relative_error < 2e-4);
  }
}
