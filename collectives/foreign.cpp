// Collectives that another library carries (gloo, NCCL): lockstep numbers them, checks their signature in debug mode
// and keeps them on the watchdog's board, but moves no data.
//
// The board holds one call in flight, while a carrier may have many outstanding (a torch program issues several
// asynchronous all_reduces before it waits for any). So the calls begun and not yet ended wait in a queue, oldest
// first, and the board shows the oldest: it goes on the board when it is begun with nothing older outstanding, or when
// the call before it ends. A carrier that completes calls out of order ends a later call early: it leaves the queue
// only once every older call has ended too. Each call thus goes on the board once, in call-number order, and the
// watchdog's clock for a call starts when it became the oldest outstanding one: the time the processes waited for it.

#include "communicator_impl.hpp"

#include <fmt/core.h>

namespace lockstep {

std::uint64_t Communicator::begin_foreign(const ForeignCall& call, CallSite site) {
    const detail::OpTraits& rules = detail::traits(call.op);
    if (static_cast<std::size_t>(call.op) >= operation_count || rules.point_to_point) {
        throw InvalidArgumentError(fmt::format("begin_foreign: {} is not a collective", static_cast<int>(call.op)));
    }
    Impl& impl = *impl_;
    impl.check_usable();
    impl.drain();
    const std::uint64_t number = ++impl.sequence;
    ++impl.collectives;
    const detail::CallInfo info{.op = call.op,
                                .root = call.root,
                                .reduce_op = call.reduce_op,
                                .varying_dim = call.varying_dim,
                                .site = site,
                                .foreign = &call};
    if (detail::CallRing* ring = impl.ring; ring != nullptr) {
        std::uint64_t entry_number = 0;
        detail::RecordWord* entry = ring->open(entry_number);
        detail::write_call(entry, info, number, detail::ticks(impl.tsc), impl.step, detail::RecordedKind::collective,
                           true);
        detail::CallRing::close(entry);
    }
    if (impl.board != nullptr) {
        const detail::CallRecord record = detail::board_record(info, number);
        std::scoped_lock lock(impl.foreign_mutex);
        if (impl.foreign_pending.empty()) impl.board->begin(record);
        impl.foreign_pending.push_back({number, record, false});
    }
    try {
        if (impl.debug) impl.exchange_and_check(detail::encode_signature(info, number, impl.step), nullptr, true);
        if (call.root >= impl.size || (call.root < 0 && (call.root != -1 || rules.rooted()))) {
            throw InvalidArgumentError(fmt::format("{}: root {} is not a rank of this communicator of {}",
                                                   op_name(call.op), call.root,
                                                   detail::count_text(impl.size, "process", "processes")));
        }
    } catch (...) {
        impl.end_foreign(number, detail::current_exception_type());  // the carrier will not issue it
        throw;
    }
    return number;
}

void Communicator::end_foreign(std::uint64_t number) noexcept {
    impl_->end_foreign(number);
}

void Communicator::Impl::end_foreign(std::uint64_t number, const char* error) noexcept {
    // The carrier may end it on another thread than the one that began it: an update entry in the shared ring.
    if (recorded != nullptr) {
        detail::write_update(*recorded, detail::RecordedStream::calls, number, detail::ticks(tsc), error, 0);
    }
    if (board == nullptr) return;
    std::scoped_lock lock(foreign_mutex);
    for (ForeignPending& p : foreign_pending) {
        if (p.number == number) p.ended = true;
    }
    bool moved = false;
    while (!foreign_pending.empty() && foreign_pending.front().ended) {
        foreign_pending.pop_front();
        board->end();
        moved = true;
    }
    if (moved && !foreign_pending.empty()) board->begin(foreign_pending.front().record);
}

void Communicator::set_carrier(std::string_view name) {
    std::string label = fmt::format("calls carried by {}", name);
    detail::name_recorded(impl_->recorded, label);
    detail::Watchdog::instance().label_communicator(impl_->id, std::move(label));
}

}  // namespace lockstep
