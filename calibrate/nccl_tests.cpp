// nccl-tests text tables (nccl_tests.hpp): one pass over the lines with a small state per test (its name, device
// listing, table layout). Layouts as printed by src/util.cu (writeResultHeader, writeBenchmarkLinePreamble,
// writeBenchmarkLineBody; writePerIterReport for -I, 2.19.2; writeTimestamp for -S, 2.17.6) and, before nccl-tests
// 2.13.0 (51af557), by each test's print_header(); the collective's name by the "# Collective test starting:" line
// (dafb704, 2.16.7).
#include "calibrate/nccl_tests.hpp"

#include "calibrate/nccl_tests_detail.hpp"
#include "core/error.hpp"
#include "core/io.hpp"
#include "core/units.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>

namespace ddlsim::calibrate {

// ---------------------------------------------------------------------------------------------------------------
// Names and definitions

namespace {
struct CollectiveInfo {
  NcclCollective collective;
  std::string_view name;
};
constexpr CollectiveInfo kCollectives[] = {
    {NcclCollective::all_reduce, "all_reduce"},
    {NcclCollective::all_gather, "all_gather"},
    {NcclCollective::reduce_scatter, "reduce_scatter"},
    {NcclCollective::broadcast, "broadcast"},
    {NcclCollective::reduce, "reduce"},
    {NcclCollective::alltoall, "alltoall"},
    {NcclCollective::sendrecv, "sendrecv"},
    {NcclCollective::gather, "gather"},
    {NcclCollective::scatter, "scatter"},
};
} // namespace

std::string_view nccl_collective_name(NcclCollective c) {
  for (const auto& info : kCollectives)
    if (info.collective == c)
      return info.name;
  return "?";
}

std::optional<NcclCollective> find_nccl_collective(std::string_view name) {
  if (const auto slash = name.find_last_of("/\\"); slash != std::string_view::npos)
    name.remove_prefix(slash + 1);
  for (std::string_view suffix : {"_mpi", "_perf"})
    if (name.ends_with(suffix))
      name.remove_suffix(suffix.size());
  for (const auto& info : kCollectives)
    if (info.name == name)
      return info.collective;
  return std::nullopt;
}

std::optional<NcclCollective> find_measured_collective(std::string_view name) {
  if (const auto c = find_nccl_collective(name))
    return c;
  for (const auto& info : kCollectives)
    if (const auto c = ddlsim_collective(info.collective); c && collective_name(*c) == name)
      return info.collective;
  return std::nullopt;
}

std::optional<Collective> ddlsim_collective(NcclCollective c) {
  switch (c) {
  case NcclCollective::all_reduce:
    return Collective::allreduce;
  case NcclCollective::all_gather:
    return Collective::allgather;
  case NcclCollective::reduce_scatter:
    return Collective::reduce_scatter;
  case NcclCollective::broadcast:
    return Collective::broadcast;
  case NcclCollective::sendrecv:
    return Collective::point_to_point;
  case NcclCollective::reduce:
  case NcclCollective::alltoall:
  case NcclCollective::gather:
  case NcclCollective::scatter:
    return std::nullopt;
  }
  return std::nullopt;
}

double busbw_factor(NcclCollective c, int ranks) {
  if (ranks < 1)
    throw std::invalid_argument(fmt::format("busbw_factor: {} ranks; a communicator has at least 1", ranks));
  const double n = ranks;
  switch (c) {
  case NcclCollective::all_reduce: // src/all_reduce.cu, AllReduceGetBw
    return 2.0 * (n - 1) / n;
  case NcclCollective::all_gather:     // src/all_gather.cu, AllGatherGetBw
  case NcclCollective::reduce_scatter: // src/reduce_scatter.cu, ReduceScatterGetBw
  case NcclCollective::alltoall:       // src/alltoall.cu, AlltoAllGetBw
  case NcclCollective::gather:         // src/gather.cu, GatherGetBw
  case NcclCollective::scatter:        // src/scatter.cu, ScatterGetBw
    return (n - 1) / n;
  case NcclCollective::broadcast: // src/broadcast.cu, BroadcastGetBw
  case NcclCollective::reduce:    // src/reduce.cu, ReduceGetBw
  case NcclCollective::sendrecv:  // src/sendrecv.cu, SendRecvGetBw
    return 1.0;
  }
  return 1.0;
}

bool size_is_whole_buffer(NcclCollective c) {
  switch (c) {
  case NcclCollective::all_gather:
  case NcclCollective::reduce_scatter:
  case NcclCollective::alltoall:
  case NcclCollective::gather:
  case NcclCollective::scatter:
    return true;
  case NcclCollective::all_reduce:
  case NcclCollective::broadcast:
  case NcclCollective::reduce:
  case NcclCollective::sendrecv:
    return false;
  }
  return false;
}

double NcclMeasurement::fastest_s() const {
  return out_of_place ? std::min(out_of_place->time_s, in_place.time_s) : in_place.time_s;
}

// ---------------------------------------------------------------------------------------------------------------
// Shared checks (nccl_tests_detail.hpp)

namespace detail {

Communicator resolve_communicator(std::span<const DeviceEntry> listing, int ranks_per_entry, bool listing_cut,
                                  const NcclReadOptions& options, const std::string& origin, const std::string& where) {
  if (options.ranks && (*options.ranks < 1 || *options.ranks > kMaxRanks))
    throw InputError(origin, where,
                     fmt::format("{} ranks given; a communicator has 1 to {} ranks", *options.ranks, kMaxRanks));
  if (listing.empty() || listing_cut) {
    if (options.ranks)
      return {*options.ranks, 0};
    throw InputError(origin, where,
                     listing.empty()
                         ? "no device listing ('#  Rank 0 Group 0 Pid ... on HOST device ...') before the table, so "
                           "the number of ranks is unknown; pass it"
                         : "the device listing was cut short (nccl-tests prints at most 2048 characters per "
                           "process), so the number of ranks is unknown; pass it");
  }
  std::set<int> ranks;
  std::set<std::string> hosts;
  for (const DeviceEntry& e : listing) {
    if (e.group != listing.front().group)
      continue;
    if (!ranks.insert(e.rank).second)
      throw InputError(origin, where, fmt::format("the device listing names rank {} twice", e.rank));
    hosts.insert(e.host);
  }
  const auto total = static_cast<std::int64_t>(ranks.size()) * ranks_per_entry;
  if (ranks_per_entry < 1 || total > kMaxRanks)
    throw InputError(origin, where,
                     fmt::format("{} ranks ({} listed x {} per entry); a communicator has 1 to {} ranks", total,
                                 ranks.size(), ranks_per_entry, kMaxRanks));
  const Communicator c{static_cast<int>(total), static_cast<int>(hosts.size())};
  if (options.ranks && *options.ranks != c.ranks)
    throw InputError(origin, where,
                     fmt::format("the device listing has {} ranks, but {} were given", c.ranks, *options.ranks));
  return c;
}

std::optional<int> type_bytes(std::string_view type) {
  static constexpr std::pair<std::string_view, int> kTypes[] = {
      {"int8", 1},  {"uint8", 1},  {"char", 1}, {"f8e4m3", 1}, {"f8e5m2", 1}, {"half", 2},   {"bfloat16", 2},
      {"int32", 4}, {"uint32", 4}, {"int", 4},  {"float", 4},  {"int64", 8},  {"uint64", 8}, {"double", 8},
  };
  for (const auto& [name, bytes] : kTypes)
    if (name == type)
      return bytes;
  return std::nullopt;
}

void check_size(const NcclMeasurement& row, const std::string& origin, const std::string& where) {
  const auto bytes = type_bytes(row.type);
  if (row.count == 0 || !bytes)
    return;
  const bool whole = size_is_whole_buffer(row.collective);
  // In doubles: exact up to 2^53, and a product beyond is more than any size read (at most 1 PiB, check_range).
  const double expected = static_cast<double>(row.count) * *bytes * (whole ? row.ranks : 1);
  if (static_cast<double>(row.size_bytes) == expected)
    return;
  throw InputError(origin, where,
                   fmt::format("size {} B is not count {} x {} B ({}){}, as {}_perf prints it: is this another "
                               "collective's table, or another number of ranks?",
                               row.size_bytes, row.count, *bytes, row.type,
                               whole ? fmt::format(" x {} ranks", row.ranks) : "",
                               nccl_collective_name(row.collective)));
}

std::optional<std::string> out_of_range(const NcclMeasurement& row) {
  if (auto e = quantity_range_error(static_cast<double>(row.size_bytes), Dimension::bytes,
                                    fmt::format("{} B", row.size_bytes));
      !e.empty())
    return fmt::format("size {}", e);
  for (const NcclTiming* t : {row.out_of_place ? &*row.out_of_place : nullptr, &row.in_place})
    if (t)
      if (auto e = quantity_range_error(t->time_s, Dimension::time, fmt::format("{} s", t->time_s)); !e.empty())
        return fmt::format("time {}", e);
  return std::nullopt;
}

std::optional<std::string> busbw_mismatch(const NcclMeasurement& row, const NcclTiming& timing,
                                          const Resolution& resolution) {
  const double factor = busbw_factor(row.collective, row.ranks);
  const double alg = timing.algbw_Bps / 1e9, bus = timing.busbw_Bps / 1e9;
  const double slack = resolution.busbw_GBps + factor * resolution.algbw_GBps + 1e-9 * bus;
  if (std::abs(bus - factor * alg) <= slack)
    return std::nullopt;
  return fmt::format(
      "busbw {:.6g} GB/s is not {:.4g} x algbw {:.6g} GB/s, the factor of {} on {} ranks: is the number of "
      "ranks or the collective wrong?",
      bus, factor, alg, nccl_collective_name(row.collective), row.ranks);
}

} // namespace detail

// ---------------------------------------------------------------------------------------------------------------
// Text tables

namespace {

using detail::DeviceEntry;

// The most words of a line kept: a table row has at most 23 (size, count, type, redop, root, two sides of time,
// algbw, busbw, #wrong and four -I statistics, a two-word timestamp); a longer line has kMaxWords + 1 (too many).
constexpr std::size_t kMaxWords = 64;
// The most notes kept per log; more are counted in one last note.
constexpr std::size_t kMaxNotes = 100;

std::vector<std::string_view> split_words(std::string_view line) {
  std::vector<std::string_view> words;
  std::size_t i = 0;
  while (i < line.size() && words.size() <= kMaxWords) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t'))
      ++i;
    const std::size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t')
      ++i;
    if (i > start)
      words.push_back(line.substr(start, i - start));
  }
  return words;
}

// The length of Open MPI's output tag at the start of `text` (`mpirun --tag-output`: "[JOB,RANK]<stdout>:", or
// <stderr>, <stddiag>), 0 if none starts there.
std::size_t mpi_tag_length(std::string_view text) {
  const auto digits = [](std::string_view d) {
    return !d.empty() && std::all_of(d.begin(), d.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  const std::size_t close = text.find(']');
  if (!text.starts_with('[') || close == std::string_view::npos)
    return 0;
  const std::string_view ids = text.substr(1, close - 1);
  const std::size_t comma = ids.find(',');
  if (comma == std::string_view::npos || !digits(ids.substr(0, comma)) || !digits(ids.substr(comma + 1)))
    return 0;
  for (const std::string_view stream : {"<stdout>:", "<stderr>:", "<stddiag>:"})
    if (text.substr(close + 1).starts_with(stream))
      return close + 1 + stream.size();
  return 0;
}

// The line without Open MPI's output tags: at its start, as a multi-node nccl-tests run under mpirun prints every
// line, and inside it, where mpirun forwarded a line in two pieces (Echo's 128-GPU log has one in a device line).
std::string without_mpi_tags(std::string_view line) {
  std::string out;
  out.reserve(line.size());
  for (std::size_t i = 0; i < line.size();) {
    const std::size_t tag = line[i] == '[' ? mpi_tag_length(line.substr(i)) : 0;
    if (tag > 0) {
      i += tag;
    } else {
      out.push_back(line[i]);
      ++i;
    }
  }
  return out;
}

bool starts_with_digit(std::string_view word) {
  return !word.empty() && word[0] >= '0' && word[0] <= '9';
}

template <typename T> std::optional<T> parse_integer(std::string_view word) {
  T value{};
  const auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), value);
  if (ec != std::errc{} || end != word.data() + word.size())
    return std::nullopt;
  return value;
}

std::optional<double> parse_double(std::string_view word) {
  double value = 0;
  const auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), value);
  if (ec != std::errc{} || end != word.data() + word.size() || !std::isfinite(value))
    return std::nullopt;
  return value;
}

