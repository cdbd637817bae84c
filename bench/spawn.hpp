// Benchmarks time whole `ddlsim` processes, the way /usr/bin/time does: spawn without a shell, output to
// /dev/null, wall time from spawn to exit and the peak resident set from wait4.
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

extern char** environ;

namespace ddlsim::bench {

struct ProcessRun {
  bool ok = false;     ///< spawned and exited with status 0
  double wall_s = 0;   ///< spawn to exit
  double peak_mib = 0; ///< maximum resident set size
};

/// Runs DDLSIM_CLI with `args`, its stdout (and stderr unless `keep_stderr`) sent to /dev/null.
inline ProcessRun run_ddlsim(const std::vector<std::string>& args, bool keep_stderr = false) {
  std::vector<std::string> all{DDLSIM_CLI};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t quiet;
  posix_spawn_file_actions_init(&quiet);
  posix_spawn_file_actions_addopen(&quiet, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  if (!keep_stderr)
    posix_spawn_file_actions_addopen(&quiet, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  const auto start = std::chrono::steady_clock::now();
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, argv[0], &quiet, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&quiet);
  ProcessRun r;
  if (spawned != 0)
    return r;
  int status = 0;
  struct rusage usage {};
  ::wait4(pid, &status, 0, &usage);
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.peak_mib = static_cast<double>(usage.ru_maxrss) / 1024.0;
  r.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  return r;
}

} // namespace ddlsim::bench
