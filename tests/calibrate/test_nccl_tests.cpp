// The nccl-tests reader (calibrate/nccl_tests.hpp) on small excerpts of every layout nccl-tests prints: the tables of
// 2.13 and later (redop and root columns), the per-test headers before 2.13 (nccl-tests src/*.cu, print_header at
// 51af557^), -I, -S and -C columns, N/A, several tests per log, logs that do not name their collective, the device
// listing with hosts and groups, the -J JSON output of both spellings; and the errors, each naming its line.
#include "calibrate/nccl_tests.hpp"
#include "core/error.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <stdexcept>
#include <string>

using namespace ddlsim;
using namespace ddlsim::calibrate;
using Catch::Contains;
using Catch::Matchers::WithinRel;

namespace {

NcclTestsLog parse(const std::string& text, NcclReadOptions options = {}) {
  return parse_nccl_tests(text, "log.txt", options);
}

// `text` with the first `from` replaced by `to`; `from` must occur.
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  if (at == std::string::npos)
    throw std::logic_error("test excerpt lacks '" + from + "'");
  return text.replace(at, from.size(), to);
}

// The device listing of nccl-tests 2.13 and later (src/util.cu, writeDeviceReport): 4 ranks on 2 hosts.
const std::string kListing = R"(# Using devices
#  Rank  0 Group  0 Pid  36600 on x3006c0s1b1n0 device  0 [0x07] NVIDIA A100-SXM4-40GB
#  Rank  1 Group  0 Pid  36601 on x3006c0s1b1n0 device  1 [0x46] NVIDIA A100-SXM4-40GB
#  Rank  2 Group  0 Pid  36031 on x3006c0s25b0n0 device  0 [0x07] NVIDIA A100-SXM4-40GB
#  Rank  3 Group  0 Pid  36032 on x3006c0s25b0n0 device  1 [0x46] NVIDIA A100-SXM4-40GB
#
)";

// An all_reduce on those 4 ranks as nccl-tests 2.17 prints it; busbw = 1.5 algbw.
const std::string kAllReduce217 =
    R"(# nccl-tests version 2.17.8 nccl-headers=22902 nccl-library=22902
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 1 minBytes 8 maxBytes 1048576 step: 1024(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
)" + kListing +
    R"(#                                                              out-of-place                       in-place          
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong 
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)         
           8             2     float     sum      -1    48.77    0.00    0.00       0    44.82    0.00    0.00       0
        8192          2048     float     sum      -1    72.11    0.11    0.17       0    65.05    0.13    0.19       0
     1048576        262144     float     sum      -1   561.20    1.87    2.80       0   565.30    1.85    2.78       0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0.99 
#
# Collective test concluded: all_reduce_perf
#
)";

} // namespace

TEST_CASE("calibrate::busbw_factor follows nccl-tests' *GetBw", "[calibrate][nccl]") {
  // The factors as src/<collective>.cu writes them, for 8 ranks: 2(n-1)/n, (n-1)/n or 1.
  auto [collective, factor] = GENERATE(table<NcclCollective, double>({
      {NcclCollective::all_reduce, 14.0 / 8},
      {NcclCollective::all_gather, 7.0 / 8},
      {NcclCollective::reduce_scatter, 7.0 / 8},
      {NcclCollective::alltoall, 7.0 / 8},
      {NcclCollective::gather, 7.0 / 8},
      {NcclCollective::scatter, 7.0 / 8},
      {NcclCollective::broadcast, 1.0},
      {NcclCollective::reduce, 1.0},
      {NcclCollective::sendrecv, 1.0},
  }));
  CAPTURE(nccl_collective_name(collective));
  CHECK_THAT(busbw_factor(collective, 8), WithinRel(factor, 1e-15));
  // One rank moves nothing over a bus, except the rootless point-to-point and rooted copies, which nccl-tests
  // counts at algbw.
  CHECK(busbw_factor(collective, 1) == (factor == 1.0 ? 1.0 : 0.0));
  CHECK_THROWS_AS(busbw_factor(collective, 0), std::invalid_argument);
}

TEST_CASE("calibrate::find_nccl_collective reads binary names and maps to ddlsim's collectives", "[calibrate][nccl]") {
  CHECK(find_nccl_collective("all_reduce") == NcclCollective::all_reduce);
  CHECK(find_nccl_collective("all_gather_perf") == NcclCollective::all_gather);
  CHECK(find_nccl_collective("/opt/src/nccl-tests/build/reduce_scatter_perf") == NcclCollective::reduce_scatter);
  CHECK(find_nccl_collective("./build/sendrecv_perf_mpi") == NcclCollective::sendrecv);
  CHECK(find_nccl_collective("alltoall_perf") == NcclCollective::alltoall);
  CHECK_FALSE(find_nccl_collective("hypercube_perf"));
  CHECK_FALSE(find_nccl_collective("allreduce")); // nccl-tests' spelling only
  CHECK(nccl_collective_name(NcclCollective::reduce_scatter) == "reduce_scatter");
  CHECK(ddlsim_collective(NcclCollective::all_reduce) == Collective::allreduce);
  CHECK(ddlsim_collective(NcclCollective::sendrecv) == Collective::point_to_point);
  CHECK_FALSE(ddlsim_collective(NcclCollective::alltoall));
  CHECK(size_is_whole_buffer(NcclCollective::all_gather));
  CHECK_FALSE(size_is_whole_buffer(NcclCollective::all_reduce));
}

