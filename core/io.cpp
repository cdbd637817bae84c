// Atomic file output: write to "<path>.tmp.<pid>", flush, rename over the target; bounded input.
#include "core/io.hpp"

#include "core/error.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
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

void OutputBatch::adopt(const std::string& temporary, const std::string& path) {
  staged_.emplace_back(temporary, path);
}

namespace {

// The old files of a batch, kept until every new one is in place: "<target>.old.<pid>" (a hard link, or a copy
// where the file system has none); "" for a target that did not exist.
std::vector<std::string> keep_old_files(const std::vector<std::pair<std::string, std::string>>& staged) {
  std::vector<std::string> kept;
  for (const auto& [tmp, target] : staged) {
    std::error_code ec;
    if (!fs::is_regular_file(target, ec)) {
      kept.emplace_back();
      continue;
    }
    std::string old = fmt::format("{}.old.{}", target, static_cast<long>(::getpid()));
    fs::remove(old, ec);
    fs::create_hard_link(target, old, ec);
    if (ec)
      fs::copy_file(target, old, fs::copy_options::overwrite_existing, ec);
    if (ec) {
      for (const auto& k : kept)
        if (!k.empty())
          fs::remove(k, ec);
      throw InputError(target, "", fmt::format("cannot keep the previous file while replacing it: {}", ec.message()));
    }
    kept.push_back(std::move(old));
  }
  return kept;
}

} // namespace

void OutputBatch::commit() {
  // Every file is complete on disk before the first rename. A rename that fails puts back those already done.
  const auto kept = keep_old_files(staged_);
  std::error_code ec;
  for (std::size_t i = 0; i < staged_.size(); ++i) {
    fs::rename(staged_[i].first, staged_[i].second, ec);
    if (!ec)
      continue;
    const std::string target = staged_[i].second;
    const std::string reason = ec.message();
    for (std::size_t j = 0; j < i; ++j) { // put the old files back (or remove a file that was not there)
      if (!kept[j].empty())
        fs::rename(kept[j], staged_[j].second, ec);
      else
        fs::remove(staged_[j].second, ec);
    }
    for (std::size_t j = i; j < kept.size(); ++j)
      if (!kept[j].empty())
        fs::remove(kept[j], ec);
    staged_.erase(staged_.begin(), staged_.begin() + static_cast<std::ptrdiff_t>(i)); // moved or put back
    throw InputError(target, "", fmt::format("cannot move the file into place: {}", reason));
  }
  for (const auto& k : kept)
    if (!k.empty())
      fs::remove(k, ec);
  staged_.clear();
}

namespace {

// A temporary a ddlsim process writes in an output directory, named after its pid.
bool is_temporary(const std::string& name) {
  static const std::regex pattern(R"(.*\.(tmp|old|gp\.run|gp\.log)\.[0-9]+)");
  return std::regex_match(name, pattern);
}

// `dir` as an absolute path without a trailing separator ("" if it has none).
fs::path absolute_dir(const std::string& dir) {
  std::error_code ec;
  fs::path p = fs::absolute(dir, ec).lexically_normal();
  if (!ec && !p.has_filename())
    p = p.parent_path();
  return ec ? fs::path{} : p;
}

// The staging directory of an import-trace (sim/cli/import_trace.cpp), named after its pid.
bool is_temporary_dir(const std::string& name) {
  static const std::regex pattern(R"(\.import-trace\.tmp\.[0-9]+)");
  return std::regex_match(name, pattern);
}

} // namespace

OutputDir::OutputDir(const std::string& dir) : dir_(dir) {
  for (fs::path p = absolute_dir(dir); !p.empty() && !path_exists(p.string()) && p != p.parent_path();
       p = p.parent_path())
    made_ = p.string();
  prepare_output_dir(dir);
  const std::string lock = (fs::path(dir) / ".ddlsim.lock").string();
  fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw InputError(dir, "", fmt::format("cannot write outputs here: {}", std::strerror(errno)));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd_);
    fd_ = -1;
    throw InputError(dir, "",
                     "is in use by another ddlsim command (its lock, .ddlsim.lock, is held): wait for it, or "
                     "use another --out");
  }
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (it->is_directory(ec) && !it->is_symlink(ec) && is_temporary_dir(name)) {
      it.disable_recursion_pending();
      std::error_code removed;
      stale_removed_ += fs::remove_all(it->path(), removed) > 0 ? 1 : 0;
    } else if (it->is_regular_file(ec) && is_temporary(name) && fs::remove(it->path(), ec)) {
      ++stale_removed_;
    }
  }
}

OutputDir::~OutputDir() {
  if (fd_ < 0)
    return;
  std::error_code ec;
  const bool only_lock =
      !made_.empty() && std::distance(fs::directory_iterator(dir_, ec), fs::directory_iterator{}) == 1;
  if (only_lock && !ec) // nothing written: the directories this made go again (the lock file first, still held)
    fs::remove(fs::path(dir_) / ".ddlsim.lock", ec);
  ::close(fd_); // releases the lock
  if (!only_lock || ec)
    return;
  fs::path p = absolute_dir(dir_);
  while (!p.empty() && fs::remove(p, ec) && p.string() != made_)
    p = p.parent_path();
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

std::string csv_cell(std::string_view text) {
  if (text.find_first_of(",\"\n\r") == std::string_view::npos)
    return std::string(text);
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"')
      out += '"';
    out += c;
  }
  return out + "\"";
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
