// The life cycle of a Communicator: creation (MPI duplicates, the watchdog's view, the agreed id), splitting and
// duplication, accessors, and freeing. The operations are in ops/, the funnel in communicator_impl.hpp, the world
// communicator's bootstrap in world.cpp.

#include "communicator_impl.hpp"
#include "wait_statistics.hpp"

#include <lockstep/config.hpp>
#include <lockstep/logging.hpp>

namespace lockstep {

namespace {
// The next communicator id this process would give; a new communicator takes the largest over its members.
std::uint64_t& communicator_counter() {
    static std::uint64_t counter = 0;
    return counter;
}
}  // namespace

Communicator::Impl::Impl(MPI_Comm base, const CommunicatorOptions& options) {
    const Config& cfg = config();
    debug = options.debug.value_or(cfg.debug);
    timeout = options.timeout.value_or(cfg.timeout);
    tsc = detail::ticks_are_tsc();
    LOCKSTEP_MPI_CHECK(MPI_Comm_dup(base, &comm));
    LOCKSTEP_MPI_CHECK(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
    LOCKSTEP_MPI_CHECK(MPI_Comm_dup(comm, &control));
    LOCKSTEP_MPI_CHECK(MPI_Comm_set_errhandler(control, MPI_ERRORS_RETURN));
    LOCKSTEP_MPI_CHECK(MPI_Comm_rank(comm, &rank));
    LOCKSTEP_MPI_CHECK(MPI_Comm_size(comm, &size));
    LOCKSTEP_MPI_CHECK(MPI_Query_thread(&thread_level));

    // One exchange sets up the watchdog's view of this communicator and agrees on its id.
    auto& watchdog = detail::Watchdog::instance();
    watchdog.ensure_started(thread_level);
    detail::Endpoint mine = watchdog.endpoint();
    mine.next_comm_id = communicator_counter();
    std::vector<detail::Endpoint> members;
    LOCKSTEP_MPI_CHECK(detail::allgather_fixed(mine, members, control, size));
    for (const auto& m : members) id = std::max(id, m.next_comm_id);
    communicator_counter() = id + 1;
    const detail::Boards boards = watchdog.register_communicator(id, std::move(members), timeout);
    if (timeout > 0.0) {
        board = boards.collectives;
        p2p_board = boards.point_to_point;
    }
    detail::attach_wait_counter(&wait_ticks);
}

Communicator::Impl::~Impl() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) {
        if (control != MPI_COMM_NULL) MPI_Comm_free(&control);
        if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
    }
    detail::Watchdog::instance().forget_communicator(id);
    detail::detach_wait_counter(&wait_ticks);
}

void Communicator::Impl::exchange_and_check(const detail::WireSignature& mine) {
    ++signature_checks;
    mpi(detail::allgather_fixed(mine, exchanged, control, size), "MPI_Allgather");
    if (detail::wire_signatures_agree(exchanged)) return;
    std::vector<Signature> sigs;
    sigs.reserve(exchanged.size());
    for (const auto& w : exchanged) sigs.push_back(detail::decode_signature(w));
    if (auto report = check_signatures(sigs)) {
        get_logger("lockstep.debug").error("{}", *report);  // the main process logs it; every rank throws it
        throw SignatureMismatchError(std::move(*report), std::move(sigs));
    }
}

Communicator::Communicator(MPI_Comm comm, CommunicatorOptions options) : impl_(std::make_unique<Impl>(comm, options)) {}
Communicator::Communicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Communicator::~Communicator() = default;
Communicator::Communicator(Communicator&&) noexcept = default;
Communicator& Communicator::operator=(Communicator&&) noexcept = default;

int Communicator::rank() const noexcept {
    return impl_->rank;
}
int Communicator::size() const noexcept {
    return impl_->size;
}
MPI_Comm Communicator::mpi_comm() const noexcept {
    return impl_->comm;
}
bool Communicator::debug() const noexcept {
    return impl_->debug;
}
double Communicator::timeout() const noexcept {
    return impl_->timeout;
}
void Communicator::set_debug(bool on) noexcept {
    impl_->debug = on;
}
CommunicatorStats Communicator::stats() const noexcept {
    CommunicatorStats s;
    s.collectives = impl_->collectives;
    s.signature_checks = impl_->signature_checks;
    s.mpi_calls = impl_->mpi_calls;
    s.wait_seconds = detail::ticks_to_seconds(impl_->wait_ticks.load(std::memory_order_relaxed));
    return s;
}

Communicator Communicator::split(int color, int key) const {
    if (color < 0) {
        throw InvalidArgumentError(fmt::format("split: color {} must be >= 0 (every rank joins one sub-group)", color));
    }
    MPI_Comm part = MPI_COMM_NULL;
    LOCKSTEP_MPI_CHECK(MPI_Comm_split(impl_->comm, color, key, &part));
    CommunicatorOptions options{impl_->debug, impl_->timeout};
    auto impl = std::make_unique<Impl>(part, options);
    LOCKSTEP_MPI_CHECK(MPI_Comm_free(&part));
    return Communicator(std::move(impl));
}

Communicator Communicator::dup() const {
    return Communicator(std::make_unique<Impl>(impl_->comm, CommunicatorOptions{impl_->debug, impl_->timeout}));
}

}  // namespace lockstep
