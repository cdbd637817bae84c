// The measured table (dag/measured.hpp): linear interpolation between the measured sizes (between two points of one
// α-β regime, that regime), a flagged fallback outside them, bad points refused.
#include "dag/measured.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <stdexcept>

using Catch::Contains;
using Catch::Matchers::WithinRel;
using ddlsim::dag::Estimate;
using ddlsim::dag::MeasuredTable;

TEST_CASE("dag::MeasuredTable interpolates linearly and flags what lies outside", "[dag][measured]") {
  const MeasuredTable table({{100, 10e-6}, {1100, 20e-6}, {3100, 60e-6}});
  SECTION("at the measured sizes, the measurements") {
    CHECK(table.time(100).time_s == 10e-6);
    CHECK(table.time(1100).time_s == 20e-6);
    CHECK(table.time(3100).time_s == 60e-6);
    CHECK_FALSE(table.time(3100).extrapolated);
  }
  SECTION("between them, the line through the two neighbours") {
    // (10 + 10 * 400/1000) us and (20 + 40 * 1500/2000) us
    CHECK_THAT(table.time(500).time_s, WithinRel(14e-6, 1e-12));
    CHECK_THAT(table.time(2600).time_s, WithinRel(50e-6, 1e-12));
    CHECK_FALSE(table.time(2600).extrapolated);
    CHECK(table.covers(100));
    CHECK(table.covers(3100));
  }
  SECTION("outside, the latency floor below and the largest size's throughput above, flagged") {
    CHECK_FALSE(table.covers(99));
    CHECK_FALSE(table.covers(3101));
    const Estimate below = table.time(8);
    CHECK(below.extrapolated);
    CHECK(below.time_s == 10e-6);
    const Estimate above = table.time(6200);
    CHECK(above.extrapolated);
    CHECK_THAT(above.time_s, WithinRel(120e-6, 1e-12)); // 60 us * 6200 / 3100
  }
  SECTION("bad points") {
    CHECK_THROWS_WITH(MeasuredTable({}), "MeasuredTable: no points");
    CHECK_THROWS_WITH(MeasuredTable({{100, 1e-6}, {100, 2e-6}}),
                      "MeasuredTable: sizes must increase strictly, but point 1 has 100 B after 100 B");
    CHECK_THROWS_WITH(MeasuredTable({{100, 1e-6}, {200, 0}}), Contains("point 1 (size 200 B) has time 0 s"));
    CHECK_THROWS_AS(MeasuredTable({{-1, 1e-6}}), std::invalid_argument);
    CHECK_THROWS_AS(MeasuredTable({{1, std::nan("")}}), std::invalid_argument);
  }
}
