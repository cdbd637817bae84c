// Runs a piece of a test in a forked child process. SimGrid's Engine is a process-wide singleton that cannot be
// created twice (docs/architecture.md, "Module boundaries"), so every simulation of a test runs in its own child; the
// child reports numbers and text lines back through a pipe and the parent makes the Catch2 checks. Works whether or not
// ctest runs each TEST_CASE in its own process, and inside SECTIONs and GENERATEs.
#pragma once

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace ddlsim::test {

struct ChildReport {
  std::vector<double> values;
  std::vector<std::string> texts;
  std::string error; ///< what the child threw, or how it died; empty on success
};

namespace detail {
inline void write_all(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n <= 0)
      return;
    done += static_cast<size_t>(n);
  }
}
inline std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n')
      c = ' ';
  return s;
}
} // namespace detail

/// Forks; the child runs `body` (which fills the report) and exits without running the parent's exit handlers.
inline ChildReport run_in_child(const std::function<void(ChildReport&)>& body) {
  int fds[2];
  if (::pipe(fds) != 0)
    return {{}, {}, "pipe() failed"};
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0)
    return {{}, {}, "fork() failed"};
  if (pid == 0) {
    ::close(fds[0]);
    ChildReport report;
    std::ostringstream out;
    out.precision(17);
    int code = 0;
    try {
      body(report);
    } catch (const std::exception& e) {
      report.error = e.what();
      code = 3;
    }
    for (double v : report.values)
      out << "v " << v << '\n';
    for (const auto& t : report.texts)
      out << "s " << detail::one_line(t) << '\n';
    if (!report.error.empty())
      out << "e " << detail::one_line(report.error) << '\n';
    detail::write_all(fds[1], out.str());
    ::close(fds[1]);
    ::_exit(code);
  }
  ::close(fds[1]);
  std::string data;
  char buffer[4096];
  for (ssize_t n; (n = ::read(fds[0], buffer, sizeof buffer)) > 0;)
    data.append(buffer, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);

  ChildReport report;
  std::istringstream in(data);
  for (std::string line; std::getline(in, line);) {
    if (line.size() < 2)
      continue;
    const std::string rest = line.substr(2);
    if (line[0] == 'v')
      report.values.push_back(std::strtod(rest.c_str(), nullptr));
    else if (line[0] == 's')
      report.texts.push_back(rest);
    else if (line[0] == 'e')
      report.error = rest;
  }
  if (report.error.empty() && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
    report.error = WIFSIGNALED(status) ? "child killed by signal " + std::to_string(WTERMSIG(status))
                                       : "child exited with status " + std::to_string(WEXITSTATUS(status));
  return report;
}

} // namespace ddlsim::test
