// libFuzzer target: the scenario loader with --set overrides. The input is a scenario's JSON text, then optional
// overrides `key=VALUE`, each after a 0x01 byte. Reading either succeeds (and the scenario validates its sweep) or
// throws InputError with one line; any other exception, a crash or a sanitizer report is a finding.
#include "core/error.hpp"
#include "core/json.hpp"
#include "sim/spec/scenario.hpp"

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (;;) {
    const auto at = all.find('\x01', start);
    parts.emplace_back(all.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos)
      break;
    start = at + 1;
  }
  try {
    ddlsim::Json doc = ddlsim::parse_json_text(parts[0], "fuzz.json");
    if (!doc.is_object())
      return 0;
    for (std::size_t i = 1; i < parts.size(); ++i)
      ddlsim::sim::apply_override(doc, parts[i], "fuzz.json");
    (void)ddlsim::sim::parse_scenario(doc, "fuzz.json", ddlsim::sim::sweep_key_order(parts[0]));
  } catch (const ddlsim::InputError& e) {
    if (std::string_view(e.what()).find('\n') != std::string_view::npos)
      std::abort();
  }
  return 0;
}
