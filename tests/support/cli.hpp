// End-to-end test support: run the real `ddlsim` binary (DDLSIM_BIN, set by ddlsim_add_test; DDLSIM_BIN_FALLBACK
// when a test executable is run by hand) without a shell, capture its output, and give each test a temporary
// directory.
#pragma once

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace ddlsim::test {

namespace fs = std::filesystem;

// A fresh directory under the system temporary directory, removed with everything in it on destruction.
class TempDir {
public:
  TempDir() {
    std::random_device rd;
    const fs::path base = fs::temp_directory_path();
    for (int attempt = 0; attempt < 100; ++attempt) {
      std::ostringstream name;
      name << "ddlsim-test-cli-" << ::getpid() << "-" << std::hex << rd() << rd();
      path_ = base / name.str();
      if (fs::create_directory(path_))
        return;
    }
    FAIL("cannot create a unique temporary directory under " << base);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  [[nodiscard]] const fs::path& path() const { return path_; }
  [[nodiscard]] std::string operator/(const std::string& name) const { return (path_ / name).string(); }

private:
  fs::path path_;
};

inline std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Outcome {
  int exit_code = -1; // 128 + signal number when the process was killed by a signal (a crash)
  std::string out;
  std::string err;
};

inline std::string ddlsim_binary() {
  if (const char* env = std::getenv("DDLSIM_BIN"); env != nullptr && *env != '\0')
    return env;
  return DDLSIM_BIN_FALLBACK;
}

// Runs `ddlsim args...` without a shell (arguments are passed verbatim), stdout and stderr captured in files.
/// Starts `ddlsim args...` without a shell and returns at once: stdin from /dev/null, stdout and stderr into the
/// given files. The caller waits for (or kills) the process.
inline pid_t spawn_ddlsim(const std::vector<std::string>& args, const std::string& out_path,
                          const std::string& err_path) {
  const std::string binary = ddlsim_binary();
  REQUIRE(fs::exists(binary));
  std::vector<std::string> argv_strings{binary};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_strings)
    argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  REQUIRE(posix_spawn_file_actions_init(&actions) == 0);
  REQUIRE(posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0) == 0);
  REQUIRE(posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                           0644) == 0);
  REQUIRE(posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                           0644) == 0);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, binary.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  REQUIRE(spawned == 0);
  return pid;
}

/// Runs `ddlsim args...` to completion, stdout and stderr captured.
inline Outcome run_ddlsim(const std::vector<std::string>& args) {
  TempDir capture;
  const std::string out_path = capture / "stdout", err_path = capture / "stderr";
  const pid_t pid = spawn_ddlsim(args, out_path, err_path);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);

  Outcome o;
  if (WIFEXITED(status))
    o.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    o.exit_code = 128 + WTERMSIG(status);
  o.out = read_text(out_path);
  o.err = read_text(err_path);
  return o;
}

// Runs and requires success, so that a failing run shows its stderr.
inline Outcome run_ok(const std::vector<std::string>& args) {
  auto o = run_ddlsim(args);
  INFO("stderr: " << o.err);
  REQUIRE(o.exit_code == 0);
  return o;
}

// Bad input: exit 2 and one line on stderr, the phrase in it.
inline void check_refused(const Outcome& o, const std::string& phrase) {
  INFO("stdout: " << o.out << "\nstderr: " << o.err);
  CHECK(o.exit_code == 2);
  CHECK_THAT(o.err, Catch::Contains(phrase));
  CHECK(std::count(o.err.begin(), o.err.end(), '\n') == 1);
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  REQUIRE(out.good());
}

} // namespace ddlsim::test
