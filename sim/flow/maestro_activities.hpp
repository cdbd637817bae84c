// MaestroActivities: keeps SimGrid 3.32's maestro activity list empty (sim/flow only; see the comment below).
#pragma once

#include <simgrid/s4u/Activity.hpp>
#include <simgrid/s4u/Actor.hpp>
#include <simgrid/version.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <list>

namespace ddlsim::sim::flow {

// SimGrid 3.32 keeps every activity created outside an actor in one std::list of the maestro actor
// (kernel::actor::ActorImpl::activities_): Comm::sendto_init detaches its comm there (CommImpl::detach), and an Exec
// created by maestro registers there (ExecImpl::ExecImpl). Each one is removed when it finishes with std::list::remove,
// which scans the whole list: with every pending task and every flow in flight in it, that scan was 60 % of a
// 1,024-GPU run with symmetry off and made wall time quadratic in the GPU count (issue #10). Actors would not help:
// sendto comms always go to maestro's list. The list serves only to cancel those activities when the maestro exits;
// our activities are kept alive by FlowRun and all finish before Engine::run returns (checked by the callers). So
// each activity is unlinked from the list as soon as it is created, and every later removal scans an empty list.
// ActorImpl is not in SimGrid's installed headers, but its list's type is (forward.h): the list is located once, as
// the only std::list<ActivityImplPtr> inside the maestro's ActorImpl that grows by one element, the new activity,
// when one is created; every later unlink checks that the list's last element is the activity just created. When
// the list is not found (another SimGrid release, another layout) nothing is unlinked: correct, only slower.
class MaestroActivities {
public:
  /// Calls `create` (which must create exactly one activity in maestro's context and return it) and unlinks that
  /// activity from the maestro's list.
  template <class Create> auto adopt(Create&& create) {
#if SIMGRID_VERSION_MAJOR == 3 && SIMGRID_VERSION_MINOR == 32
    if (state_ == State::unknown) {
      const auto* maestro = maestro_bytes();
      if (maestro == nullptr) {
        state_ = State::unusable;
        return create();
      }
      std::array<Word, kWindow> before;
      std::memcpy(before.data(), maestro, sizeof before);
      auto activity = create();
      locate(maestro, before, activity->get_impl());
      unlink(activity->get_impl());
      return activity;
    }
    auto activity = create();
    unlink(activity->get_impl());
    return activity;
#else
    return create();
#endif
  }

private:
  using Word = std::uintptr_t;
  using ActivityList = std::list<simgrid::kernel::activity::ActivityImplPtr>;
  // Words of the maestro ActorImpl searched: activities_ is at byte 192 in 3.32 and the object is larger than 256 bytes
  // (its simcall, timers and s4u::Actor interface follow the list), so the search stays inside it.
  static constexpr std::size_t kWindow = 32;
  enum class State { unknown, found, unusable };

  static const unsigned char* maestro_bytes() {
    const auto* self = simgrid::s4u::Actor::self();
    return self == nullptr ? nullptr : reinterpret_cast<const unsigned char*>(self->get_impl());
  }

  // A std::list header is {next, prev, size} (libstdc++): the list that received `impl` has a size one larger and
  // a new last node, whose element (after the node's two links) is `impl`.
  void locate(const unsigned char* maestro, const std::array<Word, kWindow>& before,
              const simgrid::kernel::activity::ActivityImpl* impl) {
    state_ = State::unusable;
    std::array<Word, kWindow> after;
    std::memcpy(after.data(), maestro, sizeof after);
    for (std::size_t w = 0; w + 2 < kWindow; ++w) {
      if (after[w + 2] != before[w + 2] + 1 || after[w + 1] == before[w + 1] || after[w + 1] % alignof(Word) != 0 ||
          after[w + 1] == 0)
        continue;
      Word element = 0;
      std::memcpy(&element, reinterpret_cast<const unsigned char*>(after[w + 1]) + 2 * sizeof(Word), sizeof element);
      if (element != reinterpret_cast<Word>(impl))
        continue;
      if (list_ != nullptr) { // two candidates: ambiguous, leave the list alone
        list_ = nullptr;
        return;
      }
      list_ = reinterpret_cast<ActivityList*>(const_cast<unsigned char*>(maestro) + w * sizeof(Word));
    }
    if (list_ != nullptr)
      state_ = State::found;
  }

  void unlink(const simgrid::kernel::activity::ActivityImpl* impl) {
    if (state_ != State::found)
      return;
    if (list_->empty() || list_->back().get() != impl) {
      state_ = State::unusable; // not the list we took it for: stop touching it
      return;
    }
    list_->pop_back();
  }

  State state_ = State::unknown;
  ActivityList* list_ = nullptr;
};

} // namespace ddlsim::sim::flow
