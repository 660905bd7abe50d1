#pragma once
// Reports that group ranks by what they have in common (internal): the debug-mode mismatch report, the device
// inventory warning and the watchdog's headline all print "Processes 0-2: X" lines through lockstep/base's one
// formatter, under the names the collectives use.

#include <lockstep/base/rank_groups.hpp>

namespace lockstep::detail {

using base::count_text;
using base::grouped_by_value;
using base::processes_text;

}  // namespace lockstep::detail
