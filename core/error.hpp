// The one error type for bad input: every message names the file and the JSON pointer it is about, so that
// `ddlsim` can print one line and exit 2 (docs/contracts.md, "Exit status").
#pragma once

#include <stdexcept>
#include <string>

namespace ddlsim {

class InputError : public std::runtime_error {
public:
  /// `file` may be empty (e.g. a command-line value), `pointer` may be empty (the whole document).
  InputError(std::string file, std::string pointer, const std::string& message);

  [[nodiscard]] const std::string& file() const noexcept { return file_; }
  [[nodiscard]] const std::string& pointer() const noexcept { return pointer_; }
  [[nodiscard]] const std::string& detail() const noexcept { return detail_; }

private:
  std::string file_;
  std::string pointer_;
  std::string detail_;
};

} // namespace ddlsim