TEST_CASE("calibrate::parse_nccl_tests reads a 2.17 table with its listing", "[calibrate][nccl]") {
  const NcclTestsLog log = parse(kAllReduce217);
  CHECK(log.notes.empty());
  REQUIRE(log.rows.size() == 3);
  for (const auto& r : log.rows) {
    CHECK(r.collective == NcclCollective::all_reduce);
    CHECK(r.ranks == 4);
    CHECK(r.nodes == 2);
    CHECK(r.type == "float");
    CHECK(r.redop == "sum");
    CHECK(r.root == -1);
  }
  const NcclMeasurement& big = log.rows[2];
  CHECK(big.line == 16);
  CHECK(big.size_bytes == 1048576);
  CHECK(big.count == 262144);
  REQUIRE(big.out_of_place);
  CHECK_THAT(big.out_of_place->time_s, WithinRel(561.20e-6, 1e-12));
  CHECK_THAT(big.out_of_place->algbw_Bps, WithinRel(1.87e9, 1e-12));
  CHECK_THAT(big.out_of_place->busbw_Bps, WithinRel(2.80e9, 1e-12));
  CHECK(big.out_of_place->wrong == 0.0);
  CHECK_THAT(big.in_place.time_s, WithinRel(565.30e-6, 1e-12));
  CHECK_THAT(big.fastest_s(), WithinRel(561.20e-6, 1e-12));        // out-of-place is faster here
  CHECK_THAT(log.rows[1].fastest_s(), WithinRel(65.05e-6, 1e-12)); // in-place here
}

TEST_CASE("calibrate::parse_nccl_tests reads a log tagged by mpirun --tag-output", "[calibrate][nccl]") {
  // Open MPI prefixes every forwarded line with "[JOB,RANK]<stdout>:" (or <stderr>, <stddiag>), and where it forwards
  // a line in two pieces the tag lands inside it (Echo's 128-GPU log); a device's "[0x07]" is no tag. The tagged log
  // reads as the untagged one, hosts and rows alike.
  std::string tagged;
  std::size_t pos = 0;
  for (std::size_t end; (end = kAllReduce217.find('\n', pos)) != std::string::npos; pos = end + 1)
    tagged += (pos == 0 ? "[1,0]<stderr>:" : "[1,0]<stdout>:") + kAllReduce217.substr(pos, end - pos + 1);
  tagged = replaced(tagged, "on x3006c0s25b0n0 device  0", "on x3006c0s[12,0]<stdout>:25b0n0 device  0");
  const NcclTestsLog plain = parse(kAllReduce217), log = parse(tagged);
  CHECK(log.notes.empty());
  REQUIRE(log.rows.size() == plain.rows.size());
  for (std::size_t i = 0; i < log.rows.size(); ++i) {
    CHECK(log.rows[i].ranks == 4);
    CHECK(log.rows[i].nodes == 2); // the split host name is one host
    CHECK(log.rows[i].size_bytes == plain.rows[i].size_bytes);
    CHECK(log.rows[i].fastest_s() == plain.rows[i].fastest_s());
    CHECK(log.rows[i].line == plain.rows[i].line);
  }
  // not a tag: letters in the brackets (the header is then no header), or no stream after them (the row is then
  // other output interleaved with the table, as NCCL's INFO lines are)
  CHECK_THROWS_WITH(parse(replaced(tagged, "[1,0]<stdout>:#       size", "[1,x]<stdout>:#       size")),
                    Contains("line 14") && Contains("the header is missing"));
  CHECK(parse(replaced(tagged, "[1,0]<stdout>:           8 ", "[1,0]           8 ")).rows.size() == 2);
}

