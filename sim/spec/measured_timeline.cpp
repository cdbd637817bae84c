// Reading a scenario's measured timeline (measured_timeline.hpp).
#include "sim/spec/measured_timeline.hpp"

#include "core/error.hpp"

#include <fmt/format.h>

namespace ddlsim::sim {
namespace {

// Throws unless the event at `at` is one the report can place beside the simulated step.
void check_event(const Json& e, const std::string& file, const std::string& at) {
  if (!e.is_object() || !e.contains("ph") || !e.at("ph").is_string())
    throw InputError(file, at, "expected a trace event with \"ph\"");
  const std::string ph = e.at("ph").get<std::string>();
  if (ph != "X" && ph != "M")
    return; // not drawn
  const auto pid = e.find("pid");
  if (pid == e.end() || !(pid->is_number() || pid->is_string()))
    throw InputError(file, at + "/pid", "expected a process id");
  if (ph != "M")
    return;
  const auto name = e.find("name");
  if (name != e.end() && !name->is_string())
    throw InputError(file, at + "/name", fmt::format("expected a string, not {}", json_type_phrase(*name)));
  if (name == e.end() || *name != "process_name")
    return;
  const auto args = e.find("args");
  if (args != e.end() && !args->is_object())
    throw InputError(file, at + "/args", fmt::format("expected an object, not {}", json_type_phrase(*args)));
  if (args != e.end() && args->contains("name") && !args->at("name").is_string())
    throw InputError(file, at + "/args/name",
                     fmt::format("expected the process's name, a string, not {}", json_type_phrase(args->at("name"))));
}

} // namespace

Json read_measured_timeline(const std::string& file) {
  Json doc = load_json_file(file);
  const bool object = doc.is_object();
  Json events = object && doc.contains("traceEvents") ? std::move(doc.at("traceEvents")) : std::move(doc);
  const std::string prefix = object ? "/traceEvents" : "";
  if (!events.is_array())
    throw InputError(file, prefix, "expected an array of trace events");
  for (std::size_t i = 0; i < events.size(); ++i)
    check_event(events[i], file, fmt::format("{}/{}", prefix, i));
  return events;
}

} // namespace ddlsim::sim
