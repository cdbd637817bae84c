// Output files are written atomically (temporary file in the same directory, then rename), so a crash or a
// kill never leaves a partial summary.json or results.csv behind; a run's files are replaced all together
// (OutputBatch). Inputs are read with a size limit, so that a device or a pipe that never ends is an input error.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace ddlsim {

/// Writes `content` to `path` atomically, creating parent directories. A path that cannot be written (a file
/// where a directory should be, no permission, a read-only file system, a full disk) throws InputError naming it.
void write_file_atomic(const std::string& path, std::string_view content);

/// Creates `dir` (and its parents) for a command's outputs and checks that files can be created in it, before any
/// work is done; throws InputError(dir, "", "cannot write outputs here: ...") if not.
void prepare_output_dir(const std::string& dir);

/// A command's output directory, held while this lives: prepare_output_dir's checks, an exclusive lock against
/// another ddlsim writing there (flock on <dir>/.ddlsim.lock, released when this ends or the process dies; a second
/// process gets an InputError naming the directory), and the temporaries a killed run left there removed
/// (`*.tmp.<pid>`, `*.old.<pid>`, gnuplot's `*.gp.run.<pid>` and `*.gp.log.<pid>`, import-trace's staging directory
/// `.import-trace.tmp.<pid>`: under the lock, none is in use). A directory this made and nothing was written into
/// (a refusal after it was taken) is removed again when this ends, with the parents it made.
class OutputDir {
public:
  explicit OutputDir(const std::string& dir);
  ~OutputDir();
  OutputDir(const OutputDir&) = delete;
  OutputDir& operator=(const OutputDir&) = delete;
  /// Temporaries of earlier runs removed when the directory was taken.
  [[nodiscard]] std::size_t stale_removed() const { return stale_removed_; }

private:
  int fd_ = -1;
  std::size_t stale_removed_ = 0;
  std::string dir_;
  std::string made_; ///< the outermost directory that this made ("" if `dir` existed)
};

/// Files replaced all together or not at all: add() writes each to a temporary file beside its target, commit()
/// renames them all into place; if anything fails before commit() (or commit() is never reached), the temporary
/// files are removed and the old files stay as they were. A rename that fails inside commit() puts back the files
/// already renamed (each old file is kept as `<target>.old.<pid>`, a hard link or a copy, until all are in place).
class OutputBatch {
public:
  OutputBatch() = default;
  OutputBatch(const OutputBatch&) = delete;
  OutputBatch& operator=(const OutputBatch&) = delete;
  ~OutputBatch();
  void add(const std::string& path, std::string_view content);
  /// Takes `temporary`, a complete file that another program wrote beside `path`, into the batch as `path`'s new
  /// content.
  void adopt(const std::string& temporary, const std::string& path);
  void commit();

private:
  std::vector<std::pair<std::string, std::string>> staged_; // (temporary, target)
};

/// Whether `path` names an existing file or directory; false (never an exception) for a name the system cannot
/// look up: too long, a NUL byte in it, a component that is a file.
[[nodiscard]] bool path_exists(const std::string& path);

/// The largest input file ddlsim reads whole (scenarios, calibrations, workloads, logs, traces).
inline constexpr std::size_t kMaxInputBytes = std::size_t{1} << 30;

/// Reads a whole file; throws InputError(path, "", ...) if it cannot be read, is a directory, has a NUL byte in its
/// name, is a device (/dev/zero), or is larger than `max_bytes` (a pipe that does not end).
[[nodiscard]] std::string read_file(const std::string& path, std::size_t max_bytes = kMaxInputBytes);

/// `text` as one field of a CSV row (RFC 4180): quoted, its quotes doubled, when it holds a comma, a quote or a line
/// break; as it is otherwise.
[[nodiscard]] std::string csv_cell(std::string_view text);

/// FNV-1a (64 bits) of `bytes` as 16 hex digits: a fingerprint of a file's content, not a cryptographic hash.
[[nodiscard]] std::string fingerprint(std::string_view bytes);

/// While one lives, every file read_file reads on this thread is recorded with its fingerprint: a sweep's journal
/// keeps what its points read (calibrations, workloads), so that --resume and merge notice a file that changed.
/// Logs nest: an inner one records for itself, then for the one around it.
class ReadLog {
public:
  ReadLog();
  ~ReadLog();
  ReadLog(const ReadLog&) = delete;
  ReadLog& operator=(const ReadLog&) = delete;
  /// path as read -> fingerprint of its content
  [[nodiscard]] const std::map<std::string, std::string>& files() const { return files_; }
  void record(const std::string& path, std::string_view content);

private:
  std::map<std::string, std::string> files_;
  ReadLog* outer_;
};

/// Makes an I/O failure signal-free: SIGXFSZ (file size limit) is ignored, so that the write fails with EFBIG and
/// the temporary files are cleaned up, instead of the process dying with them left behind. Called once by main().
void ignore_file_size_signal();

} // namespace ddlsim