TEST_CASE("calibrate::parse_nccl_tests reads the tables of nccl-tests before 2.13", "[calibrate][nccl]") {
  // all_gather's print_header: no redop or root column, "error" (the largest deviation) instead of "#wrong", and a
  // listing without groups. 4 ranks: size = count x 4 B x 4; busbw = 3/4 algbw.
  const std::string log =
      R"(# nThread 1 nGpus 4 minBytes 32 maxBytes 1048576 step: 2(factor) warmup iters: 5 iters: 20 validation: 1 
#
# Using devices
#   Rank  0 Pid  12345 on     node01 device  0 [0x1a] Tesla V100-SXM2-32GB
#   Rank  1 Pid  12345 on     node01 device  1 [0x1b] Tesla V100-SXM2-32GB
#   Rank  2 Pid  12345 on     node01 device  2 [0x3d] Tesla V100-SXM2-32GB
#   Rank  3 Pid  12345 on     node01 device  3 [0x3e] Tesla V100-SXM2-32GB
#
#                                             out-of-place                       in-place          
#       size         count      type     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       
          32             2     float    12.34    0.00    0.00  0e+00    12.10    0.00    0.00  0e+00
     1048576         65536     float    45.67   22.96   17.22  0e+00    44.90   23.35   17.52  0e+00
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 8.685 
#
)";
  SECTION("without the collective the log is an error naming the header's line") {
    REQUIRE_THROWS_WITH(parse(log), "log.txt: line 10: the log does not name its collective (nccl-tests before 2.16.7 "
                                    "prints no '# Collective test starting:' line); pass it");
  }
  SECTION("with it") {
    const NcclTestsLog parsed = parse(log, {.collective = NcclCollective::all_gather});
    CHECK(parsed.notes.empty());
    REQUIRE(parsed.rows.size() == 2);
    const NcclMeasurement& r = parsed.rows[1];
    CHECK(r.collective == NcclCollective::all_gather);
    CHECK(r.ranks == 4);
    CHECK(r.nodes == 1);
    CHECK(r.size_bytes == 1048576);
    CHECK(r.count == 65536);
    CHECK(r.redop.empty());
    CHECK(r.root == -1);
    CHECK_THAT(r.in_place.busbw_Bps, WithinRel(17.52e9, 1e-12));
    CHECK(r.in_place.wrong == 0.0);
  }
  SECTION("another collective does not fit its sizes") {
    // all_reduce prints size = count x 4 B: 32 B would be 8 elements, not 2.
    REQUIRE_THROWS_WITH(parse(log, {.collective = NcclCollective::all_reduce}),
                        "log.txt: line 12: size 32 B is not count 2 x 4 B (float), as all_reduce_perf prints it: is "
                        "this another collective's table, or another number of ranks?");
  }
}

TEST_CASE("calibrate::parse_nccl_tests reads each column variant", "[calibrate][nccl]") {
  const std::string head = "# Collective test starting: sendrecv_perf\n" + kListing;
  SECTION("sendrecv before 2.13: no redop or root; in-place #wrong N/A") {
    const NcclTestsLog log = parse(
        head + R"(#       size         count      type     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       
    33554432       8388608     float   422.19   79.48   79.48      0   422.04   79.51   79.51    N/A
)");
    REQUIRE(log.rows.size() == 1);
    CHECK(log.rows[0].collective == NcclCollective::sendrecv);
    CHECK(log.rows[0].out_of_place->wrong == 0.0);
    CHECK_FALSE(log.rows[0].in_place.wrong);
    CHECK(log.notes.empty());
  }
  SECTION("broadcast before 2.13: a root column but no redop") {
    const NcclTestsLog log = parse(
        "# Collective test starting: broadcast_perf\n" + kListing +
        R"(#       size         count      type    root     time   algbw   busbw  error     time   algbw   busbw  error
     1048576        262144     float       2   100.00   10.49   10.49  0e+00   100.00   10.49   10.49  0e+00
)");
    REQUIRE(log.rows.size() == 1);
    CHECK(log.rows[0].root == 2);
    CHECK(log.rows[0].redop.empty());
  }
  SECTION("-I: per-iteration statistics after each #wrong") {
    const NcclTestsLog log = parse(
        head +
        R"(#                                                        out-of-place (+ per-iteration)                                in-place (+ per-iteration)
#       size         count      type   redop    root     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv%     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv%
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)     (us)     (us)      (%)     (us)  (GB/s)  (GB/s)             (us)     (us)     (us)      (%)
    33554432       8388608     float     sum      -1   422.19   79.48   79.48       0   420.10   430.55   430.55     0.61   422.04   79.51   79.51     N/A   419.80   428.00   428.00     0.55
)");
    REQUIRE(log.rows.size() == 1);
    CHECK_THAT(log.rows[0].in_place.time_s, WithinRel(422.04e-6, 1e-12));
    CHECK_FALSE(log.rows[0].in_place.wrong);
  }
  SECTION("-S: a timestamp after the in-place columns; -C: cputime") {
    const NcclTestsLog log = parse(
        head +
        R"(#       size         count      type   redop    root  cputime   algbw   busbw  #wrong  cputime   algbw   busbw  #wrong            timestamp
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)           %Y-%m-%d %H:%M:%S
    33554432       8388608     float     sum      -1   422.19   79.48   79.48       0   422.04   79.51   79.51     N/A  2025-10-28 14:03:59
)");
    REQUIRE(log.rows.size() == 1);
    CHECK_THAT(log.rows[0].out_of_place->time_s, WithinRel(422.19e-6, 1e-12));
  }
  SECTION("NCCL INFO lines inside the table and CRLF line ends are skipped") {
    std::string text = kAllReduce217;
    text.insert(text.find("        8192"), "node1:36600:36600 [0] NCCL INFO Channel 00/02 : 0 1 2 3\n");
    std::string crlf;
    for (char c : text)
      crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
    const NcclTestsLog log = parse(crlf);
    REQUIRE(log.rows.size() == 3);
    CHECK(log.rows[2].line == 17);
    CHECK(log.rows[2].type == "float");
  }
}

