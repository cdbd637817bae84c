// Strong unit types and one strict parser for dimensional quantities written as strings with units:
// "10 Gbps" (bits, SI) = 1.25e9 B/s, "12 GB/s", "25 MiB", "5 us", "0.857 ns/B", "15.7 TFLOPS".
// Bits vs bytes and SI (k = 1e3) vs binary (Ki = 1024) prefixes are exact; a bare number is rejected.
#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>

namespace ddlsim {

/// A double with a unit tag; arithmetic within one unit, explicit `.value` to leave the type system.
template <class Tag> struct Quantity {
  double value = 0;
  constexpr Quantity() = default;
  constexpr explicit Quantity(double v) : value(v) {}
  constexpr Quantity operator+(Quantity o) const { return Quantity(value + o.value); }
  constexpr Quantity operator-(Quantity o) const { return Quantity(value - o.value); }
  constexpr Quantity operator*(double k) const { return Quantity(value * k); }
  constexpr Quantity operator/(double k) const { return Quantity(value / k); }
  constexpr double operator/(Quantity o) const { return value / o.value; }
  constexpr Quantity& operator+=(Quantity o) { return value += o.value, *this; }
  constexpr auto operator<=>(const Quantity&) const = default;
};

struct SecondsTag {};
struct BytesTag {};
struct BytesPerSecondTag {};
struct SecondsPerByteTag {};
struct FlopsTag {};
struct FlopsPerSecondTag {};

using Seconds = Quantity<SecondsTag>;
using Bytes = Quantity<BytesTag>;
using BytesPerSecond = Quantity<BytesPerSecondTag>;
using SecondsPerByte = Quantity<SecondsPerByteTag>;
using Flops = Quantity<FlopsTag>;
using FlopsPerSecond = Quantity<FlopsPerSecondTag>;

constexpr Seconds operator/(Bytes b, BytesPerSecond bw) {
  return Seconds(b.value / bw.value);
}
constexpr Seconds operator*(Bytes b, SecondsPerByte beta) {
  return Seconds(b.value * beta.value);
}
constexpr Seconds operator/(Flops f, FlopsPerSecond r) {
  return Seconds(f.value / r.value);
}

enum class Dimension { time, bytes, bandwidth, inverse_bandwidth, flops, flop_rate };

/// Name of the dimension for messages ("time", "bandwidth", ...).
[[nodiscard]] std::string_view dimension_name(Dimension d);
/// Examples of well-formed values for messages, e.g. "\"5 us\", \"252.9 ms\"".
[[nodiscard]] std::string_view dimension_example(Dimension d);

/// Parses `text` as a quantity of dimension `d` and returns it in base units (s, B, B/s, s/B, FLOP, FLOP/s).
/// Throws std::invalid_argument with a message that says how to fix the input.
[[nodiscard]] double parse_quantity(std::string_view text, Dimension d);

[[nodiscard]] inline Seconds parse_time(std::string_view t) {
  return Seconds(parse_quantity(t, Dimension::time));
}
[[nodiscard]] inline Bytes parse_bytes(std::string_view t) {
  return Bytes(parse_quantity(t, Dimension::bytes));
}
[[nodiscard]] inline BytesPerSecond parse_bandwidth(std::string_view t) {
  return BytesPerSecond(parse_quantity(t, Dimension::bandwidth));
}
[[nodiscard]] inline SecondsPerByte parse_inverse_bandwidth(std::string_view t) {
  return SecondsPerByte(parse_quantity(t, Dimension::inverse_bandwidth));
}
[[nodiscard]] inline Flops parse_flops(std::string_view t) {
  return Flops(parse_quantity(t, Dimension::flops));
}
[[nodiscard]] inline FlopsPerSecond parse_flop_rate(std::string_view t) {
  return FlopsPerSecond(parse_quantity(t, Dimension::flop_rate));
}

/// Human formatting with a fitting prefix: "1.5 us", "25 MiB", "1.25 GB/s".
[[nodiscard]] std::string format_time(double seconds);
[[nodiscard]] std::string format_bytes(double bytes);
[[nodiscard]] std::string format_bandwidth(double bytes_per_second);

} // namespace ddlsim

template <> struct fmt::formatter<ddlsim::Seconds> : fmt::formatter<std::string_view> {
  template <class Ctx> auto format(ddlsim::Seconds s, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(ddlsim::format_time(s.value), ctx);
  }
};
template <> struct fmt::formatter<ddlsim::Bytes> : fmt::formatter<std::string_view> {
  template <class Ctx> auto format(ddlsim::Bytes b, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(ddlsim::format_bytes(b.value), ctx);
  }
};
template <> struct fmt::formatter<ddlsim::BytesPerSecond> : fmt::formatter<std::string_view> {
  template <class Ctx> auto format(ddlsim::BytesPerSecond b, Ctx& ctx) const {
    return fmt::formatter<std::string_view>::format(ddlsim::format_bandwidth(b.value), ctx);
  }
};
