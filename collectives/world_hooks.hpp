#pragma once
// What starts with the world communicator, attached from outside it: the agreements (the device inventory with its
// kernel and device warnings, the straggler report) register here, and Communicator::world() runs what is registered
// once, when the world is made, on lockstep's labelled duplicate for start-up checks. The communicator names none of
// them.

#include <lockstep/communicator.hpp>

namespace lockstep::detail {

using WorldStartHook = void (*)(Communicator& checks);

// Registers `hook`; returns true, so that a file registers from a namespace-scope initialiser.
bool at_world_start(WorldStartHook hook);

// Runs every registered hook, in the order of registration (Communicator::world(), once).
void run_world_start_hooks(Communicator& checks);

}  // namespace lockstep::detail
