// The world communicator and what starts with it: the start-up checks (device inventory, kernel warnings) on a
// labelled duplicate, the straggler report as a section of Runtime::report(), and freeing at Runtime::finalize.

#include "communicator_impl.hpp"
#include "wait_statistics.hpp"

#include <lockstep/inventory.hpp>
#include <lockstep/straggler.hpp>

#include <mutex>

namespace lockstep {

Communicator& Communicator::world() {
    static std::mutex mutex;
    static std::unique_ptr<Communicator> world;
    std::scoped_lock lock(mutex);
    if (!world) {
        world = std::make_unique<Communicator>(Runtime::get().comm());
        detail::mark_world_start();
        // On a duplicate, so that the checks' collectives do not count among the world's call numbers.
        Communicator checks = world->dup();
        detail::Watchdog::instance().label_communicator(checks.impl_->id, "lockstep's start-up checks");
        run_startup_checks(checks);
        detail::at_runtime_report([] { return straggler_report(Communicator::world()); });
        // Freed while MPI still runs; the watchdog shows the phase if another rank is still waiting for this one.
        detail::at_runtime_finalize([] {
            detail::Watchdog::instance().set_phase("in lockstep::Runtime::finalize / MPI_Finalize");
            std::scoped_lock inner(mutex);
            world.reset();
        });
    }
    return *world;
}

}  // namespace lockstep
