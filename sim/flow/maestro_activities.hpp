// MaestroActivities: keeps SimGrid 3.32's maestro activity list empty (sim/flow only; maestro_activities.cpp, and
// docs/simgrid-maestro-list.md for the report to SimGrid's maintainers).
#pragma once

#include <simgrid/forward.h>

#include <array>
#include <cstdint>
#include <list>

namespace ddlsim::sim::flow {

// SimGrid 3.32 keeps every activity created outside an actor in one std::list of the maestro actor
// (kernel::actor::ActorImpl::activities_): Comm::sendto_init detaches its comm there (CommImpl::detach), and an Exec
// created by maestro registers there (ExecImpl::ExecImpl). Each one is removed when it finishes with std::list::remove,
// which scans the whole list: with every pending task and every flow in flight in it, that scan was 60 % of a
// 1,024-GPU run with symmetry off and made wall time quadratic in the GPU count (issue #10). Actors would not help:
// sendto comms always go to maestro's list, and SimGrid 3.32's public API offers no way to keep an activity out of it.
// The list serves only to cancel those activities when the maestro exits; ours are kept alive by FlowRun and all
// finish before Engine::run returns (checked by the callers). So each activity is unlinked from the list as soon as
// it is created, and every later removal scans an empty list.
// ActorImpl is not in SimGrid's installed headers, but its list's type is (forward.h): the list is located once, as
// the only std::list<ActivityImplPtr> inside the maestro's ActorImpl that grows by one element, the new activity,
// when one is created; every later unlink checks that the list's last element is the activity just created. When
// the list is not found (another layout) nothing is unlinked: correct, only slower, and `state()` says so (a test
// fails on it). Built only with SimGrid 3.32 and the CMake option DDLSIM_SIMGRID_MAESTRO_UNLINK (on by default).
class MaestroActivities {
public:
  enum class State {
    off,      ///< not built in (the option is off, or another SimGrid release): nothing is unlinked
    unknown,  ///< built in, no activity created yet
    found,    ///< the list was located: every activity created is unlinked from it
    unusable, ///< built in, but the list was not found (SimGrid's layout changed): nothing is unlinked
  };

  /// Calls `create` (which must create exactly one activity in maestro's context and return it) and unlinks that
  /// activity from the maestro's list.
  template <class Create> auto adopt(Create&& create) {
    const bool locating = before_create();
    auto activity = create();
    after_create(activity->get_impl(), locating);
    return activity;
  }

  [[nodiscard]] State state() const { return state_; }

private:
  using Word = std::uintptr_t;
  using ActivityList = std::list<simgrid::kernel::activity::ActivityImplPtr>;
  // Words of the maestro ActorImpl searched: activities_ is at byte 192 in 3.32 and the object is larger than 256 bytes
  // (its simcall, timers and s4u::Actor interface follow the list), so the search stays inside it.
  static constexpr std::size_t kWindow = 32;

  // Snapshots the maestro's words before the first activity is created; true when it did (locating).
  bool before_create();
  void after_create(const simgrid::kernel::activity::ActivityImpl* impl, bool locating);
  void locate(const simgrid::kernel::activity::ActivityImpl* impl);
  void unlink(const simgrid::kernel::activity::ActivityImpl* impl);

  State state_ = initial_state();
  static State initial_state();
  const unsigned char* maestro_ = nullptr;
  std::array<Word, kWindow> before_{};
  ActivityList* list_ = nullptr;
};

} // namespace ddlsim::sim::flow
