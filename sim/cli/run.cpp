// Engine dispatch (sim/cli/run.hpp): the one place that knows both engines.
#include "sim/cli/run.hpp"

#include "sim/analytic/analytic.hpp"
#include "sim/flow/flow_engine.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace ddlsim::sim {

namespace {
RunResult run_on(const Scenario& s) {
  switch (s.engine) {
  case Engine::analytic:
    return run_analytic(s);
  case Engine::flow:
    return run_flow(s);
  }
  throw std::logic_error("run_scenario: no such engine");
}
} // namespace

void check_runnable(const Scenario& s) {
  if (s.engine == Engine::flow && (!s.strategy.asynchronous() || capabilities(s.engine).simulates_asynchronous_workers))
    check_flow(s);
  else
    check_analytic(s);
}

RunResult run_scenario(const Scenario& s) {
  if (!s.strategy.asynchronous() || capabilities(s.engine).simulates_asynchronous_workers)
    return run_on(s);
  // The asynchronous workers' loops are simulated by the analytic engine's queue model (sim/analytic/ps_async.hpp).
  Scenario analytic = s;
  analytic.engine = Engine::analytic;
  auto r = run_analytic(analytic);
  r.engine = s.engine;
  r.notes.push_back(fmt::format("{} engine: {} is not simulated flow by flow; its figures are the analytic "
                                "engine's FIFO link-queue simulation of the asynchronous workers",
                                engine_name(s.engine), s.strategy.kind()));
  return r;
}

} // namespace ddlsim::sim
