// Engine dispatch (sim/cli/run.hpp): the one place that knows both engines.
#include "sim/cli/run.hpp"

#include "sim/analytic/analytic.hpp"
#include "sim/flow/flow_engine.hpp"

#include <fmt/format.h>

namespace ddlsim::sim {

RunResult run_scenario(const Scenario& s) {
  if (s.engine != "flow")
    return run_analytic(s);
  if (s.strategy.asynchronous()) {
    // The asynchronous workers' loops are simulated by the analytic engine's queue model (sim/analytic/ps_async.hpp).
    Scenario analytic = s;
    analytic.engine = "analytic";
    auto r = run_analytic(analytic);
    r.engine = "flow";
    r.notes.push_back(fmt::format("flow engine: {} is not simulated flow by flow; its figures are the analytic "
                                  "engine's FIFO link-queue simulation of the asynchronous workers",
                                  s.strategy.kind()));
    return r;
  }
  return run_flow(s);
}

} // namespace ddlsim::sim
