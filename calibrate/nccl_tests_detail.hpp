// What the text and the JSON readers of nccl-tests output share (nccl_tests.cpp, nccl_tests_json.cpp): the rank
// listing, the checks of a row against nccl-tests' definitions of size and busbw.
#pragma once

#include "calibrate/nccl_tests.hpp"

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace ddlsim::calibrate::detail {

/// One entry of the device listing: "#  Rank  3 Group  0 Pid  36603 on x3006c0s1b1n0 device  3 [0xc7] ..." in text
/// (no Group before nccl-tests 2.13.0), one object of `config.devices` in JSON.
struct DeviceEntry {
  int rank = 0;
  std::optional<int> group;
  std::string host;
};

struct Communicator {
  int ranks = 0;
  int nodes = 0; ///< 0 when unknown
};

/// The communicator a table was measured on: the listing's entries in the group of its first entry (nccl-tests
/// splits MPI processes into groups with NCCL_TESTS_SPLIT; each group is one communicator and rank 0's table is
/// printed, src/common.cu), each entry standing for `ranks_per_entry` ranks (JSON lists one entry per process:
/// src/util.cu, writeDeviceReport), and their distinct hosts. Without a listing, `options.ranks` and nodes 0.
/// Throws InputError(origin, where, ...) when neither gives the rank count or they disagree.
[[nodiscard]] Communicator resolve_communicator(std::span<const DeviceEntry> listing, int ranks_per_entry,
                                                bool listing_cut, const NcclReadOptions& options,
                                                const std::string& origin, const std::string& where);

/// Bytes per element of an nccl-tests type name (src/common.cu, test_typenames; src/common.h, wordSize), or
/// nullopt for a name it does not list.
[[nodiscard]] std::optional<int> type_bytes(std::string_view type);

/// Throws InputError(origin, where, ...) unless size = count · type bytes (· ranks for size_is_whole_buffer), the
/// relation every nccl-tests version prints (src/<collective>.cu, *GetCollByteCount; src/common.cu, TimeTest): a
/// table of another collective, or another rank count, read as this one fails it. Skipped for count 0 or an
/// unknown type.
void check_size(const NcclMeasurement& row, const std::string& origin, const std::string& where);

/// Why a row's size or a time is not one a calibration holds (core/units.hpp, quantity_range: 0 or 1 B to 1 PiB,
/// 1e-15 s to 1e7 s), or nullopt: what `ddlsim calibrate` would write of it, its reader would refuse.
[[nodiscard]] std::optional<std::string> out_of_range(const NcclMeasurement& row);

/// Half the last printed digit of algbw and busbw (GB/s): what rounding may have moved them by.
struct Resolution {
  double algbw_GBps = 0;
  double busbw_GBps = 0;
};

/// A message if busbw is not busbw_factor · algbw within the printing resolution, else nullopt. Logs of nccl-tests
/// before June 2020 printed all_gather and reduce_scatter's algbw equal to busbw (its commit ec1b5e2) and fail this.
[[nodiscard]] std::optional<std::string> busbw_mismatch(const NcclMeasurement& row, const NcclTiming& timing,
                                                        const Resolution& resolution);

/// Parses `-J` JSON output (nccl_tests_json.cpp).
[[nodiscard]] NcclTestsLog parse_json(std::string_view text, const std::string& origin, const NcclReadOptions& options);

} // namespace ddlsim::calibrate::detail
