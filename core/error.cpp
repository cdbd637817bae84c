// InputError formats "FILE: /json/pointer: message".
#include "core/error.hpp"

namespace ddlsim {
namespace {
std::string format_input_error(const std::string& file, const std::string& pointer, const std::string& message) {
  std::string out;
  if (!file.empty())
    out += file + ": ";
  if (!pointer.empty())
    out += pointer + ": ";
  out += message;
  return out;
}
} // namespace

InputError::InputError(std::string file, std::string pointer, const std::string& message)
    : std::runtime_error(format_input_error(file, pointer, message)), file_(std::move(file)),
      pointer_(std::move(pointer)), detail_(message) {}

} // namespace ddlsim
