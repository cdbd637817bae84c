// Strict unit parsing: "<number> <unit>", the unit mandatory and matched exactly (case matters: "Mb" is
// megabits, "MB" megabytes, "MiB" mebibytes). Messages say how to fix the input, as SimGrid's do.
#include "core/units.hpp"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <cmath>
#include <optional>
#include <stdexcept>

namespace ddlsim {
namespace {

struct Prefix {
  std::string_view symbol;
  double factor;
};

// SI and binary (IEC 60027-2) prefixes. "K" alone is not SI; see hint below.
constexpr std::array<Prefix, 12> kDataPrefixes{{{"", 1.0},
                                                {"k", 1e3},
                                                {"M", 1e6},
                                                {"G", 1e9},
                                                {"T", 1e12},
                                                {"P", 1e15},
                                                {"E", 1e18},
                                                {"Ki", 1024.0},
                                                {"Mi", 1048576.0},
                                                {"Gi", 1073741824.0},
                                                {"Ti", 1099511627776.0},
                                                {"Pi", 1125899906842624.0}}};

constexpr std::array<Prefix, 9> kTimeUnits{{{"s", 1.0},
                                            {"ms", 1e-3},
                                            {"us", 1e-6},
                                            {"\xc2\xb5s", 1e-6}, // µs
                                            {"ns", 1e-9},
                                            {"ps", 1e-12},
                                            {"min", 60.0},
                                            {"h", 3600.0},
                                            {"sec", 1.0}}};

std::optional<double> time_unit(std::string_view u) {
  for (const auto& t : kTimeUnits)
    if (t.symbol == u)
      return t.factor;
  return std::nullopt;
}

// A data unit: prefix + "B" (bytes), "b" or "bit" (bits). Returns bytes.
std::optional<double> data_unit(std::string_view u) {
  for (const auto& p : kDataPrefixes) {
    if (!u.starts_with(p.symbol))
      continue;
    const std::string_view rest = u.substr(p.symbol.size());
    if (rest == "B")
      return p.factor;
    if (rest == "b" || rest == "bit")
      return p.factor / 8.0;
  }
  return std::nullopt;
}

std::optional<double> flop_unit(std::string_view u, bool rate) {
  for (const auto& p : kDataPrefixes) {
    if (p.symbol.size() != 1 && !p.symbol.empty())
      continue; // no binary prefixes for FLOPs
    if (!u.starts_with(p.symbol))
      continue;
    const std::string_view rest = u.substr(p.symbol.size());
    if (rate && (rest == "FLOPS" || rest == "FLOP/s" || rest == "flop/s"))
      return p.factor;
    if (!rate && (rest == "FLOP" || rest == "FLOPs" || rest == "flop"))
      return p.factor;
  }
  return std::nullopt;
}

std::optional<double> bandwidth_unit(std::string_view u) {
  if (u.ends_with("/s"))
    return data_unit(u.substr(0, u.size() - 2));
  if (u.ends_with("ps")) { // SimGrid spelling: "125MBps" (bytes), "10Gbps" (bits)
    const std::string_view d = u.substr(0, u.size() - 2);
    if (d.ends_with("B") || d.ends_with("b"))
      return data_unit(d);
  }
  return std::nullopt;
}

std::optional<double> inverse_bandwidth_unit(std::string_view u) {
  const auto slash = u.find('/');
  if (slash == std::string_view::npos)
    return std::nullopt;
  const auto t = time_unit(u.substr(0, slash));
  const auto d = data_unit(u.substr(slash + 1));
  if (!t || !d)
    return std::nullopt;
  return *t / *d;
}

std::string_view example(Dimension d) {
  switch (d) {
  case Dimension::time:
    return "\"5 us\", \"252.9 ms\"";
  case Dimension::bytes:
    return "\"25 MiB\", \"4 kB\"";
  case Dimension::bandwidth:
    return "\"10 Gbps\" (bits), \"12 GB/s\" (bytes)";
  case Dimension::inverse_bandwidth:
    return "\"0.857 ns/B\"";
  case Dimension::flops:
    return "\"4.1 GFLOP\"";
  case Dimension::flop_rate:
    return "\"15.7 TFLOPS\"";
  }
  return "";
}

// A hint for a unit that exists but in another dimension, or a common misspelling.
std::string hint(std::string_view unit, Dimension d) {
  if (d == Dimension::bandwidth && data_unit(unit))
    return fmt::format("'{}' is an amount of data, not a rate: append '/s' (e.g. \"{}/s\"), or 'ps' as in \"10 Gbps\"",
                       unit, unit);
  if (d == Dimension::bytes && bandwidth_unit(unit))
    return fmt::format("'{}' is a rate, not an amount of data", unit);
  if (unit.starts_with("K") && !unit.starts_with("Ki"))
    return "'K' is not an SI prefix: write 'k' (1000) or 'Ki' (1024)";
  if (d == Dimension::flop_rate && flop_unit(unit, false))
    return fmt::format("'{}' is an amount of work, not a rate: write FLOPS or FLOP/s", unit);
  return fmt::format("expected a {} such as {}", dimension_name(d), example(d));
}

} // namespace

std::string_view dimension_example(Dimension d) {
  return example(d);
}

std::string_view dimension_name(Dimension d) {
  switch (d) {
  case Dimension::time:
    return "time";
  case Dimension::bytes:
    return "size";
  case Dimension::bandwidth:
    return "bandwidth";
  case Dimension::inverse_bandwidth:
    return "time per byte";
  case Dimension::flops:
    return "FLOP count";
  case Dimension::flop_rate:
    return "FLOP rate";
  }
  return "quantity";
}

QuantityRange quantity_range(Dimension d) {
  switch (d) {
  case Dimension::time:
    return {1e-15, 1e7, "1e-15 s", "1e7 s (116 days)"};
  case Dimension::bytes:
    return {1, 1125899906842624.0, "1 B", "1 PiB"};
  case Dimension::bandwidth:
    return {1, 1e15, "1 B/s", "1 PB/s"};
  case Dimension::inverse_bandwidth:
    return {1e-15, 1, "1e-15 s/B", "1 s/B"};
  case Dimension::flops:
    return {1, 1e21, "1 FLOP", "1e21 FLOP"};
  case Dimension::flop_rate:
    return {1e6, 1e18, "1 MFLOPS", "1 EFLOPS"};
  }
  return {0, 0, "", ""};
}

std::string quantity_range_error(double value, Dimension d, std::string_view written) {
  const auto r = quantity_range(d);
  const double a = std::fabs(value);
  if (a == 0 || (a >= r.smallest && a <= r.largest))
    return {};
  return fmt::format("'{}' is out of range: a {} is 0 or between {} and {}", written, dimension_name(d),
                     r.smallest_text, r.largest_text);
}

double parse_quantity(std::string_view text, Dimension d) {
  const auto first = text.find_first_not_of(' ');
  if (first == std::string_view::npos)
    throw std::invalid_argument(fmt::format("empty {}: write e.g. {}", dimension_name(d), example(d)));
  text.remove_prefix(first);
  double number = 0;
  const auto* begin = text.data();
  const auto* end = text.data() + text.size();
  if (*begin == '+')
    ++begin;
  const auto [ptr, ec] = std::from_chars(begin, end, number);
  if (ec != std::errc() || !std::isfinite(number))
    throw std::invalid_argument(
        fmt::format("'{}' does not start with a number; write a {} such as {}", text, dimension_name(d), example(d)));
  std::string_view unit(ptr, static_cast<std::size_t>(end - ptr));
  while (!unit.empty() && unit.front() == ' ')
    unit.remove_prefix(1);
  while (!unit.empty() && unit.back() == ' ')
    unit.remove_suffix(1);
  if (unit.empty())
    throw std::invalid_argument(
        fmt::format("'{}' has no unit; write a {} such as {}", text, dimension_name(d), example(d)));

  std::optional<double> factor;
  switch (d) {
  case Dimension::time:
    factor = time_unit(unit);
    break;
  case Dimension::bytes:
    factor = data_unit(unit);
    break;
  case Dimension::bandwidth:
    factor = bandwidth_unit(unit);
    break;
  case Dimension::inverse_bandwidth:
    factor = inverse_bandwidth_unit(unit);
    break;
  case Dimension::flops:
    factor = flop_unit(unit, false);
    break;
  case Dimension::flop_rate:
    factor = flop_unit(unit, true);
    break;
  }
  if (!factor)
    throw std::invalid_argument(fmt::format("unknown unit '{}' in '{}': {}", unit, text, hint(unit, d)));
  return number * *factor;
}

namespace {
std::string trim_number(double v) {
  std::string s = fmt::format("{:.4g}", v);
  return s;
}
} // namespace

std::string format_time(double s) {
  const double a = std::fabs(s);
  if (a == 0)
    return "0 s";
  if (a >= 1)
    return trim_number(s) + " s";
  if (a >= 1e-3)
    return trim_number(s * 1e3) + " ms";
  if (a >= 1e-6)
    return trim_number(s * 1e6) + " us";
  return trim_number(s * 1e9) + " ns";
}

std::string format_bytes(double b) {
  const double a = std::fabs(b);
  if (a >= 1073741824.0)
    return trim_number(b / 1073741824.0) + " GiB";
  if (a >= 1048576.0)
    return trim_number(b / 1048576.0) + " MiB";
  if (a >= 1024.0)
    return trim_number(b / 1024.0) + " KiB";
  return trim_number(b) + " B";
}

std::string format_bandwidth(double bps) {
  const double a = std::fabs(bps);
  if (a >= 1e9)
    return trim_number(bps / 1e9) + " GB/s";
  if (a >= 1e6)
    return trim_number(bps / 1e6) + " MB/s";
  if (a >= 1e3)
    return trim_number(bps / 1e3) + " kB/s";
  return trim_number(bps) + " B/s";
}

} // namespace ddlsim
