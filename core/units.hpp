// One strict parser for dimensional quantities written as strings with units:
// "10 Gbps" (bits, SI) = 1.25e9 B/s, "12 GB/s", "25 MiB", "5 us", "0.857 ns/B", "15.7 TFLOPS".
// Bits vs bytes and SI (k = 1e3) vs binary (Ki = 1024) prefixes are exact; a bare number is rejected.
#pragma once

#include <string>
#include <string_view>

namespace ddlsim {

enum class Dimension { time, bytes, bandwidth, inverse_bandwidth, flops, flop_rate };

/// Name of the dimension for messages ("time", "bandwidth", ...).
[[nodiscard]] std::string_view dimension_name(Dimension d);
/// Examples of well-formed values for messages, e.g. "\"5 us\", \"252.9 ms\"".
[[nodiscard]] std::string_view dimension_example(Dimension d);

/// Parses `text` as a quantity of dimension `d` and returns it in base units (s, B, B/s, s/B, FLOP, FLOP/s).
/// Throws std::invalid_argument with a message that says how to fix the input.
[[nodiscard]] double parse_quantity(std::string_view text, Dimension d);

/// The finite range every quantity of a dimension must lie in, besides the key's own bounds: 0, or a magnitude in
/// [smallest, largest] (base units). Values outside are input errors, not numbers that overflow to infinity or
/// underflow to 0 somewhere inside an engine (docs/scenario.md, "Quantities").
struct QuantityRange {
  double smallest; ///< the least non-zero magnitude
  double largest;
  std::string_view smallest_text; ///< the bounds as a user would write them
  std::string_view largest_text;
};
[[nodiscard]] QuantityRange quantity_range(Dimension d);
/// Empty if `value` (base units) is 0 or in `d`'s range, else the message: "'1e308 h' is out of range: ...".
[[nodiscard]] std::string quantity_range_error(double value, Dimension d, std::string_view written);

/// Human formatting with a fitting prefix: "1.5 us", "25 MiB", "1.25 GB/s".
[[nodiscard]] std::string format_time(double seconds);
[[nodiscard]] std::string format_bytes(double bytes);
[[nodiscard]] std::string format_bandwidth(double bytes_per_second);

} // namespace ddlsim
