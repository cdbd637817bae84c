// Runs a SimGrid simulation in a child process: SimGrid's engine is a process-wide singleton, so a test that
// needs several simulations forks one child per simulation and reads its numbers back through a pipe.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

namespace ddlsim::test {

template <class Fn> std::vector<double> in_child(Fn&& fn) {
  int fds[2];
  if (::pipe(fds) != 0)
    throw std::runtime_error("pipe failed");
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0)
    throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::close(fds[0]);
    int code = 0;
    try {
      const std::vector<double> out = fn();
      const auto* p = reinterpret_cast<const char*>(out.data());
      std::size_t left = out.size() * sizeof(double);
      while (left > 0) {
        const ssize_t w = ::write(fds[1], p, left);
        if (w <= 0)
          break;
        p += w;
        left -= static_cast<std::size_t>(w);
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child failed: %s\n", e.what());
      code = 3;
    }
    ::close(fds[1]);
    ::_exit(code);
  }
  ::close(fds[1]);
  std::string bytes;
  char buffer[4096];
  for (ssize_t r; (r = ::read(fds[0], buffer, sizeof buffer)) > 0;)
    bytes.append(buffer, static_cast<std::size_t>(r));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw std::runtime_error("simulation child failed with status " + std::to_string(status));
  std::vector<double> out(bytes.size() / sizeof(double));
  std::copy(bytes.data(), bytes.data() + out.size() * sizeof(double), reinterpret_cast<char*>(out.data()));
  return out;
}

} // namespace ddlsim::test