TEST_CASE("calibrate::parse_nccl_tests reads several tests and the listing's groups", "[calibrate][nccl]") {
  SECTION("tests named by 2.17 follow each other") {
    std::string second = kAllReduce217;
    second.replace(second.find("all_reduce_perf"), 15, "all_gather_perf");
    // all_gather on 4 ranks: size = count x 4 B x 4, busbw = 3/4 algbw.
    const auto table = second.find("           8");
    second.replace(table, second.find("# Out of bounds") - table,
                   "     1048576         65536     float    none      -1    45.67   22.96   17.22       0    44.90   "
                   "23.35   17.52       0\n");
    const NcclTestsLog log = parse(kAllReduce217 + "\n" + second);
    CHECK(log.notes.empty());
    REQUIRE(log.rows.size() == 4);
    CHECK(log.rows[2].collective == NcclCollective::all_reduce);
    CHECK(log.rows[3].collective == NcclCollective::all_gather);
    CHECK(log.rows[3].redop == "none");
    const auto series = group_by_communicator(log.rows);
    REQUIRE(series.size() == 2);
    CHECK(series[0].collective == NcclCollective::all_reduce);
    CHECK(series[0].rows.size() == 3);
    CHECK(series[1].rows.size() == 1);
  }
  SECTION("unnamed tests before 2.16.7 each take their own listing") {
    // No version, no name: from "# nThread" to before "# Collective test concluded".
    const auto begin = kAllReduce217.find("# nThread");
    const std::string log = kAllReduce217.substr(begin, kAllReduce217.find("# Collective test concluded") - begin);
    // The same on ranks 0 and 1 only: busbw = algbw.
    std::string two_ranks = replaced(
        log, kListing.substr(kListing.find("#  Rank  2"), kListing.size() - kListing.find("#  Rank  2") - 2), "");
    two_ranks = replaced(two_ranks, "0.17       0    65.05    0.13    0.19", "0.11       0    65.05    0.13    0.13");
    two_ranks = replaced(two_ranks, "2.80       0   565.30    1.85    2.78", "1.87       0   565.30    1.85    1.85");
    const NcclTestsLog parsed = parse(log + two_ranks, {.collective = NcclCollective::all_reduce});
    CHECK(parsed.notes.empty());
    REQUIRE(parsed.rows.size() == 6);
    CHECK(parsed.rows[0].ranks == 4);
    CHECK(parsed.rows[0].nodes == 2);
    CHECK(parsed.rows[5].ranks == 2);
    CHECK(parsed.rows[5].nodes == 1);
  }
  SECTION("NCCL_TESTS_SPLIT: the table is rank 0's group's") {
    std::string log = replaced(kAllReduce217, "Rank  2 Group  0", "Rank  2 Group  1");
    log = replaced(log, "Rank  3 Group  0", "Rank  3 Group  1");
    // Two ranks per communicator: busbw would be 1 x algbw, not the 1.5 x the excerpt prints for 4.
    const NcclTestsLog parsed = parse(log);
    CHECK(parsed.rows[0].ranks == 2);
    CHECK(parsed.rows[0].nodes == 1);
    REQUIRE(parsed.notes.size() == 1);
    CHECK(parsed.notes[0] == "line 15: out-of-place busbw 0.17 GB/s is not 1 x algbw 0.11 GB/s, the factor of "
                             "all_reduce on 2 ranks: is the number of ranks or the collective wrong?");
  }
  SECTION("a table without a listing needs the rank count; nodes are then unknown") {
    std::string log = kAllReduce217;
    log.erase(log.find("# Using devices"), kListing.size());
    REQUIRE_THROWS_WITH(parse(log), Contains("log.txt: line 6: no device listing"));
    const NcclTestsLog parsed = parse(log, {.ranks = 4});
    CHECK(parsed.rows[0].ranks == 4);
    CHECK(parsed.rows[0].nodes == 0);
    REQUIRE_THROWS_WITH(parse(kAllReduce217, {.ranks = 8}),
                        "log.txt: line 12: the device listing has 4 ranks, but 8 were given");
  }
  SECTION("a log naming another collective than asked for") {
    REQUIRE_THROWS_WITH(parse(kAllReduce217, {.collective = NcclCollective::all_gather}),
                        "log.txt: line 12: the log names all_reduce (line 2), but all_gather was asked for");
  }
}

TEST_CASE("calibrate::parse_nccl_tests notes failed validation and memory limits", "[calibrate][nccl]") {
  std::string log = replaced(kAllReduce217, "2.80       0", "2.80       3");
  log = replaced(log, "values : 0 OK", "values : 1 FAILED");
  log = replaced(log, "#\n#            ",
                 "#\n# Reducing maxBytes to 26549638485 due to memory limitation\n#\n#            ");
  const NcclTestsLog parsed = parse(log);
  REQUIRE(parsed.rows.size() == 3);
  CHECK(parsed.rows[2].out_of_place->wrong == 3.0);
  CHECK(parsed.notes == std::vector<std::string>{
                            "line 11: nccl-tests reduced maxBytes to 26549638485 for lack of GPU memory",
                            "line 18: validation failed (#wrong > 0) in 1 row(s) of the table at line 14",
                            "line 19: nccl-tests reports out-of-bounds values (validation FAILED)",
                        });
}

