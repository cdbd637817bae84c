// Output files are written atomically (temporary file in the same directory, then rename), so a crash or a
// kill never leaves a partial summary.json or results.csv behind.
#pragma once

#include <string>
#include <string_view>

namespace ddlsim {

/// Writes `content` to `path` atomically, creating parent directories. Throws std::runtime_error on failure.
void write_file_atomic(const std::string& path, std::string_view content);

/// Reads a whole file; throws InputError(path, "", "cannot open file") if it cannot be read.
[[nodiscard]] std::string read_file(const std::string& path);

} // namespace ddlsim
