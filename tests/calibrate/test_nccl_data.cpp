// The nccl-tests reader and the fits on the real measurements in tests/data/shared/nccl-tests (README one level up):
// every file reads with its collectives, ranks, nodes and rows, busbw agrees with nccl-tests' factor on every row
// (no note), and issue #12's acceptance: fitted on the H100 2x8 allreduce up to 64 MiB, the calibrated 1 GiB and
// 8 GiB times are within 10 % of the measured ones, every row inside the range within 5 %.
#include "calibrate/alpha_beta.hpp"
#include "calibrate/measured.hpp"
#include "calibrate/nccl_tests.hpp"
#include "core/error.hpp"
#include "core/io.hpp"
#include "support/nccl_data.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

using namespace ddlsim::calibrate;
using Catch::Matchers::WithinRel;
using ddlsim::dag::Estimate;
using ddlsim::dag::MeasuredTable;
using ddlsim::dag::predict;
using ddlsim::dag::SizeTime;

namespace {

using ddlsim::test::kGiB;
using ddlsim::test::kMiB;
using ddlsim::test::kNcclTestsDir;

struct Expected {
  std::optional<NcclCollective> pass;                        ///< logs that do not name it
  std::vector<std::pair<NcclCollective, std::size_t>> tests; ///< collective and rows, in file order
  int ranks = 0;
  int nodes = 0;
  std::size_t notes = 0; ///< "reduced maxBytes" notes
};

// What the README of the shared data and the files' device listings say.
const std::map<std::string, Expected>& expected() {
  using C = NcclCollective;
  static const std::map<std::string, Expected> files{
      // argonne-lcf Polaris logs (nccl-tests 2.13.0 .. 2.16.6: groups, no name): -b 4 -e 1G -f 2; all_gather prints 0 B
      // for the
      // five sizes below 8 ranks x 16 B.
      {"a100_2x4_tcp_allgather.txt", {C::all_gather, {{C::all_gather, 29}}, 8, 2, 0}},
      {"a100_2x4_tcp_allreduce.txt", {C::all_reduce, {{C::all_reduce, 29}}, 8, 2, 0}},
      // nccl-tests 2.17.8, five named tests of 32 MiB .. 16 GiB, each with maxBytes reduced.
      {"h100_1x8_sweep_32MiB-16GiB.log",
       {std::nullopt,
        {{C::all_reduce, 10}, {C::all_gather, 10}, {C::reduce_scatter, 10}, {C::alltoall, 10}, {C::sendrecv, 10}},
        8,
        1,
        5}},
      // all_reduce_perf -b 8 -e 8G -f 2 on 2 x 8 H100, unnamed (the command line is in the file, not a name line).
      {"h100_2x8_allreduce_8B-8GiB.txt", {C::all_reduce, {{C::all_reduce, 31}}, 16, 2, 0}},
      // Echo's all_reduce_perf on Azure ND A100 v4 nodes, unnamed, CRLF line ends: -b 8 -e 1G -f 2 on one node;
      // -b 1K under mpirun on 2-16 nodes (every line tagged "[1,0]<stdout>:", once also inside a device line).
      {"echo_azure_a100_1gpu_all_reduce.txt", {C::all_reduce, {{C::all_reduce, 28}}, 1, 1, 0}},
      {"echo_azure_a100_2gpu_all_reduce.txt", {C::all_reduce, {{C::all_reduce, 28}}, 2, 1, 0}},
      {"echo_azure_a100_4gpu_all_reduce.txt", {C::all_reduce, {{C::all_reduce, 28}}, 4, 1, 0}},
      {"echo_azure_a100_8gpu_all_reduce.txt", {C::all_reduce, {{C::all_reduce, 28}}, 8, 1, 0}},
      {"echo_azure_a100_16gpu_all_reduce.txt", {C::all_reduce, {{C::all_reduce, 25}}, 16, 2, 0}},
      {"echo_azure_a100_32gpu_all_reduce.txt", {C::all_reduce, {{C::all_reduce, 23}}, 32, 4, 0}},
      {"echo_azure_a100_64gpu_all_reduce.txt", {C::all_reduce, {{C::all_reduce, 23}}, 64, 8, 0}},
      {"echo_azure_a100_128gpu_all_reduce.txt", {C::all_reduce, {{C::all_reduce, 23}}, 128, 16, 0}},
  };
  return files;
}

NcclTestsLog read(const std::string& name) {
  return read_nccl_tests(kNcclTestsDir + "/" + name, {.collective = expected().at(name).pass});
}

} // namespace

