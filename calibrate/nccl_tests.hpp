// Reads the output of NVIDIA's nccl-tests (github.com/NVIDIA/nccl-tests): the tables the `*_perf` binaries print and
// the JSON file they write with `-J`. Definitions follow nccl-tests' sources (2.19.6, a0b82b2): the printed size is
// max(send, receive bytes) per rank (src/common.cu, TimeTest), algbw = size / time and busbw = algbw · factor
// (src/<collective>.cu, *GetBw), the table and JSON layouts from src/util.cu (writeResultHeader,
// writeBenchmarkLine*, writeDeviceReport, writePerIterReport) and, for logs before nccl-tests 2.13.0, each test's
// print_header(). Tags as in nccl-tests' git history: -J from 2.17.3, -S from 2.17.6, -I from 2.19.2.
#pragma once

#include "core/collective.hpp"
#include "dag/measured.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ddlsim::calibrate {

/// The most rows read from one log, and from all the logs and probe files of one `ddlsim calibrate`: nccl-tests'
/// sweeps print tens of rows (-f 2) to a few thousand (-i STEP); 100,000 rows take about 20 MB, and their fit well
/// under a second (alpha_beta.hpp). Beyond, the reader refuses, naming the limit.
inline constexpr std::size_t kMaxNcclRows = 100'000;
/// The most ranks of a communicator read from a log, a probe file or --ranks: as many GPUs as a scenario may have
/// (sim/spec/scenario.hpp, kMaxGpus).
inline constexpr int kMaxRanks = 1 << 20;

/// The nccl-tests benchmarks this reader knows, named like their binaries without `_perf`.
enum class NcclCollective : std::uint8_t {
  all_reduce,
  all_gather,
  reduce_scatter,
  broadcast,
  reduce,
  alltoall,
  sendrecv,
  gather,
  scatter
};

/// "all_reduce", "all_gather", ... (the binary is this plus "_perf").
[[nodiscard]] std::string_view nccl_collective_name(NcclCollective c);
/// From a test or binary name: "all_reduce", "all_reduce_perf", "./build/all_reduce_perf", "all_reduce_perf_mpi".
[[nodiscard]] std::optional<NcclCollective> find_nccl_collective(std::string_view name);
/// As a user names it (`ddlsim calibrate --collective`): as find_nccl_collective, or by the ddlsim collective it
/// measures as a scenario spells it (ddlsim_collective): "allreduce", "allgather", "point_to_point", ...
[[nodiscard]] std::optional<NcclCollective> find_measured_collective(std::string_view name);
/// The ddlsim collective it measures, if ddlsim has one (core/collective.hpp): sendrecv is point_to_point (nccl-tests'
/// sendrecv_perf: each rank sends to the next and receives from the previous); reduce, alltoall, gather and scatter
/// have none yet.
[[nodiscard]] std::optional<Collective> ddlsim_collective(NcclCollective c);

/// busbw / algbw as nccl-tests defines it for `ranks` ranks (src/<collective>.cu, *GetBw): all_reduce 2(n-1)/n
/// (all_reduce.cu); all_gather, reduce_scatter, alltoall, gather, scatter (n-1)/n (all_gather.cu,
/// reduce_scatter.cu, alltoall.cu, gather.cu, scatter.cu); broadcast, reduce, sendrecv 1 (broadcast.cu, reduce.cu,
/// sendrecv.cu). `ranks` >= 1.
[[nodiscard]] double busbw_factor(NcclCollective c, int ranks);

/// Whether nccl-tests' `size` is the whole buffer of all ranks, n times the per-rank `count` (all_gather: the
/// receive buffer; reduce_scatter: the send buffer; alltoall: either; gather, scatter: the root's buffer), rather than
/// one rank's message (src/<collective>.cu, *GetCollByteCount, printed as max(send, receive) in common.cu).
[[nodiscard]] bool size_is_whole_buffer(NcclCollective c);

