// results.csv as a table: RFC 4180 parsing (quoted cells, "" escapes, embedded newlines, LF or CRLF), errors that
// name the file and line, and the lookups the plots make in it (columns, summary fields, successful rows, numbers,
// distinct and varying swept values).
#include "sim/report/plot_detail.hpp"

#include "core/error.hpp"
#include "core/io.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace ddlsim::sim {
namespace {

// ---------------------------------------------------------------------------------------------------------------
// CSV

struct Record {
  int line = 0; // physical line (1-based) where the record starts
  std::vector<std::string> cells;
};

[[noreturn]] void csv_error(const std::string& file, int line, const std::string& what) {
  throw InputError(file, "", fmt::format("line {}: {}", line, what));
}

// Splits RFC 4180 text into records. Line ends are LF or CRLF (also inside quoted cells, where CRLF becomes LF);
// a lone CR is ordinary text. Blank lines are skipped, so a trailing newline or two do not make ragged rows.
std::vector<Record> split_records(std::string_view text, const std::string& file) {
  if (text.starts_with("\xEF\xBB\xBF")) // UTF-8 byte order mark, as spreadsheet exports write it
    text.remove_prefix(3);
  const std::size_t n = text.size();
  const auto at_line_end = [&](std::size_t k) {
    return text[k] == '\n' || (text[k] == '\r' && (k + 1 == n || text[k + 1] == '\n'));
  };
  std::vector<Record> records;
  std::size_t i = 0;
  int line = 1;
  while (i < n) {
    Record rec{line, {}};
    bool quoted_any = false;
    for (;;) {
      std::string cell;
      if (i < n && text[i] == '"') {
        quoted_any = true;
        const int opened = line;
        ++i;
        for (;;) {
          if (i >= n)
            csv_error(file, opened, "unterminated quoted cell: the '\"' that opens it is never closed");
          const char c = text[i++];
          if (c == '"') {
            if (i < n && text[i] == '"') {
              cell += '"';
              ++i;
              continue;
            }
            break;
          }
          if (c == '\r' && i < n && text[i] == '\n')
            continue;
          if (c == '\n')
            ++line;
          cell += c;
        }
        if (i < n && text[i] != ',' && !at_line_end(i))
          csv_error(file, line,
                    fmt::format("cell {} has text after its closing quote; inside a quoted cell write '\"' as '\"\"'",
                                rec.cells.size() + 1));
      } else {
        const std::size_t start = i;
        while (i < n && text[i] != ',' && !at_line_end(i)) {
          if (text[i] == '"')
            csv_error(file, line,
                      fmt::format("cell {} contains '\"' but does not start with one; quote the whole cell and "
                                  "write '\"' as '\"\"'",
                                  rec.cells.size() + 1));
          ++i;
        }
        cell.assign(text.substr(start, i - start));
      }
      rec.cells.push_back(std::move(cell));
      if (i < n && text[i] == ',') {
        ++i;
        continue;
      }
      if (i < n) { // at a line end: CRLF or LF
        if (text[i] == '\r')
          ++i;
        if (i < n && text[i] == '\n')
          ++i;
        ++line;
      }
      break;
    }
    const bool blank = !quoted_any && rec.cells.size() == 1 && rec.cells.front().empty();
    if (!blank)
      records.push_back(std::move(rec));
  }
  return records;
}

// ---------------------------------------------------------------------------------------------------------------
// Table access

std::string available_columns(const ResultsTable& t) {
  std::string out;
  for (const auto& c : t.columns)
    out += (out.empty() ? "" : ", ") + c;
  return out;
}

} // namespace

