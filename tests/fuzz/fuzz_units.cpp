// libFuzzer target: the unit parser. Every input is a quantity in one of the dimensions: it parses to a finite value
// or throws std::invalid_argument; the range check and the formatters take whatever it returns.
#include "core/units.hpp"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0)
    return 0;
  const auto d = static_cast<ddlsim::Dimension>(data[0] % 6);
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    const double x = ddlsim::parse_quantity(text, d);
    if (!std::isfinite(x))
      std::abort(); // parse_quantity promises a finite value
    (void)ddlsim::quantity_range_error(x, d, text);
    (void)ddlsim::format_time(x);
    (void)ddlsim::format_bytes(x);
    (void)ddlsim::format_bandwidth(x);
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