// Half the last digit a printed number shows: "9.45" -> 0.005, "14716" -> 0.5, "1.2e+03" -> 50.
double print_resolution(std::string_view word) {
  int exponent = 0;
  if (const auto e = word.find_first_of("eE"); e != std::string_view::npos) {
    const bool plus = e + 1 < word.size() && word[e + 1] == '+';
    exponent = parse_integer<int>(word.substr(plus ? e + 2 : e + 1)).value_or(0);
    word = word.substr(0, e);
  }
  const auto dot = word.find('.');
  const int decimals = dot == std::string_view::npos ? 0 : static_cast<int>(word.size() - dot - 1);
  return 0.5 * std::pow(10.0, exponent - decimals);
}

// Where each field of a row is, from the header "#  size  count  type  redop  root  time  algbw  busbw  #wrong ...".
struct Layout {
  struct Side {
    std::size_t time = 0, algbw = 0, busbw = 0;
    std::optional<std::size_t> wrong; ///< "#wrong" or, before nccl-tests 2.13.0, "error"
    bool wrong_counts_elements = true;
    std::vector<std::size_t> extra; ///< -I per-iteration statistics: i_min, i_max, i_p99, i_cv%
  };
  std::vector<std::string> names;
  std::optional<std::size_t> redop, root;
  Side sides[2];          ///< out-of-place, in-place
  bool timestamp = false; ///< -S: a trailing "timestamp" column, "YYYY-MM-DD HH:MM:SS" in two words
  std::size_t line = 0;

