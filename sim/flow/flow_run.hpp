// FlowRun: the SimGrid side of a flow-engine run (sim/flow only): collectives lowered into phases of point-to-point
// flows started as comms on the platform, timed activities on a clock host, completion handlers, and the collectives
// that run on links of their own timed without the platform.
#pragma once

#include "sim/flow/maestro_activities.hpp"
#include "sim/flow/platform.hpp"
#include "sim/network/lowering/lowering.hpp"

#include <simgrid/s4u/Activity.hpp>
#include <simgrid/s4u/Comm.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Exec.hpp>
#include <simgrid/s4u/Host.hpp>
#include <simgrid/s4u/Link.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace ddlsim::sim::flow {

namespace sg4 = simgrid::s4u;

// Timers (a collective's delayed start and its end, latency waits) run on one "clock" host at flow::kHostSpeedFlops
// with a core per concurrent activity (platform.hpp); tasks other than collectives are timed by ReplicaTimer.
constexpr double kClockSpeed = flow::kHostSpeedFlops;
constexpr int kClockCores = flow::kHostCores;

class FlowRun {
public:
  FlowRun(const flow::Platform& platform, sg4::Host* clock);

  /// A timed activity on the clock host, not started. Exec::init + set_host (not Host::exec_init, which needs an
  /// issuing actor), as in examples/cpp/dag-tuto: activities are started from main or from completion callbacks,
  /// no actor runs.
  sg4::ExecPtr timed(double seconds);

  /// Starts a collective lowered into `phases` (ranks of this platform); `done` is started when its last phase has
  /// finished.
  void start_collective(std::vector<Phase> phases, sg4::ExecPtr done);

  /// A collective whose links no other flow uses while it runs, timed without SimGrid: each phase ends when its
  /// slowest flow does, a flow taking its latencies and its bytes at its route's bandwidth (what SimGrid gives a flow
  /// alone under configure_closed_form); its links' statistics are added (flow::add_unshared_flow). nullopt, and
  /// nothing added, when two flows of a phase would share a link (a source or a destination twice, or a flow
  /// between two ranks that have no link between them): the caller starts it on the platform then.
  [[nodiscard]] std::optional<double> unshared_time(const std::vector<Phase>& phases);
  /// Flows timed by unshared_time.
  [[nodiscard]] std::size_t unshared_flows() const { return unshared_flows_; }
  /// Whether SimGrid's maestro activity list is kept empty (maestro_activities.hpp).
  [[nodiscard]] MaestroActivities::State maestro_state() const { return maestro_.state(); }

  /// Declares that no two collectives will ever be in flight together (one GPU's stream issues every collective of
  /// the run, each over all the copies): a flow then sends all its segments as one comm from the start, since no
  /// other traffic can use the links during its latencies. The same times as segment by segment, up to rounding;
  /// half the comms.
  void set_one_at_a_time(bool one) { one_at_a_time_ = one; }

  /// Calls `fn` when the timed activity `activity` completes (once).
  void on_done(const sg4::Activity* activity, std::function<void()> fn) { handlers_.emplace(activity, std::move(fn)); }

  [[nodiscard]] std::size_t flows() const { return flows_; }
  [[nodiscard]] std::size_t events() const { return events_; }

private:
  struct Collective;

  // A route between two ranks, looked up once.
  struct Route {
    std::vector<sg4::Link*> links;
    std::vector<flow::LinkNote*> notes; ///< the links' statistics (flow::link_notes)
    double latency_s = 0;
    double bandwidth = 0; ///< the slowest link's, B/s
  };

  // One flow of a phase. An aggregated flow folds r steps (lowering.hpp). It is sent as S = min(r, segments)
  // consecutive segments, each carrying 1/S of the bytes and paying its share of the r latencies, one before its
  // transfer and the others after it: the latencies stay interleaved with the transfer as in per-message
  // simulation, so under contention other traffic uses the link during them (tests/flow_engine: within 0.5 % of
  // per-message). SimGrid's own latency is off (configure_closed_form: a latency factor of 0): every latency is a
  // wait here, so that a flow can pay another path's latency (a ring step's critical walk, lowering.hpp). The comm
  // of the segment in flight carries a pointer to its Flow as its data.
  struct Flow {
    Collective* run;
    const Route* path; ///< src to dst (an element of routes_, whose addresses are stable)
    int src, dst;
    double bytes_per_segment;
    double latency_per_repeat_s; ///< the flow's latency / repeats
    int repeats, segments, sent;
    double extra_s = 0;   ///< latency paid after the segment in flight
    sg4::CommPtr comm;    ///< the segment in flight
    bool waiting = false; ///< its comm waits for the latency before it
  };

  struct Collective {
    std::vector<Phase> phases;
    std::size_t next = 0;
    std::size_t outstanding = 0;
    std::vector<Flow> flows; ///< the current phase's (never resized while it runs: Flow addresses are stable)
    sg4::ExecPtr done;
  };

  void completed(const sg4::Activity& a);

  const Route& route(int src, int dst);

  /// Each flow's latency in `phase` (lowering.hpp): its path's, latency_repeats times (at least once), or, in a
  /// step of a pipelined ring, the critical walk's over the flows' paths; plus the phase's extra latency. The returned
  /// buffer is reused.
  const std::vector<double>& latencies(const Phase& phase);

  void next_phase(Collective& run);

  void send_segment(Flow& flow);

  void start_transfer(Flow& flow);

  // The segment in flight and the latencies after it are over.
  void segment_done(Flow& flow);

  /// `delay` seconds from now, starts the transfer of a flow that waits for it, or else calls segment_done(flow).
  /// Waits that end at the same instant share one timed activity: the flows of a phase end together, so fewer
  /// activities are in flight.
  void after(double delay, Flow* flow);

  const flow::Platform& platform_;
  sg4::Host* clock_;
  flow::MaestroActivities maestro_;
  int segments_ = 4;
  bool one_at_a_time_ = false;
  int active_ = 0;                              ///< collectives in flight
  std::map<double, std::vector<Flow*>> timers_; ///< flows waiting for latencies, by the instant the wait ends
  std::unordered_map<const sg4::Activity*, std::function<void()>> handlers_; ///< of timed activities
  std::unordered_map<std::uint64_t, Route> routes_;                          ///< by (source, destination) rank
  std::vector<double> latency_;                                              ///< latencies()'s buffer
  std::vector<std::unique_ptr<Collective>> collectives_;
  // Released at the next time step (see completed).
  std::vector<sg4::CommPtr> graveyard_;
  std::vector<std::function<void()>> handler_graveyard_;
  std::vector<std::vector<Flow>> retired_flows_;
  double graveyard_time_ = -1;
  std::size_t flows_ = 0;
  std::size_t events_ = 0;
  std::size_t unshared_flows_ = 0;
};

} // namespace ddlsim::sim::flow
