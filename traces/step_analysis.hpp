// One profiler step's analysis (traces/ only): the figures of one ProfilerStep#N span, reduced over the steps by
// analyse (analysis.cpp).
#pragma once

#include "traces/analysis.hpp"
#include "traces/kineto.hpp"
#include "traces/operators.hpp"

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace ddlsim::traces::detail {

/// Per-step results, reduced over steps by the caller.
struct StepResult {
  double duration_s = 0;
  std::vector<TracedLayer> layers; // structure + this step's times
  std::vector<TracedCollective> collectives;
  PhaseFigures phases;
  std::vector<double> launch_per_task; // per layer operator that launched GPU work
  std::optional<int> batch;
  bool from_modules = false; // layers from module annotations
  bool ok = true;
  std::string problem;
};

/// Analyses the step that runs on `main_thread` from `from_us` to `to_us`: the CPU operators of every thread as call
/// trees, runtime calls attached to the innermost operator around them, GPU activities reached from the runtime calls
/// by correlation id; the main thread's top-level spans classified into phases; the forward operators grouped into
/// layers at parameterised operators; the autograd thread's operators joined to them by sequence number; host
/// intervals attributed to the operator they start with (so Python time between operators counts).
[[nodiscard]] StepResult analyse_step(const KinetoTrace& t, const Index& ix, std::size_t main_thread, double from_us,
                                      double to_us);

} // namespace ddlsim::traces::detail
