// Measured collectives from the shared nccl-tests logs, written as a version-2 calibration (dag/calibration.hpp):
// what is kept per communicator, the round trip write -> read -> write (same bytes), version 1 still read, an unknown
// version refused.
#include "calibrate/measured.hpp"
#include "core/error.hpp"
#include "core/json.hpp"
#include "dag/calibration.hpp"
#include "support/nccl_data.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <string>
#include <vector>

using namespace ddlsim;
using namespace ddlsim::calibrate;
using Catch::Matchers::WithinRel;

namespace {

using ddlsim::test::kNcclTestsDir;

dag::Calibration h100_calibration() {
  const std::vector<std::string> files{kNcclTestsDir + "/h100_2x8_allreduce_8B-8GiB.txt",
                                       kNcclTestsDir + "/h100_1x8_sweep_32MiB-16GiB.log"};
  // The 2 x 8 log does not name its collective (nccl-tests before 2.16.7); the 1 x 8 sweep names each test.
  std::vector<NcclTestsLog> logs{read_nccl_tests(files[0], {.collective = NcclCollective::all_reduce}),
                                 read_nccl_tests(files[1])};
  const auto measured = measured_collectives(logs, files);
  dag::Calibration c;
  c.source = "test";
  c.collectives = measured.collectives;
  return c;
}

} // namespace

TEST_CASE("calibrate: nccl-tests logs become one measured collective per communicator", "[calibrate]") {
  const auto c = h100_calibration();
  // 2 x 8 all_reduce; 1 x 8: all_reduce, all_gather, reduce_scatter and sendrecv (as point-to-point) kept, alltoall
  // left out (ddlsim does not simulate it).
  std::vector<std::string> kept;
  for (const auto& m : c.collectives)
    kept.push_back(fmt::format("{} {}x{}", collective_name(m.collective), m.nodes, m.ranks));
  std::sort(kept.begin(), kept.end());
  CHECK(kept == std::vector<std::string>{"allgather 1x8", "allreduce 1x8", "allreduce 2x16", "point_to_point 1x8",
                                         "reduce_scatter 1x8"});
  for (const auto& m : c.collectives) {
    CAPTURE(collective_name(m.collective), m.ranks);
    REQUIRE_FALSE(m.table.empty());
    for (std::size_t i = 1; i < m.table.size(); ++i)
      CHECK(m.table[i].size_bytes > m.table[i - 1].size_bytes);
    // The segments cover the fitted sizes, in order, and say how well they fit.
    REQUIRE_FALSE(m.segments.empty());
    CHECK(m.segments.back().last_size_bytes == m.table.back().size_bytes);
    for (const auto& s : m.segments)
      CHECK(s.max_relative_error >= s.mean_relative_error);
  }
  // The 2 x 8 sweep's 8 B row: the faster of 135.8 us (out-of-place) and 123.5 us (in-place).
  for (const auto& m : c.collectives)
    if (m.ranks == 16) {
      CHECK(m.table.front().size_bytes == 8);
      CHECK_THAT(m.table.front().time_s, WithinRel(123.5e-6, 1e-12));
      CHECK(m.table.size() == 31);
    }
}

TEST_CASE("calibrate: a version-2 calibration reads back to the same bytes", "[calibrate][calibration]") {
  auto c = h100_calibration();
  c.batch_per_gpu = 32;
  c.layers["conv1"] = {1.2e-3, 2.3e-3, 3.1e-4, 4.2e-4};
  c.layers["fc"] = {1e-4, 2e-4}; // no host times measured
  c.selection["sort"] = {3e-5, 7e-11, 1e-9};
  c.host = {
      .launch_s = 1.2e-5, .iteration_s = 1.1e-3, .data_loading_s = 9.5e-3, .prefetch = false, .h2d_bandwidth = 6.2e9};
  c.optimizer = {.gpu_s = 2.4e-3, .host_s = 2.1e-2};
  const std::string first = dag::calibration_json(c).dump(2);
  const auto read = dag::parse_calibration(Json::parse(first), "c.json", "");
  CHECK(read.version == 2);
  CHECK(read.collectives == c.collectives);
  CHECK(read.layers == c.layers);
  CHECK(read.host == c.host);
  CHECK(read.optimizer == c.optimizer);
  CHECK(read.layers.at("conv1").backward_s == 2.3e-3);
  CHECK_FALSE(read.layers.at("fc").forward_host_s.has_value());
  CHECK(dag::calibration_json(read).dump(2) == first);

  // Version 1 still reads; it has no measured collectives; an unknown version is refused with its path.
  const auto v1 =
      dag::parse_calibration(Json::parse(R"({"format": "ddlsim-calibration", "version": 1, "batch_per_gpu": 8,
                      "layers": {"fc": {"forward": "1 ms", "backward": "2 ms"}}})"),
                             "v1.json", "");
  CHECK(v1.version == 1);
  CHECK(v1.layers.at("fc").forward_s == 1e-3);
  const auto error = [](const char* text) {
    try {
      (void)dag::parse_calibration(Json::parse(text), "c.json", "");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK_THAT(error(R"({"version": 3, "layers": {}})"), Catch::Contains("c.json: /version"));
  CHECK_THAT(error(R"({"version": 1, "collectives": []})"),
             Catch::Contains("/collectives") && Catch::Contains("\"version\": 2"));
  CHECK_THAT(error(R"({"version": 1, "host": {"launch": "5 us"}})"),
             Catch::Contains("/host") && Catch::Contains("\"version\": 2"));
  CHECK_THAT(error(R"({"version": 2, "host": {"launch": "5"}})"), Catch::Contains("/host/launch"));
  CHECK_THAT(error(R"({"version": 2, "optimizer": {"gpu": "1 ms", "cpu": "1 ms"}})"),
             Catch::Contains("/optimizer/cpu"));
  CHECK_THAT(error(R"({"version": 2, "collectives": [{"collective": "allreduce", "ranks": 8,
                       "table": [["8 B", "10 us"], ["8 B", "11 us"]]}]})"),
             Catch::Contains("/collectives/0/table/1") && Catch::Contains("increase"));
  CHECK_THAT(error(R"({"version": 2, "collectives": [{"collective": "allreduce", "ranks": 8,
                       "table": [["8", "10 us"]]}]})"),
             Catch::Contains("/collectives/0/table/0/0"));
  CHECK_THAT(error(R"({"version": 2, "collectives": [{"collective": "alltoall", "ranks": 8,
                       "table": [["8 B", "10 us"]]}]})"),
             Catch::Contains("/collectives/0/collective"));
}

