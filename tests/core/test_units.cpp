// core units: the strict parser against exact conversions (bits vs bytes, SI vs binary prefixes).
#include "core/units.hpp"

#include <catch2/catch.hpp>

#include <stdexcept>
#include <tuple>

using namespace ddlsim;
using Catch::Matchers::WithinRel;

TEST_CASE("core::parse_quantity converts units exactly", "[core][units]") {
  auto [text, dim, expected] = GENERATE(table<const char*, Dimension, double>({
      {"10 Gbps", Dimension::bandwidth, 1.25e9}, // 10e9 bits / 8
      {"12 GB/s", Dimension::bandwidth, 12e9},
      {"125MBps", Dimension::bandwidth, 125e6}, // SimGrid spelling, bytes
      {"100 Gb/s", Dimension::bandwidth, 12.5e9},
      {"1 Gbit/s", Dimension::bandwidth, 1.25e8},
      {"25 MiB", Dimension::bytes, 26214400.0},
      {"1 KiB", Dimension::bytes, 1024.0},
      {"4 kB", Dimension::bytes, 4000.0},
      {"8 Mb", Dimension::bytes, 1e6}, // megabits
      {"5 us", Dimension::time, 5e-6},
      {"5us", Dimension::time, 5e-6},
      {"252.9 ms", Dimension::time, 0.2529},
      {"2 min", Dimension::time, 120.0},
      {"0.857 ns/B", Dimension::inverse_bandwidth, 0.857e-9},
      {"1 s/GB", Dimension::inverse_bandwidth, 1e-9},
      {"15.7 TFLOPS", Dimension::flop_rate, 15.7e12},
      {"312 TFLOP/s", Dimension::flop_rate, 312e12},
      {"4.1 GFLOP", Dimension::flops, 4.1e9},
      {"1e3 B", Dimension::bytes, 1000.0},
      {"-3 us", Dimension::time, -3e-6}, // sign accepted here; ranges are the loader's job
  }));
  CAPTURE(text);
  CHECK_THAT(parse_quantity(text, dim), WithinRel(expected, 1e-15));
}

TEST_CASE("core::parse_quantity rejects what it cannot read, saying how to fix it", "[core][units]") {
  auto [text, dim, phrase] = GENERATE(table<const char*, Dimension, const char*>({
      {"10", Dimension::bandwidth, "has no unit"},
      {"10 GB", Dimension::bandwidth, "append '/s'"},
      {"10 Gbps", Dimension::bytes, "is a rate"},
      {"10 KB", Dimension::bytes, "'K' is not an SI prefix"},
      {"fast", Dimension::time, "does not start with a number"},
      {"", Dimension::time, "empty time"},
      {"5 parsecs", Dimension::time, "unknown unit 'parsecs'"},
      {"4 GFLOP", Dimension::flop_rate, "not a rate"},
      {"inf s", Dimension::time, "does not start with a number"},
  }));
  CAPTURE(text);
  REQUIRE_THROWS_WITH(parse_quantity(text, dim), Catch::Contains(phrase));
  REQUIRE_THROWS_AS(parse_quantity(text, dim), std::invalid_argument);
}

TEST_CASE("core::format_* prints human units", "[core][units]") {
  CHECK(format_time(1.5e-6) == "1.5 us");
  CHECK(format_time(0.2529) == "252.9 ms");
  CHECK(format_bytes(26214400.0) == "25 MiB");
  CHECK(format_bandwidth(1.25e9) == "1.25 GB/s");
}
