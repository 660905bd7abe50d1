#include "watchdog.hpp"

#include "watchdog/state.hpp"

#include <memory>
#include <mutex>

namespace lockstep::detail {

Endpoint Watchdog::endpoint() const {
    std::scoped_lock lock(state_->registry_mutex);
    return state_->self;
}

void Watchdog::forget_communicator(std::uint64_t comm_id) {
    State& s = *state_;
    std::scoped_lock lock(s.registry_mutex);
    const auto it = s.registered.find(comm_id);
    if (it == s.registered.end()) return;
    State::observe(it->second, Clock::now());
    State::take_later(s.retired_last, it->second);
    s.registered.erase(it);
}

std::vector<Endpoint> Watchdog::members(std::uint64_t comm_id) const {
    std::scoped_lock lock(state_->registry_mutex);
    const auto it = state_->registered.find(comm_id);
    return it == state_->registered.end() ? std::vector<Endpoint>{} : it->second.members;
}

void Watchdog::label_communicator(std::uint64_t comm_id, std::string label) {
    std::scoped_lock lock(state_->registry_mutex);
    if (auto it = state_->registered.find(comm_id); it != state_->registered.end()) it->second.label = std::move(label);
}

void Watchdog::name_communicator(std::uint64_t comm_id, std::string name) {
    std::scoped_lock lock(state_->registry_mutex);
    if (auto it = state_->registered.find(comm_id); it != state_->registered.end()) it->second.name = std::move(name);
}

void Watchdog::report_now() noexcept {
    state_->nudged = true;
}

void Watchdog::set_phase(std::string phase, const void* caller) {
    std::scoped_lock lock(state_->registry_mutex);
    state_->phase = std::move(phase);
    state_->phase_caller = caller;
}

Boards Watchdog::register_communicator(std::uint64_t comm_id, std::vector<Endpoint> members, double timeout,
                                       TimeoutAction on_timeout) {
    std::scoped_lock lock(state_->registry_mutex);
    State::Registered& entry = state_->registered[comm_id];
    entry.members = std::move(members);
    entry.on_timeout = std::move(on_timeout);
    for (auto& w : entry.boards) w.board = std::make_unique<Board>(comm_id, timeout, &state_->completions);
    return Boards{entry.boards[0].board.get(), entry.boards[1].board.get()};
}

}  // namespace lockstep::detail