TEST_CASE("calibrate::parse_nccl_tests rejects bad input with its line", "[calibrate][nccl]") {
  SECTION("truncated row (a log cut short)") {
    const std::string log = kAllReduce217.substr(0, kAllReduce217.find("1.87"));
    REQUIRE_THROWS_WITH(parse(log), "log.txt: line 16: truncated row: 6 of 13 fields (the header at line 12 names "
                                    "size count type redop root time algbw busbw #wrong time algbw busbw #wrong)");
  }
  SECTION("a row with a field too many") {
    const std::string log = replaced(kAllReduce217, "\n# Out of bounds", " 7\n# Out of bounds");
    REQUIRE_THROWS_WITH(parse(log), Contains("log.txt: line 16: 14 fields, but the header at line 12 names 13"));
  }
  SECTION("non-numeric fields") {
    REQUIRE_THROWS_WITH(parse(replaced(kAllReduce217, "72.11", "72.x1")),
                        "log.txt: line 15: field 6 ('time') is '72.x1', not a non-negative number");
    REQUIRE_THROWS_WITH(parse(replaced(kAllReduce217, " 2048 ", " 2o48 ")),
                        "log.txt: line 15: field 2 ('count') is '2o48', not a non-negative integer");
    REQUIRE_THROWS_WITH(parse(replaced(kAllReduce217, "1.87", "-1.8")),
                        Contains("line 16: field 7 ('algbw') is '-1.8'"));
    REQUIRE_THROWS_WITH(parse(replaced(kAllReduce217, " 565.30 ", " 0.00 ")),
                        "log.txt: line 16: field 10 ('time') is '0.00', not a time > 0");
  }
  SECTION("a table without its header") {
    std::string log = kAllReduce217;
    const auto header = log.find("#            ");
    log.erase(header, log.find("           8 ") - header);
    REQUIRE_THROWS_WITH(parse(log), Contains("log.txt: line 11: a table row before any column header"));
  }
  SECTION("a header without rows (the log ends after it)") {
    const std::string log = kAllReduce217.substr(0, kAllReduce217.find("           8 "));
    REQUIRE_THROWS_WITH(parse(log), "log.txt: line 12: the table has no rows (is the log cut short?)");
  }
  SECTION("an unknown column") {
    REQUIRE_THROWS_WITH(parse(replaced(kAllReduce217, "busbw  #wrong     time", "busBW  #wrong     time")),
                        "log.txt: line 12: table header: unknown or repeated column 'busBW'");
  }
  SECTION("a malformed device line") {
    REQUIRE_THROWS_WITH(parse(replaced(kAllReduce217, "Pid  36601", "PID  36601")),
                        Contains("log.txt: line 7: malformed device line"));
  }
  SECTION("empty input and input without a table") {
    REQUIRE_THROWS_WITH(parse(""), "log.txt: line 1: empty file: no nccl-tests output");
    REQUIRE_THROWS_WITH(parse("\n  \n"), "log.txt: line 1: empty file: no nccl-tests output");
    REQUIRE_THROWS_WITH(
        parse("# nThread 1 nGpus 1\n#\n"),
        "log.txt: line 2: end of file: no nccl-tests table (no '#  size  count  type ...' header line)");
  }
  SECTION("InputError carries the file and the line") {
    try {
      (void)parse(kAllReduce217.substr(0, kAllReduce217.find("1.87")));
      FAIL("no error");
    } catch (const InputError& e) {
      CHECK(e.file() == "log.txt");
      CHECK(e.pointer() == "line 16");
    }
  }
}

namespace {

// -J output as src/util.cu writes it: version 1 (before 2.17.9, 85ca91d) misspells the average bandwidth and writes
// booleans as strings; one device entry per process (here 2 processes of 2 GPUs on 2 hosts: 4 ranks).
const std::string kJsonV1 = R"({"version":1,"start_time":"2025-10-20 10:00:00",
"args":["/opt/nccl-tests/build/all_gather_perf","-b","8","-e","1M","-g","2","-J","ag.json"],"env":["HOME=/root"],
"nccl_version":22703,
"config":{"nthreads":1,"ngpus":2,"minimum_bytes":8,"maximum_bytes":1048576,"step_factor":2,"warmup_iters":5,
 "iterations":20,"aggregated_iterations":1,"validation":1,"graph":0,"blocking_collectives":"false",
 "parallel_init":"false",
 "devices":[{"rank":0,"group":0,"pid":101,"hostname":"node-a","device":0,"device_hex":"0000:1b:00","device_info":"NVIDIA H100"},
            {"rank":2,"group":0,"pid":202,"hostname":"node-b","device":0,"device_hex":"0000:1b:00","device_info":"NVIDIA H100"}]},
"results":[
 {"size":0,"count":0,"type":"float","redop":"none","root":"    -1",
  "out_of_place":{"time":7.590000,"alg_bw":0.000000,"bus_bw":0.000000,"nwrong":0.000000},
  "in_place":{"time":7.520000,"alg_bw":0.000000,"bus_bw":0.000000,"nwrong":0.000000},"actual_iterations":20,"experiment_name":""},
 {"size":1048576,"count":65536,"type":"float","redop":"none","root":"    -1",
  "out_of_place":{"time":45.670000,"alg_bw":22.959843,"bus_bw":17.219882,"nwrong":0.000000},
  "in_place":{"time":44.900000,"alg_bw":23.353586,"bus_bw":17.515190,"nwrong":null},"actual_iterations":20,"experiment_name":""}],
"out_of_bounds":{"count":0,"okay":"true"},
"average_bus_bandwidith":{"bandwidith":8.683768,"okay":"unchecked"},
"errors":[],"end_time":"2025-10-20 10:00:05"})";

} // namespace

