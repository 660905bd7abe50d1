#pragma once
// Triggers: a decision that one rank makes and every rank must follow, such as stopping early.
//
//   if (local_validation_loss_stopped_improving) lockstep::set_trigger();   // any rank, any number of times
//   if (lockstep::check_trigger()) break;                                    // every rank, same iteration
//
// check_trigger() is a collective (one MPI_Allreduce of one byte): it returns true on every rank when any rank set the
// trigger since the last check, then clears it everywhere. All ranks therefore leave the loop in the same iteration.

#include <lockstep/communicator.hpp>
#include <lockstep/export.hpp>

namespace lockstep {

// Sets this process's trigger for `comm` (no communication).
LOCKSTEP_API void set_trigger(const Communicator& comm = Communicator::world());
// Collective over `comm`: true everywhere if any rank set its trigger; clears the trigger on every rank.
[[nodiscard]] LOCKSTEP_API bool check_trigger(Communicator& comm = Communicator::world(), CallSite site = {});

}  // namespace lockstep