TEST_CASE("calibrate: every shared nccl-tests file reads with its collectives, ranks, nodes and rows",
          "[calibrate][nccl][data]") {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(kNcclTestsDir))
    if (!entry.path().filename().string().starts_with("LICENSE"))
      names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  std::vector<std::string> known;
  for (const auto& [name, e] : expected())
    known.push_back(name);
  REQUIRE(names == known); // a new file needs its expectations here

  for (const auto& [name, e] : expected()) {
    CAPTURE(name);
    const NcclTestsLog log = read(name);
    // No busbw note: nccl-tests' factor for the rank count read holds on every row (within print rounding); no
    // validation note.
    CHECK(log.notes.size() == e.notes);
    for (const auto& note : log.notes)
      CHECK_THAT(note, Catch::Contains("reduced maxBytes to 26549638485"));
    std::vector<std::pair<NcclCollective, std::size_t>> tests;
    for (const NcclMeasurement& r : log.rows) {
      CHECK(r.ranks == e.ranks);
      CHECK(r.nodes == e.nodes);
      CHECK(r.out_of_place.has_value());
      if (tests.empty() || tests.back().first != r.collective)
        tests.emplace_back(r.collective, 0);
      ++tests.back().second;
    }
    CHECK(tests == e.tests);
    if (e.pass) {
      // Those logs do not name their collective: without it they are refused.
      CHECK_THROWS_WITH(read_nccl_tests(kNcclTestsDir + "/" + name), Catch::Contains("does not name its collective"));
    }
  }
}

TEST_CASE("calibrate: rows of the shared files carry nccl-tests' figures", "[calibrate][nccl][data]") {
  SECTION("the H100 2x8 allreduce's last row") {
    const auto rows = read("h100_2x8_allreduce_8B-8GiB.txt").rows;
    const NcclMeasurement& r = rows.back();
    CHECK(r.size_bytes == 8589934592);
    CHECK(r.count == 2147483648);
    CHECK(r.type == "float");
    CHECK(r.redop == "sum");
    CHECK(r.root == -1);
    CHECK_THAT(r.out_of_place->time_s, WithinRel(47535e-6, 1e-12));
    CHECK_THAT(r.in_place.busbw_Bps, WithinRel(337.35e9, 1e-12));
    CHECK_THAT(r.fastest_s(), WithinRel(47535e-6, 1e-12));
  }
  SECTION("the H100 1x8 sweep's alltoall and sendrecv: N/A in-place, size the whole buffer") {
    const auto rows = read("h100_1x8_sweep_32MiB-16GiB.log").rows;
    const auto alltoall =
        std::find_if(rows.begin(), rows.end(), [](const auto& r) { return r.collective == NcclCollective::alltoall; });
    REQUIRE(alltoall != rows.end());
    CHECK(alltoall->size_bytes == 33554432);
    CHECK(alltoall->count * 8 * 8 == alltoall->size_bytes); // 8 ranks x count doubles
    CHECK_FALSE(alltoall->in_place.wrong);
    CHECK(alltoall->out_of_place->wrong == 0.0);
    CHECK(rows.back().collective == NcclCollective::sendrecv);
    CHECK_THAT(rows.back().out_of_place->time_s, WithinRel(46779.2e-6, 1e-12));
  }
  SECTION("the A100 all_gather's 0 B rows collapse into one point") {
    const auto rows = read("a100_2x4_tcp_allgather.txt").rows;
    const auto points = fastest_per_size(rows);
    REQUIRE(points.size() == 25); // 0 B, then 128 B .. 1 GiB
    CHECK(points[0].size_bytes == 0);
    CHECK_THAT(points[0].time_s, WithinRel(7.44e-6, 1e-12)); // the fastest of the five 0 B rows, in-place
    CHECK(points[1].size_bytes == 128);
  }
}