  /// Words in a row: one per column, two for the timestamp.
  [[nodiscard]] std::size_t words() const { return names.size() + (timestamp ? 1 : 0); }
};

// The header's words after '#'; nullopt if it is not a table header (first words other than size, count, type).
std::optional<Layout> parse_header(const std::vector<std::string_view>& words, std::size_t line,
                                   const std::string& origin) {
  if (words.size() < 3 || words[0] != "size" || words[1] != "count" || words[2] != "type")
    return std::nullopt;
  const auto fail = [&](const std::string& message) -> Layout {
    throw InputError(origin, fmt::format("line {}", line), "table header: " + message);
  };
  Layout layout;
  layout.line = line;
  layout.names = {"size", "count", "type"};
  std::size_t i = 3;
  for (; i < words.size() && (words[i] == "redop" || words[i] == "root"); ++i) {
    (words[i] == "redop" ? layout.redop : layout.root) = layout.names.size();
    layout.names.emplace_back(words[i]);
  }
  for (int side = 0; side < 2; ++side) {
    if (i >= words.size() || (words[i] != "time" && words[i] != "cputime"))
      return fail(fmt::format("expected the {} columns to start with 'time' after '{}'",
                              side == 0 ? "out-of-place" : "in-place", layout.names.back()));
    Layout::Side& s = layout.sides[side];
    s.time = layout.names.size();
    layout.names.emplace_back(words[i++]);
    bool algbw = false, busbw = false;
    for (; i < words.size() && words[i] != "time" && words[i] != "cputime" && words[i] != "timestamp"; ++i) {
      const std::string_view w = words[i];
      const std::size_t at = layout.names.size();
      if (w == "algbw" && !algbw) {
        s.algbw = at;
        algbw = true;
      } else if (w == "busbw" && !busbw) {
        s.busbw = at;
        busbw = true;
      } else if ((w == "#wrong" || w == "error") && !s.wrong) {
        s.wrong = at;
        s.wrong_counts_elements = w == "#wrong";
      } else if (w == "i_min" || w == "i_max" || w == "i_p99" || w == "i_cv%") {
        s.extra.push_back(at);
      } else {
        return fail(fmt::format("unknown or repeated column '{}'", w));
      }
      layout.names.emplace_back(w);
    }
    if (!algbw || !busbw)
      return fail(
          fmt::format("the {} columns lack {}", side == 0 ? "out-of-place" : "in-place", algbw ? "busbw" : "algbw"));
  }
  if (i < words.size() && words[i] == "timestamp") {
    layout.timestamp = true;
    layout.names.emplace_back(words[i++]);
  }
  if (i < words.size())
    return fail(fmt::format("unexpected column '{}' after the in-place columns", words[i]));
  return layout;
}