/// One direction of a row: out-of-place or in-place.
struct NcclTiming {
  double time_s = 0;
  double algbw_Bps = 0; ///< bytes per second (nccl-tests prints GB/s, 1e9)
  double busbw_Bps = 0;
  /// `#wrong` (elements that failed validation) or, in logs before nccl-tests 2.13.0, `error` (the largest deviation);
  /// nullopt where it printed N/A (validation off, or in-place sendrecv and alltoall).
  std::optional<double> wrong;
};

/// One row of a table: one message size of one test.
struct NcclMeasurement {
  NcclCollective collective = NcclCollective::all_reduce;
  int ranks = 0;                ///< communicator size
  int nodes = 0;                ///< distinct hosts among the ranks; 0 when unknown (ranks given by the caller)
  std::uint64_t size_bytes = 0; ///< as nccl-tests prints it; see size_is_whole_buffer
  std::uint64_t count = 0;      ///< elements per rank, as printed
  std::string type;             ///< "float", "double", "bfloat16", ...
  std::string redop;            ///< "sum", "none", ...; empty when the table has no redop column
  int root = -1;                ///< -1 for rootless collectives, or when the table has no root column
  std::optional<NcclTiming> out_of_place; ///< absent only in JSON that recorded none (`"out_of_place": null`)
  NcclTiming in_place;
  std::size_t line = 0; ///< 1-based line of a text row; 0 for JSON

  /// The faster of in-place and out-of-place.
  [[nodiscard]] double fastest_s() const;
};

/// Everything read from one file.
struct NcclTestsLog {
  std::vector<NcclMeasurement> rows; ///< in file order
  /// What a user should know but does not stop the reading: failed validation (`#wrong` > 0, out-of-bounds values),
  /// busbw that does not match the factor for the ranks read (wrong rank count or collective), maxBytes reduced for
  /// lack of memory. Each starts with "line N: " (text) or the JSON pointer.
  std::vector<std::string> notes;
};

struct NcclReadOptions {
  /// The collective of a log that does not name it: text logs before nccl-tests 2.16.7 (no "# Collective test
  /// starting:" line), JSON whose `args[0]` is not a `*_perf` binary. A log that names another one is an error.
  std::optional<NcclCollective> collective = std::nullopt;
  /// The communicator size of a log without a device listing (e.g. only the table was kept); nodes are then 0.
  /// A listing that says otherwise is an error.
  std::optional<int> ranks = std::nullopt;
  /// The most rows (sizes) read from one log; kMaxNcclRows unless a test checks the bound on a smaller one.
  std::size_t max_rows = kMaxNcclRows;
};

/// Parses nccl-tests output: JSON if the first non-blank character is '{', else text (any number of tests, each
/// with its device listing and table; lines that are neither, such as NCCL INFO logs or the command line, are
/// skipped). Throws InputError(origin, "line N", ...) for a truncated or malformed row, a row outside any table, a
/// header with no rows, an unknown column, a missing collective or rank count, an empty input; JSON errors name the
/// JSON pointer.
[[nodiscard]] NcclTestsLog parse_nccl_tests(std::string_view text, const std::string& origin,
                                            const NcclReadOptions& options = {});
/// Reads and parses a file (parse_nccl_tests with the path as origin).
[[nodiscard]] NcclTestsLog read_nccl_tests(const std::string& path, const NcclReadOptions& options = {});

/// The faster of in-place and out-of-place per distinct size, ascending. Several rows of one size (nccl-tests `-N`
/// cycles, `-d all`, the 0-byte rows an all_gather sweep from 4 B prints) give their fastest. Every row must be of
/// one collective, rank count and node count; throws std::invalid_argument otherwise or when `rows` is empty.
[[nodiscard]] std::vector<dag::SizeTime> fastest_per_size(std::span<const NcclMeasurement> rows);

/// The rows of one (collective, ranks, nodes), e.g. for fastest_per_size. Sorted by those keys; each series keeps
/// file order.
struct NcclSeries {
  NcclCollective collective = NcclCollective::all_reduce;
  int ranks = 0;
  int nodes = 0;
  std::vector<NcclMeasurement> rows;
};
[[nodiscard]] std::vector<NcclSeries> group_by_communicator(std::span<const NcclMeasurement> rows);

} // namespace ddlsim::calibrate
