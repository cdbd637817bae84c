// A run's progress line on a terminal (run_progress.hpp).
#include "sim/cli/run_progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <utility>

namespace ddlsim::sim {
namespace {
using Clock = std::chrono::steady_clock;
constexpr auto kEvery = std::chrono::milliseconds(500); // how often the line is rewritten

// A run shorter than this prints nothing: 2 s, or DDLSIM_PROGRESS_AFTER_S seconds (0 to 60; the tests set 0).
std::chrono::seconds quiet_for() {
  const char* env = std::getenv("DDLSIM_PROGRESS_AFTER_S");
  const std::string_view text = env != nullptr ? env : "";
  if (text.empty() || text.size() > 2 || text.find_first_not_of("0123456789") != std::string_view::npos)
    return std::chrono::seconds(2);
  return std::chrono::seconds(std::min(60, std::atoi(env)));
}
} // namespace

RunProgress::RunProgress(bool enabled, std::string what) : what_(std::move(what)) {
  if (enabled && ::isatty(STDERR_FILENO) == 1)
    thread_ = std::thread([this] { show(); });
}

RunProgress::~RunProgress() {
  if (!thread_.joinable())
    return;
  {
    const std::lock_guard lock(mutex_);
    done_ = true;
  }
  stop_.notify_one();
  thread_.join();
  if (shown_)
    std::fputs("\r\033[K", stderr); // the line cleared: the summary follows on stdout
}

void RunProgress::show() {
  const auto start = Clock::now();
  std::unique_lock lock(mutex_);
  const auto quiet = quiet_for(); // 0: shown at once, even for a run that ends first (the tests)
  if (quiet.count() > 0 && stop_.wait_for(lock, quiet, [this] { return done_; }))
    return;
  do {
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    std::fputs(fmt::format("\r\033[K  ddlsim run: {}: {} ({:.0f} s)", what_, step_.load(), elapsed).c_str(), stderr);
    std::fflush(stderr);
    shown_ = true;
  } while (!stop_.wait_for(lock, kEvery, [this] { return done_; }));
}

} // namespace ddlsim::sim
