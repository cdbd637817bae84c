// Atomic file output: write to "<path>.tmp.<pid>", flush, rename over the target.
#include "core/io.hpp"

#include "core/error.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace ddlsim {

void write_file_atomic(const std::string& path, std::string_view content) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  if (target.has_parent_path())
    fs::create_directories(target.parent_path());
  const std::string tmp = fmt::format("{}.tmp.{}", path, static_cast<long>(::getpid()));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out)
      throw std::runtime_error(fmt::format("{}: cannot write file", tmp));
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.flush();
    if (!out) {
      std::error_code ignored;
      fs::remove(tmp, ignored);
      throw std::runtime_error(fmt::format("{}: write failed", tmp));
    }
  }
  std::error_code ec;
  fs::rename(tmp, target, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw std::runtime_error(fmt::format("{}: cannot rename into place", path));
  }
}

std::string read_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw InputError(path, "", "is a directory, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw InputError(path, "", "cannot open file");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

} // namespace ddlsim