TEST_CASE("calibrate: a real log cut at any byte reads or fails with an InputError naming a line",
          "[calibrate][nccl][data]") {
  // As a log copied off a cluster while the job still ran: every prefix, never a crash or another exception.
  const std::string text = ddlsim::read_file(kNcclTestsDir + "/h100_2x8_allreduce_8B-8GiB.txt");
  std::size_t read = 0, refused = 0;
  for (std::size_t cut = 0; cut <= text.size(); ++cut) {
    try {
      const auto log = parse_nccl_tests(std::string_view(text).substr(0, cut), "cut.txt",
                                        {.collective = NcclCollective::all_reduce});
      CHECK(!log.rows.empty());
      ++read;
    } catch (const ddlsim::InputError& e) {
      CAPTURE(cut, e.what());
      CHECK(e.pointer().starts_with("line "));
      ++refused;
    }
  }
  // Prefixes ending at a row's end read (the 31 rows, the footer after them); the rest are refused.
  CHECK(read > 31);
  CHECK(refused > 0);
  CHECK(read + refused == text.size() + 1);
}

// Issue #12 reports its piecewise fit "+3 %/+4 % out-of-place": fitted on the out-of-place column, compared with the
// faster of in-place and out-of-place as measured. Fitted on the faster column itself, the same method predicts
// +10.8 % / +13.1 % (printed below): its last segment, 16 .. 64 MiB, is three rows on one line (to 0.06 %) whose slope
// is 13 % above the 1 .. 8 GiB one, and no α-β line through those rows extrapolates within 10 % to 8 GiB. The
// out-of-place column passes because its 16 MiB row lies 2.7 % higher, which flattens the segment: 128x beyond the
// measured range, the extrapolation is only as good as the last rows are representative.
TEST_CASE("calibrate: the H100 2x8 allreduce fitted up to 64 MiB predicts 1 GiB and 8 GiB (issue #12)",
          "[calibrate][fit][data][acceptance]") {
  const auto rows = read("h100_2x8_allreduce_8B-8GiB.txt").rows;
  const std::vector<SizeTime> faster = fastest_per_size(rows); // one row per size in this file
  REQUIRE(faster.size() == rows.size());
  std::vector<SizeTime> out_of_place;
  for (const NcclMeasurement& r : rows)
    out_of_place.push_back({static_cast<double>(r.size_bytes), r.out_of_place->time_s});
  const auto up_to_64MiB = [](const std::vector<SizeTime>& points) {
    std::vector<SizeTime> kept;
    std::copy_if(points.begin(), points.end(), std::back_inserter(kept),
                 [](const SizeTime& p) { return p.size_bytes <= 64 * kMiB; });
    return kept;
  };
  const std::vector<SizeTime> measured = up_to_64MiB(faster);
  REQUIRE(measured.size() == 24); // 8 B .. 64 MiB
  const MeasuredTable table(measured);
  const auto fit = fit_piecewise(up_to_64MiB(out_of_place));
  const auto fit_faster = fit_piecewise(measured);

  const auto describe = [](const PiecewiseFit& f) {
    std::string text = fmt::format("BIC {:.1f}\n", f.bic);
    for (const auto& s : f.segments())
      text += fmt::format("  [{} B, {} B] {} points: alpha {:.2f} us, beta {:.4g} us/MiB, error mean {:.2f} % max "
                          "{:.2f} %\n",
                          s.first_size_bytes, s.last_size_bytes, s.points, s.alpha_s * 1e6,
                          s.beta_s_per_byte * kMiB * 1e6, 100 * s.mean_relative_error, 100 * s.max_relative_error);
    return text;
  };
  INFO("fit on the out-of-place column: " << describe(fit));
  INFO("fit on the faster column: " << describe(fit_faster));

  SECTION("ddlsim calibrate's measured collective keeps the faster column and fits the out-of-place one") {
    NcclTestsLog truncated = read("h100_2x8_allreduce_8B-8GiB.txt");
    std::erase_if(truncated.rows,
                  [](const NcclMeasurement& r) { return static_cast<double>(r.size_bytes) > 64 * kMiB; });
    const auto calibrated = measured_collectives({truncated}, {"h100_2x8"});
    REQUIRE(calibrated.collectives.size() == 1);
    const auto& m = calibrated.collectives.front();
    REQUIRE(m.table.size() == measured.size());
    for (std::size_t i = 0; i < measured.size(); ++i)
      CHECK(m.table[i].time_s == measured[i].time_s);
    REQUIRE(m.segments.size() == fit.segments().size());
    for (std::size_t i = 0; i < m.segments.size(); ++i) {
      CHECK(m.segments[i].alpha_s == fit.segments()[i].alpha_s);
      CHECK(m.segments[i].beta_s_per_byte == fit.segments()[i].beta_s_per_byte);
    }
  }
  SECTION("extrapolated to 1 GiB and 8 GiB: within 10 % of the faster of in-place and out-of-place") {
    for (const double size : {kGiB, 8 * kGiB}) {
      const auto at =
          std::find_if(faster.begin(), faster.end(), [&](const SizeTime& p) { return p.size_bytes == size; });
      REQUIRE(at != faster.end());
      const Estimate e = predict(table, fit, size);
      const double error = e.time_s / at->time_s - 1;
      const double error_faster = predict(table, fit_faster, size).time_s / at->time_s - 1;
      INFO(fmt::format("{} GiB: measured {:.1f} us; predicted {:.1f} us, error {:+.2f} % (fit on the faster column: "
                       "{:+.2f} %)",
                       size / kGiB, at->time_s * 1e6, e.time_s * 1e6, 100 * error, 100 * error_faster));
      CHECK(e.extrapolated);
      CHECK(std::abs(error) <= 0.10);
    }
  }
  SECTION("inside the range: every row within 5 %") {
    // Each row up to 64 MiB, its faster direction, against the calibrated time (the table) and against the fit
    // on the faster column (its summary), which must describe the rows as well.
    double worst_table = 0, worst_fit = 0;
    for (const NcclMeasurement& r : rows) {
      const auto size = static_cast<double>(r.size_bytes);
      if (size > 64 * kMiB)
        continue;
      const Estimate e = predict(table, fit, size);
      CHECK_FALSE(e.extrapolated);
      worst_table = std::max(worst_table, std::abs(e.time_s / r.fastest_s() - 1));
      worst_fit = std::max(worst_fit, std::abs(fit_faster.time(size).time_s / r.fastest_s() - 1));
    }
    // Leave one out: each inner row interpolated from its neighbours alone, the table's error between sizes.
    double sum = 0, worst_between = 0, worst_between_size = 0;
    for (std::size_t i = 1; i + 1 < measured.size(); ++i) {
      std::vector<SizeTime> others = measured;
      others.erase(others.begin() + static_cast<std::ptrdiff_t>(i));
      const double error = std::abs(MeasuredTable(others).time(measured[i].size_bytes).time_s / measured[i].time_s - 1);
      sum += error;
      if (error > worst_between) {
        worst_between = error;
        worst_between_size = measured[i].size_bytes;
      }
    }
    const double mean_between = sum / static_cast<double>(measured.size() - 2);
    INFO(fmt::format("worst row: table {:.3f} %, fit {:.3f} %; leave-one-out interpolation: mean {:.2f} %, worst "
                     "{:.1f} % at {} B (where NCCL switches algorithm)",
                     100 * worst_table, 100 * worst_fit, 100 * mean_between, 100 * worst_between, worst_between_size));
    CHECK(worst_table <= 0.05);
    CHECK(worst_fit <= 0.05);
    CHECK(mean_between <= 0.05);
  }
}
