// Atomic file output: write to "<path>.tmp.<pid>", flush, rename over the target; bounded input.
#include "core/io.hpp"

#include "core/error.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

namespace ddlsim {
namespace fs = std::filesystem;
namespace {

std::string temp_name(const std::string& path) {
  return fmt::format("{}.tmp.{}", path, static_cast<long>(::getpid()));
}

// Creates the parent directories of `target`; a failure names the directory and the reason.
void create_parents(const fs::path& target) {
  if (!target.has_parent_path())
    return;
  std::error_code ec;
  fs::create_directories(target.parent_path(), ec);
  if (ec)
    throw InputError(target.parent_path().string(), "", fmt::format("cannot create the directory: {}", ec.message()));
}

// Writes `content` to `tmp`; on failure removes it and throws InputError naming `target`.
void write_temp(const std::string& tmp, const std::string& target, std::string_view content) {
  errno = 0;
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  if (!out)
    throw InputError(target, "", fmt::format("cannot write the file: {}", std::strerror(errno != 0 ? errno : EIO)));
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  out.flush();
  const int err = errno;
  if (!out) {
    out.close();
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw InputError(target, "", fmt::format("writing the file failed: {}", std::strerror(err != 0 ? err : EIO)));
  }
}

} // namespace

void write_file_atomic(const std::string& path, std::string_view content) {
  OutputBatch batch;
  batch.add(path, content);
  batch.commit();
}

void prepare_output_dir(const std::string& dir) {
  const fs::path d(dir);
  std::error_code ec;
  if (fs::exists(d, ec) && !fs::is_directory(d, ec))
    throw InputError(dir, "", "cannot write outputs here: it exists and is not a directory");
  fs::create_directories(d, ec);
  if (ec)
    throw InputError(dir, "", fmt::format("cannot write outputs here: {}", ec.message()));
  const std::string probe = temp_name((d / ".ddlsim-write-test").string());
  {
    std::ofstream out(probe, std::ios::binary | std::ios::trunc);
    if (!out)
      throw InputError(dir, "", fmt::format("cannot write outputs here: {}", std::strerror(errno != 0 ? errno : EIO)));
  }
  fs::remove(probe, ec);
}

OutputBatch::~OutputBatch() {
  for (const auto& [tmp, target] : staged_) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
  }
}

void OutputBatch::add(const std::string& path, std::string_view content) {
  create_parents(fs::path(path));
  std::string tmp = temp_name(path);
  write_temp(tmp, path, content);
  staged_.emplace_back(std::move(tmp), path);
}

void OutputBatch::commit() {
  // Every file is complete on disk before the first rename; a rename within one directory does not fail for lack
  // of space, so the files are replaced together.
  for (std::size_t i = 0; i < staged_.size(); ++i) {
    std::error_code ec;
    fs::rename(staged_[i].first, staged_[i].second, ec);
    if (ec) {
      const std::string target = staged_[i].second;
      staged_.erase(staged_.begin(), staged_.begin() + static_cast<std::ptrdiff_t>(i)); // those are in place
      throw InputError(target, "", fmt::format("cannot move the file into place: {}", ec.message()));
    }
  }
  staged_.clear();
}

bool path_exists(const std::string& path) {
  if (path.find('\0') != std::string::npos)
    return false;
  std::error_code ec;
  return fs::exists(path, ec) && !ec;
}

namespace {
thread_local ReadLog* current_read_log = nullptr;
} // namespace

std::string read_file(const std::string& path, std::size_t max_bytes) {
  if (path.find('\0') != std::string::npos)
    throw InputError(path, "", "the file name contains a NUL byte");
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (fs::is_directory(status))
    throw InputError(path, "", "is a directory, not a file");
  if (fs::is_character_file(status) || fs::is_block_file(status))
    throw InputError(path, "", "is a device, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw InputError(path, "", "cannot open file");
  std::string content;
  constexpr std::size_t kChunk = std::size_t{1} << 20;
  while (in) {
    const std::size_t have = content.size();
    if (have > max_bytes)
      throw InputError(path, "",
                       fmt::format("larger than {} MiB, more than any ddlsim input (a device or an endless pipe?)",
                                   max_bytes >> 20));
    content.resize(have + kChunk);
    in.read(content.data() + have, static_cast<std::streamsize>(kChunk));
    content.resize(have + static_cast<std::size_t>(in.gcount()));
  }
  if (in.bad())
    throw InputError(path, "", "reading the file failed");
  if (current_read_log != nullptr)
    current_read_log->record(path, content);
  return content;
}

std::string fingerprint(std::string_view bytes) {
  std::uint64_t h = 14695981039346656037ull;
  for (const unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return fmt::format("{:016x}", h);
}

ReadLog::ReadLog() : outer_(current_read_log) {
  current_read_log = this;
}

ReadLog::~ReadLog() {
  current_read_log = outer_;
}

void ReadLog::record(const std::string& path, std::string_view content) {
  files_[path] = fingerprint(content);
  if (outer_ != nullptr)
    outer_->record(path, content);
}

void ignore_file_size_signal() {
  std::signal(SIGXFSZ, SIG_IGN);
}

} // namespace ddlsim