namespace detail {

// Hand-built tables (tests, the sweep runner) get the same checks as parsed ones, so a bad table is an InputError
// and never an out-of-range access.
void validate(const ResultsTable& t) {
  if (t.column("point") < 0 || t.column("status") < 0)
    throw InputError(
        t.file, "",
        fmt::format("not a results table: it needs the columns 'point' and 'status' (has: {})", available_columns(t)));
  for (std::size_t r = 0; r < t.rows.size(); ++r)
    if (t.rows[r].size() != t.columns.size())
      throw InputError(
          t.file, "",
          fmt::format("row {} has {} cells, but the table has {} columns", r + 1, t.rows[r].size(), t.columns.size()));
}

std::size_t column_index(const ResultsTable& t, std::string_view name, std::string_view role) {
  const int c = t.column(name);
  if (c < 0)
    throw InputError(t.file, "",
                     fmt::format("no column '{}' for {}; available columns: {}", name, role, available_columns(t)));
  return static_cast<std::size_t>(c);
}

// Index of the summary field `name`: the first column of that name after "status", else the swept key of that name
// (a table leaves out a summary field that is swept: sweeping "engine", or whole "strategy" objects), or -1.
int summary_field(const ResultsTable& t, std::string_view name) {
  for (auto c = static_cast<std::size_t>(t.column("status")) + 1; c < t.columns.size(); ++c)
    if (t.columns[c] == name)
      return static_cast<int>(c);
  return t.column(name);
}

std::size_t summary_index(const ResultsTable& t, std::string_view name, std::string_view role) {
  const int c = summary_field(t, name);
  if (c < 0)
    throw InputError(
        t.file, "",
        fmt::format("no summary column '{}' for {}; available columns: {}", name, role, available_columns(t)));
  return static_cast<std::size_t>(c);
}

std::vector<std::size_t> ok_rows(const ResultsTable& t) {
  const auto status = static_cast<std::size_t>(t.column("status"));
  std::vector<std::size_t> rows;
  for (std::size_t r = 0; r < t.rows.size(); ++r)
    if (t.rows[r][status] == "ok")
      rows.push_back(r);
  return rows;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

// A plain finite number, the whole cell ("8", "0.85", "1e-3"); std::nullopt otherwise.
std::optional<double> parse_number(std::string_view s) {
  s = trim(s);
  if (s.starts_with('+'))
    s.remove_prefix(1);
  if (s.empty())
    return std::nullopt;
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v))
    return std::nullopt;
  return v;
}

// The sweep point a row stands for, for messages and the .dat files.
double point_of(const ResultsTable& t, std::size_t row) {
  return parse_number(t.rows[row][static_cast<std::size_t>(t.column("point"))]).value_or(static_cast<double>(row));
}

// Distinct values of a column over `rows`, in order of first appearance (the sweep's own order).
std::vector<std::string> distinct_cells(const ResultsTable& t, std::size_t col, const std::vector<std::size_t>& rows) {
  std::vector<std::string> out;
  for (const std::size_t r : rows)
    if (std::find(out.begin(), out.end(), t.rows[r][col]) == out.end())
      out.push_back(t.rows[r][col]);
  return out;
}

// Swept key columns that take more than one value over `rows`.
std::vector<std::size_t> varying_keys(const ResultsTable& t, const std::vector<std::size_t>& rows) {
  std::vector<std::size_t> out;
  const auto first = static_cast<std::size_t>(t.column("point")) + 1;
  const auto last = static_cast<std::size_t>(t.column("status"));
  for (std::size_t c = first; c < last; ++c)
    if (distinct_cells(t, c, rows).size() > 1)
      out.push_back(c);
  return out;
}

// True when, over `rows`, the value of column `a` fixes the value of column `b` (as a sweep's "zip" does).
bool determines(const ResultsTable& t, const std::vector<std::size_t>& rows, std::size_t a, std::size_t b) {
  std::map<std::string, std::string> seen;
  for (const std::size_t r : rows) {
    const auto [it, inserted] = seen.emplace(t.rows[r][a], t.rows[r][b]);
    if (!inserted && it->second != t.rows[r][b])
      return false;
  }
  return true;
}

} // namespace detail

// ---------------------------------------------------------------------------------------------------------------
// API

int ResultsTable::column(std::string_view name) const {
  const auto it = std::find(columns.begin(), columns.end(), name);
  return it == columns.end() ? -1 : static_cast<int>(it - columns.begin());
}

std::vector<std::string> ResultsTable::swept_keys() const {
  const int point = column("point"), status = column("status");
  if (point < 0 || status <= point)
    return {};
  return {columns.begin() + point + 1, columns.begin() + status};
}

ResultsTable parse_results_csv(std::string_view text, const std::string& file) {
  auto records = split_records(text, file);
  if (records.empty())
    throw InputError(file, "", "empty file: a results table starts with a header row (point, swept keys, status, ...)");
  ResultsTable t;
  t.file = file;
  t.columns = std::move(records.front().cells);
  const int header_line = records.front().line;
  for (const char* required : {"point", "status"})
    if (t.column(required) < 0)
      csv_error(file, header_line,
                fmt::format("no '{}' column in the header; a results table has point, the swept keys, status, then "
                            "the summary fields",
                            required));
  if (t.column("status") < t.column("point"))
    csv_error(file, header_line, "the 'status' column comes before 'point'; the swept keys lie between them");
  for (std::size_t r = 1; r < records.size(); ++r) {
    if (records[r].cells.size() != t.columns.size())
      csv_error(file, records[r].line,
                fmt::format("{} cells, but the header has {} columns", records[r].cells.size(), t.columns.size()));
    t.rows.push_back(std::move(records[r].cells));
  }
  return t;
}

ResultsTable read_results_csv(const std::string& path) {
  return parse_results_csv(read_file(path), path);
}

} // namespace ddlsim::sim
