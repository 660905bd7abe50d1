// The world communicator and what starts and ends with it: the hooks registered to start with it (world_hooks.hpp:
// the device inventory, the straggler report) on a labelled duplicate, and at Runtime::finalize the comparison of how
// many collectives each process made, the trace file if one was asked for, then freeing.

#include "communicator_impl.hpp"
#include "rank_groups.hpp"
#include "recorder/dump.hpp"
#include "wait_statistics.hpp"
#include "world_hooks.hpp"

#include <lockstep/internal/arena.hpp>
#include <lockstep/logging.hpp>

#include <mutex>

namespace lockstep {

namespace {

// Function-local: registrations come from other files' static initialisers, in any order.
std::vector<detail::WorldStartHook>& world_start_hooks() {
    static std::vector<detail::WorldStartHook> hooks;
    return hooks;
}

struct CallCount {
    std::uint64_t collectives;
};

// Every process reaching Runtime::finalize says how many collectives it made on the world communicator. A process
// that skipped a call whose others completed without it (a broadcast's root, a reduce's senders return as soon as
// their data is out) has paired its later calls with the wrong ones of its peers; the counts then differ, and every
// process says so, instead of the job ending as if nothing happened. (A peer still waiting in a collective never
// gets here: the exchange waits on it, watched, and the watchdog reports the stuck call.)
void compare_call_counts(Communicator& checks, std::uint64_t made) {
    const std::vector<CallCount> all = detail::allgather_fixed(checks, CallCount{made});
    std::vector<std::string> counts;
    for (const CallCount& c : all) counts.push_back(detail::count_text(c.collectives, "collective", "collectives"));
    if (std::all_of(counts.begin(), counts.end(), [&](const auto& c) { return c == counts.front(); })) return;
    get_logger("lockstep.debug")
        .error(every_rank,
               "Processes made different numbers of collectives on the world communicator before "
               "Runtime::finalize:\n{}A process skipped a collective (or made an extra one) whose other processes "
               "did not wait for it, so later calls paired with the wrong ones and their results are not to be "
               "trusted. LOCKSTEP_DEBUG_MODE=1 finds the call where they part.",
               detail::grouped_by_value(counts));
}

}  // namespace

bool detail::at_world_start(WorldStartHook hook) {
    world_start_hooks().push_back(hook);
    return true;
}

void detail::run_world_start_hooks(Communicator& checks) {
    for (WorldStartHook hook : world_start_hooks()) hook(checks);
}

Communicator& Communicator::world() {
    // Never destroyed: a program that ends without Runtime::finalize (it called MPI_Finalize itself, or none) must not
    // run these communicators' destructors at exit, after the watchdog they report to is gone. Runtime::finalize
    // frees them while MPI still runs.
    static std::mutex& mutex = *new std::mutex;
    static std::unique_ptr<Communicator>& world = *new std::unique_ptr<Communicator>;
    // lockstep's own calls, apart from the program's call numbers: the start-up checks, and the comparison at
    // finalize on a communicator of its own (made now: a duplicate made at finalize would wait unwatched for a
    // process that never comes), so that each report names its calls by their own label.
    static std::unique_ptr<Communicator>& checks = *new std::unique_ptr<Communicator>;
    static std::unique_ptr<Communicator>& closing = *new std::unique_ptr<Communicator>;
    std::scoped_lock lock(mutex);
    if (!world) {
        world = std::make_unique<Communicator>(Runtime::get().comm());
        detail::mark_world_start();
        detail::name_recorded(world->impl_->recorded, "world");
        checks = std::make_unique<Communicator>(world->dup());
        detail::Watchdog::instance().label_communicator(checks->impl_->id, "lockstep's start-up checks");
        detail::name_recorded(checks->impl_->recorded, "lockstep's start-up checks");
        detail::run_world_start_hooks(*checks);
        // The arena's set-up, if it fell back: once per node (its first process says it).
        if (auto warning = detail::arena_setup_warning())
            get_logger("lockstep.memory").warning(every_rank, "{}", *warning);
        closing = std::make_unique<Communicator>(checks->dup());
        detail::Watchdog::instance().label_communicator(closing->impl_->id, "lockstep's check at finalize");
        detail::name_recorded(closing->impl_->recorded, "lockstep's check at finalize");
        // Freed while MPI still runs; the watchdog shows the phase if another rank is still waiting for this one.
        detail::at_runtime_finalize([] {
            detail::Watchdog::instance().set_phase("in lockstep::Runtime::finalize / MPI_Finalize");
            std::scoped_lock inner(mutex);
            int mpi_finalized = 0;
            MPI_Finalized(&mpi_finalized);  // by another library (mpi4py) first: no more MPI calls, only the frees
            try {
                if (mpi_finalized == 0) compare_call_counts(*closing, world->impl_->sequence);
                // Every process passed the comparison, so every one is here for the trace's gather.
                if (mpi_finalized == 0) detail::dump_trace_at_exit(closing->impl_->comm);
            } catch (const Error& e) {
                get_logger("lockstep.debug").error(every_rank, "the comparison of call counts failed: {}", e.what());
            }
            closing.reset();
            checks.reset();
            world.reset();
        });
    }
    return *world;
}

}  // namespace lockstep
