// Progress of one `ddlsim run` on a terminal: after ~2 s without a result, a line on stderr that says what runs and
// for how long, rewritten every half second and cleared at the end (issue #31: a run was silent for 84 s).
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace ddlsim::sim {

class RunProgress {
public:
  /// Shows `what` (e.g. "gpt3 on the flow engine") when `enabled` and stderr is a terminal.
  RunProgress(bool enabled, std::string what);
  ~RunProgress();
  RunProgress(const RunProgress&) = delete;
  RunProgress& operator=(const RunProgress&) = delete;
  /// The step now running ("simulating", "writing the reports").
  void step(const char* step) { step_.store(step); }

private:
  void show();
  std::string what_;
  std::atomic<const char*> step_{"planning and simulating"};
  std::mutex mutex_;
  std::condition_variable stop_;
  bool done_ = false;
  bool shown_ = false;
  std::thread thread_;
};

} // namespace ddlsim::sim
