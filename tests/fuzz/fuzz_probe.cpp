// libFuzzer target: the reader of ddlsim-probe's measurement files (`calibrate --probe`). A file parses or is an
// InputError with one line; nothing else may escape.
#include "calibrate/probe.hpp"
#include "core/error.hpp"
#include "core/json.hpp"

#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    (void)ddlsim::calibrate::parse_probe(ddlsim::parse_json_text(text, "probe.json"), "probe.json");
  } catch (const ddlsim::InputError& e) {
    if (std::string_view(e.what()).find('\n') != std::string_view::npos)
      std::abort();
  }
  return 0;
}