// "#  Rank  0 Group  0 Pid  36600 on x3006c0s1b1n0 device  0 [0x07] NVIDIA A100-SXM4-40GB" (src/util.cu,
// writeDeviceReport), before nccl-tests 2.13.0 without "Group N". The words after '#'.
std::optional<DeviceEntry> parse_rank_line(const std::vector<std::string_view>& words) {
  std::size_t i = 2;
  DeviceEntry e;
  const auto rank = words.size() > 1 ? parse_integer<int>(words[1]) : std::nullopt;
  if (!rank)
    return std::nullopt;
  e.rank = *rank;
  if (i + 1 < words.size() && words[i] == "Group") {
    e.group = parse_integer<int>(words[i + 1]);
    if (!e.group)
      return std::nullopt;
    i += 2;
  }
  if (i + 4 >= words.size() || words[i] != "Pid" || !parse_integer<long>(words[i + 1]) || words[i + 2] != "on" ||
      words[i + 4] != "device")
    return std::nullopt;
  e.host = std::string(words[i + 3]);
  return e;
}

class TextReader {
public:
  TextReader(const std::string& origin, const NcclReadOptions& options) : origin_(origin), options_(options) {}

  NcclTestsLog read(std::string_view text);

private:
  [[noreturn]] void fail(std::size_t line, const std::string& message) const {
    throw InputError(origin_, fmt::format("line {}", line), message);
  }
  // The first kMaxNotes notes, then only their count (a log of a million "Reducing maxBytes" lines).
  void note(std::string text) {
    if (log_.notes.size() < kMaxNotes)
      log_.notes.push_back(std::move(text));
    else
      ++notes_left_out_;
  }
  void comment(const std::vector<std::string_view>& words, std::size_t line);
  void start_table(Layout layout);
  void row(const std::vector<std::string_view>& words, std::size_t line);
  void finish_table();
  void new_test() {
    named_.reset();
    unsupported_.clear();
    listing_.clear();
    listing_cut_ = false;
    test_has_table_ = false;
  }

