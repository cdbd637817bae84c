// libFuzzer target: the PyTorch profiler (Kineto) trace reader and the step analysis `import-trace` runs on it. A
// trace parses and analyses, or is an InputError with one line; nothing else may escape.
#include "core/error.hpp"
#include "traces/analysis.hpp"
#include "traces/kineto.hpp"

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto trace = ddlsim::traces::parse_kineto(text, "fuzz.json");
    const auto analysis = ddlsim::traces::analyse(trace);
    (void)ddlsim::traces::traced_step_events(trace, analysis);
  } catch (const ddlsim::InputError& e) {
    if (std::string_view(e.what()).find('\n') != std::string_view::npos)
      std::abort();
  }
  return 0;
}
