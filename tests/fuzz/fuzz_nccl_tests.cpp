// libFuzzer target: the nccl-tests reader (text and JSON output). A log parses or is an InputError naming a line or
// JSON pointer; nothing else may escape.
#include "calibrate/nccl_tests.hpp"
#include "core/error.hpp"

#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const auto log = ddlsim::calibrate::parse_nccl_tests(text, "fuzz.txt");
    for (const auto& row : log.rows)
      (void)row.fastest_s();
  } catch (const ddlsim::InputError& e) {
    if (std::string_view(e.what()).find('\n') != std::string_view::npos)
      std::abort();
  }
  return 0;
}