TEST_CASE("calibrate::parse_nccl_tests reads -J JSON of every version", "[calibrate][nccl][json]") {
  SECTION("version 1: misspelled keys, string booleans, one device per process") {
    const NcclTestsLog log = parse(kJsonV1);
    CHECK(log.notes.empty());
    REQUIRE(log.rows.size() == 2);
    const NcclMeasurement& r = log.rows[1];
    CHECK(r.collective == NcclCollective::all_gather);
    CHECK(r.ranks == 4);
    CHECK(r.nodes == 2);
    CHECK(r.size_bytes == 1048576);
    CHECK(r.count == 65536);
    CHECK(r.redop == "none");
    CHECK(r.root == -1);
    CHECK(r.line == 0);
    CHECK_THAT(r.out_of_place->time_s, WithinRel(45.67e-6, 1e-12));
    CHECK_THAT(r.in_place.algbw_Bps, WithinRel(23.353586e9, 1e-12));
    CHECK_FALSE(r.in_place.wrong);
  }
  SECTION("version 3: fixed spelling, real booleans, -C cpu_time, per-iteration objects, out_of_place null") {
    std::string v3 = replaced(kJsonV1, "\"version\":1", "\"version\":3");
    v3 = replaced(v3, "average_bus_bandwidith", "average_bus_bandwidth");
    v3 = replaced(v3, "bandwidith", "bandwidth");
    v3 = replaced(v3, "\"okay\":\"true\"", "\"okay\":true");
    v3 = replaced(v3, "\"time\":45.67", "\"cpu_time\":45.67");
    v3 = replaced(v3, R"("out_of_place":{"time":7.590000,"alg_bw":0.000000,"bus_bw":0.000000,"nwrong":0.000000})",
                  R"("out_of_place":null,"in_place_per_iter":{"skipped_iterations":0,"min_us":7.1,"times_us":[7.1]})");
    const NcclTestsLog log = parse(v3);
    CHECK(log.notes.empty());
    REQUIRE(log.rows.size() == 2);
    CHECK_FALSE(log.rows[0].out_of_place);
    CHECK_THAT(log.rows[1].out_of_place->time_s, WithinRel(45.67e-6, 1e-12));
  }
  SECTION("failed checks become notes") {
    std::string bad = replaced(kJsonV1, R"({"count":0,"okay":"true"})", R"({"count":2,"okay":"false"})");
    bad = replaced(bad, R"("okay":"unchecked")", R"("okay":"false")");
    bad = replaced(bad, R"("nwrong":null)", R"("nwrong":5)");
    const NcclTestsLog log = parse(bad);
    CHECK(log.notes == std::vector<std::string>{
                           "/results/1/in_place: validation failed (nwrong > 0) in 1 result(s)",
                           "/out_of_bounds: nccl-tests reports out-of-bounds values (validation FAILED)",
                           "/average_bus_bandwidith: nccl-tests reports the average bus bandwidth below its threshold "
                           "(check FAILED)",
                       });
  }
  SECTION("the collective comes from the caller when args does not name it") {
    const std::string unnamed = replaced(kJsonV1, "/opt/nccl-tests/build/all_gather_perf", "./bench");
    REQUIRE_THROWS_WITH(parse(unnamed), Contains("log.txt: /args/0: the command line does not name an nccl-tests "
                                                 "benchmark"));
    CHECK(parse(unnamed, {.collective = NcclCollective::all_gather}).rows.size() == 2);
    REQUIRE_THROWS_WITH(parse(kJsonV1, {.collective = NcclCollective::all_reduce}),
                        "log.txt: /args/0: the binary is all_gather_perf, but all_reduce was asked for");
  }
  SECTION("errors name the JSON pointer") {
    auto broken = [](const std::string& from, const std::string& to) { return replaced(kJsonV1, from, to); };
    REQUIRE_THROWS_WITH(parse(broken("\"time\":45.670000", "\"time\":\"nan\"")),
                        "log.txt: /results/1/out_of_place/time: is the string \"nan\", not a number (nccl-tests "
                        "writes a NaN as \"nan\")");
    REQUIRE_THROWS_WITH(parse(broken("\"root\":\"    -1\"", "\"root\":\"x\"")),
                        "log.txt: /results/0/root: \"x\" is not an integer");
    REQUIRE_THROWS_WITH(parse(broken("\"okay\":\"true\"", "\"okay\":\"yes\"")),
                        Contains("log.txt: /out_of_bounds/okay: expected true or false"));
    REQUIRE_THROWS_WITH(parse(broken("\"results\":[", "\"results\":[],\"x\":[")),
                        "log.txt: /results: no results (did the run stop before its first size?)");
    REQUIRE_THROWS_WITH(parse(broken("\"size\":1048576", "\"size\":1048572")),
                        Contains("log.txt: /results/1: size 1048572 B is not count 65536 x 4 B (float) x 4 ranks"));
    REQUIRE_THROWS_WITH(parse(kJsonV1.substr(0, 300)), Contains("log.txt: invalid JSON at line"));
  }
}

