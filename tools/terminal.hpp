#pragma once
// Colour on the terminal for the subcommands that link the library.

#include <string>

namespace lockstep::tools {

// "always", "never" or "auto": auto colours only on a terminal, without NO_COLOR or TERM=dumb, and never in a rank
// started by a launcher (its stdout is mpirun's pseudo-terminal, not the user's).
[[nodiscard]] bool colour_wanted(const std::string& setting);

}  // namespace lockstep::tools