  const std::string& origin_;
  const NcclReadOptions& options_;
  NcclTestsLog log_;
  // The current test: what its log said before the table.
  std::optional<NcclCollective> named_;
  std::size_t named_line_ = 0;
  std::string unsupported_; // a "Collective test starting:" name this reader does not know: its table is skipped
  std::vector<DeviceEntry> listing_;
  bool listing_cut_ = false;
  bool test_has_table_ = false;
  // The current table.
  std::optional<Layout> table_;
  bool units_seen_ = false;
  NcclCollective collective_ = NcclCollective::all_reduce;
  detail::Communicator comm_;
  std::size_t table_rows_ = 0, wrong_rows_ = 0, first_wrong_line_ = 0;
  std::optional<std::string> busbw_note_;
  std::size_t notes_left_out_ = 0;
};

NcclTestsLog TextReader::read(std::string_view text) {
  std::size_t line = 0, pos = 0;
  bool any = false;
  while (pos < text.size()) {
    const std::size_t end = std::min(text.find('\n', pos), text.size());
    std::string_view raw = text.substr(pos, end - pos);
    pos = end + 1;
    ++line;
    if (!raw.empty() && raw.back() == '\r')
      raw.remove_suffix(1);
    const std::string untagged = without_mpi_tags(raw);
    const auto words = split_words(untagged);
    if (words.empty())
      continue;
    any = true;
    if (words[0][0] == '#') {
      std::vector<std::string_view> after = words;
      if (after[0].size() == 1)
        after.erase(after.begin());
      else
        after[0].remove_prefix(1);
      if (table_ && !units_seen_ && table_rows_ == 0 && !after.empty() && after[0] == "(B)") {
        units_seen_ = true; // "#  (B)  (elements) ... (us)  (GB/s)  (GB/s)"
        continue;
      }
      if (table_)
        finish_table();
      comment(after, line);
    } else if (table_) {
      if (starts_with_digit(words[0]))
        row(words, line);
      // else: NCCL INFO/WARN lines and other logging interleaved with the table
    } else if (starts_with_digit(words[0]) && words.size() >= 9 && parse_integer<std::uint64_t>(words[0]) &&
               parse_integer<std::uint64_t>(words[1])) {
      fail(line, "a table row before any column header ('#  size  count  type  redop  root  time  algbw  busbw "
                 "#wrong ...'): the header is missing");
    }
  }
  if (table_)
    finish_table();
  if (notes_left_out_ > 0)
    log_.notes.push_back(fmt::format("{} more notes like these left out", notes_left_out_));
  if (!any)
    fail(1, "empty file: no nccl-tests output");
  if (log_.rows.empty())
    fail(line, "end of file: no nccl-tests table (no '#  size  count  type ...' header line)");
  return std::move(log_);
}