TEST_CASE("calibrate::fastest_per_size takes the faster direction and the fastest repeat", "[calibrate][nccl]") {
  NcclTestsLog log = parse(kAllReduce217);
  log.rows.push_back(log.rows[0]); // the 8 B row again (nccl-tests -N 2), faster in-place
  log.rows.back().in_place.time_s = 40e-6;
  const auto points = fastest_per_size(log.rows);
  REQUIRE(points.size() == 3);
  CHECK(points[0].size_bytes == 8);
  CHECK_THAT(points[0].time_s, WithinRel(40e-6, 1e-12));
  CHECK(points[1].size_bytes == 8192);
  CHECK_THAT(points[1].time_s, WithinRel(65.05e-6, 1e-12));
  CHECK_THAT(points[2].time_s, WithinRel(561.20e-6, 1e-12));

  log.rows.back().ranks = 8;
  REQUIRE_THROWS_WITH(fastest_per_size(log.rows), Contains("group them first"));
  REQUIRE_THROWS_AS(fastest_per_size({}), std::invalid_argument);
}

TEST_CASE("calibrate::find_measured_collective takes nccl-tests' and scenarios' spellings (#31)", "[calibrate][nccl]") {
  const auto [name, expected] = GENERATE(table<std::string, NcclCollective>({
      {"all_reduce", NcclCollective::all_reduce},
      {"allreduce", NcclCollective::all_reduce},
      {"all_gather_perf", NcclCollective::all_gather},
      {"allgather", NcclCollective::all_gather},
      {"reduce_scatter", NcclCollective::reduce_scatter},
      {"broadcast", NcclCollective::broadcast},
      {"point_to_point", NcclCollective::sendrecv},
      {"sendrecv", NcclCollective::sendrecv},
      {"alltoall", NcclCollective::alltoall},
  }));
  CAPTURE(name);
  CHECK(find_measured_collective(name) == expected);
  CHECK_FALSE(find_measured_collective("allreduc"));
  CHECK_FALSE(find_measured_collective("allreduce_perf")); // a binary has nccl-tests' name only
}

TEST_CASE("calibrate::parse_nccl_tests range-checks every count of -J JSON before using it (#31 R04)",
          "[calibrate][nccl][json]") {
  // ngpus 0 made a communicator of 0 ranks, 2^31 and 2^32 wrapped to negative and 0 ranks: each failed inside
  // busbw_factor (an internal error, exit 1).
  const auto [from, to, message] = GENERATE(table<std::string, std::string, std::string>({
      {"\"ngpus\":2", "\"ngpus\":0", "log.txt: /config/ngpus: 0 is out of range [1, 1048576]"},
      {"\"ngpus\":2", "\"ngpus\":2147483648", "log.txt: /config/ngpus: 2147483648 is out of range [1, 1048576]"},
      {"\"ngpus\":2", "\"ngpus\":4294967296", "log.txt: /config/ngpus: 4294967296 is out of range [1, 1048576]"},
      {"\"ngpus\":2", "\"ngpus\":-2", "log.txt: /config/ngpus: -2 is out of range [1, 1048576]"},
      {"\"nthreads\":1", "\"nthreads\":1048576",
       "log.txt: /config/ngpus: nthreads x ngpus is 2097152, more than the 1048576 ranks a communicator has here"},
      {"\"ngpus\":2", "\"ngpus\":524289",
       "log.txt: /config/devices: 1048578 ranks (2 listed x 524289 per entry); a communicator has 1 to 1048576 ranks"},
      {"\"rank\":2", "\"rank\":4294967296", "log.txt: /config/devices/1/rank: 4294967296 is out of range [0, 1048575]"},
      {"\"group\":0,\"pid\":202", "\"group\":2147483648,\"pid\":202",
       "log.txt: /config/devices/1/group: 2147483648 is out of range [0, 2147483647]"},
      {"\"root\":\"    -1\"", "\"root\":4294967296",
       "log.txt: /results/0/root: 4294967296 is out of range [-1, 1048575]"},
  }));
  CAPTURE(to);
  REQUIRE_THROWS_WITH(parse(replaced(kJsonV1, from, to)), message);
}

