// MaestroActivities (maestro_activities.hpp): locating SimGrid 3.32's maestro activity list and unlinking from it.
#include "sim/flow/maestro_activities.hpp"

#include <simgrid/s4u/Activity.hpp>
#include <simgrid/s4u/Actor.hpp>
#include <simgrid/version.h>

#include <cstring>

namespace ddlsim::sim::flow {

#if defined(DDLSIM_SIMGRID_MAESTRO_UNLINK) && SIMGRID_VERSION_MAJOR == 3 && SIMGRID_VERSION_MINOR == 32
MaestroActivities::State MaestroActivities::initial_state() {
  return State::unknown;
}
#else
MaestroActivities::State MaestroActivities::initial_state() {
  return State::off;
}
#endif

bool MaestroActivities::before_create() {
  if (state_ != State::unknown)
    return false;
  const auto* self = simgrid::s4u::Actor::self();
  if (self == nullptr) {
    state_ = State::unusable;
    return false;
  }
  maestro_ = reinterpret_cast<const unsigned char*>(self->get_impl());
  std::memcpy(before_.data(), maestro_, sizeof before_);
  return true;
}

void MaestroActivities::after_create(const simgrid::kernel::activity::ActivityImpl* impl, bool locating) {
  if (locating)
    locate(impl);
  unlink(impl);
}

// A std::list header is {next, prev, size} (libstdc++): the list that received `impl` has a size one larger and
// a new last node, whose element (after the node's two links) is `impl`.
void MaestroActivities::locate(const simgrid::kernel::activity::ActivityImpl* impl) {
  state_ = State::unusable;
  std::array<Word, kWindow> after;
  std::memcpy(after.data(), maestro_, sizeof after);
  for (std::size_t w = 0; w + 2 < kWindow; ++w) {
    if (after[w + 2] != before_[w + 2] + 1 || after[w + 1] == before_[w + 1] || after[w + 1] % alignof(Word) != 0 ||
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
    list_ = reinterpret_cast<ActivityList*>(const_cast<unsigned char*>(maestro_) + w * sizeof(Word));
  }
  if (list_ != nullptr)
    state_ = State::found;
}

void MaestroActivities::unlink(const simgrid::kernel::activity::ActivityImpl* impl) {
  if (state_ != State::found)
    return;
  if (list_->empty() || list_->back().get() != impl) {
    state_ = State::unusable; // not the list we took it for: stop touching it
    return;
  }
  list_->pop_back();
}

} // namespace ddlsim::sim::flow