void TextReader::comment(const std::vector<std::string_view>& words, std::size_t line) {
  if (words.empty())
    return;
  const auto starts = [&](std::initializer_list<std::string_view> prefix) {
    return words.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), words.begin());
  };
  if (starts({"nccl-tests", "version"})) {
    new_test();
  } else if (starts({"Collective", "test", "starting:"}) && words.size() >= 4) {
    new_test();
    named_ = find_nccl_collective(words[3]);
    named_line_ = line;
    if (!named_)
      unsupported_ = std::string(words[3]);
  } else if (starts({"Collective", "test", "concluded:"})) {
    new_test();
  } else if (starts({"nThread"})) {
    if (test_has_table_)
      new_test(); // a log before 2.16.7: tests follow each other without naming themselves
  } else if (starts({"Using", "devices"})) {
    listing_.clear();
    listing_cut_ = false;
  } else if (starts({"Rank"})) {
    if (auto e = parse_rank_line(words)) {
      if (listing_.size() == static_cast<std::size_t>(kMaxRanks))
        fail(line, fmt::format("more than {} ranks listed, the most a communicator has here", kMaxRanks));
      listing_.push_back(std::move(*e));
    } else if (words.back().ends_with("...")) {
      listing_cut_ = true;
    } else {
      fail(line, "malformed device line: expected '#  Rank R Group G Pid P on HOST device D ...'");
    }
  } else if (starts({"Reducing", "maxBytes", "to"}) && words.size() >= 4) {
    note(fmt::format("line {}: nccl-tests reduced maxBytes to {} for lack of GPU memory", line, words[3]));
  } else if (starts({"Out", "of", "bounds", "values"}) && words.back() == "FAILED") {
    note(fmt::format("line {}: nccl-tests reports out-of-bounds values (validation FAILED)", line));
  } else if (auto layout = parse_header(words, line, origin_)) {
    start_table(std::move(*layout));
  }
}