TEST_CASE("calibrate::parse_nccl_tests refuses sizes and times a calibration cannot hold (#31 R12)",
          "[calibrate][nccl]") {
  // `ddlsim calibrate` wrote them, and its own reader refused the file: '1e-306 s', sizes over 1 PiB.
  SECTION("text") {
    const std::string row = "        8192          2048     float     sum      -1    72.11";
    REQUIRE_THROWS_WITH(
        parse(replaced(kAllReduce217, row, "        8192          2048     float     sum      -1  1e-300")),
        "log.txt: line 15: time '1e-306 s' is out of range: a time is 0 or between 1e-15 s and 1e7 s "
        "(116 days)");
    REQUIRE_THROWS_WITH(
        parse(replaced(kAllReduce217, row, "        8192          2048     float     sum      -1  1e+300")),
        Contains("log.txt: line 15: time '1e+294 s' is out of range"));
    // 2 PiB of floats: count x 4 B, as nccl-tests prints it
    REQUIRE_THROWS_WITH(
        parse(replaced(kAllReduce217, row, "2251799813685248 562949953421312     float     sum      -1    72.11")),
        "log.txt: line 15: size '2251799813685248 B' is out of range: a size is 0 or between 1 B and 1 PiB");
    // 1 PiB itself is read
    CHECK(parse(replaced(kAllReduce217, row, "1125899906842624 281474976710656     float     sum      -1    72.11"))
              .rows[1]
              .size_bytes == 1125899906842624);
  }
  SECTION("JSON") {
    REQUIRE_THROWS_WITH(parse(replaced(kJsonV1, "\"time\":45.670000", "\"time\":1e-300")),
                        Contains("log.txt: /results/1: time '1e-306 s' is out of range"));
    // a count that wraps 64 bits when multiplied by 4 B and 4 ranks is no match for the size, not a wrapped one
    REQUIRE_THROWS_WITH(
        parse(replaced(kJsonV1, "{\"size\":0,\"count\":0", "{\"size\":0,\"count\":4611686018427387904")),
        Contains("log.txt: /results/0: size 0 B is not count 4611686018427387904 x 4 B (float) x 4 ranks"));
  }
}

TEST_CASE("calibrate::parse_nccl_tests bounds what it reads: rows, listed ranks, words, notes (#31 R03)",
          "[calibrate][nccl]") {
  // kAllReduce217's table with `rows` rows of 8 B each (nccl-tests -N repeats a size).
  const auto with_rows = [](std::size_t rows) {
    const std::string row = "           8             2     float     sum      -1    48.77    0.00    0.00       0    "
                            "44.82    0.00    0.00       0\n";
    std::string text = kAllReduce217.substr(0, kAllReduce217.find("           8    "));
    text.reserve(text.size() + rows * row.size());
    for (std::size_t i = 0; i < rows; ++i)
      text += row;
    return text;
  };
  // The bound, checked at 1,000 rows (max_rows; kMaxNcclRows reads the same way, 100 times longer: a minute in
  // the debug build). The default is kMaxNcclRows.
  CHECK(NcclReadOptions{}.max_rows == kMaxNcclRows);
  constexpr std::size_t kRows = 1000;
  const NcclReadOptions bounded{.max_rows = kRows};
  CHECK(parse(with_rows(kRows), bounded).rows.size() == kRows);
  REQUIRE_THROWS_WITH(parse(with_rows(kRows + 1), bounded),
                      fmt::format("log.txt: line {}: more than 1000 rows, the most ddlsim reads from one log "
                                  "(calibrate/nccl_tests.hpp)",
                                  kRows + 14));

  std::string results = "\"results\":[";
  const std::string result = R"({"size":0,"count":0,"type":"float","redop":"none","root":"    -1",)"
                             R"("in_place":{"time":7.52,"alg_bw":0,"bus_bw":0}},)";
  for (std::size_t i = 0; i + 1 < kRows; ++i) // and kJsonV1's own 2
    results += result;
  REQUIRE_THROWS_WITH(parse(replaced(kJsonV1, "\"results\":[", results), bounded),
                      "log.txt: /results: 1001 results, more than the 1000 ddlsim reads from one log "
                      "(calibrate/nccl_tests.hpp)");

  // A row of 100 fields is counted up to 64; 150 "Reducing maxBytes" lines give 100 notes and a count.
  std::string extra;
  for (int i = 0; i < 90; ++i)
    extra += " 0";
  REQUIRE_THROWS_WITH(parse(replaced(kAllReduce217, "0    44.82", "0" + extra + "    44.82")),
                      Contains("log.txt: line 14: more than 64 fields, but the header at line 12 names 13"));
  std::string reduced;
  for (int i = 0; i < 150; ++i)
    reduced += "# Reducing maxBytes to 26549638485 due to memory limitation\n";
  const NcclTestsLog log = parse(reduced + kAllReduce217);
  REQUIRE(log.notes.size() == 101);
  CHECK(log.notes[99] == "line 100: nccl-tests reduced maxBytes to 26549638485 for lack of GPU memory");
  CHECK(log.notes[100] == "50 more notes like these left out");
}
