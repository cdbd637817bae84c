// The median step as a Chrome trace (analysis.hpp, traced_step_events): what `ddlsim run` shows beside the
// simulated step.
#include "traces/analysis.hpp"
#include "traces/operators.hpp"

#include <fmt/format.h>

#include <cmath>
#include <set>

namespace ddlsim::traces {

using namespace detail;

OrderedJson traced_step_events(const KinetoTrace& trace, const TraceAnalysis& analysis) {
  const StepSpan& step = analysis.steps[static_cast<std::size_t>(analysis.median_step)];
  const double from = step.start_us;
  const double to = step.start_us + step.duration_s / kUs;
  // CPU events inside the step; GPU activities launched from it (by correlation), wherever they ran.
  std::set<std::int64_t> correlations;
  for (const auto& e : trace.events)
    if (e.cat == Category::runtime && e.ts_us >= from && e.ts_us < to && e.correlation >= 0)
      correlations.insert(e.correlation);
  OrderedJson events = OrderedJson::array();
  std::set<int> threads;
  for (const auto& e : trace.events) {
    if (e.cat == Category::memory)
      continue;
    const bool inside = is_gpu(e.cat) ? correlations.count(e.correlation) > 0 : e.ts_us >= from && e.ts_us < to;
    if (!inside)
      continue;
    const Thread& th = trace.threads[static_cast<std::size_t>(e.thread)];
    threads.insert(e.thread);
    OrderedJson j;
    j["ph"] = "X";
    j["cat"] = e.cat == Category::kernel            ? "kernel"
               : e.cat == Category::memcpy          ? "gpu_memcpy"
               : e.cat == Category::memset          ? "gpu_memset"
               : e.cat == Category::runtime         ? "cuda_runtime"
               : e.cat == Category::user_annotation ? "user_annotation"
               : e.cat == Category::python          ? "python_function"
                                                    : "cpu_op";
    j["name"] = e.name;
    j["pid"] = th.pid;
    j["tid"] = th.tid;
    j["ts"] = std::round((e.ts_us - from) * 1000) / 1000;
    j["dur"] = e.dur_us;
    events.push_back(std::move(j));
  }
  for (const int t : threads) {
    const Thread& th = trace.threads[static_cast<std::size_t>(t)];
    OrderedJson m;
    m["ph"] = "M";
    m["name"] = "thread_name";
    m["pid"] = th.pid;
    m["tid"] = th.tid;
    m["args"] = {{"name", th.name.empty() ? (th.gpu ? th.tid : "thread " + th.tid) : th.name}};
    events.push_back(std::move(m));
  }
  OrderedJson out;
  out["traceEvents"] = std::move(events);
  out["displayTimeUnit"] = "ms";
  out["source"] = fmt::format("{}, {}", analysis.path, step.name);
  return out;
}

} // namespace ddlsim::traces