void TextReader::start_table(Layout layout) {
  const std::string where = fmt::format("line {}", layout.line);
  table_ = std::move(layout);
  units_seen_ = false;
  table_rows_ = wrong_rows_ = first_wrong_line_ = 0;
  busbw_note_.reset();
  test_has_table_ = true;
  if (!unsupported_.empty())
    return; // skipped with a note when the table ends
  if (named_ && options_.collective && *named_ != *options_.collective)
    throw InputError(origin_, where,
                     fmt::format("the log names {} (line {}), but {} was asked for", nccl_collective_name(*named_),
                                 named_line_, nccl_collective_name(*options_.collective)));
  if (!named_ && !options_.collective)
    throw InputError(origin_, where,
                     "the log does not name its collective (nccl-tests before 2.16.7 prints no '# Collective test "
                     "starting:' line); pass it");
  collective_ = named_ ? *named_ : *options_.collective;
  comm_ = detail::resolve_communicator(listing_, 1, listing_cut_, options_, origin_, where);
}

void TextReader::row(const std::vector<std::string_view>& words, std::size_t line) {
  const Layout& layout = *table_;
  if (!unsupported_.empty()) {
    ++table_rows_;
    return;
  }
  if (words.size() < layout.words())
    fail(line, fmt::format("truncated row: {} of {} fields (the header at line {} names {})", words.size(),
                           layout.words(), layout.line, fmt::join(layout.names, " ")));
  if (words.size() > layout.words())
    fail(line, fmt::format("{}{} fields, but the header at line {} names {} ({})",
                           words.size() > kMaxWords ? "more than " : "", std::min(words.size(), kMaxWords), layout.line,
                           layout.words(), fmt::join(layout.names, " ")));
  const auto field = [&](std::size_t i) {
    return fmt::format("field {} ('{}') is '{}', not ", i + 1, layout.names[i], words[i]);
  };
  const auto unsigned_at = [&](std::size_t i) {
    const auto v = parse_integer<std::uint64_t>(words[i]);
    if (!v)
      fail(line, field(i) + "a non-negative integer");
    return *v;
  };
  const auto number_at = [&](std::size_t i) {
    const auto v = parse_double(words[i]);
    if (!v || *v < 0)
      fail(line, field(i) + "a non-negative number");
    return *v;
  };

  NcclMeasurement m;
  m.collective = collective_;
  m.ranks = comm_.ranks;
  m.nodes = comm_.nodes;
  m.line = line;
  m.size_bytes = unsigned_at(0);
  m.count = unsigned_at(1);
  m.type = std::string(words[2]);
  if (layout.redop)
    m.redop = std::string(words[*layout.redop]);
  if (layout.root) {
    const auto root = parse_integer<int>(words[*layout.root]);
    if (!root)
      fail(line, field(*layout.root) + "an integer");
    m.root = *root;
  }
  detail::Resolution resolution[2];
  for (int side = 0; side < 2; ++side) {
    const Layout::Side& s = layout.sides[side];
    NcclTiming t;
    t.time_s = number_at(s.time) * 1e-6; // printed in us
    if (!(t.time_s > 0))
      fail(line, field(s.time) + "a time > 0");
    t.algbw_Bps = number_at(s.algbw) * 1e9; // printed in GB/s
    t.busbw_Bps = number_at(s.busbw) * 1e9;
    resolution[side] = {print_resolution(words[s.algbw]), print_resolution(words[s.busbw])};
    if (s.wrong && words[*s.wrong] != "N/A")
      t.wrong = number_at(*s.wrong);
    for (std::size_t i : s.extra)
      if (words[i] != "N/A")
        (void)number_at(i);
    if (s.wrong_counts_elements && t.wrong && *t.wrong > 0 && wrong_rows_++ == 0)
      first_wrong_line_ = line;
    if (side == 0)
      m.out_of_place = t;
    else
      m.in_place = t;
  }
  detail::check_size(m, origin_, fmt::format("line {}", line));
  if (const auto range = detail::out_of_range(m))
    fail(line, *range);
  if (log_.rows.size() == options_.max_rows)
    fail(line, fmt::format("more than {} rows, the most ddlsim reads from one log (calibrate/nccl_tests.hpp)",
                           options_.max_rows));
  for (int side = 0; side < 2 && !busbw_note_; ++side)
    if (auto note = detail::busbw_mismatch(m, side == 0 ? *m.out_of_place : m.in_place, resolution[side]))
      busbw_note_ = fmt::format("line {}: {} {}", line, side == 0 ? "out-of-place" : "in-place", *note);
  log_.rows.push_back(std::move(m));
  ++table_rows_;
}