namespace {

// An all_reduce on 8 ranks of one node measured at `sizes`, each in `time(size)` both in and out of place.
NcclTestsLog measured_log(const std::vector<double>& sizes, double (*time)(double)) {
  NcclTestsLog log;
  for (const double s : sizes) {
    NcclMeasurement m;
    m.ranks = 8;
    m.nodes = 1;
    m.size_bytes = static_cast<std::uint64_t>(s);
    m.count = m.size_bytes / 4;
    m.type = "float";
    m.in_place.time_s = time(s);
    m.out_of_place = m.in_place;
    log.rows.push_back(m);
  }
  return log;
}

// `c` written and read back by the calibration's own reader (dag/calibration.hpp).
dag::Calibration read_back(const dag::Calibration& c) {
  return dag::parse_calibration(Json::parse(dag::calibration_json(c).dump()), "calibration.json", "");
}

} // namespace

TEST_CASE("calibrate: a fit no calibration can hold is left out or rounded, and the notes say so (#31 R12)",
          "[calibrate][calibration]") {
  dag::Calibration c;
  SECTION("beta 2e5 s/B, above the 1 s/B a file holds: the table alone, a note") {
    // `ddlsim calibrate` wrote such a fit, which its reader refused.
    const auto log = measured_log({8, 16, 24, 32, 40}, [](double s) { return 1e3 + 2e5 * s; });
    const auto measured = measured_collectives({log}, {"log.txt"});
    REQUIRE(measured.collectives.size() == 1);
    CHECK(measured.collectives[0].segments.empty());
    CHECK(measured.collectives[0].table.size() == 5);
    REQUIRE(measured.notes.size() == 1);
    CHECK_THAT(measured.notes[0], Catch::Contains("all_reduce over 8 ranks on 1 nodes: its alpha-beta fit") &&
                                      Catch::Contains("is beyond what a calibration holds (1e7 s, 1 s/B); the table "
                                                      "alone is kept"));
    c.collectives = measured.collectives;
  }
  SECTION("beta 1e-17 s/B, below the least a file states: written as 0, a note, the errors measured again") {
    const auto log = measured_log({8, 64, 512, 4096, 32768}, [](double s) { return 20e-6 + 1e-17 * s; });
    const auto measured = measured_collectives({log}, {"log.txt"});
    REQUIRE(measured.collectives.size() == 1);
    REQUIRE(measured.collectives[0].segments.size() == 1);
    const auto& seg = measured.collectives[0].segments[0];
    CHECK(seg.beta_s_per_byte == 0);
    CHECK_THAT(seg.alpha_s, WithinRel(20e-6, 1e-9));
    CHECK(seg.max_relative_error > 0); // 1e-17 x 32768 B / 20 us: 1.6e-8
    CHECK(seg.max_relative_error < 2e-8);
    CHECK(measured.notes == std::vector<std::string>{"all_reduce over 8 ranks on 1 nodes: an alpha below 1e-15 s or a "
                                                     "beta below 1e-15 s/B, the least a calibration holds, is written "
                                                     "as 0"});
    c.collectives = measured.collectives;
  }
  CHECK(read_back(c).collectives == c.collectives);
}
