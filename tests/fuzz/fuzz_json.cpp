// libFuzzer target: strict JSON text (parse_json_text, parse_json_value): an input parses, or is an InputError with
// one line; nothing else may escape (a std::exception of another type is a finding).
#include "core/error.hpp"
#include "core/json.hpp"

#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    (void)ddlsim::parse_json_text(text, "fuzz.json");
  } catch (const ddlsim::InputError& e) {
    if (std::string_view(e.what()).find('\n') != std::string_view::npos)
      std::abort(); // a message is one line
  }
  try {
    (void)ddlsim::parse_json_value(text, "fuzz.json", "/key");
  } catch (const ddlsim::InputError&) {
  }
  return 0;
}