void TextReader::finish_table() {
  const std::size_t header = table_->line;
  table_.reset();
  if (table_rows_ == 0)
    fail(header, "the table has no rows (is the log cut short?)");
  if (!unsupported_.empty()) {
    note(fmt::format("line {}: skipped the table of '{}', a test this reader does not know", header, unsupported_));
    return;
  }
  if (busbw_note_)
    note(*busbw_note_);
  if (wrong_rows_ > 0)
    note(fmt::format("line {}: validation failed (#wrong > 0) in {} row(s) of the table at line {}", first_wrong_line_,
                     wrong_rows_, header));
}

} // namespace

// ---------------------------------------------------------------------------------------------------------------
// Entry points and helpers

NcclTestsLog parse_nccl_tests(std::string_view text, const std::string& origin, const NcclReadOptions& options) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && text[first] == '{')
    return detail::parse_json(text, origin, options);
  return TextReader(origin, options).read(text);
}

NcclTestsLog read_nccl_tests(const std::string& path, const NcclReadOptions& options) {
  return parse_nccl_tests(read_file(path), path, options);
}

std::vector<dag::SizeTime> fastest_per_size(std::span<const NcclMeasurement> rows) {
  if (rows.empty())
    throw std::invalid_argument("fastest_per_size: no rows");
  const NcclMeasurement& first = rows.front();
  for (const NcclMeasurement& r : rows)
    if (r.collective != first.collective || r.ranks != first.ranks || r.nodes != first.nodes)
      throw std::invalid_argument(fmt::format(
          "fastest_per_size: rows of {} on {} ranks / {} nodes and of {} on {} ranks / {} nodes; group them first "
          "(group_by_communicator)",
          nccl_collective_name(first.collective), first.ranks, first.nodes, nccl_collective_name(r.collective), r.ranks,
          r.nodes));
  std::map<std::uint64_t, double> fastest; // by size, ascending
  for (const NcclMeasurement& r : rows) {
    const auto [it, inserted] = fastest.emplace(r.size_bytes, r.fastest_s());
    if (!inserted)
      it->second = std::min(it->second, r.fastest_s());
  }
  std::vector<dag::SizeTime> points;
  points.reserve(fastest.size());
  for (const auto& [size, time] : fastest)
    points.push_back({static_cast<double>(size), time});
  return points;
}

std::vector<NcclSeries> group_by_communicator(std::span<const NcclMeasurement> rows) {
  std::map<std::tuple<NcclCollective, int, int>, std::vector<NcclMeasurement>> groups;
  for (const NcclMeasurement& r : rows)
    groups[{r.collective, r.ranks, r.nodes}].push_back(r);
  std::vector<NcclSeries> series;
  for (auto& [key, members] : groups)
    series.push_back({std::get<0>(key), std::get<1>(key), std::get<2>(key), std::move(members)});
  return series;
}

} // namespace ddlsim::calibrate
